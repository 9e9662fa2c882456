"""An asyncio Kafka protocol client for broker-to-broker traffic.

Used by the controller channel (LeaderAndIsr, UpdateMetadata, StopReplica) and the replica
fetchers (Fetch, ListOffsets) directly, and by every other inter-broker client (AlterPartition,
AllocateProducerIds, ControlledShutdown, WriteTxnMarkers, AddPartitionsToTxn verification)
through net/peers.py, which keeps one connection per broker and purpose. Versions are fixed by
the caller, as Kafka's inter-broker requests are sent without ApiVersions negotiation. Headers are
protocol/headers.py's client side; SASL is net/sasl_client.py's exchange.

One `BrokerConnection` is one socket with pipelined requests; responses are matched to requests
by correlation id. Any error (connect, timeout, framing) closes the socket and raises
`BrokerConnectionError`; the next `send` reconnects. With `ssl_context` the socket speaks TLS (the
inter-broker listener is SSL or SASL_SSL: `security.tls.inter_broker_ssl_context`); `authenticate`
runs on each new connection before any request (the hook for SASL between brokers).
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import ssl
import struct
from collections.abc import Awaitable, Callable

from ..protocol.headers import decode_response_header, encode_request_header
from ..protocol.messages import RESPONSE_TYPES
from .sasl_client import SaslClientError, authenticate_async

__all__ = ["BrokerConnection", "BrokerConnectionError", "encode_request", "sasl_authenticate"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 256 * 1024 * 1024


class BrokerConnectionError(Exception):
    """The request may or may not have reached the broker; the connection is closed."""


def encode_request(request, version: int, correlation_id: int, client_id: str | None) -> list:
    """A framed request as a list of buffers (size prefix, header, body parts)."""
    header = encode_request_header(request.API_KEY, version, correlation_id, client_id)
    parts = request.encode_parts(version)
    size = len(header) + sum(len(p) for p in parts)
    return [_SIZE.pack(size), header, *parts]


async def sasl_authenticate(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, mechanism: str,
                            username: str, password: str, client_id: str | None = "kafkapy-broker") -> None:
    """Authenticate a new connection (BrokerConnection's `authenticate` hook, made from its
    `sasl` login) with the shared SASL client exchange (net/sasl_client.py).
    Raises BrokerConnectionError naming the broker's error (never the password)."""
    correlation = itertools.count(1)

    async def call(request, version: int):
        correlation_id = next(correlation)
        writer.writelines(encode_request(request, version, correlation_id, client_id))
        await writer.drain()
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        if not 4 <= size <= _MAX_RESPONSE:
            raise BrokerConnectionError(f"bad SASL response size {size}")
        frame = await reader.readexactly(size)
        answered, pos = decode_response_header(frame, request.API_KEY, version)
        if answered != correlation_id:
            raise BrokerConnectionError("SASL response with an unexpected correlation id")
        return RESPONSE_TYPES[request.API_KEY].decode(frame, version, pos)

    try:
        await authenticate_async(call, mechanism=mechanism, username=username, password=password)
    except SaslClientError as exc:
        raise BrokerConnectionError(str(exc)) from None


class BrokerConnection:
    """A connection to one broker endpoint; `send` is safe to call concurrently."""

    def __init__(self, host: str, port: int, *, client_id: str = "kafkapy-broker",
                 request_timeout_s: float = 30.0, connect_timeout_s: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None,
                 authenticate: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]] | None = None,
                 sasl=None):
        self.host = host
        # TLS towards the broker (host names are checked when the context says so)
        self.ssl_context = ssl_context
        # run on every new connection before the first request, with the stream to itself (no
        # request is in flight yet): SASL between brokers authenticates here
        self.authenticate = authenticate
        if sasl is not None and authenticate is None:
            # a SaslLogin (security.sasl.inter_broker): the shared exchange of net/sasl_client.py
            self.authenticate = functools.partial(sasl_authenticate, mechanism=sasl.mechanism,
                                                  username=sasl.username, password=sasl.password)
        self.port = port
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._correlation = itertools.count(1)
        self._read_task: asyncio.Task | None = None
        self._connect_lock = asyncio.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    def retarget(self, host: str, port: int) -> None:
        """Point at a new endpoint (the broker re-registered elsewhere); closes the socket."""
        if (host, port) != (self.host, self.port):
            self.host, self.port = host, port
            self._drop(BrokerConnectionError("endpoint changed"))

    async def _connect(self) -> None:
        async with self._connect_lock:
            if self.connected:
                return
            if self._closed:
                raise BrokerConnectionError(f"connection to {self.host}:{self.port} is closed")
            try:
                tls = {} if self.ssl_context is None else {"ssl": self.ssl_context, "server_hostname": self.host}
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, limit=1 << 20, **tls), self.connect_timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:  # ssl.SSLError (handshake, certificate) is an OSError
                raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {exc!r}") from None
            if self.authenticate is not None:
                try:
                    await asyncio.wait_for(self.authenticate(reader, writer), self.request_timeout_s)
                except Exception as exc:
                    writer.close()
                    raise BrokerConnectionError(
                        f"authentication to {self.host}:{self.port} failed: {exc!r}") from None
            self._reader, self._writer = reader, writer
            self._read_task = asyncio.get_running_loop().create_task(self._read_loop(reader, writer))

    async def send(self, request, version: int, *, timeout_s: float | None = None):
        """Send `request` as `version` and return the decoded response."""
        await self._connect()
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        future = asyncio.get_running_loop().create_future()
        api_key = request.API_KEY
        self._pending[correlation_id] = (future, api_key, version)
        writer = self._writer
        try:
            writer.writelines(encode_request(request, version, correlation_id, self.client_id))
            await writer.drain()
        except (OSError, RuntimeError, AttributeError) as exc:
            self._pending.pop(correlation_id, None)
            self._drop(BrokerConnectionError(f"send to {self.host}:{self.port} failed: {exc!r}"))
            raise BrokerConnectionError(f"send to {self.host}:{self.port} failed: {exc!r}") from None
        try:
            return await asyncio.wait_for(future, timeout_s if timeout_s is not None else self.request_timeout_s)
        except asyncio.TimeoutError:
            self._pending.pop(correlation_id, None)
            self._drop(BrokerConnectionError("request timed out"))
            raise BrokerConnectionError(
                f"api {api_key} v{version} to {self.host}:{self.port} timed out") from None

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: Exception = BrokerConnectionError(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if not 4 <= size <= _MAX_RESPONSE:
                    error = BrokerConnectionError(f"bad response size {size} from {self.host}:{self.port}")
                    break
                frame = await reader.readexactly(size)
                correlation_id = _SIZE.unpack_from(frame, 0)[0]
                entry = self._pending.pop(correlation_id, None)
                if entry is None:
                    continue  # the caller gave up (timeout)
                future, api_key, version = entry
                try:
                    _, pos = decode_response_header(frame, api_key, version)
                    response = RESPONSE_TYPES[api_key].decode(frame, version, pos)
                except Exception as exc:  # a malformed response fails this request and the socket
                    if not future.done():
                        future.set_exception(BrokerConnectionError(f"bad response: {exc}"))
                    error = BrokerConnectionError(f"bad response from {self.host}:{self.port}: {exc}")
                    break
                if not future.done():
                    future.set_result(response)
        except (asyncio.IncompleteReadError, OSError) as exc:
            error = BrokerConnectionError(f"connection to {self.host}:{self.port} lost: {exc!r}")
        except asyncio.CancelledError:
            error = BrokerConnectionError("connection closed")
        finally:
            if self._writer is writer:
                self._drop(error)
            else:
                writer.close()

    def _drop(self, error: Exception) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
        task, self._read_task = self._read_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        pending, self._pending = self._pending, {}
        for future, _, _ in pending.values():
            if not future.done():
                future.set_exception(error)
                future.exception()  # a caller that gave up must not leave an unretrieved exception

    def close(self) -> None:
        self._closed = True
        self._drop(BrokerConnectionError("connection closed"))



async def request_once(host: str, port: int, request, version: int, *, timeout_s: float = 30.0,
                       client_id: str = "kafkapy"):
    """Open a connection, send one request, read its answer, close: for tools and test harnesses that
    ask a broker one thing now and then (readiness, CreateTopics, Metadata) and keep no connection.
    Raises BrokerConnectionError (or OSError) when the broker cannot be reached or does not answer."""
    connection = BrokerConnection(host, port, client_id=client_id, request_timeout_s=timeout_s,
                                  connect_timeout_s=timeout_s)
    try:
        return await connection.send(request, version)
    finally:
        connection.close()
