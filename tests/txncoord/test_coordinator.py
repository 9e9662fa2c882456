"""The transaction coordinator's state machine: epochs and fencing, two-phase commit, timeouts,
recovery from __transaction_state, expiry, admin views."""
from __future__ import annotations

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.txncoord import TransactionState
from kafkapy.txncoord.metadata import MAX_EPOCH

from .harness import TxnHarness

T0 = ("orders", 0)
T1 = ("orders", 1)
E = ErrorCode
S = TransactionState


@pytest.fixture
def h(tmp_path):
    harness = TxnHarness(tmp_path)
    yield harness
    harness.close()


def init(h, tid="tx", timeout=60_000, pid=-1, epoch=-1):
    result = h.coord.handle_init_producer_id(tid, timeout, pid, epoch)
    return result.error, result.producer_id, result.producer_epoch


def test_init_allocates_then_bumps_the_epoch(h):
    error, pid, epoch = init(h)
    assert (error, epoch) == (E.NONE, 0)
    assert init(h) == (E.NONE, pid, 1)
    assert h.metadata("tx").state == S.EMPTY
    # the zombie with epoch 0 is fenced everywhere
    assert h.coord.handle_add_partitions("tx", pid, 0, [T0]) == E.PRODUCER_FENCED
    assert h.coord.handle_end_txn("tx", pid, 0, True) == E.PRODUCER_FENCED


def test_init_validates_timeout_and_id(h):
    assert init(h, timeout=900_001)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert init(h, timeout=0)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert init(h, tid="")[0] == E.INVALID_REQUEST


def test_commit_writes_markers_and_completes(h):
    _, pid, epoch = init(h)
    assert h.coord.handle_add_partitions("tx", pid, epoch, [T0, T1]) == E.NONE
    assert h.metadata("tx").state == S.ONGOING
    h.produce(T0, pid, epoch)
    h.produce(T1, pid, epoch)
    assert h.log(*T0).last_stable_offset == 0
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.NONE
    md = h.metadata("tx")
    assert md.state == S.COMPLETE_COMMIT and not md.partitions
    assert sorted(m[4] for m in h.markers) == [T0, T1] and all(m[3] for m in h.markers)
    assert h.log(*T0).last_stable_offset == 2
    assert h.log(*T0).aborted_transactions(0, 2) == []
    # a retried commit is fine, an abort now is not
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.NONE
    assert h.coord.handle_end_txn("tx", pid, epoch, False) == E.INVALID_TXN_STATE


def test_abort_indexes_the_aborted_transaction(h):
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    h.produce(T0, pid, epoch)
    assert h.coord.handle_end_txn("tx", pid, epoch, False) == E.NONE
    assert h.metadata("tx").state == S.COMPLETE_ABORT
    assert [(a.producer_id, a.first_offset) for a in h.log(*T0).aborted_transactions(0, 2)] == [(pid, 0)]
    assert h.coord.handle_end_txn("tx", pid, epoch, False) == E.NONE
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.INVALID_TXN_STATE


def test_end_without_transaction_is_invalid_state(h):
    _, pid, epoch = init(h)
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.INVALID_TXN_STATE
    assert h.coord.handle_end_txn("tx", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.coord.handle_end_txn("nope", pid, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.coord.handle_add_partitions("nope", pid, epoch, [T0]) == E.INVALID_PRODUCER_ID_MAPPING


def test_next_transaction_after_completion(h):
    _, pid, epoch = init(h)
    for commit in (True, False, True):
        assert h.coord.handle_add_partitions("tx", pid, epoch, [T0]) == E.NONE
        h.produce(T0, pid, epoch, seq=len(h.markers))
        assert h.coord.handle_end_txn("tx", pid, epoch, commit) == E.NONE
    assert h.metadata("tx").state == S.COMPLETE_COMMIT
    assert len(h.log(*T0).aborted_transactions(0, 100)) == 1


def test_init_during_ongoing_transaction_aborts_it_with_a_fenced_epoch(h):
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    h.produce(T0, pid, epoch)
    assert init(h)[0] == E.CONCURRENT_TRANSACTIONS
    md = h.metadata("tx")
    assert md.state == S.COMPLETE_ABORT and md.producer_epoch == epoch + 1
    assert h.markers[-1][:4] == (pid, epoch + 1, 0, False)
    assert init(h) == (E.NONE, pid, epoch + 2)
    # the old producer can neither commit nor write
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.PRODUCER_FENCED
    with pytest.raises(Exception) as excinfo:
        h.produce(T0, pid, epoch, seq=1)
    assert getattr(excinfo.value, "code", None) == E.INVALID_PRODUCER_EPOCH


def test_concurrent_transactions_while_markers_are_pending(h):
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0, T1])
    h.marker_failures[T1] = E.NOT_LEADER_OR_FOLLOWER
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.NONE
    md = h.metadata("tx")
    assert md.state == S.PREPARE_COMMIT and md.partitions == {T1}
    assert h.coord.handle_add_partitions("tx", pid, epoch, [T0]) == E.CONCURRENT_TRANSACTIONS
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert h.coord.handle_end_txn("tx", pid, epoch, False) == E.INVALID_TXN_STATE
    assert init(h)[0] == E.CONCURRENT_TRANSACTIONS
    del h.marker_failures[T1]
    h.sched.advance(200)
    assert h.metadata("tx").state == S.COMPLETE_COMMIT
    assert h.coord.handle_add_partitions("tx", pid, epoch, [T0]) == E.NONE


def test_markers_for_deleted_partitions_are_skipped(h):
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0, ("gone", 0)])
    h.marker_failures[("gone", 0)] = E.UNKNOWN_TOPIC_OR_PARTITION
    assert h.coord.handle_end_txn("tx", pid, epoch, False) == E.NONE
    assert h.metadata("tx").state == S.COMPLETE_ABORT


def test_timed_out_transaction_is_aborted_and_producer_fenced(h):
    _, pid, epoch = init(h, timeout=1_000)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    h.produce(T0, pid, epoch)
    h.sched.advance(h.config.transaction_abort_timed_out_transaction_cleanup_interval_ms)
    md = h.metadata("tx")
    assert md.state == S.COMPLETE_ABORT and md.producer_epoch == epoch + 1
    assert h.log(*T0).last_stable_offset == h.log(*T0).log_end_offset
    assert len(h.log(*T0).aborted_transactions(0, 10)) == 1
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.PRODUCER_FENCED
    assert h.coord.handle_add_partitions("tx", pid, epoch, [T0]) == E.PRODUCER_FENCED
    # the producer re-initialises and carries on
    assert init(h)[0] == E.NONE


def test_transaction_within_its_timeout_is_not_aborted(h):
    _, pid, epoch = init(h, timeout=60_000)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    h.sched.advance(30_000)
    assert h.metadata("tx").state == S.ONGOING


def test_state_survives_restart(h):
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    h.restart()
    md = h.metadata("tx")
    assert (md.producer_id, md.producer_epoch, md.state, md.partitions) == (pid, epoch, S.ONGOING, {T0})
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.NONE
    h.restart(clean=False)
    assert h.metadata("tx").state == S.COMPLETE_COMMIT
    assert init(h) == (E.NONE, pid, epoch + 1)


def test_prepared_transaction_is_completed_when_loaded(h):
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    h.produce(T0, pid, epoch)
    h.marker_failures[T0] = E.KAFKA_STORAGE_ERROR
    assert h.coord.handle_end_txn("tx", pid, epoch, False) == E.NONE
    assert h.metadata("tx").state == S.PREPARE_ABORT
    h.marker_failures.clear()
    h.restart(clean=False)
    assert h.metadata("tx").state == S.COMPLETE_ABORT
    assert len(h.log(*T0).aborted_transactions(0, 10)) == 1


def test_kip360_epoch_bump_with_expected_producer(h):
    _, pid, epoch = init(h)
    assert init(h, pid=pid, epoch=epoch) == (E.NONE, pid, epoch + 1)
    # a retry of that bump (the producer never saw the answer) gets the same epoch
    assert init(h, pid=pid, epoch=epoch) == (E.NONE, pid, epoch + 1)
    # another producer bumped meanwhile: this one is fenced
    assert init(h) == (E.NONE, pid, epoch + 2)
    assert init(h, pid=pid, epoch=epoch + 1)[0] == E.PRODUCER_FENCED
    assert init(h, pid=pid + 7, epoch=0)[0] == E.PRODUCER_FENCED


def test_exhausted_epoch_rotates_the_producer_id(h):
    _, pid, _ = init(h)
    md = h.metadata("tx")
    md.producer_epoch = MAX_EPOCH - 1
    error, new_pid, new_epoch = init(h, pid=pid, epoch=MAX_EPOCH - 1)
    assert error == E.NONE and new_pid != pid and new_epoch == 0
    # a retry naming the previous id and its exhausted epoch gets the same answer
    assert init(h, pid=pid, epoch=MAX_EPOCH - 1) == (E.NONE, new_pid, 0)
    # without an expected producer the rotation also happens
    h.metadata("tx").producer_epoch = MAX_EPOCH - 1
    error, third_pid, epoch = init(h)
    assert error == E.NONE and third_pid not in (pid, new_pid) and epoch == 0


def test_verify_partitions(h):
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    assert h.coord.handle_verify_partitions("tx", pid, epoch, [T0, T1]) == {
        T0: E.NONE, T1: E.TRANSACTION_ABORTABLE}
    assert h.coord.handle_verify_partitions("tx", pid, epoch + 1, [T0]) == {T0: E.PRODUCER_FENCED}
    assert h.coord.handle_verify_partitions("other", pid, epoch, [T0]) == {T0: E.INVALID_PRODUCER_ID_MAPPING}


def test_transactional_ids_expire(h):
    _, pid, epoch = init(h)
    h.sched.advance(h.config.transactional_id_expiration_ms
                    + h.config.transaction_remove_expired_transaction_cleanup_interval_ms)
    assert h.coord.describe_transaction("tx")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
    h.restart()
    assert h.metadata("tx") is None
    error, new_pid, new_epoch = init(h)
    assert error == E.NONE and new_pid != pid and new_epoch == 0


def test_ongoing_transactions_do_not_expire(h):
    _, pid, epoch = init(h, timeout=900_000)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    md = h.metadata("tx")
    md.txn_timeout_ms = 10**12  # keep the timeout abort out of the way
    h.sched.advance(h.config.transactional_id_expiration_ms
                    + h.config.transaction_remove_expired_transaction_cleanup_interval_ms)
    assert h.metadata("tx") is not None


def test_describe_and_list(h):
    _, pid, epoch = init(h, "a")
    _, pid_b, _ = init(h, "b")
    h.coord.handle_add_partitions("a", pid, epoch, [T1, T0])
    error, desc = h.coord.describe_transaction("a")
    assert error == E.NONE
    assert (desc.state, desc.producer_id, desc.partitions) == ("Ongoing", pid, [T0, T1])
    assert h.coord.describe_transaction("zzz")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
    error, unknown, found = h.coord.list_transactions()
    assert error == E.NONE and sorted(d.transactional_id for d in found) == ["a", "b"]
    error, unknown, found = h.coord.list_transactions(states=["Ongoing", "Bogus"])
    assert unknown == ["Bogus"] and [d.transactional_id for d in found] == ["a"]
    assert [d.transactional_id for d in h.coord.list_transactions(producer_ids=[pid_b])[2]] == ["b"]
    h.sched.advance(5_000)
    assert [d.transactional_id for d in h.coord.list_transactions(["Ongoing"], duration_ms=1_000)[2]] == ["a"]
    assert h.coord.list_transactions(["Ongoing"], duration_ms=10_000)[2] == []


def test_not_coordinator_for_unloaded_partitions(h):
    h.coord.sync_leadership([1, 1, 1])
    assert init(h)[0] == E.NOT_COORDINATOR
    assert h.coord.find_coordinator("tx") == (E.NONE, 0)  # reloads from the (fake) metadata
    assert init(h)[0] == E.NONE


@pytest.mark.parametrize("code", [E.TRANSACTION_COORDINATOR_FENCED, E.INVALID_PRODUCER_EPOCH])
def test_an_obsolete_marker_answer_stops_completing_the_transaction(h, code):
    # Kafka's TransactionMarkerRequestCompletionHandler: a newer coordinator (or producer epoch)
    # exists and finishes the transaction; this one must not write CompleteCommit without the marker
    forgotten = []
    h.coord.forget_markers = forgotten.extend
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0, T1])
    h.marker_failures[T1] = code
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.NONE
    md = h.metadata("tx")
    assert md.state == S.PREPARE_COMMIT and T1 in md.partitions
    assert forgotten == [pid]
    h.sched.advance(10_000)  # and no retry either
    assert h.metadata("tx").state == S.PREPARE_COMMIT
    assert [m[4] for m in h.markers] == [T0]


def test_marker_outcomes_are_forgotten_on_completion_and_unload(h):
    forgotten = []
    h.coord.forget_markers = forgotten.extend
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.NONE
    assert h.metadata("tx").state == S.COMPLETE_COMMIT and forgotten == [pid]
    forgotten.clear()
    h.coord.sync_leadership([1] * 3)  # __transaction_state moved away: Kafka's onResignation
    assert forgotten == [pid]


def test_a_refused_marker_is_retried_after_the_back_off_not_at_once(h):
    _, pid, epoch = init(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [T0])
    h.marker_failures[T0] = E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert h.coord.handle_end_txn("tx", pid, epoch, True) == E.NONE
    h.coord.markers_delivered(pid)  # a delivery finishing does not trigger an immediate retry
    assert pid not in h.coord._awaiting_markers
    del h.marker_failures[T0]
    h.sched.advance(h.config.marker_retry_backoff_ms)
    assert h.metadata("tx").state == S.COMPLETE_COMMIT
