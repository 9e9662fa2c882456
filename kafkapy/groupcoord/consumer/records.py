"""Kafka 4.0's __consumer_offsets records of consumer-protocol (KIP-848) groups, byte for byte.

A key starts with an int16 that names the record type (Kafka's "apiKey" of the coordinator
record): 3 ConsumerGroupMetadata (group epoch), 4 ConsumerGroupPartitionMetadata (subscribed
topics' ids and partition counts), 5 ConsumerGroupMemberMetadata (a member's subscription),
6 ConsumerGroupTargetAssignmentMetadata (assignment epoch), 7 ConsumerGroupTargetAssignmentMember
(a member's target), 8 ConsumerGroupCurrentMemberAssignment (a member's epochs and owned
partitions) and 16 ConsumerGroupRegularExpression (a resolved regex, new in 4.0). Keys are
non-flexible (int16-length strings); every value is version 0 and flexible (compact strings and
arrays, a tagged-field section after each struct). Kafka only writes a tagged field whose value
is not its default, and so do we; tagged fields this code does not know (4.1's MetadataHash,
later AssignmentEpochs) are skipped on read. A null value is a tombstone.

Share group (9-15), streams group (17+) and unknown record types are not consumer-group
records: `decode_consumer_key` returns None for them and the loader skips them.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Union

from ...protocol.errors import CorruptRecordError

# Key types (the key's leading int16) of consumer-group records.
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
CONSUMER_GROUP_KEY_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
VALUE_VERSION = 0

# Kafka's MemberState byte values (ConsumerGroupCurrentMemberAssignmentValue.State).
MEMBER_STATE_STABLE = 0
MEMBER_STATE_UNREVOKED_PARTITIONS = 1
MEMBER_STATE_UNRELEASED_PARTITIONS = 2
MEMBER_STATE_UNKNOWN = 127

# topic id -> partitions, the shape of kafkapy.groupcoord.consumer.group.Assignment
Assignment = dict[uuid.UUID, frozenset[int]]

# topic ids seen while decoding (a partition's groups subscribe to few topics): uuid.UUID()
# construction was a tenth of a consumer-group load
_UUIDS: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_MAX = 65536
# ">Ni" structs by N, for partition arrays
_INT32_ARRAYS: dict[int, struct.Struct] = {}

_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")
_b = struct.Struct(">b")


# -- keys ----------------------------------------------------------------------------------
@dataclass(slots=True, frozen=True)
class ConsumerGroupMetadataKey:
    KEY_TYPE: ClassVar[int] = CONSUMER_GROUP_METADATA
    group: str


@dataclass(slots=True, frozen=True)
class ConsumerGroupPartitionMetadataKey:
    KEY_TYPE: ClassVar[int] = CONSUMER_GROUP_PARTITION_METADATA
    group: str


@dataclass(slots=True, frozen=True)
class ConsumerGroupMemberMetadataKey:
    KEY_TYPE: ClassVar[int] = CONSUMER_GROUP_MEMBER_METADATA
    group: str
    member_id: str


@dataclass(slots=True, frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    KEY_TYPE: ClassVar[int] = CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA
    group: str


@dataclass(slots=True, frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    KEY_TYPE: ClassVar[int] = CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER
    group: str
    member_id: str


@dataclass(slots=True, frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    KEY_TYPE: ClassVar[int] = CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT
    group: str
    member_id: str


@dataclass(slots=True, frozen=True)
class ConsumerGroupRegularExpressionKey:
    KEY_TYPE: ClassVar[int] = CONSUMER_GROUP_REGULAR_EXPRESSION
    group: str
    regex: str


ConsumerGroupKey = Union[
    ConsumerGroupMetadataKey, ConsumerGroupPartitionMetadataKey, ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupRegularExpressionKey,
]
_GROUP_ONLY_KEYS = {k.KEY_TYPE: k for k in (ConsumerGroupMetadataKey, ConsumerGroupPartitionMetadataKey,
                                             ConsumerGroupTargetAssignmentMetadataKey)}
_TWO_STRING_KEYS = {k.KEY_TYPE: k for k in (ConsumerGroupMemberMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
                                             ConsumerGroupCurrentMemberAssignmentKey,
                                             ConsumerGroupRegularExpressionKey)}


# -- values --------------------------------------------------------------------------------
@dataclass(slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(slots=True)
class TopicMetadata:
    """One subscribed topic in ConsumerGroupPartitionMetadataValue (racks: empty when Kafka
    4.0 wrote it, which stopped storing them)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: dict[int, tuple[str, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: list[TopicMetadata]


@dataclass(slots=True)
class ClassicMemberMetadata:
    """The tagged field (tag 0) of a member that speaks the classic protocol in a consumer group."""

    session_timeout_ms: int
    supported_protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: Assignment


@dataclass(slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MEMBER_STATE_*
    assigned: Assignment
    pending_revocation: Assignment


@dataclass(slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: list[str]
    version: int  # the metadata image version the regex was resolved against
    timestamp_ms: int


ConsumerGroupValue = Union[
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataValue, ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataValue, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentValue, ConsumerGroupRegularExpressionValue,
]

Record = tuple[bytes, Union[bytes, None]]


# -- writing -------------------------------------------------------------------------------
def _uvarint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _key_string(out: bytearray, text: str) -> None:
    raw = text.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes does not fit a record key")
    out += _h.pack(len(raw))
    out += raw


def _compact_string(out: bytearray, text: str | None) -> None:
    if text is None:
        out.append(0)
        return
    raw = text.encode("utf-8")
    _uvarint(out, len(raw) + 1)
    out += raw


def _compact_bytes(out: bytearray, data: bytes) -> None:
    _uvarint(out, len(data) + 1)
    out += data


def _string_array(out: bytearray, items: list[str] | tuple[str, ...]) -> None:
    _uvarint(out, len(items) + 1)
    for item in items:
        _compact_string(out, item)


def _topic_partitions(out: bytearray, assignment: Mapping[uuid.UUID, Iterable[int]]) -> None:
    """[]TopicPartitions: topics by id, partitions ascending (deterministic bytes for equal state)."""
    topics = sorted(assignment.items(), key=lambda item: item[0].bytes)
    _uvarint(out, len(topics) + 1)
    for topic_id, partitions in topics:
        out += topic_id.bytes
        ordered = sorted(partitions)
        _uvarint(out, len(ordered) + 1)
        for p in ordered:
            out += _i.pack(p)
        out.append(0)  # no tagged fields


def encode_key(key: ConsumerGroupKey) -> bytes:
    """The key bytes: int16 type, the group id, then the member id or regex where the type has one."""
    out = bytearray(_h.pack(key.KEY_TYPE))
    _key_string(out, key.group)
    if type(key) is ConsumerGroupRegularExpressionKey:
        _key_string(out, key.regex)
    elif key.KEY_TYPE in _TWO_STRING_KEYS:
        _key_string(out, key.member_id)  # type: ignore[union-attr]
    return bytes(out)


def encode_value(value: ConsumerGroupValue) -> bytes:
    """The value bytes (version 0, flexible)."""
    out = bytearray(_h.pack(VALUE_VERSION))
    kind = type(value)
    if kind is ConsumerGroupMetadataValue:
        out += _i.pack(value.epoch)
    elif kind is ConsumerGroupPartitionMetadataValue:
        _uvarint(out, len(value.topics) + 1)
        for topic in value.topics:
            out += topic.topic_id.bytes
            _compact_string(out, topic.name)
            out += _i.pack(topic.num_partitions)
            _uvarint(out, len(topic.partition_racks) + 1)
            for partition, racks in sorted(topic.partition_racks.items()):
                out += _i.pack(partition)
                _string_array(out, racks)
                out.append(0)
            out.append(0)
    elif kind is ConsumerGroupMemberMetadataValue:
        _compact_string(out, value.instance_id)
        _compact_string(out, value.rack_id)
        _compact_string(out, value.client_id)
        _compact_string(out, value.client_host)
        _string_array(out, value.subscribed_topic_names)
        _compact_string(out, value.subscribed_topic_regex)
        out += _i.pack(value.rebalance_timeout_ms)
        _compact_string(out, value.server_assignor)
        classic = value.classic_member_metadata
        if classic is None:
            out.append(0)
        else:
            body = bytearray(_i.pack(classic.session_timeout_ms))
            _uvarint(body, len(classic.supported_protocols) + 1)
            for name, metadata in classic.supported_protocols:
                _compact_string(body, name)
                _compact_bytes(body, metadata)
                body.append(0)
            body.append(0)
            out.append(1)  # one tagged field: tag 0, its size, the struct
            out.append(0)
            _uvarint(out, len(body))
            out += body
        return bytes(out)
    elif kind is ConsumerGroupTargetAssignmentMetadataValue:
        out += _i.pack(value.assignment_epoch)
    elif kind is ConsumerGroupTargetAssignmentMemberValue:
        _topic_partitions(out, value.partitions)
    elif kind is ConsumerGroupCurrentMemberAssignmentValue:
        out += _i.pack(value.member_epoch)
        out += _i.pack(value.previous_member_epoch)
        out += _b.pack(value.state)
        _topic_partitions(out, value.assigned)
        _topic_partitions(out, value.pending_revocation)
    elif kind is ConsumerGroupRegularExpressionValue:
        _string_array(out, value.topics)
        out += _q.pack(value.version)
        out += _q.pack(value.timestamp_ms)
    else:
        raise TypeError(f"not a consumer group record value: {kind.__name__}")
    out.append(0)  # the value's (empty) tagged fields
    return bytes(out)


def record(key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> Record:
    """(key bytes, value bytes), or (key bytes, None) for a tombstone."""
    return encode_key(key), None if value is None else encode_value(value)


# -- reading -------------------------------------------------------------------------------
class _Reader:
    """Reads one flexible value."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int):
        self.buf = buf
        self.pos = pos

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise CorruptRecordError(f"__consumer_offsets consumer group record truncated at byte {self.pos}")
        data = self.buf[self.pos:end]
        self.pos = end
        return data

    def int8(self) -> int:
        return _b.unpack(self._take(1))[0]

    def int32(self) -> int:
        return _i.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _q.unpack(self._take(8))[0]

    def uuid(self) -> uuid.UUID:
        raw = bytes(self._take(16))
        found = _UUIDS.get(raw)
        if found is None:
            found = uuid.UUID(bytes=raw)
            if len(_UUIDS) < _UUID_CACHE_MAX:
                _UUIDS[raw] = found
        return found

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise CorruptRecordError("varint too long in __consumer_offsets consumer group record")

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"invalid UTF-8 in __consumer_offsets consumer group record: {exc}") from None

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise CorruptRecordError("null string where the consumer group record schema requires one")
        return text

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptRecordError("null bytes where the consumer group record schema requires them")
        return bytes(self._take(n))

    def array_length(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptRecordError("null array where the consumer group record schema requires one")
        if n > len(self.buf) - self.pos:
            raise CorruptRecordError(f"array length {n} exceeds the __consumer_offsets record")
        return n

    def strings(self) -> list[str]:
        return [self.string() for _ in range(self.array_length())]

    def int32s(self) -> tuple[int, ...]:
        n = self.array_length()
        layout = _INT32_ARRAYS.get(n)
        if layout is None:
            layout = struct.Struct(f">{n}i")
            if n <= 4096:
                _INT32_ARRAYS[n] = layout
        start = self.pos
        self._take(4 * n)
        return layout.unpack_from(self.buf, start)

    def tags(self) -> dict[int, bytes]:
        """The tagged-field section: tag -> raw bytes."""
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = bytes(self._take(self.uvarint()))
        return found

    def end(self) -> None:
        """Nothing may follow a value: Kafka never writes trailing bytes, and a value of another
        layout under the same version (Kafka 3.7's early-access KIP-848 records) mostly leaves some."""
        if self.pos != len(self.buf):
            raise CorruptRecordError(f"{len(self.buf) - self.pos} bytes after the end of a consumer group value")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def topic_partitions(self) -> Assignment:
        assignment: Assignment = {}
        for _ in range(self.array_length()):
            topic_id = self.uuid()
            partitions = frozenset(self.int32s())
            if self.pos < len(self.buf) and self.buf[self.pos] == 0:
                self.pos += 1  # no tagged fields (what 4.0 writes)
            else:
                self.skip_tags()  # 4.x+ AssignmentEpochs (tag 0) and anything later
            if partitions or topic_id not in assignment:
                assignment[topic_id] = assignment.get(topic_id, frozenset()) | partitions
        return assignment


def decode_consumer_key(key: bytes) -> ConsumerGroupKey | None:
    """A consumer group record's key; None for record types that are not consumer-group ones."""
    try:
        (key_type,) = _h.unpack_from(key, 0)
        two = key_type in _TWO_STRING_KEYS
        if not two and key_type not in _GROUP_ONLY_KEYS:
            return None
        (n,) = _h.unpack_from(key, 2)
        end = 4 + n
        if n < 0 or end > len(key):
            raise CorruptRecordError("__consumer_offsets consumer group key truncated or malformed")
        group = str(key[4:end], "utf-8")
        if not two:
            return _GROUP_ONLY_KEYS[key_type](group)
        (n,) = _h.unpack_from(key, end)
        start, end = end + 2, end + 2 + n
        if n < 0 or end > len(key):
            raise CorruptRecordError("__consumer_offsets consumer group key truncated or malformed")
        return _TWO_STRING_KEYS[key_type](group, str(key[start:end], "utf-8"))
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed __consumer_offsets consumer group key: {exc}") from None


def _classic_member_metadata(raw: bytes) -> ClassicMemberMetadata:
    """Tag 0 of ConsumerGroupMemberMetadataValue. Kafka 3.8+ writes SessionTimeoutMs first; the
    pre-release layout without it is read too (the tag's size tells them apart)."""
    for with_session_timeout in (True, False):
        reader = _Reader(raw, 0)
        try:
            session_timeout = reader.int32() if with_session_timeout else -1
            protocols = []
            for _ in range(reader.array_length()):
                name = reader.string()
                protocols.append((name, reader.bytes_()))
                reader.skip_tags()
            reader.skip_tags()
        except CorruptRecordError:
            continue
        if reader.pos == len(raw):
            return ClassicMemberMetadata(session_timeout, protocols)
    raise CorruptRecordError("malformed ClassicMemberMetadata in ConsumerGroupMemberMetadataValue")


def decode_consumer_value(key: ConsumerGroupKey, value: bytes) -> ConsumerGroupValue:
    """The value of a record whose key `decode_consumer_key` returned (not a tombstone)."""
    try:
        (version,) = _h.unpack_from(value, 0)
    except struct.error:
        raise CorruptRecordError("__consumer_offsets consumer group value shorter than its version") from None
    kind = type(key)
    if version != VALUE_VERSION:
        raise CorruptRecordError(f"unknown {kind.__name__[:-3]}Value version {version}")
    reader = _Reader(value, 2)
    result: ConsumerGroupValue
    if kind is ConsumerGroupMetadataKey:
        result = ConsumerGroupMetadataValue(reader.int32())
    elif kind is ConsumerGroupPartitionMetadataKey:
        topics = []
        for _ in range(reader.array_length()):
            topic_id = reader.uuid()
            name = reader.string()
            num_partitions = reader.int32()
            racks: dict[int, tuple[str, ...]] = {}
            for _ in range(reader.array_length()):
                partition = reader.int32()
                racks[partition] = tuple(reader.strings())
                reader.skip_tags()
            reader.skip_tags()
            topics.append(TopicMetadata(topic_id, name, num_partitions, racks))
        result = ConsumerGroupPartitionMetadataValue(topics)
    elif kind is ConsumerGroupMemberMetadataKey:
        instance_id = reader.nullable_string()
        rack_id = reader.nullable_string()
        client_id = reader.string()
        client_host = reader.string()
        subscribed = reader.strings()
        regex = reader.nullable_string()
        rebalance_timeout_ms = reader.int32()
        assignor = reader.nullable_string()
        tagged = reader.tags()
        classic = _classic_member_metadata(tagged[0]) if tagged.get(0) else None
        result = ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, subscribed, regex,
                                                  rebalance_timeout_ms, assignor, classic)
        reader.end()
        return result
    elif kind is ConsumerGroupTargetAssignmentMetadataKey:
        result = ConsumerGroupTargetAssignmentMetadataValue(reader.int32())
    elif kind is ConsumerGroupTargetAssignmentMemberKey:
        result = ConsumerGroupTargetAssignmentMemberValue(reader.topic_partitions())
    elif kind is ConsumerGroupCurrentMemberAssignmentKey:
        member_epoch = reader.int32()
        previous_member_epoch = reader.int32()
        state = reader.int8()
        assigned = reader.topic_partitions()
        pending = reader.topic_partitions()
        result = ConsumerGroupCurrentMemberAssignmentValue(member_epoch, previous_member_epoch, state, assigned,
                                                           pending)
    elif kind is ConsumerGroupRegularExpressionKey:
        matched = reader.strings()
        result = ConsumerGroupRegularExpressionValue(matched, reader.int64(), reader.int64())
    else:
        raise TypeError(f"not a consumer group record key: {kind.__name__}")
    reader.skip_tags()
    reader.end()
    return result
