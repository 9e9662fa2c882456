"""Kafka's key/value schemas of the __consumer_offsets topic, byte for byte.

Keys start with an int16 "version" that says what the record is: 0/1 an OffsetCommitKey,
2 a GroupMetadataKey (3-8 and 16 are KIP-848 consumer group records: consumer/records.py). Values start
with their own int16 version. Kafka writes OffsetCommitValue v3 (v1 when the commit carries an
explicit retention) and GroupMetadataValue v3; every version Kafka ever wrote (0-4, v4 being
flexible) is read back, so a data directory copied from Kafka loads. A null value is a tombstone.

The same schemas are declared with construct in layouts.py, the readable reference that
tests/groupcoord/test_record_layouts.py holds this code to for every version. This code stays
hand-written because it is what runs: construct decodes 16-17x slower and encodes 37x slower
(bench/groups/offsets_decode.py; docs/architecture.md, "Binary layouts").
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..protocol.errors import CorruptRecordError
from .consumer.records import ConsumerGroupKey, decode_consumer_key
from .group import GroupMetadata, OffsetAndMetadata

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")


@dataclass(slots=True, frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(slots=True, frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(slots=True)
class StoredMember:
    """A member as GroupMetadataValue stores it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[StoredMember]


# -- writing -------------------------------------------------------------------------------
def _string(out: bytearray, text: str | None) -> None:
    if text is None:
        out += _h.pack(-1)
        return
    raw = text.encode("utf-8")
    out += _h.pack(len(raw))
    out += raw


def _bytes(out: bytearray, data: bytes) -> None:
    out += _i.pack(len(data))
    out += data


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(_h.pack(OFFSET_COMMIT_KEY_VERSION))
    _string(out, group)
    _string(out, topic)
    out += _i.pack(partition)
    return bytes(out)


def group_metadata_key(group: str) -> bytes:
    out = bytearray(_h.pack(GROUP_METADATA_KEY_VERSION))
    _string(out, group)
    return bytes(out)


def offset_commit_value(committed: OffsetAndMetadata) -> bytes:
    """OffsetCommitValue v3, or v1 when the commit has an explicit expire timestamp (as Kafka)."""
    if committed.expire_timestamp >= 0:
        out = bytearray(_h.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY))
        out += _q.pack(committed.offset)
        _string(out, committed.metadata)
        out += _q.pack(committed.commit_timestamp)
        out += _q.pack(committed.expire_timestamp)
        return bytes(out)
    out = bytearray(_h.pack(OFFSET_COMMIT_VALUE_VERSION))
    out += _q.pack(committed.offset)
    out += _i.pack(committed.leader_epoch)
    _string(out, committed.metadata)
    out += _q.pack(committed.commit_timestamp)
    return bytes(out)


def group_metadata_value(group: GroupMetadata, assignment: dict[str, bytes]) -> bytes:
    """GroupMetadataValue v3 of `group` with the given member assignments."""
    out = bytearray(_h.pack(GROUP_METADATA_VALUE_VERSION))
    _string(out, group.protocol_type or "")
    out += _i.pack(group.generation_id)
    _string(out, group.protocol_name)
    _string(out, group.leader_id)
    out += _q.pack(group.current_state_timestamp if group.current_state_timestamp is not None else -1)
    out += _i.pack(len(group.members))
    for member in group.members.values():
        _string(out, member.member_id)
        _string(out, member.group_instance_id)
        _string(out, member.client_id)
        _string(out, member.client_host)
        out += _i.pack(member.rebalance_timeout_ms)
        out += _i.pack(member.session_timeout_ms)
        _bytes(out, member.metadata(group.protocol_name) if group.protocol_name is not None else b"")
        _bytes(out, assignment.get(member.member_id, member.assignment))
    return bytes(out)


# -- reading -------------------------------------------------------------------------------
class _Reader:
    """Sequential reader of one key or value; `flexible` selects compact encodings."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False):
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise CorruptRecordError(f"__consumer_offsets record truncated at byte {self.pos}")
        data = self.buf[self.pos:end]
        self.pos = end
        return data

    def int16(self) -> int:
        return _h.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _i.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _q.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise CorruptRecordError("varint too long in __consumer_offsets record")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        n = self._length(False)
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"invalid UTF-8 in __consumer_offsets record: {exc}") from None

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise CorruptRecordError("null string where __consumer_offsets schema requires one")
        return text

    def bytes_(self) -> bytes:
        n = self._length(True)
        return b"" if n < 0 else bytes(self._take(n))

    def array_length(self) -> int:
        n = self._length(True)
        if n > len(self.buf) - self.pos:
            raise CorruptRecordError(f"array length {n} exceeds __consumer_offsets record")
        return max(n, 0)

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def _corrupt(what: str) -> CorruptRecordError:
    return CorruptRecordError(f"__consumer_offsets {what} truncated or malformed")


def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | None:
    """The key's meaning: the classic types, the consumer group (KIP-848) ones
    (consumer/records.py), or None for record types the group coordinator skips (share and
    streams groups, unknown types).

    Hand-written with unpack_from (no reader object): one key per offset commit is decoded when
    a partition loads, and this is most of the load's time (docs/architecture.md)."""
    try:
        (version,) = _h.unpack_from(key, 0)
        if version > 2 or version < 0:
            return decode_consumer_key(key)
        (n,) = _h.unpack_from(key, 2)
        end = 4 + n
        if n < 0 or end > len(key):
            raise _corrupt("key")
        group = str(key[4:end], "utf-8")
        if version == 2:
            return GroupMetadataKey(group)
        (n,) = _h.unpack_from(key, end)
        start, end = end + 2, end + 2 + n
        if n < 0 or end > len(key):
            raise _corrupt("key")
        return OffsetCommitKey(group, str(key[start:end], "utf-8"), _i.unpack_from(key, end)[0])
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed __consumer_offsets key: {exc}") from None


_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_V01_HEAD = struct.Struct(">hqh")  # version, offset, metadata length


def decode_offset_commit_value(value: bytes) -> OffsetAndMetadata:
    """OffsetCommitValue v0-v4; v3 (what Kafka and kafkapy write) takes the short path."""
    try:
        (version,) = _h.unpack_from(value, 0)
        if version == 3:
            _, offset, leader_epoch, n = _V3_HEAD.unpack_from(value, 0)
            pos = 16 + max(n, 0)
            if pos + 8 > len(value):
                raise _corrupt("OffsetCommitValue")
            metadata = str(value[16:pos], "utf-8") if n > 0 else ""
            return OffsetAndMetadata(offset, leader_epoch, metadata, _q.unpack_from(value, pos)[0], -1)
        if version in (0, 1, 2):
            _, offset, n = _V01_HEAD.unpack_from(value, 0)
            pos = 12 + max(n, 0)
            if pos + 8 > len(value):
                raise _corrupt("OffsetCommitValue")
            metadata = str(value[12:pos], "utf-8") if n > 0 else ""
            commit_timestamp = _q.unpack_from(value, pos)[0]
            expire_timestamp = _q.unpack_from(value, pos + 8)[0] if version == 1 else -1
            return OffsetAndMetadata(offset, -1, metadata, commit_timestamp, expire_timestamp)
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed __consumer_offsets OffsetCommitValue: {exc}") from None
    if version != 4:
        raise CorruptRecordError(f"unknown OffsetCommitValue version {version}")
    reader = _Reader(bytes(value), 2, flexible=True)
    offset = reader.int64()
    leader_epoch = reader.int32()
    metadata = reader.nullable_string() or ""
    commit_timestamp = reader.int64()
    reader.skip_tags()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, -1)


def decode_group_metadata_value(value: bytes) -> GroupMetadataValue:
    reader = _Reader(bytes(value))
    version = reader.int16()
    if not 0 <= version <= 4:
        raise CorruptRecordError(f"unknown GroupMetadataValue version {version}")
    reader.flexible = version >= 4
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(reader.array_length()):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.int32() if version >= 1 else -1
        session_timeout = reader.int32()
        subscription = reader.bytes_()
        assignment = reader.bytes_()
        reader.skip_tags()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(StoredMember(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                    session_timeout, subscription, assignment))
    reader.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp, members)
