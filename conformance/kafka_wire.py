"""Hand-built Kafka wire requests over raw sockets, independent of kafkapy's own codec.

The conformance tests use this to send exactly the bytes they mean (including malformed
ones) and to decode the few response shapes they check. Everything is written with
`struct` from the Kafka protocol guide, so a bug in kafkapy.protocol cannot hide here;
flexible-version requests (compact encodings, tagged fields) come from kafka-python's
protocol classes instead.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

import crc32c

API_PRODUCE = 0
API_METADATA = 3
API_API_VERSIONS = 18
API_CREATE_TOPICS = 19


# ---------------------------------------------------------------- primitives

def zigzag_varint(value: int) -> bytes:
    """Kafka's signed varint (zig-zag, base-128) encoding."""
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def kstring(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def kbytes(value: bytes | None) -> bytes:
    if value is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(value)) + value


def request_header_v1(api_key: int, api_version: int, correlation_id: int, client_id: str = "kafkapy-conformance") -> bytes:
    return struct.pack(">hhi", api_key, api_version, correlation_id) + kstring(client_id)


def frame(payload: bytes) -> bytes:
    """Prefix a request with its int32 size."""
    return struct.pack(">i", len(payload)) + payload


# ---------------------------------------------------------------- record batch v2

def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes | None]] = ()) -> bytes:
    body = bytearray()
    body += b"\x00"  # record attributes (unused)
    body += zigzag_varint(timestamp_delta)
    body += zigzag_varint(offset_delta)
    for blob in (key, value):
        if blob is None:
            body += zigzag_varint(-1)
        else:
            body += zigzag_varint(len(blob)) + blob
    body += zigzag_varint(len(headers))
    for name, hval in headers:
        raw = name.encode()
        body += zigzag_varint(len(raw)) + raw
        if hval is None:
            body += zigzag_varint(-1)
        else:
            body += zigzag_varint(len(hval)) + hval
    return zigzag_varint(len(body)) + bytes(body)


def encode_batch(records: list[tuple[bytes | None, bytes | None]], base_timestamp: int | None = None,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 corrupt_crc: bool = False) -> bytes:
    """An uncompressed magic-2 record batch with base offset 0 and a correct (or broken) CRC32C."""
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    encoded = b"".join(encode_record(i, 0, k, v) for i, (k, v) in enumerate(records))
    after_crc = struct.pack(
        ">hiqqqhii",
        0,                      # attributes: no compression, CreateTime
        len(records) - 1,       # lastOffsetDelta
        base_timestamp,
        base_timestamp,         # maxTimestamp
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + encoded
    crc = crc32c.crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    # batchLength counts from partitionLeaderEpoch to the end.
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", 0, batch_length, -1, 2, crc) + after_crc


# ---------------------------------------------------------------- requests

def api_versions_request(version: int, correlation_id: int) -> bytes:
    if version >= 3:
        # Flexible header v2 (tagged fields) and body: client software name/version.
        header = struct.pack(">hhi", API_API_VERSIONS, version, correlation_id) + kstring("kafkapy-conformance") + b"\x00"
        body = b"\x08kafkapy" + b"\x061.0.0" + b"\x00"  # compact strings: len+1
        return frame(header + body)
    return frame(request_header_v1(API_API_VERSIONS, version, correlation_id))


def metadata_request(version: int, correlation_id: int, topics: list[str] | None) -> bytes:
    """Metadata v1..v3 (non-flexible); topics=None means all topics."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(kstring(t) for t in topics)
    return frame(request_header_v1(API_METADATA, version, correlation_id) + body)


def produce_request_v3(correlation_id: int, topic: str, partition: int, batch: bytes,
                       acks: int = -1, timeout_ms: int = 10_000) -> bytes:
    body = kstring(None) + struct.pack(">hi", acks, timeout_ms)
    body += struct.pack(">i", 1) + kstring(topic)
    body += struct.pack(">i", 1) + struct.pack(">i", partition) + kbytes(batch)
    return frame(request_header_v1(API_PRODUCE, 3, correlation_id) + body)


# ---------------------------------------------------------------- responses

class Reader:
    """Sequential big-endian reader over one response body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError(f"response truncated at byte {self.pos} reading {fmt}")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def int8(self) -> int: return self.take(">b")[0]
    def int16(self) -> int: return self.take(">h")[0]
    def int32(self) -> int: return self.take(">i")[0]
    def int64(self) -> int: return self.take(">q")[0]

    def string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        return raw.decode()

    def remaining(self) -> int:
        return len(self.data) - self.pos


@dataclass(slots=True)
class ApiVersionsV0:
    correlation_id: int
    error_code: int
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)


def parse_api_versions_v0(data: bytes) -> ApiVersionsV0:
    """ApiVersions response in the v0 layout (what a broker answers to an unsupported version)."""
    reader = Reader(data)
    correlation_id = reader.int32()
    error_code = reader.int16()
    ranges = {}
    for _ in range(reader.int32()):
        key, lo, hi = reader.take(">hhh")
        ranges[key] = (lo, hi)
    return ApiVersionsV0(correlation_id, error_code, ranges)


@dataclass(slots=True)
class ProducePartitionResult:
    topic: str
    partition: int
    error_code: int
    base_offset: int


def parse_produce_v3(data: bytes) -> tuple[int, list[ProducePartitionResult]]:
    """Returns (correlation_id, partition results) of a Produce v3 response."""
    reader = Reader(data)
    correlation_id = reader.int32()
    results = []
    for _ in range(reader.int32()):
        topic = reader.string() or ""
        for _ in range(reader.int32()):
            partition, error_code, base_offset, _log_append_time = reader.take(">ihqq")
            results.append(ProducePartitionResult(topic, partition, error_code, base_offset))
    return correlation_id, results


# ---------------------------------------------------------------- connection

class ConnectionClosed(Exception):
    """The broker closed the connection (EOF or reset) before a full response arrived."""


class RawConnection:
    """A blocking socket to the broker that sends raw bytes and reads size-prefixed responses."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            try:
                chunk = self.sock.recv(size - len(chunks))
            except ConnectionResetError as exc:
                raise ConnectionClosed(f"connection reset after {len(chunks)}/{size} bytes") from exc
            if not chunk:
                raise ConnectionClosed(f"EOF after {len(chunks)}/{size} bytes")
            chunks += chunk
        return bytes(chunks)

    def receive(self) -> bytes:
        """One response body (without its size prefix). Raises ConnectionClosed, socket.timeout."""
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def roundtrip(self, request: bytes) -> bytes:
        self.send(request)
        return self.receive()

    def wait_closed(self, timeout: float = 10.0) -> bool:
        """True if the broker closes the connection within `timeout`, discarding any data sent."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def init_producer_id(bootstrap: str, version: int = 4, correlation_id: int = 4242) -> tuple[int, int, int]:
    """Allocate a non-transactional producer id: returns (error_code, producer_id, producer_epoch).

    Uses kafka-python's InitProducerId classes (v2+ is a flexible version).
    """
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                    producer_id=-1, producer_epoch=-1)
    request.with_header(correlation_id=correlation_id, client_id="kafkapy-conformance")
    with RawConnection(bootstrap) as conn:
        body = conn.roundtrip(bytes(request.encode(version=version, header=True, framed=True)))
    response = InitProducerIdResponse.decode(body, version=version, header=True)
    return response.error_code, response.producer_id, response.producer_epoch
