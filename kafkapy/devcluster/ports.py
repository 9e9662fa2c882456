"""Loopback ports for local brokers: free ones to listen on, and whether a broker on one accepts or
answers ApiVersions (its readiness), for the launcher, the dev cluster and the conformance tests.
"""
from __future__ import annotations

import socket
import struct

HOST = "127.0.0.1"
API_VERSIONS_KEY = 18


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that nothing listens on at this moment."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):  # held open together, so the kernel cannot hand out one port twice
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((HOST, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port() -> int:
    """A loopback port that nothing listens on at this moment."""
    return free_ports(1)[0]


def port_accepts(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on host:port right now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def answers_api_versions(port: int, host: str = HOST, timeout: float = 1.0) -> bool:
    """True if a broker on host:port answers ApiVersions (v0, the version every broker takes).

    A kafkapy broker binds its port before it loads its logs; until it serves, connections wait in
    the backlog, so an accepted connection does not yet mean a working broker. Written on a bare
    socket so that a test process polling for readiness imports nothing of the broker."""
    from ..protocol.headers import encode_request_header

    request = bytes(encode_request_header(API_VERSIONS_KEY, 0, 1, "kafkapy-launcher"))
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", recv_exactly(sock, 4))
            recv_exactly(sock, size)  # a whole response frame: the broker serves requests
            return True
    except (OSError, struct.error):
        return False


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """Exactly `size` bytes from a blocking socket; OSError if the peer closes first."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return bytes(data)
