"""Listening sockets, bound before the rest of the broker is imported so clients can connect at once.

The kernel queues connections on a listening socket; binding first means a client that connects
while the broker is still importing its modules and loading logs waits in the backlog instead of
being refused.
"""
from __future__ import annotations

import socket


def bind_listener(hosts: str | list[str] | None, port: int, backlog: int = 1024) -> list[socket.socket]:
    """Bind and listen on every address of `hosts` (None = all interfaces), sharing one port.

    With port 0 the first socket picks a free port and the others reuse it.
    """
    if isinstance(hosts, str) or hosts is None:
        hosts = [hosts]
    sockets: list[socket.socket] = []
    try:
        for host in hosts:
            # an ASCII host goes as bytes: a str is IDNA-encoded first, which imports the idna codec
            # (and unicodedata) at every start for nothing
            query = host.encode("ascii") if host is not None and host.isascii() else host
            infos = socket.getaddrinfo(query, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            seen = set()
            for family, type_, proto, _, address in infos:
                if (family, address[0]) in seen:
                    continue
                seen.add((family, address[0]))
                sock = socket.socket(family, type_, proto)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    sock.bind((address[0], port) + tuple(address[2:]))
                except OSError:
                    sock.close()
                    raise
                sock.listen(backlog)
                sock.setblocking(False)
                sockets.append(sock)
                if port == 0:
                    port = sock.getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
