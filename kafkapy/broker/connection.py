"""One client connection: length-prefixed framing, in-order request processing, response writing.

Requests on one connection are handled one at a time, in arrival order, like Kafka's
muted-channel model: a fetch that waits for data delays the requests queued behind it on the
same connection only, never other connections. Frames keep arriving while a request is being
handled; reading pauses when too many bytes are queued.

Memory: a frame is kept as the chunks read so far (never a growing buffer copied on every read)
and every byte held is charged to the broker's MemoryPool (queued.max.request.bytes, see
memory_pool.py); a connection holding more than its small allowance pauses reading while the pool
is exhausted. Connection limits and idle expiry: connection_quotas.py. Warnings about a peer's
bad input go through a PeerLogThrottle (log_throttle.py): a few lines per peer, then one
aggregate line per minute.
"""
from __future__ import annotations

import asyncio
import logging
import os
import select
import struct
import time
from collections import deque
from typing import TYPE_CHECKING

from ..protocol.errors import DecodeError
from ..protocol.primitives import ExternalRecords
from ..security.principal import ANONYMOUS
from ..security.session import ConnectionSession
from .dispatch import ConnectionClosed, RequestContext, handle_frame
from .log_throttle import PeerLogThrottle, peer_ip
from .memory_pool import SMALL_ALLOWANCE, MemoryPool

if TYPE_CHECKING:
    from .connection_quotas import ConnectionQuotas
    from .interfaces import HandlerServices

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Stop reading from a client whose unprocessed requests exceed this many bytes.
_MAX_QUEUED_BYTES = 64 * 1024 * 1024
# Why reading is paused (a bit each): too much queued on this connection, the memory pool is
# exhausted, the client is throttled (mute_for), the connection waits for a connection-quota slot.
_PAUSE_QUEUE, _PAUSE_MEMORY, _PAUSE_MUTE, _PAUSE_ADMISSION = 1, 2, 4, 8
# Warnings about peers' bad input: a few lines per peer IP per minute, then one aggregate line.
peer_log = PeerLogThrottle(log)
# Below this a pread + transport write costs less than the sendfile bookkeeping.
_SENDFILE_MIN_BYTES = 64 * 1024
# TLS cannot sendfile: segment slices go through the transport in pieces of this size.
_TLS_CHUNK_BYTES = 1024 * 1024


class ConnectionServices:
    """What every connection of a broker shares, built once by the broker (Broker.connection_services):
    the bundle its requests' contexts carry, the set of open connections, the memory pool
    (queued.max.request.bytes) and the connection quotas. A connection copies these four
    references when it is made and reads nothing else of the broker."""

    __slots__ = ("handlers", "connections", "memory_pool", "connection_quotas")

    def __init__(self, handlers: HandlerServices, connections: set, memory_pool: MemoryPool,
                 connection_quotas: ConnectionQuotas):
        self.handlers = handlers
        self.connections = connections
        self.memory_pool = memory_pool
        self.connection_quotas = connection_quotas


class KafkaConnection(asyncio.Protocol):
    """asyncio protocol for one client socket."""

    def __init__(self, shared: ConnectionServices, listener=None):
        # the broker's parts, as its requests' contexts carry them (dispatch.RequestContext)
        self.services: HandlerServices = shared.handlers
        self._connections = shared.connections
        self._quotas: ConnectionQuotas = shared.connection_quotas
        # the listener this connection came in on (config.Listener: name, security protocol) and
        # who it is: ANONYMOUS until TLS client auth or SASL says otherwise
        self.listener = listener
        self.principal = ANONYMOUS
        # authentication state (SASL) and what a request may do before it completes
        self.session = ConnectionSession(self)
        # what ends with this connection (key -> callable, run once when it closes): the share
        # sessions it opened, as Kafka's ShareSessionCache ends a session when its connection goes
        self.on_close: dict | None = None
        # the client's software name and version from ApiVersions v3+ (client telemetry matches on them)
        self.client_software: tuple[str | None, str | None] = (None, None)
        self._muted_until = 0.0
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.peer_ip = "?"
        # the frame being read: its body chunks so far and the bytes it still needs, or the first
        # 1-3 bytes of a length prefix
        self._chunks: list[bytes] = []
        self._need = 0
        self._head = b""
        # the partial frame's announced size and what is charged for it: the whole size once
        # reserved (frames above SMALL_ALLOWANCE, as Kafka's pool does), else the bytes read
        self._partial_size = 0
        self._partial_charged = 0
        self._reserved = False
        self._frames: deque[bytes] = deque()
        self._queued_bytes = 0
        # bytes of requests this connection holds (partial frame, queued and in-progress frames),
        # all charged to the broker's memory pool
        self._held = 0
        self._pool: MemoryPool = shared.memory_pool
        self._worker: asyncio.Task | None = None
        self._pause_reasons = 0
        # connection quotas: (listener name, ip) while counted, and whether it may be read from yet
        self.quota_state: tuple[str, str] | None = None
        self.admitted = True
        self._last_active = time.monotonic()
        self._closed = False
        self._eof = False
        self._drain_waiter: asyncio.Future | None = None
        self._write_paused = False
        self._max_request = self.services.config.get("socket.request.max.bytes")
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
                    from ..security.tls import peer_principal  # TLS listeners only

                    self.principal = peer_principal(ssl_object)
                except ValueError as exc:  # NoMatchingRule, or a certificate subject that does not parse
                    log.info("closing TLS connection from %s: authentication failed: %s", self.peer, exc)
                    self.close()
                    return
            log.debug("TLS connection from %s on %s: principal %s, %s, %s", self.peer,
                      self.listener.name if self.listener else "?", self.principal, ssl_object.version(),
                      (ssl_object.cipher() or ("?",))[0])
        self.peer_ip = peer[0] if peer else "?"
        self._connections.add(self)
        self._quotas.on_connect(self, self.listener.name if self.listener else "", self.peer_ip)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._connections.discard(self)
        if self.on_close:
            callbacks, self.on_close = self.on_close, None
            for callback in callbacks.values():
                try:
                    callback()
                except Exception:  # one line; the connection is gone either way
                    log.exception("closing %s: a close callback failed", self.peer)
        self._chunks = []
        self._need = self._partial_size = self._partial_charged = 0
        self._reserved = False
        self._frames.clear()
        if self._held:
            held, self._held = self._held, 0
            self._pool.release(held)
        if self._pause_reasons & _PAUSE_MEMORY:
            self._pool.forget(self)
        self._quotas.on_close(self)
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._last_active = time.monotonic()
        n = len(data)
        pos = 0
        added = 0
        frames = self._frames
        need = self._need
        if need:  # inside a frame body
            if n < need:
                self._chunks.append(data)
                self._need = need - n
                if not self._reserved:
                    self._partial_charged += n
                    self._held += n
                    self._pool.charge(n)
                    self._check_memory()
                return
            chunks = self._chunks
            chunks.append(data[:need] if need < n else data)
            frame = b"".join(chunks)
            self._chunks = []
            self._need = 0
            # what neither the reservation nor the reads so far have charged
            added = self._partial_size - self._partial_charged
            self._partial_size = self._partial_charged = 0
            self._reserved = False
            frames.append(frame)
            self._queued_bytes += len(frame)
            pos = need
        elif self._head:
            data = self._head + data
            self._head = b""
            n = len(data)
        max_request = self._max_request
        while n - pos >= 4:
            (size,) = _SIZE.unpack_from(data, pos)
            if size < 0 or size > max_request:
                self._held += added
                self._pool.charge(added)
                peer_log.warning(self.peer_ip, "closing connection from %s: request size %d outside 0..%d "
                                 "(socket.request.max.bytes)", self.peer, size, max_request)
                self.close()
                return
            end = pos + 4 + size
            if end > n:  # a partial frame: keep what came, wait for the rest
                body = data[pos + 4:]
                self._chunks = [body]
                self._need = size - len(body)
                self._partial_size = size
                if size > SMALL_ALLOWANCE and self._pool.used + added < self._pool.capacity:
                    # reserve the whole request while the pool has room, as Kafka's memory pool
                    # does, so that a request once started always completes
                    self._reserved = True
                    self._partial_charged = size
                else:
                    self._reserved = False
                    self._partial_charged = len(body)
                added += self._partial_charged
                pos = n
                break
            frames.append(data[pos + 4:end])
            self._queued_bytes += size
            added += size
            pos = end
        if pos < n:
            self._head = data[pos:]
        if added:
            self._held += added
            self._pool.charge(added)
        if frames and self._worker is None and self.admitted:
            self._worker = asyncio.get_running_loop().create_task(self._process())
        if self._queued_bytes > _MAX_QUEUED_BYTES:
            self._pause(_PAUSE_QUEUE)
        self._check_memory()

    def _may_read(self) -> bool:
        """Whether this connection may read with the pool as it is: a large partial frame needs its
        reservation (taken here when the pool has room); otherwise reading goes on while the pool
        has room or the connection holds at most SMALL_ALLOWANCE bytes outside a reservation."""
        pool = self._pool
        if self._need and not self._reserved and self._partial_size > SMALL_ALLOWANCE:
            if pool.used >= pool.capacity:
                return False
            extra = self._partial_size - self._partial_charged
            self._reserved = True
            self._partial_charged = self._partial_size
            self._held += extra
            pool.charge(extra)
            return True
        if pool.used <= pool.capacity:
            return True
        return self._held - (self._partial_charged if self._reserved else 0) <= SMALL_ALLOWANCE

    def _check_memory(self) -> None:
        if self._closed or self._pause_reasons & _PAUSE_MEMORY:
            return
        if not self._may_read():
            self._pause(_PAUSE_MEMORY)
            self._pool.wait(self)

    def resume_after_memory(self) -> None:
        """The memory pool has room again (called by MemoryPool.release, which dequeued us)."""
        if self._closed:
            return
        if self._may_read():
            self._unpause(_PAUSE_MEMORY)
        else:
            self._pool.wait(self)

    def _release(self, n: int) -> None:
        n = min(n, self._held)
        if n <= 0:
            return
        self._held -= n
        pool = self._pool
        pool.release(n)
        if self._pause_reasons & _PAUSE_MEMORY and not self._closed and self._may_read():
            pool.forget(self)
            self._unpause(_PAUSE_MEMORY)

    def _pause(self, reason: int) -> None:
        if not self._pause_reasons and self.transport is not None and not self._closed:
            self.transport.pause_reading()
        self._pause_reasons |= reason

    def _unpause(self, reason: int) -> None:
        if self._pause_reasons & reason:
            self._pause_reasons &= ~reason
            if not self._pause_reasons and self.transport is not None and not self._closed:
                self.transport.resume_reading()

    # -- connection quotas (connection_quotas.py) -------------------------------------------------
    @property
    def busy(self) -> bool:
        """Whether a request of this connection is being handled (the broker's stop waits for it)."""
        return self._worker is not None

    def wait_for_admission(self) -> None:
        """Read nothing until ConnectionQuotas admits this connection (max.connections, creation rate)."""
        self.admitted = False
        self._pause(_PAUSE_ADMISSION)
        # uvloop starts reading after connection_made returns: pause again once it has
        asyncio.get_running_loop().call_soon(self._pause_again)

    def _pause_again(self) -> None:
        if self._pause_reasons and self.transport is not None and not self._closed:
            self.transport.pause_reading()

    def admit(self) -> None:
        self.admitted = True
        self._last_active = time.monotonic()
        self._unpause(_PAUSE_ADMISSION)
        if self._frames and self._worker is None and not self._closed:
            self._worker = asyncio.get_running_loop().create_task(self._process())

    def idle_since(self) -> float:
        """When this connection last read or wrote, or +inf while a request is in progress
        (connections.max.idle.ms)."""
        if not self.admitted or self._worker is not None or self._frames:
            return float("inf")
        return self._last_active

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
                size = len(frame)
                self._queued_bytes -= size
                if self._pause_reasons & _PAUSE_QUEUE and self._queued_bytes < _MAX_QUEUED_BYTES // 2:
                    self._unpause(_PAUSE_QUEUE)
                ctx = RequestContext(self.services, self)
                try:
                    if self.session.expects_raw_frame(size):
                        # SASL: a raw token after SaslHandshake v0 (no request header), or a frame
                        # above sasl.server.max.receive.size before authentication
                        parts = await self.session.handle_raw_frame(frame)
                    else:
                        parts = await handle_frame(ctx, frame)
                except DecodeError as exc:
                    peer_log.warning(self.peer_ip, "closing connection from %s: malformed request: %s",
                                     self.peer, exc)
                    self.close()
                    return
                except ConnectionClosed as exc:
                    if str(exc):
                        peer_log.warning(self.peer_ip, "closing connection from %s: %s", self.peer, exc)
                    self.close()
                    return
                except Exception:
                    peer_log.log(logging.ERROR, self.peer_ip, "closing connection from %s: unexpected error "
                                 "handling request", self.peer, exc_info=True)
                    self.close()
                    return
                finally:
                    frame = None
                    self._release(size)
                if parts is not None and not self._closed:
                    await self._write(parts)
                    if ctx.timing is not None:
                        self.services.metrics.response_sent(ctx.timing)
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
        self._pause(_PAUSE_MUTE)

    async def _wait_unmuted(self) -> None:
        while not self._closed and (left := self._muted_until - time.monotonic()) > 0:
            await asyncio.sleep(left)
        self._muted_until = 0.0
        self._unpause(_PAUSE_MUTE)

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
                        peer_log.warning(self.peer_ip, "closing connection from %s: segment slice at %d+%d was truncated while "
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
        self._last_active = time.monotonic()

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



def close_hung_up(connections) -> int:
    """Close paused connections whose peer has gone (memory pool or connection-quota wait).

    A transport that does not read never sees the peer's FIN behind the unread bytes, so a client
    that gave up on a large request would hold its part of the memory pool forever; poll() with
    POLLRDHUP sees the hang-up without reading. Returns how many were closed.
    """
    rdhup = getattr(select, "POLLRDHUP", 0)
    if not rdhup:
        return 0
    poller = select.poll()
    by_fd: dict[int, KafkaConnection] = {}
    for conn in connections:
        if conn._closed or not conn._pause_reasons & (_PAUSE_MEMORY | _PAUSE_ADMISSION) or conn.transport is None:
            continue
        sock = conn.transport.get_extra_info("socket")
        fd = sock.fileno() if sock is not None else -1
        if fd >= 0:
            poller.register(fd, rdhup)
            by_fd[fd] = conn
    closed = 0
    if by_fd:
        for fd, events in poller.poll(0):
            if events & (rdhup | select.POLLHUP | select.POLLERR):
                conn = by_fd[fd]
                log.debug("closing connection from %s: the peer hung up while reading was paused", conn.peer)
                conn.transport.abort()
                conn.close()
                closed += 1
    return closed
