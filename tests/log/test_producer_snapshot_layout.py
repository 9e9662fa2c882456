"""Producer-state snapshot files are Kafka's format (ProducerStateManager's version-1
.snapshot: int16 version, uint32 CRC32C of everything after it, int32 count, then fixed-size
entries), checked against a declarative construct layout of that format.

The broker keeps its struct-based codec (one Struct.iter_unpack for all entries): snapshots are
read on every partition load at start-up, where construct costs ~30x more per entry
(bench/groups/offsets_decode.py); this layout is the readable reference it is held to.
"""
from __future__ import annotations

from collections import deque

from construct import Check, Const, Int16sb, Int32sb, Int32ub, Int64sb, PrefixedArray, RawCopy, Rebuild, Struct
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.log.producer_state import BatchMetadata, ProducerStateEntry, read_snapshot, write_snapshot

ENTRY = Struct(
    "producer_id" / Int64sb,
    "producer_epoch" / Int16sb,
    "last_sequence" / Int32sb,
    "last_offset" / Int64sb,
    "offset_delta" / Int32sb,
    "timestamp" / Int64sb,
    "coordinator_epoch" / Int32sb,
    "current_txn_first_offset" / Int64sb,
)
BODY = PrefixedArray(Int32sb, ENTRY)
SNAPSHOT = Struct(
    "version" / Const(1, Int16sb),
    # CRC32C of the count and the entries
    "crc" / Rebuild(Int32ub, lambda ctx: crc32c(BODY.build(ctx.entries["value"]))),
    "entries" / RawCopy(BODY),
    Check(lambda ctx: ctx.crc == crc32c(ctx.entries.data)),
)

int16s = st.integers(0, 2**15 - 1)
int32s = st.integers(0, 2**31 - 1)
int64s = st.integers(0, 2**62)


@st.composite
def entries(draw) -> dict[int, ProducerStateEntry]:
    producers = {}
    for pid in draw(st.lists(int64s, unique=True, max_size=6)):
        entry = ProducerStateEntry(pid, draw(int16s), coordinator_epoch=draw(st.integers(-1, 100)),
                                   last_timestamp=draw(int64s),
                                   current_txn_first_offset=draw(st.integers(-1, 2**40)))
        if draw(st.booleans()):
            delta = draw(st.integers(0, 1000))
            last_seq = draw(st.integers(delta, 2**31 - 1))
            last_offset = draw(st.integers(delta, 2**40))
            entry.batches = deque([BatchMetadata(last_seq - delta, last_seq, last_offset - delta, last_offset,
                                                 entry.last_timestamp)], maxlen=5)
        producers[pid] = entry
    return producers


def _layout_entries(producers: dict[int, ProducerStateEntry]) -> list[dict]:
    out = []
    for pid in sorted(producers):
        entry = producers[pid]
        last = entry.batches[-1] if entry.batches else None
        out.append({
            "producer_id": pid, "producer_epoch": entry.producer_epoch,
            "last_sequence": last.last_seq if last else -1, "last_offset": last.last_offset if last else -1,
            "offset_delta": last.last_offset - last.base_offset if last else 0,
            "timestamp": entry.last_timestamp, "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_first_offset": entry.current_txn_first_offset})
    return out


@settings(max_examples=40, deadline=None)
@given(entries())
def test_snapshot_bytes_match_kafkas_layout(tmp_path_factory, producers):
    path = tmp_path_factory.mktemp("snap") / "00000000000000000042.snapshot"
    write_snapshot(path, producers)
    written = path.read_bytes()
    assert written == SNAPSHOT.build({"entries": {"value": _layout_entries(producers)}})
    parsed = SNAPSHOT.parse(written)  # checks the CRC too
    assert [e.producer_id for e in parsed.entries.value] == sorted(producers)
    # and what the layout builds, the broker reads back
    path.write_bytes(SNAPSHOT.build({"entries": {"value": _layout_entries(producers)}}))
    loaded = {e.producer_id: e for e in read_snapshot(path)}
    for pid, entry in producers.items():
        got = loaded[pid]
        assert (got.producer_epoch, got.coordinator_epoch, got.last_timestamp, got.current_txn_first_offset) == \
            (entry.producer_epoch, entry.coordinator_epoch, entry.last_timestamp, entry.current_txn_first_offset)
        assert (got.last_seq, got.batches[-1].last_offset if got.batches else -1) == \
            (entry.last_seq, entry.batches[-1].last_offset if entry.batches else -1)
