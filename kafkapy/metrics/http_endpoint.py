"""The Prometheus endpoint: GET /metrics over a tiny HTTP/1.1 server on the broker's event loop.

`kafkapy.metrics.listener=http://127.0.0.1:9404` turns it on. A scrape renders the registry on the
loop (collectors read broker state without locks) in the Prometheus text format, or OpenMetrics when
the Accept header asks for it. The server answers one request per connection and closes it, which
is all Prometheus needs; anything but GET/HEAD of /metrics gets a 404/405 and no work.
"""
from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

_MAX_HEADER_BYTES = 16 * 1024
_READ_TIMEOUT_S = 10.0


def parse_listener_url(text: str) -> tuple[str, int]:
    """(host, port) of an http://host:port listener; ValueError saying what is wrong otherwise."""
    text = (text or "").strip()
    if "://" not in text:
        raise ValueError(f"expected http://host:port, not {text!r}")
    parts = urlsplit(text)
    if parts.scheme != "http":
        raise ValueError(f"only http:// is supported, not {parts.scheme!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"expected http://host:port without a path, not {text!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in {text!r}") from None
    if port is None:
        raise ValueError(f"expected http://host:port (the port is missing) in {text!r}")
    host = parts.hostname or ""
    if not host:
        raise ValueError(f"expected http://host:port (the host is missing) in {text!r}")
    return host, port


class MetricsEndpoint:
    """Serves `await render(accept) -> (body, content_type)` at /metrics on host:port."""

    def __init__(self, url: str, render):
        self.host, self.port = parse_listener_url(url)
        self._render = render
        self._server: asyncio.base_events.Server | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Prometheus metrics endpoint on %s", self.url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                ConnectionError):
            writer.close()
            return
        try:
            status, body, ctype = await self._answer(head)
        except Exception:
            log.exception("rendering /metrics failed")
            status, body, ctype = "500 Internal Server Error", b"metrics rendering failed\n", "text/plain"
        method = head.split(b" ", 1)[0]
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode("latin-1"))
        if method != b"HEAD":
            writer.write(body)
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    async def _answer(self, head: bytes) -> tuple[str, bytes, str]:
        lines = head[:_MAX_HEADER_BYTES].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return "400 Bad Request", b"bad request line\n", "text/plain"
        method, target, _ = parts
        path = target.split("?", 1)[0]
        if path not in ("/metrics", "/"):
            return "404 Not Found", b"not found: try /metrics\n", "text/plain"
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", b"GET only\n", "text/plain"
        if path == "/":
            return "200 OK", b'<html><body><a href="/metrics">/metrics</a></body></html>\n', "text/html"
        accept = ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "accept":
                accept = value.strip()
        body, ctype = await self._render(accept)
        return "200 OK", body, ctype
