"""One client connection: length-prefixed framing, in-order request processing, response writing.

Requests on one connection are handled one at a time, in arrival order, like Kafka's
muted-channel model: a fetch that waits for data delays the requests queued behind it on the
same connection only, never other connections. Frames keep arriving while a request is being
handled; reading pauses when too many bytes are queued.
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from collections import deque
from typing import TYPE_CHECKING

from ..protocol.errors import DecodeError
from ..protocol.primitives import ExternalRecords
from ..security.principal import ANONYMOUS
from ..security.session import ConnectionSession
from ..security.tls import peer_principal
from .dispatch import ConnectionClosed, RequestContext, handle_frame

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Stop reading from a client whose unprocessed requests exceed this many bytes.
_MAX_QUEUED_BYTES = 64 * 1024 * 1024
# Below this a pread + transport write costs less than the sendfile bookkeeping.
_SENDFILE_MIN_BYTES = 64 * 1024
# TLS cannot sendfile: segment slices go through the transport in pieces of this size.
_TLS_CHUNK_BYTES = 1024 * 1024


class KafkaConnection(asyncio.Protocol):
    """asyncio protocol for one client socket."""

    def __init__(self, broker: Broker, listener=None):
        self.broker = broker
        # the listener this connection came in on (config.Listener: name, security protocol) and
        # who it is: ANONYMOUS until TLS client auth or SASL says otherwise
        self.listener = listener
        self.principal = ANONYMOUS
        # authentication state (SASL) and what a request may do before it completes
        self.session = ConnectionSession(self)
        self._muted_until = 0.0
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._buf = bytearray()
        self._frames: deque[bytes] = deque()
        self._queued_bytes = 0
        self._worker: asyncio.Task | None = None
        self._reading_paused = False
        self._closed = False
        self._eof = False
        self._drain_waiter: asyncio.Future | None = None
        self._write_paused = False
        self._max_request = broker.config.get("socket.request.max.bytes")
        self._sock_fd: int | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None:
            sock = transport.get_extra_info("socket")
            self._sock_fd = sock.fileno() if sock is not None else None
        else:
            # TLS: the transport encrypts, so nothing may go to the socket directly (no sendfile)
            self._sock_fd = None
            if self.listener is None or self.listener.security_protocol == "SSL":
                # SASL_SSL: the principal is SASL's, not the certificate's (as Kafka's principal builder)
                try:
                    self.principal = peer_principal(ssl_object)
                except ValueError as exc:  # NoMatchingRule, or a certificate subject that does not parse
                    log.info("closing TLS connection from %s: authentication failed: %s", self.peer, exc)
                    self.close()
                    return
            log.debug("TLS connection from %s on %s: principal %s, %s, %s", self.peer,
                      self.listener.name if self.listener else "?", self.principal, ssl_object.version(),
                      (ssl_object.cipher() or ("?",))[0])
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.broker.connections.discard(self)
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self._max_request:
                log.warning("closing connection from %s: request size %d outside 0..%d "
                            "(socket.request.max.bytes)", self.peer, size, self._max_request)
                self.close()
                return
            if end - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            self._frames.append(frame)
            self._queued_bytes += size
        if pos:
            del buf[:pos]
        if self._frames and self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._process())
        if self._queued_bytes > _MAX_QUEUED_BYTES and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        # The client finished sending: answer what it queued, then close (the worker does).
        self._eof = True
        if self._worker is None:
            self.close()
        # TLS cannot stay half-open (asyncio warns on True and closes anyway)
        return self._sock_fd is not None or self.transport.get_extra_info("ssl_object") is None

    # -- processing ---------------------------------------------------------------------
    async def _process(self) -> None:
        try:
            while self._frames and not self._closed:
                if self._muted_until:
                    await self._wait_unmuted()
                    if self._closed:
                        return
                frame = self._frames.popleft()
                self._queued_bytes -= len(frame)
                if self._reading_paused and self._queued_bytes < _MAX_QUEUED_BYTES // 2:
                    self._reading_paused = False
                    self.transport.resume_reading()
                ctx = RequestContext(self.broker, self)
                try:
                    if self.session.expects_raw_frame(len(frame)):
                        # SASL: a raw token after SaslHandshake v0 (no request header), or a frame
                        # above sasl.server.max.receive.size before authentication
                        parts = await self.session.handle_raw_frame(frame)
                    else:
                        parts = await handle_frame(ctx, frame)
                except DecodeError as exc:
                    log.warning("closing connection from %s: malformed request: %s", self.peer, exc)
                    self.close()
                    return
                except ConnectionClosed as exc:
                    if str(exc):
                        log.warning("closing connection from %s: %s", self.peer, exc)
                    self.close()
                    return
                except Exception:
                    log.exception("closing connection from %s: unexpected error handling request",
                                  self.peer)
                    self.close()
                    return
                if parts is not None and not self._closed:
                    await self._write(parts)
            if self._eof and not self._frames:
                self.close()
        finally:
            self._worker = None
            if self._frames and not self._closed:
                self._worker = asyncio.get_running_loop().create_task(self._process())

    def mute_for(self, seconds: float) -> None:
        """Kafka's throttling: read and handle nothing more from this client for `seconds` (the
        response already sent tells it the throttle time)."""
        if seconds <= 0 or self._closed:
            return
        self._muted_until = max(self._muted_until, time.monotonic() + seconds)
        if not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    async def _wait_unmuted(self) -> None:
        while not self._closed and (left := self._muted_until - time.monotonic()) > 0:
            await asyncio.sleep(left)
        self._muted_until = 0.0
        if self._reading_paused and not self._closed and self._queued_bytes < _MAX_QUEUED_BYTES // 2:
            self._reading_paused = False
            self.transport.resume_reading()

    async def _write(self, parts: list) -> None:
        transport = self.transport
        total = 0
        for part in parts:
            total += len(part)
        pending = [_SIZE.pack(total)]
        for part in parts:
            if not isinstance(part, ExternalRecords):
                pending.append(part)
                continue
            if pending:
                transport.write(b"".join(pending))
                pending = []
            if self._sock_fd is None and len(part) >= _SENDFILE_MIN_BYTES and hasattr(part, "fileno"):
                # TLS: read the slice in large pieces (never decoded) and let the transport encrypt
                # them, waiting for it to drain between pieces so a big fetch holds about one piece
                # plus the transport's buffer in memory
                fd, position, end = part.fileno(), part.position, part.position + len(part)
                while position < end and not self._closed:
                    data = os.pread(fd, min(_TLS_CHUNK_BYTES, end - position), position)
                    if not data:
                        log.warning("closing connection from %s: segment slice at %d+%d was truncated while "
                                    "being sent", self.peer, part.position, len(part))
                        self.close()
                        return
                    transport.write(data)
                    position += len(data)
                    if self._write_paused and not self._closed:
                        self._drain_waiter = asyncio.get_running_loop().create_future()
                        await self._drain_waiter
                        self._drain_waiter = None
                continue
            sent = self._sendfile(part) if len(part) >= _SENDFILE_MIN_BYTES else 0
            if sent < len(part):
                data = part.tobytes()
                transport.write(memoryview(data)[sent:] if sent else data)
        if pending:
            transport.write(b"".join(pending) if len(pending) > 1 else pending[0])
        if self._write_paused and not self._closed:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter
            self._drain_waiter = None

    def _sendfile(self, part) -> int:
        """Send a segment slice straight from the file while the transport has nothing queued.

        Returns the bytes sent; the caller writes the rest through the transport. Only safe when
        the transport's buffer is empty, or bytes would go out of order.
        """
        fileno = getattr(part, "fileno", None)
        if fileno is None or self._sock_fd is None or self.transport.get_write_buffer_size():
            return 0
        sent = 0
        length = len(part)
        try:
            in_fd = fileno()
            while sent < length:
                n = os.sendfile(self._sock_fd, in_fd, part.position + sent, length - sent)
                if n == 0:
                    break
                sent += n
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            log.debug("sendfile to %s failed after %d bytes (%s); writing through the transport",
                      self.peer, sent, exc)
        return sent

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.transport is not None:
                self.transport.close()

