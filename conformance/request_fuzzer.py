"""Requests built from kafkapy's generated schemas, for probing a broker with nulls and odd values.

- `build_request(cls, version, rng, odd=...)`: a request of any API and version with every field
  filled, either with plausible values (a known topic, one element per array) or, with `odd`,
  with values picked from a pool of edge cases (nulls where the version allows them, empty and
  long strings, negative and maximal integers, unknown enum codes, up to a few array elements).
- `nullable_paths` / `set_path`: every nullable field of a version, to send each one as null.
- `mutate_bytes`: byte-level damage to an encoded request (flips, extreme lengths and counts,
  truncation, garbage), for the fuzz campaign (bench/fuzz/campaign.py).
- `WireClient`: one asyncio connection that sends framed requests and says what came back.

Unlike conformance/kafka_wire.py this uses kafkapy's own encoders: the point is valid structure
with hostile values, which the generated encoders write for any version.
"""
from __future__ import annotations

import asyncio
import random
import struct
import uuid
from typing import Any

from kafkapy.protocol.headers import request_header_version
from kafkapy.protocol.messages import REQUEST_TYPES

KNOWN_TOPIC = "fuzz-known"
KNOWN_GROUP = "fuzz-group"
CLIENT_ID = "kafkapy-fuzz"

_INT_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "uint16": (0, 65535),
               "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1)}
_TOPIC_ATTRS = {"name", "topic", "topic_name", "resource_name"}
_GROUP_ATTRS = {"group_id", "key", "transactional_id"}
# plausible values that keep a request from parking (long polls, acks=0 has no answer)
_PLAUSIBLE_INTS = {"acks": 1, "max_wait_ms": 0, "timeout_ms": 100, "session_timeout_ms": 10_000,
                   "rebalance_timeout_ms": 100, "max_bytes": 1 << 20, "partition_max_bytes": 1 << 20,
                   "replica_id": -1, "producer_id": -1, "producer_epoch": -1, "generation_id": -1,
                   "isolation_level": 0, "key_type": 0, "resource_type": 2, "num_partitions": 1,
                   "replication_factor": 1, "count": 2}


def _odd_int(type_: str, rng: random.Random) -> int:
    lo, hi = _INT_RANGES[type_]
    return rng.choice([0, 1, -1, lo, hi, hi - 1, lo + 1, rng.randint(lo, hi), rng.randint(-3, 100), 2, 7, 99])


def _odd_string(f, version: int, rng: random.Random) -> str | None:
    choices: list[str | None] = ["", KNOWN_TOPIC, KNOWN_GROUP, "x" * rng.choice([1, 249, 250, 300, 4000]),
                                 "..", ".", "__consumer_offsets", "ünïcødé-\u2603", "a/b", "a b", "\x00",
                                 "User:*", "*", "no-such-topic-%d" % rng.randint(0, 9)]
    if f.nullable(version):
        choices += [None, None]
    return rng.choice(choices)


def _value(f, version: int, rng: random.Random, odd: bool, depth: int) -> Any:
    """A value for one (non-array) element of field `f`."""
    t = f.type
    if t == "struct":
        return build_struct(f.struct, version, rng, odd, depth + 1)
    if t in _INT_RANGES:
        if odd and rng.random() < 0.7:
            return _odd_int(t, rng)
        return _PLAUSIBLE_INTS.get(f.attr, 0)
    if t == "bool":
        return rng.random() < 0.5 if odd else False
    if t == "float64":
        return rng.choice([0.0, -1.0, 1e308, float("inf"), float("nan")]) if odd else 0.0
    if t == "string":
        if odd and rng.random() < 0.7:
            return _odd_string(f, version, rng)
        if f.attr in _TOPIC_ATTRS:
            return KNOWN_TOPIC
        if f.attr in _GROUP_ATTRS:
            return KNOWN_GROUP
        return "x"
    if t == "bytes":
        if odd:
            choices = [b"", rng.randbytes(rng.choice([1, 8, 64, 300]))]
            return rng.choice(choices + ([None] if f.nullable(version) else []))
        return b""
    if t == "records":
        if odd:
            return rng.choice([None, b"", rng.randbytes(rng.choice([12, 61, 70, 200]))])
        return None
    if t == "uuid":
        if odd:
            return rng.choice([uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128)), uuid.UUID(int=1)])
        return uuid.UUID(int=0)
    raise ValueError(f"unknown field type {t}")


def build_struct(cls: type, version: int, rng: random.Random, odd: bool = False, depth: int = 0) -> Any:
    obj = cls()
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        if f.is_array:
            if odd and f.nullable(version) and rng.random() < 0.15:
                value = None
            else:
                n = (rng.choice([0, 1, 1, 2, 3]) if odd else 1) if depth < 4 else 0
                value = [_value(f, version, rng, odd, depth) for _ in range(n)]
        elif odd and f.nullable(version) and rng.random() < 0.1:
            value = None
        else:
            value = _value(f, version, rng, odd, depth)
        setattr(obj, f.attr, value)
    return obj


def build_request(cls: type, version: int, rng: random.Random | None = None, odd: bool = False) -> Any:
    """A request of `cls` at `version` with every present field set (see the module docstring)."""
    return build_struct(cls, version, rng or random.Random(0), odd)


def nullable_paths(cls: type, version: int, prefix: tuple = ()) -> list[tuple[str, ...]]:
    """Attribute paths (through the first element of arrays) of every field nullable at `version`."""
    paths = []
    for f in cls.SCHEMA:
        if not f.present(version):
            continue
        if f.nullable(version):
            paths.append(prefix + (f.attr,))
        if f.type == "struct":
            paths += nullable_paths(f.struct, version, prefix + (f.attr,))
    return paths


def set_path(obj: Any, path: tuple[str, ...], value: Any) -> bool:
    """Set the field at `path` (first element of each array on the way); False if the way is empty."""
    for attr in path[:-1]:
        obj = getattr(obj, attr)
        if isinstance(obj, list):
            if not obj:
                return False
            obj = obj[0]
        if obj is None:
            return False
    setattr(obj, path[-1], value)
    return True


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None = CLIENT_ID) -> bytes:
    raw = client_id.encode() if client_id is not None else None
    header = struct.pack(">hhih", api_key, version, correlation_id, -1 if raw is None else len(raw)) + (raw or b"")
    if request_header_version(api_key, version) == 2:
        header += b"\x00"   # no tagged fields
    return header


def encode_request(request: Any, version: int, correlation_id: int) -> bytes:
    """The framed request (size, header, body)."""
    body = request_header(request.API_KEY, version, correlation_id) + request.encode(version)
    return struct.pack(">i", len(body)) + body


_EXTREMES_16 = [struct.pack(">h", v) for v in (-1, -2, 0x7FFF, -0x8000, 0)]
_EXTREMES_32 = [struct.pack(">i", v) for v in (-1, -2, 0x7FFFFFFF, -0x80000000, 0x10000000, 0)]
_VARINTS = [b"\xff\xff\xff\xff\x0f", b"\x00", b"\x80\x80\x80\x80\x80\x01", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff"]


def mutate_bytes(frame: bytes, rng: random.Random, header_len: int = 14) -> bytes:
    """Damage the body of a framed request (the size prefix is fixed up; the header mostly kept)."""
    body = bytearray(frame[4:])
    start = min(header_len, len(body))
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.randrange(8)
        pos = rng.randint(start, max(start, len(body) - 1)) if len(body) > start else start
        if op == 0 and len(body) > start:                 # flip a byte
            body[pos] ^= 1 << rng.randrange(8)
        elif op == 1:                                     # an extreme int16 (string length, error code)
            body[pos:pos + 2] = rng.choice(_EXTREMES_16)
        elif op == 2:                                     # an extreme int32 (array count, bytes length)
            body[pos:pos + 4] = rng.choice(_EXTREMES_32)
        elif op == 3:                                     # an extreme or overlong varint (compact lengths)
            body[pos:pos + 1] = rng.choice(_VARINTS)
        elif op == 4:                                     # truncate
            del body[pos:]
        elif op == 5:                                     # trailing or inserted garbage
            body[pos:pos] = rng.randbytes(rng.choice([1, 4, 17, 200]))
        elif op == 6 and len(body) > start:               # duplicate a slice
            end = rng.randint(pos, len(body))
            body[pos:pos] = body[pos:end]
        else:                                             # random byte
            if len(body) > start:
                body[pos] = rng.randrange(256)
    return struct.pack(">i", len(body)) + bytes(body)


class Outcome:
    ANSWERED = "answered"
    CLOSED = "closed"
    SILENT = "silent"       # neither answered nor closed within the wait (acks=0, long polls)


class WireClient:
    """One connection to the broker: send a framed request, wait for its answer or the close."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self, timeout: float = 10.0) -> None:
        self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), timeout)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass
        self.reader = self.writer = None

    async def exchange(self, frame: bytes, correlation_id: int, wait: float) -> tuple[str, bytes | None]:
        """(outcome, response body after the correlation id) for one request; reconnects after a close."""
        if self.writer is None:
            await self.connect()
        try:
            self.writer.write(frame)
            await self.writer.drain()
            while True:
                size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), wait))[0]
                body = await asyncio.wait_for(self.reader.readexactly(size), wait)
                if struct.unpack_from(">i", body)[0] == correlation_id:
                    return Outcome.ANSWERED, body[4:]
                # an answer to an earlier request we stopped waiting for: keep reading
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            await self.close()
            return Outcome.CLOSED, None
        except asyncio.TimeoutError:
            await self.close()      # a parked request: start over on a fresh connection
            return Outcome.SILENT, None


def response_body(api_key: int, version: int, payload: bytes) -> Any:
    """Decode a response payload (after the correlation id) with kafkapy's classes."""
    from kafkapy.protocol.headers import response_header_version
    from kafkapy.protocol.messages import RESPONSE_TYPES

    pos = 1 if response_header_version(api_key, version) == 1 else 0   # header tagged fields
    return RESPONSE_TYPES[api_key].decode(payload, version, pos)


def request_class(api_key: int) -> type:
    return REQUEST_TYPES[api_key]
