"""__share_group_state records (state_records.py) and share-partition state round trips."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.groupcoord.share.partition import ACCEPT, ACQUIRED, ARCHIVED, AVAILABLE, RELEASE, AckBatch, \
    SharePartition
from kafkapy.groupcoord.share.state_records import (
    SNAPSHOT,
    UPDATE,
    ShareState,
    StateRecordError,
    apply_update,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def test_key_layout():
    key = encode_key(SNAPSHOT, "g", TOPIC_ID, 7)
    assert key == b"\x00\x00" + b"\x00\x01g" + TOPIC_ID.bytes + b"\x00\x00\x00\x07"
    assert decode_key(key) == (SNAPSHOT, "g", TOPIC_ID, 7)
    assert decode_key(encode_key(UPDATE, "gé", TOPIC_ID, 0))[:2] == (UPDATE, "gé")


def test_snapshot_value_layout():
    value = encode_value(SNAPSHOT, ShareState(10, [(10, 11, 2, 1)], snapshot_epoch=3, state_epoch=1, leader_epoch=5))
    # version 0, SnapshotEpoch 3, StateEpoch 1, LeaderEpoch 5, StartOffset 10, one batch, tags
    assert value[:20] == (b"\x00\x00" + b"\x00\x03" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x05"
                          + (10).to_bytes(8, "big"))
    assert value[20] == 2  # compact array of 1
    assert value[-2:] == b"\x00\x00"


@given(st.integers(-1, 2**40), st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 100),
                                                  st.sampled_from([0, 2, 4]), st.integers(0, 10)), max_size=20),
       st.sampled_from([SNAPSHOT, UPDATE]))
def test_values_round_trip(start, raw, kind):
    batches = [(first, first + span, state, count) for first, span, state, count in raw]
    decoded = decode_value(kind, encode_value(kind, ShareState(start, batches, 9, 2, 4)))
    assert (decoded.start_offset, decoded.batches, decoded.snapshot_epoch, decoded.leader_epoch) == \
        (start, batches, 9, 4)


def test_truncated_values_are_errors():
    value = encode_value(SNAPSHOT, ShareState(0, [(0, 5, 0, 1)]))
    for cut in range(len(value) - 1):
        with pytest.raises(StateRecordError):
            decode_value(SNAPSHOT, value[:cut])


def test_updates_merge_over_a_snapshot():
    snap = ShareState(0, [(0, 9, 0, 1)])
    merged = apply_update(snap, ShareState(-1, [(2, 3, 2, 1)]))
    assert merged.start_offset == 0
    assert merged.batches == [(0, 1, 0, 1), (2, 3, 2, 1), (4, 9, 0, 1)]
    moved = apply_update(merged, ShareState(4, [(4, 4, 4, 5)]))
    assert moved.batches == [(4, 4, 4, 5), (5, 9, 0, 1)]


def test_share_partition_state_round_trip():
    sp = SharePartition(0, delivery_limit=3)
    sp.acquire([(0, 9, True)], "m", 100, 30.0, 0.0)
    sp.acknowledge("m", [AckBatch(0, 1, [ACCEPT]), AckBatch(5, 5, [RELEASE]), AckBatch(7, 7, [ACCEPT])], 30.0, 1.0)
    start, batches = sp.to_state()
    assert start == 2
    # held records are written as available with their count
    assert batches == [(2, 4, 0, 1), (5, 5, 0, 1), (6, 6, 0, 1), (7, 7, 2, 1), (8, 9, 0, 1)] or \
        batches == [(2, 6, 0, 1), (7, 7, 2, 1), (8, 9, 0, 1)]
    back = SharePartition.from_state(start, batches, 3)
    assert (back.start_offset, back.end_offset) == (2, 10)
    assert back.records[7].state not in (AVAILABLE, ACQUIRED)
    assert all(back.records[o].state == AVAILABLE and back.records[o].delivery_count == 1
               for o in (2, 3, 4, 5, 6, 8, 9))
    assert back.acquire([(0, 9, True)], "n", 100, 30.0, 0.0) == [(2, 6, 2), (8, 9, 2)]


def test_records_at_the_limit_are_archived_on_load():
    back = SharePartition.from_state(0, [(0, 0, 0, 3), (1, 1, 0, 2)], delivery_limit=3)
    assert back.start_offset == 1 and back.records[1].state == AVAILABLE
    assert 0 not in back.records or back.records[0].state == ARCHIVED


def _per_offset(batches, start):
    out = {}
    for first, last, st, count in batches:
        for offset in range(max(first, start), last + 1):
            out[offset] = (st, count)
    return out


_state_batches = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.sampled_from([0, 2, 4]),
                                    st.integers(0, 3)), max_size=8).map(
    lambda raw: _disjoint([(f, f + n, s, c) for f, n, s, c in raw]))


def _disjoint(batches):
    out, end = [], -1
    for first, last, s, c in sorted(batches):
        if first > end:
            out.append((first, last, s, c))
            end = last
    return out


@given(_state_batches, _state_batches, st.integers(-1, 30))
def test_an_update_replaces_the_offsets_it_covers(old, new, start):
    """apply_update (ranges, per batch) agrees with laying the update over the old state offset by
    offset, then dropping what is before the start offset."""
    merged = apply_update(ShareState(0, old), ShareState(start, new))
    start = 0 if start < 0 else start
    want = _per_offset(old, start)
    want.update(_per_offset(new, start))
    assert merged.start_offset == start
    assert _per_offset(merged.batches, start) == want
    # joined: no two neighbours of one state and count
    assert all(not (a[1] + 1 == b[0] and a[2:] == b[2:]) for a, b in zip(merged.batches, merged.batches[1:]))


def test_an_update_keeps_the_leader_epoch_when_it_has_none():
    snap = ShareState(0, [(0, 9, 0, 1)], snapshot_epoch=4, state_epoch=2, leader_epoch=7)
    merged = apply_update(snap, ShareState(-1, [(2, 3, 2, 1)]))
    assert (merged.snapshot_epoch, merged.state_epoch, merged.leader_epoch) == (4, 2, 7)
    assert apply_update(merged, ShareState(-1, [], leader_epoch=8)).leader_epoch == 8


def test_deltas_of_a_share_partition_rebuild_its_state():
    sp = SharePartition(0, delivery_limit=3)
    stored = None
    steps = [lambda: sp.acquire([(0, 9, True)], "m", 100, 30.0, 0.0),
             lambda: sp.acknowledge("m", [AckBatch(0, 1, [ACCEPT]), AckBatch(5, 5, [RELEASE])], 30.0, 1.0),
             lambda: sp.acquire([(5, 5, True), (10, 19, True)], "n", 100, 30.0, 2.0),
             lambda: sp.acknowledge("m", [AckBatch(2, 4, [ACCEPT]), AckBatch(6, 9, [ACCEPT])], 30.0, 3.0),
             lambda: sp.expire_locks(100.0)]
    for step in steps:
        step()
        delta = sp.take_delta()
        if delta is not None:
            stored = apply_update(stored, ShareState(*delta))
        assert (stored.start_offset, stored.batches) == sp.to_state()
    # the last deltas named only what changed, not the whole window
    sp.acquire([(5, 19, True)], "m", 1, 30.0, 200.0, strict=True)
    assert sp.take_delta() == (5, [(5, 5, 0, 3)])
    assert sp.take_delta() is None
