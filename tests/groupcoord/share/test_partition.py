"""The share-partition state machine (kafkapy/groupcoord/share/partition.py): acquisition,
acknowledgement, lock expiry, delivery count limit, the in-flight window; hypothesis checks
that no sequence of operations (valid or not) breaks its invariants."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AckBatch,
    SharePartition,
    validate_ack_batches,
)
from kafkapy.protocol.errors import ErrorCode

LOCK = 30.0


def test_acquire_new_records_in_runs_and_move_the_end():
    sp = SharePartition(0)
    assert sp.acquire([(0, 4, True), (5, 9, True)], "m1", 500, LOCK, 0.0) == [(0, 9, 1)]
    assert sp.end_offset == 10 and sp.start_offset == 0
    assert sp.counts()[ACQUIRED] == 10
    # nothing more to hand out to another member
    assert sp.acquire([(0, 9, True)], "m2", 500, LOCK, 0.0) == []


def test_max_records_takes_whole_batches_unless_strict():
    sp = SharePartition(0)
    assert sp.acquire([(0, 4, True), (5, 9, True)], "m1", 3, LOCK, 0.0) == [(0, 4, 1)]
    sp2 = SharePartition(0)
    assert sp2.acquire([(0, 4, True), (5, 9, True)], "m1", 3, LOCK, 0.0, strict=True) == [(0, 2, 1)]
    assert sp2.end_offset == 3


def test_accept_moves_the_start_offset():
    sp = SharePartition(0)
    sp.acquire([(0, 9, True)], "m1", 500, LOCK, 0.0)
    assert sp.acknowledge("m1", [AckBatch(0, 4, [ACCEPT])], LOCK, 1.0) == ErrorCode.NONE
    assert sp.start_offset == 5 and set(sp.records) == set(range(5, 10))


def test_release_brings_a_record_back_with_the_next_delivery_count():
    sp = SharePartition(0)
    sp.acquire([(0, 2, True)], "m1", 500, LOCK, 0.0)
    assert sp.acknowledge("m1", [AckBatch(1, 1, [RELEASE])], LOCK, 1.0) == ErrorCode.NONE
    assert sp.fetch_offset() == 1
    assert sp.acquire([(0, 2, True)], "m2", 500, LOCK, 1.0) == [(1, 1, 2)]


def test_reject_and_gap_archive():
    sp = SharePartition(0)
    sp.acquire([(0, 3, True)], "m1", 500, LOCK, 0.0)
    assert sp.acknowledge("m1", [AckBatch(0, 3, [REJECT, GAP, ACCEPT, ACCEPT])], LOCK, 1.0) == ErrorCode.NONE
    assert sp.start_offset == 4 and not sp.records


def test_acknowledging_what_another_member_holds_changes_nothing():
    sp = SharePartition(0)
    sp.acquire([(0, 3, True)], "m1", 500, LOCK, 0.0)
    before = {o: (r.state, r.delivery_count, r.member) for o, r in sp.records.items()}
    assert sp.acknowledge("m2", [AckBatch(0, 1, [ACCEPT])], LOCK, 1.0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.refusal == "Member is not the owner of batch record"
    # all or nothing: one bad offset in a later batch leaves the earlier ones alone too; offsets
    # past the last one delivered are a bad request (Kafka 4.4's SharePartition)
    assert sp.acknowledge("m1", [AckBatch(0, 0, [ACCEPT]), AckBatch(7, 7, [ACCEPT])], LOCK, 1.0) \
        == ErrorCode.INVALID_REQUEST
    assert sp.refusal == "Batch record not found. The first offset in request is past acquired records."
    assert sp.acknowledge("m1", [AckBatch(2, 5, [ACCEPT])], LOCK, 1.0) == ErrorCode.INVALID_REQUEST
    assert sp.refusal == "Batch record not found. The last offset in request is past acquired records."
    assert {o: (r.state, r.delivery_count, r.member) for o, r in sp.records.items()} == before
    assert sp.acknowledge("m1", [AckBatch(0, 1, [ACCEPT]), AckBatch(1, 1, [ACCEPT])], LOCK, 1.0) \
        == ErrorCode.INVALID_RECORD_STATE
    assert sp.refusal == "The batch cannot be acknowledged. The batch is not in the acquired state."
    assert {o: (r.state, r.delivery_count, r.member) for o, r in sp.records.items()} == before
    assert sp.acknowledge("m1", [AckBatch(0, 0, [RELEASE])], LOCK, 1.0) == ErrorCode.NONE
    assert sp.refusal is None
    assert sp.acknowledge("m1", [AckBatch(0, 0, [ACCEPT])], LOCK, 1.0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.refusal == "The batch cannot be acknowledged. The batch is not in the acquired state."


def test_lock_expiry_releases_and_the_limit_archives():
    sp = SharePartition(0, delivery_limit=2)
    sp.acquire([(0, 0, True)], "m1", 500, 1.0, 0.0)
    assert not sp.expire_locks(0.5)
    assert sp.expire_locks(1.0)
    assert sp.records[0].state == AVAILABLE
    assert sp.acquire([(0, 0, True)], "m2", 500, 1.0, 1.0) == [(0, 0, 2)]
    # the second delivery was the last: expiry archives it
    assert not sp.expire_locks(2.5)
    assert sp.start_offset == 1 and not sp.records
    # the lock of a late acknowledgement has gone, and so has the window (everything is done)
    assert sp.acknowledge("m2", [AckBatch(0, 0, [ACCEPT])], 1.0, 3.0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.refusal == "Batch record not found. The request batch offsets are not found in the cache."


def test_renew_extends_the_lock():
    sp = SharePartition(0)
    sp.acquire([(0, 0, True)], "m1", 500, 1.0, 0.0)
    assert sp.acknowledge("m1", [AckBatch(0, 0, [RENEW])], 1.0, 0.9) == ErrorCode.NONE
    sp.expire_locks(1.5)
    assert sp.records[0].state == ACQUIRED


def test_control_and_aborted_batches_are_archived_never_delivered():
    sp = SharePartition(0)
    assert sp.acquire([(0, 1, False), (2, 2, True), (3, 3, False)], "m1", 500, LOCK, 0.0) == [(2, 2, 1)]
    assert sp.start_offset == 2 and sp.end_offset == 4


def test_member_leaving_releases_what_it_holds():
    sp = SharePartition(0)
    sp.acquire([(0, 1, True)], "m1", 500, LOCK, 0.0)
    sp.acquire([(2, 3, True)], "m2", 500, LOCK, 0.0)
    assert sp.release_member("m1")
    assert [sp.records[o].state for o in range(4)] == [AVAILABLE, AVAILABLE, ACQUIRED, ACQUIRED]


def test_in_flight_window_is_bounded():
    sp = SharePartition(0, max_in_flight=100)
    acquired = sp.acquire([(0, 999, True)], "m1", 5000, LOCK, 0.0)
    assert acquired == [(0, 99, 1)] and sp.end_offset == 100
    sp.acknowledge("m1", [AckBatch(0, 49, [ACCEPT])], LOCK, 1.0)
    assert sp.acquire([(0, 999, True)], "m1", 5000, LOCK, 1.0) == [(100, 149, 1)]


def test_compaction_gaps_are_archived():
    sp = SharePartition(0)
    assert sp.acquire([(0, 1, True), (5, 6, True)], "m1", 500, LOCK, 0.0) == [(0, 1, 1), (5, 6, 1)]
    sp.acknowledge("m1", [AckBatch(0, 1, [ACCEPT])], LOCK, 1.0)
    assert sp.start_offset == 5


def test_validate_ack_batches():
    ok = ErrorCode.NONE
    bad = ErrorCode.INVALID_REQUEST
    assert validate_ack_batches([AckBatch(0, 3, [1]), AckBatch(4, 5, [2, 3])]) == ok
    assert validate_ack_batches([AckBatch(3, 2, [1])]) == bad                      # reversed
    assert validate_ack_batches([AckBatch(0, 3, [1]), AckBatch(2, 4, [1])]) == bad  # overlapping
    # Kafka 4.4 checks `first < previous last`: one shared offset passes (the share-partition
    # refuses it then: acknowledged by the first batch already)
    assert validate_ack_batches([AckBatch(0, 3, [1]), AckBatch(3, 4, [1])]) == ok
    assert validate_ack_batches([AckBatch(5, 6, [1]), AckBatch(0, 1, [1])]) == bad  # out of order
    assert validate_ack_batches([AckBatch(0, 3, [1, 1])]) == bad                    # wrong types length
    assert validate_ack_batches([AckBatch(0, 0, [7])]) == bad                       # unknown type
    assert validate_ack_batches([AckBatch(0, 0, [RENEW])]) == bad                   # RENEW not announced
    assert validate_ack_batches([AckBatch(0, 0, [RENEW])], allow_renew=True) == ok
    assert validate_ack_batches([AckBatch(-1, 0, [1])]) == bad
    assert validate_ack_batches([AckBatch(0, 10**12, [1])], max_offsets=1000) == bad  # oversized


# -- hypothesis: any sequence of operations keeps the invariants -------------------------------
MEMBERS = ["m1", "m2", "m3"]
ack_batch = st.builds(
    lambda first, span, types: AckBatch(first, first + span, types[: 1] if len(types) == 1 or len(types) != span + 1
                                        else types),
    st.integers(0, 40), st.integers(0, 6), st.lists(st.integers(-1, 5), min_size=1, max_size=7))
operation = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(0, 40), st.integers(0, 8),
              st.booleans(), st.integers(1, 20)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.lists(ack_batch, max_size=4)),
    st.tuples(st.just("expire"), st.floats(0, 5)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=40))
def test_invariants_hold_under_any_operations(ops):
    sp = SharePartition(0, delivery_limit=3, max_in_flight=100)
    now = 0.0
    for op in ops:
        if op[0] == "acquire":
            _, member, first, span, deliverable, max_records = op
            before_end = sp.end_offset
            runs = sp.acquire([(first, first + span, deliverable)], member, max_records, 2.0, now)
            for a, b, count in runs:
                assert a <= b and 1 <= count <= 3
                for o in range(a, b + 1):
                    assert sp.records[o].state == ACQUIRED and sp.records[o].member == member
            assert sp.end_offset >= before_end
        elif op[0] == "ack":
            _, member, batches = op
            snapshot = {o: (r.state, r.delivery_count, r.member) for o, r in sp.records.items()}
            start = sp.start_offset
            if validate_ack_batches(batches) == ErrorCode.NONE:
                if sp.acknowledge(member, batches, 2.0, now) != ErrorCode.NONE:
                    # refused: nothing changed
                    assert {o: (r.state, r.delivery_count, r.member) for o, r in sp.records.items()} == snapshot
                    assert sp.start_offset == start
        elif op[0] == "expire":
            now += op[1]
            sp.expire_locks(now)
        else:
            sp.release_member(op[1])
        # invariants
        assert sp.start_offset <= sp.end_offset
        assert all(sp.start_offset <= o < sp.end_offset for o in sp.records)
        assert sp.end_offset - sp.start_offset <= 100 + 8
        for o, rec in sp.records.items():
            assert rec.delivery_count <= 3
            assert (rec.member is not None) == (rec.state == ACQUIRED)
            if rec.state == AVAILABLE:
                assert rec.delivery_count < 3
        if sp.start_offset < sp.end_offset:
            first = sp.records.get(sp.start_offset)
            assert first is not None and first.state not in (ACKNOWLEDGED, ARCHIVED)


def test_undo_acquire_gives_records_back_with_their_count():
    sp = SharePartition(0)
    runs = sp.acquire([(0, 2, True)], "m", 100, LOCK, 0.0)
    sp.undo_acquire("m", runs)
    assert all(r.state == AVAILABLE and r.delivery_count == 0 for r in sp.records.values())
    assert sp.acquire([(0, 2, True)], "n", 100, LOCK, 0.0) == [(0, 2, 1)]


def test_a_full_window_still_gives_released_records_of_later_batches():
    sp = SharePartition(0, delivery_limit=5, max_in_flight=6)
    batches = [(0, 1, True), (2, 3, True), (4, 5, True), (6, 7, True)]
    assert sp.acquire(batches, "a", 100, 30.0, 0.0) == [(0, 5, 1)]
    sp.acknowledge("a", [AckBatch(2, 5, [RELEASE])], 30.0, 1.0)
    # the window (6 offsets) is full; offsets 2-5 of the second and third batches are available
    assert sp.acquire(batches, "b", 100, 30.0, 2.0) == [(2, 5, 2)]
