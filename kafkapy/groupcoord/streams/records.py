"""Kafka 4.4's __consumer_offsets records of streams groups (KIP-1071), byte for byte.

Record types (the key's leading int16, Kafka's coordinator "apiKey"): 17 StreamsGroupMetadata
(group epoch, metadata hash, validated topology epoch, last assignment configs), 19
StreamsGroupMemberMetadata, 20 StreamsGroupTargetAssignmentMetadata (assignment epoch; 4.4's
assignment timestamp as tagged field 0), 21
StreamsGroupTargetAssignmentMember, 22 StreamsGroupCurrentMemberAssignment (epochs, state, tasks
and tasks pending revocation, active tasks' assignment epochs as tagged field 0) and 23
StreamsGroupTopology. Schemas: kafka-group-coordinator 4.4.0's generated classes (the JSON is
the one of 4.2.0's sources jar, common/message/StreamsGroup*.json; 4.4 only adds tagged fields to
StreamsGroupMetadataValue, skipped on read). Keys are non-flexible; values are version 0 and
flexible. A null value is a tombstone.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ...protocol.errors import CorruptRecordError
from .group import MemberState, StreamsGroup, StreamsGroupMember, Tasks
from .topology import CopartitionGroup, Subtopology, TopicInfo, Topology

STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23
STREAMS_KEY_TYPES = frozenset({17, 19, 20, 21, 22, 23})
_GROUP_KEYS = frozenset({17, 20, 23})

_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")
_b = struct.Struct(">b")

Record = tuple[bytes, bytes | None]


# -- writing -------------------------------------------------------------------------------
class _Writer:
    def __init__(self):
        self.out = bytearray(_h.pack(0))  # value version 0

    def uvarint(self, n: int) -> None:
        while n >= 0x80:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def string(self, text: str | None) -> None:
        if text is None:
            self.uvarint(0)
            return
        raw = text.encode("utf-8")
        self.uvarint(len(raw) + 1)
        self.out += raw

    def int8(self, n: int) -> None:
        self.out += _b.pack(n)

    def int16(self, n: int) -> None:
        self.out += _h.pack(n)

    def int32(self, n: int) -> None:
        self.out += _i.pack(n)

    def int64(self, n: int) -> None:
        self.out += _q.pack(n)

    def no_tags(self) -> None:
        self.out.append(0)

    def strings(self, items) -> None:
        self.uvarint(len(items) + 1)
        for s in items:
            self.string(s)

    def int_array(self, items, pack=_i) -> None:
        self.uvarint(len(items) + 1)
        for n in items:
            self.out += pack.pack(n)

    def key_values(self, pairs) -> None:
        self.uvarint(len(pairs) + 1)
        for k, v in pairs:
            self.string(k)
            self.string(v)
            self.no_tags()

    def task_ids(self, tasks: dict[str, frozenset[int]], epochs: dict[tuple[str, int], int] | None = None) -> None:
        self.uvarint(len(tasks) + 1)
        for subtopology in sorted(tasks):
            partitions = sorted(tasks[subtopology])
            self.string(subtopology)
            self.int_array(partitions)
            if epochs is None:
                self.no_tags()
            else:
                inner = _Writer()
                inner.out = bytearray()
                inner.int_array([epochs.get((subtopology, p), 0) for p in partitions])
                self.uvarint(1)
                self.uvarint(0)
                self.uvarint(len(inner.out))
                self.out += inner.out

    def topic_infos(self, infos) -> None:
        self.uvarint(len(infos) + 1)
        for t in infos:
            self.string(t.name)
            self.int32(t.partitions)
            self.int16(t.replication_factor)
            self.key_values(t.topic_configs)
            self.no_tags()


def _key(record_type: int, *parts: str) -> bytes:
    out = bytearray(_h.pack(record_type))
    for part in parts:
        raw = part.encode("utf-8")
        out += _h.pack(len(raw))
        out += raw
    return bytes(out)


def metadata_record(group: StreamsGroup) -> Record:
    w = _Writer()
    w.int32(group.group_epoch)
    w.int64(group.metadata_hash)
    tags = []
    if group.validated_topology_epoch != -1:
        tags.append((0, _i.pack(group.validated_topology_epoch)))
    if group.last_assignment_configs:
        inner = _Writer()
        inner.out = bytearray()
        inner.key_values(sorted(group.last_assignment_configs.items()))
        tags.append((1, bytes(inner.out)))
    w.uvarint(len(tags))
    for tag, data in tags:
        w.uvarint(tag)
        w.uvarint(len(data))
        w.out += data
    return _key(STREAMS_GROUP_METADATA, group.group_id), bytes(w.out)


def member_metadata_record(group_id: str, m: StreamsGroupMember) -> Record:
    w = _Writer()
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.int32(m.rebalance_timeout_ms)
    w.int32(m.topology_epoch)
    w.string(m.process_id)
    if m.user_endpoint is None:
        w.int8(-1)
    else:
        w.int8(1)
        w.string(m.user_endpoint[0])
        w.out += struct.pack(">H", m.user_endpoint[1])
        w.no_tags()
    w.key_values(sorted(m.client_tags.items()))
    w.no_tags()
    return _key(STREAMS_GROUP_MEMBER_METADATA, group_id, m.member_id), bytes(w.out)


def target_epoch_record(group: StreamsGroup) -> Record:
    w = _Writer()
    w.int32(group.assignment_epoch)
    if group.assignment_timestamp:  # tagged field 0 (Kafka 4.4), written when not its default 0
        w.uvarint(1)
        w.uvarint(0)
        w.uvarint(8)
        w.int64(group.assignment_timestamp)
    else:
        w.no_tags()
    return _key(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id), bytes(w.out)


def target_member_record(group_id: str, member_id: str, tasks: Tasks) -> Record:
    w = _Writer()
    w.task_ids(tasks.active)
    w.task_ids(tasks.standby)
    w.task_ids(tasks.warmup)
    w.no_tags()
    return _key(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id), bytes(w.out)


def current_assignment_record(group_id: str, m: StreamsGroupMember) -> Record:
    w = _Writer()
    w.int32(m.member_epoch)
    w.int32(m.previous_member_epoch)
    w.int8(m.state.value)
    w.task_ids(m.assigned.active, m.active_epochs)
    w.task_ids(m.assigned.standby)
    w.task_ids(m.assigned.warmup)
    w.task_ids(m.pending_revocation.active, m.active_epochs)
    w.task_ids(m.pending_revocation.standby)
    w.task_ids(m.pending_revocation.warmup)
    w.no_tags()
    return _key(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), bytes(w.out)


def topology_record(group_id: str, topology: Topology) -> Record:
    w = _Writer()
    w.int32(topology.epoch)
    w.uvarint(len(topology.subtopologies) + 1)
    for s in topology.subtopologies:
        w.string(s.subtopology_id)
        w.strings(s.source_topics)
        w.strings(s.source_topic_regex)
        w.topic_infos(s.state_changelog_topics)
        w.strings(s.repartition_sink_topics)
        w.topic_infos(s.repartition_source_topics)
        w.uvarint(len(s.copartition_groups) + 1)
        for g in s.copartition_groups:
            w.int_array(g.source_topics, _h)
            w.int_array(g.source_topic_regex, _h)
            w.int_array(g.repartition_source_topics, _h)
            w.no_tags()
        w.no_tags()
    w.no_tags()
    return _key(STREAMS_GROUP_TOPOLOGY, group_id), bytes(w.out)


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Kafka's order when a member goes: current assignment, target, then metadata."""
    return [(_key(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
            (_key(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
            (_key(STREAMS_GROUP_MEMBER_METADATA, group_id, member_id), None)]


def group_tombstones(group: StreamsGroup) -> list[Record]:
    records: list[Record] = []
    for member_id in list(group.members):
        records.extend(member_tombstones(group.group_id, member_id))
    records.append((_key(STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id), None))
    records.append((_key(STREAMS_GROUP_TOPOLOGY, group.group_id), None))
    records.append((_key(STREAMS_GROUP_METADATA, group.group_id), None))
    return records


# -- reading -------------------------------------------------------------------------------
class _Reader:
    def __init__(self, buf: bytes, pos: int = 0):
        self.buf, self.pos = buf, pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise CorruptRecordError("streams group record truncated")
        data = self.buf[self.pos:end]
        self.pos = end
        return data

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise CorruptRecordError("streams group record: varint too long")

    def int8(self) -> int:
        return _b.unpack(self.take(1))[0]

    def int16(self) -> int:
        return _h.unpack(self.take(2))[0]

    def int32(self) -> int:
        return _i.unpack(self.take(4))[0]

    def int64(self) -> int:
        return _q.unpack(self.take(8))[0]

    def nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else str(self.take(n - 1), "utf-8")

    def string(self) -> str:
        return self.nullable_string() or ""

    def length(self) -> int:
        return max(self.uvarint() - 1, 0)

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.length()))

    def ints(self, size: int = 4) -> tuple[int, ...]:
        n = self.length()
        fmt = ">%d%s" % (n, "i" if size == 4 else "h")
        return struct.unpack(fmt, self.take(n * size))

    def tags(self) -> dict[int, bytes]:
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self.take(self.uvarint())
        return found

    def key_values(self) -> list[tuple[str, str]]:
        out = []
        for _ in range(self.length()):
            out.append((self.string(), self.string()))
            self.tags()
        return out

    def task_ids(self, epochs: dict[tuple[str, int], int] | None = None) -> dict[str, frozenset[int]]:
        out = {}
        for _ in range(self.length()):
            subtopology = self.string()
            partitions = self.ints()
            tags = self.tags()
            if epochs is not None and 0 in tags:
                values = _Reader(tags[0]).ints()
                for p, e in zip(partitions, values):
                    epochs[(subtopology, p)] = e
            out[subtopology] = frozenset(partitions)
        return out

    def topic_infos(self) -> tuple[TopicInfo, ...]:
        out = []
        for _ in range(self.length()):
            name = self.string()
            partitions = self.int32()
            rf = self.int16()
            configs = tuple(self.key_values())
            self.tags()
            out.append(TopicInfo(name, partitions, rf, configs))
        return tuple(out)


def decode_streams_key(key: bytes) -> tuple[int, str, str | None] | None:
    """(record type, group id, member id or None), or None for a key that is not a streams record."""
    try:
        (kind,) = _h.unpack_from(key, 0)
        if kind not in STREAMS_KEY_TYPES:
            return None
        r = _Reader(key, 2)
        group = str(r.take(r.int16()), "utf-8")
        member = None if kind in _GROUP_KEYS else str(r.take(r.int16()), "utf-8")
        return kind, group, member
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed streams group key: {exc}") from None


@dataclass(slots=True)
class StoredStreamsGroup:
    """A streams group as its records left it, folded in log order."""

    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    last_assignment_configs: dict[str, str] = field(default_factory=dict)
    assignment_epoch: int = 0
    assignment_timestamp: int = 0
    topology: Topology | None = None
    members: dict[str, StreamsGroupMember] = field(default_factory=dict)
    target: dict[str, Tasks] = field(default_factory=dict)
    current: dict[str, tuple] = field(default_factory=dict)
    has_metadata: bool = False


class StreamsGroupReplay:
    """Streams group records of one __consumer_offsets partition, replayed while it loads."""

    def __init__(self):
        self.groups: dict[str, StoredStreamsGroup] = {}

    def add(self, key: bytes, value: bytes | None) -> bool:
        """Fold one record in; False if it is not a streams group record."""
        parsed = decode_streams_key(key)
        if parsed is None:
            return False
        kind, group_id, member_id = parsed
        stored = self.groups.get(group_id)
        if value is None:
            if stored is None:
                return True
            if kind == STREAMS_GROUP_METADATA:
                del self.groups[group_id]
            elif kind == STREAMS_GROUP_TOPOLOGY:
                stored.topology = None
            elif kind == STREAMS_GROUP_MEMBER_METADATA:
                stored.members.pop(member_id, None)
            elif kind == STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER:
                stored.target.pop(member_id, None)
            elif kind == STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT:
                stored.current.pop(member_id, None)
            return True
        if stored is None:
            stored = self.groups[group_id] = StoredStreamsGroup(group_id)
        try:
            self._apply(stored, kind, member_id, _Reader(value, 2))
        except (struct.error, UnicodeDecodeError) as exc:
            raise CorruptRecordError(f"malformed streams group record of {group_id}: {exc}") from None
        return True

    @staticmethod
    def _apply(stored: StoredStreamsGroup, kind: int, member_id: str | None, r: _Reader) -> None:
        if kind == STREAMS_GROUP_METADATA:
            stored.has_metadata = True
            stored.group_epoch = r.int32()
            stored.metadata_hash = r.int64()
            tags = r.tags()
            stored.validated_topology_epoch = _i.unpack(tags[0])[0] if 0 in tags else -1
            stored.last_assignment_configs = dict(_Reader(tags[1]).key_values()) if 1 in tags else {}
        elif kind == STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA:
            stored.assignment_epoch = r.int32()
            tags = r.tags()
            stored.assignment_timestamp = _q.unpack(tags[0])[0] if 0 in tags else 0
        elif kind == STREAMS_GROUP_MEMBER_METADATA:
            m = StreamsGroupMember(member_id)
            m.instance_id = r.nullable_string()
            m.rack_id = r.nullable_string()
            m.client_id = r.string()
            m.client_host = r.string()
            m.rebalance_timeout_ms = r.int32()
            m.topology_epoch = r.int32()
            m.process_id = r.string()
            if r.int8() >= 0:
                host = r.string()
                port = struct.unpack(">H", r.take(2))[0]
                r.tags()
                m.user_endpoint = (host, port)
            m.client_tags = dict(r.key_values())
            stored.members[member_id] = m
        elif kind == STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER:
            stored.target[member_id] = Tasks(r.task_ids(), r.task_ids(), r.task_ids())
        elif kind == STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            epoch, previous, state = r.int32(), r.int32(), r.int8()
            epochs: dict[tuple[str, int], int] = {}
            assigned = Tasks(r.task_ids(epochs), r.task_ids(), r.task_ids())
            pending = Tasks(r.task_ids(epochs), r.task_ids(), r.task_ids())
            stored.current[member_id] = (epoch, previous, MemberState.from_value(state), assigned, pending, epochs)
        elif kind == STREAMS_GROUP_TOPOLOGY:
            epoch = r.int32()
            subs = []
            for _ in range(r.length()):
                sid = r.string()
                sources = r.strings()
                regexes = r.strings()
                changelogs = r.topic_infos()
                sinks = r.strings()
                repartition_sources = r.topic_infos()
                groups = []
                for _ in range(r.length()):
                    groups.append(CopartitionGroup(r.ints(2), r.ints(2), r.ints(2)))
                    r.tags()
                r.tags()
                subs.append(Subtopology(sid, sources, regexes, changelogs, sinks, repartition_sources, tuple(groups)))
            stored.topology = Topology(epoch, tuple(subs))


def restore_streams_group(stored: StoredStreamsGroup, offsets, now_ms: int) -> StreamsGroup:
    """The StreamsGroup its replayed records describe (members without metadata are dropped)."""
    group = StreamsGroup(stored.group_id, now_ms)
    group.group_epoch = stored.group_epoch
    group.metadata_hash = stored.metadata_hash
    group.validated_topology_epoch = stored.validated_topology_epoch
    group.last_assignment_configs = dict(stored.last_assignment_configs)
    group.assignment_epoch = stored.assignment_epoch
    group.assignment_timestamp = stored.assignment_timestamp
    group.topology = stored.topology
    group.target = dict(stored.target)
    for member_id, m in stored.members.items():
        current = stored.current.get(member_id)
        if current is not None:
            (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation,
             m.active_epochs) = current
        group.add_member(m)
    group.offsets = dict(offsets)
    return group
