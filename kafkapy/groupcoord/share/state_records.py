"""The records of __share_group_state, as Kafka's share coordinator writes them.

Key: int16 record type (0 ShareSnapshotKey, 1 ShareUpdateKey), then GroupId (int16-length
string), TopicId (16 bytes), Partition (int32): the key of one share-partition.
Value: int16 version (0), then the flexible v0 fields of ShareSnapshotValue (SnapshotEpoch
uint16, StateEpoch int32, LeaderEpoch int32, StartOffset int64, StateBatches) or ShareUpdateValue
(the same without StateEpoch), each StateBatch being FirstOffset int64, LastOffset int64,
DeliveryState int8 (0 available, 2 acknowledged, 4 archived), DeliveryCount int16; arrays are
compact (unsigned varint length + 1) and every struct ends with an empty tagged-field section.
Source: Kafka's share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json
(apache/kafka, as stored; docs/share-groups.md says what was not checked against 4.2).
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

SNAPSHOT, UPDATE = 0, 1
STATE_AVAILABLE, STATE_ACKNOWLEDGED, STATE_ARCHIVED = 0, 2, 4

_I16 = struct.Struct(">h")
_SNAP_HEAD = struct.Struct(">hHiiq")   # version, SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset
_UPD_HEAD = struct.Struct(">hHiq")     # version, SnapshotEpoch, LeaderEpoch, StartOffset
_BATCH = struct.Struct(">qqbh")
_KEY_TAIL = struct.Struct(">16si")


class StateRecordError(ValueError):
    """A __share_group_state record this code cannot read."""


@dataclass
class ShareState:
    """One share-partition's durable state: start offset and state batches (first, last, state, count)."""

    start_offset: int
    batches: list[tuple[int, int, int, int]] = field(default_factory=list)
    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = -1


def encode_key(kind: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    raw = group_id.encode()
    return _I16.pack(kind) + _I16.pack(len(raw)) + raw + _KEY_TAIL.pack(topic_id.bytes, partition)


def decode_key(buf: bytes) -> tuple[int, str, uuid.UUID, int]:
    try:
        (kind,) = _I16.unpack_from(buf, 0)
        (length,) = _I16.unpack_from(buf, 2)
        if length < 0:
            raise StateRecordError("null group id")
        group_id = bytes(buf[4:4 + length]).decode()
        topic_id, partition = _KEY_TAIL.unpack_from(buf, 4 + length)
    except (struct.error, UnicodeDecodeError) as exc:
        raise StateRecordError(str(exc)) from None
    return kind, group_id, uuid.UUID(bytes=topic_id), partition


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarint(buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 28:
            raise StateRecordError("bad varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def encode_value(kind: int, state: ShareState) -> bytes:
    if kind == SNAPSHOT:
        head = _SNAP_HEAD.pack(0, state.snapshot_epoch & 0xFFFF, state.state_epoch, state.leader_epoch,
                               state.start_offset)
    else:
        head = _UPD_HEAD.pack(0, state.snapshot_epoch & 0xFFFF, state.leader_epoch, state.start_offset)
    parts = [head, _uvarint(len(state.batches) + 1)]
    for first, last, delivery_state, count in state.batches:
        parts.append(_BATCH.pack(first, last, delivery_state, count) + b"\x00")
    parts.append(b"\x00")
    return b"".join(parts)


def decode_value(kind: int, buf) -> ShareState:
    try:
        if kind == SNAPSHOT:
            version, snapshot_epoch, state_epoch, leader_epoch, start = _SNAP_HEAD.unpack_from(buf, 0)
            pos = _SNAP_HEAD.size
        else:
            version, snapshot_epoch, leader_epoch, start = _UPD_HEAD.unpack_from(buf, 0)
            state_epoch, pos = 0, _UPD_HEAD.size
        if version != 0:
            raise StateRecordError(f"unknown value version {version}")
        count, pos = _read_uvarint(buf, pos)
        batches = []
        for _ in range(max(count - 1, 0)):
            batches.append(_BATCH.unpack_from(buf, pos))
            pos += _BATCH.size
            pos = _skip_tags(buf, pos)
    except struct.error as exc:
        raise StateRecordError(str(exc)) from None
    return ShareState(start, [tuple(b) for b in batches], snapshot_epoch, state_epoch, leader_epoch)


def _skip_tags(buf, pos: int) -> int:
    n, pos = _read_uvarint(buf, pos)
    for _ in range(n):
        _, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def apply_update(state: ShareState | None, update: ShareState) -> ShareState:
    """A ShareUpdate on top of what was known (Kafka's share coordinator merges them the same way,
    ShareCoordinatorShard.merge with PersisterStateBatchCombiner: the update's batches replace the
    offsets they cover, a start offset of -1 keeps the old one, nothing before the start offset is
    kept, and neighbours of one state and count are joined). Costs per batch, not per offset."""
    if state is None:
        return ShareState(update.start_offset, list(update.batches), update.snapshot_epoch, 0, update.leader_epoch)
    start = state.start_offset if update.start_offset < 0 else update.start_offset
    leader_epoch = state.leader_epoch if update.leader_epoch == -1 else update.leader_epoch
    return ShareState(start, overlay(state.batches, update.batches, start),
                      state.snapshot_epoch, state.state_epoch, leader_epoch)


def overlay(old: list, new: list, start: int) -> list[tuple[int, int, int, int]]:
    """The state batches `new` laid over `old` (each (first, last, state, count)), from `start` on."""
    new = sorted(new)
    if any(new[k][0] <= new[k - 1][1] for k in range(1, len(new))):
        # overlapping batches in one update (not written by kafkapy): the later one wins, offset by offset
        per_offset: dict[int, tuple[int, int]] = {}
        for first, last, st, count in list(old) + new:
            for offset in range(max(first, start), last + 1):
                per_offset[offset] = (st, count)
        return runs(per_offset)
    kept: list[tuple[int, int, int, int]] = []
    k = 0
    for first, last, st, count in sorted(old):
        cur = max(first, start)
        while cur <= last:
            while k < len(new) and new[k][1] < cur:
                k += 1
            if k == len(new) or new[k][0] > last:
                kept.append((cur, last, st, count))
                break
            if new[k][0] > cur:
                kept.append((cur, new[k][0] - 1, st, count))
            cur = new[k][1] + 1
    out: list[list[int]] = []
    for first, last, st, count in sorted(kept + new):
        first = max(first, start)
        if first > last:
            continue
        if out and out[-1][1] == first - 1 and out[-1][2] == st and out[-1][3] == count:
            out[-1][1] = last
        else:
            out.append([first, last, st, count])
    return [tuple(b) for b in out]


def runs(per_offset: dict[int, tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """Contiguous runs of one (state, count) from a per-offset map."""
    out: list[list[int]] = []
    for offset in sorted(per_offset):
        st, count = per_offset[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == st and out[-1][3] == count:
            out[-1][1] = offset
        else:
            out.append([offset, offset, st, count])
    return [tuple(r) for r in out]
