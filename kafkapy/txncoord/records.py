"""Kafka's key/value schemas of the __transaction_state topic, byte for byte.

Key: TransactionLogKey v0 -- int16 version, string transactional id. Value: TransactionLogValue --
int16 version, then producer id (int64), producer epoch (int16), transaction timeout (int32),
status (int8, the state id), partitions (nullable array of {topic string, partitions [int32]};
null in state Empty), last update timestamp (int64), start timestamp (int64). Kafka 3.9 writes
v0; v1 (flexible: compact encodings and tagged fields, written once transaction.version >= 1)
is read too. A null value is a tombstone: the transactional id expired.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..protocol.errors import CorruptRecordError

KEY_VERSION = 0
VALUE_VERSION = 0

_h = struct.Struct(">h")
_b = struct.Struct(">b")
_i = struct.Struct(">i")
_q = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")

__all__ = ["TransactionLogValue", "decode_key", "decode_value", "encode_key", "encode_value"]


@dataclass(slots=True)
class TransactionLogValue:
    """What __transaction_state stores for one transactional id."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state_id: int
    partitions: dict[str, list[int]] = field(default_factory=dict)  # topic -> partitions
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _h.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _h.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(value: TransactionLogValue, partitions_null: bool = False) -> bytes:
    """TransactionLogValue v0; `partitions_null` writes the null array Kafka uses in state Empty."""
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, value.producer_id, value.producer_epoch,
                                     value.transaction_timeout_ms, value.state_id))
    if partitions_null:
        out += _i.pack(-1)
    else:
        out += _i.pack(len(value.partitions))
        for topic in sorted(value.partitions):
            out += _string(topic)
            ids = sorted(value.partitions[topic])
            out += _i.pack(len(ids))
            out += b"".join(_i.pack(p) for p in ids)
    out += _TIMES.pack(value.last_update_timestamp_ms, value.start_timestamp_ms)
    return bytes(out)


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, flexible: bool = False):
        self.buf = buf
        self.pos = 0
        self.flexible = flexible

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise CorruptRecordError(f"__transaction_state record truncated at byte {self.pos}")
        data = self.buf[self.pos:end]
        self.pos = end
        return data

    def unpack(self, st: struct.Struct):
        return st.unpack(self.take(st.size))[0]

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise CorruptRecordError("varint too long in __transaction_state record")

    def length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.unpack(_i) if wide else self.unpack(_h)

    def string(self) -> str:
        n = self.length(False)
        if n < 0:
            raise CorruptRecordError("null string in __transaction_state record")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"invalid UTF-8 in __transaction_state record: {exc}") from None

    def array_length(self) -> int:
        n = self.length(True)
        if n > len(self.buf) - self.pos:
            raise CorruptRecordError(f"array length {n} exceeds the __transaction_state record")
        return n

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.take(self.uvarint())


def decode_key(key: bytes) -> str | None:
    """The transactional id of a TransactionLogKey; None for a key version this broker ignores."""
    reader = _Reader(bytes(key))
    if reader.unpack(_h) != KEY_VERSION:
        return None
    return reader.string()


def decode_value(value: bytes) -> TransactionLogValue:
    """TransactionLogValue v0 or v1; raises CorruptRecordError for anything else."""
    reader = _Reader(bytes(value))
    version = reader.unpack(_h)
    if version not in (0, 1):
        raise CorruptRecordError(f"unknown TransactionLogValue version {version}")
    reader.flexible = version >= 1
    producer_id = reader.unpack(_q)
    epoch = reader.unpack(_h)
    timeout = reader.unpack(_i)
    state_id = reader.unpack(_b)
    partitions: dict[str, list[int]] = {}
    for _ in range(max(reader.array_length(), 0)):
        topic = reader.string()
        ids = [reader.unpack(_i) for _ in range(max(reader.array_length(), 0))]
        reader.skip_tags()
        partitions.setdefault(topic, []).extend(ids)
    last_update, start = reader.unpack(_q), reader.unpack(_q)
    reader.skip_tags()
    return TransactionLogValue(producer_id, epoch, timeout, state_id, partitions, last_update, start)
