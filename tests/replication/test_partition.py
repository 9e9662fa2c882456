"""Partition: the leader's high watermark, ISR changes, the min-ISR rule and diverging epochs."""
from __future__ import annotations

import pytest

from kafkapy.log import PartitionLog
from kafkapy.log.errors import OffsetOutOfRangeError
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import LeaderAndIsrRequest
from kafkapy.replication.partition import IsrChangeOutcome, Partition
from tests.log.logtools import batch, small_config

LAG_MS = 10_000
T0 = 1_000_000


def state(leader=1, epoch=1, isr=(1, 2, 3), replicas=(1, 2, 3), partition_epoch=0):
    return LeaderAndIsrRequest.LeaderAndIsrPartitionState(
        topic_name="t", partition_index=0, leader=leader, leader_epoch=epoch, isr=list(isr),
        partition_epoch=partition_epoch, replicas=list(replicas))


@pytest.fixture
def make(tmp_path):
    logs = []

    def build(min_isr=1, live=None, local_id=1):
        plog = PartitionLog.open(tmp_path / f"t-{len(logs)}", small_config(min_insync_replicas=min_isr))
        plog.auto_high_watermark = False  # as the replica manager hosts it
        logs.append(plog)
        proposals = []
        part = Partition("t", 0, local_id, plog, lag_ms=LAG_MS,
                         is_eligible=(lambda r: True) if live is None else live.__contains__,
                         submit_isr_change=lambda p, change: proposals.append(change))
        return part, plog, proposals

    yield build
    for plog in logs:
        plog.close()


def append(plog, n=1, epoch=1):
    for _ in range(n):
        plog.append(batch(), leader_epoch=epoch)


def test_leader_records_its_epoch_at_the_log_end(make):
    part, plog, _ = make()
    append(plog, 3, epoch=0)
    assert part.make_leader(state(epoch=4), T0)
    assert part.is_leader and part.leader_epoch == 4
    assert plog.leader_epochs.entries()[-1] == (4, 3)
    assert part.leader_epoch_start_offset == 3
    assert plog.auto_high_watermark is False


def test_high_watermark_waits_for_every_isr_member(make):
    part, plog, _ = make()
    part.make_leader(state(), T0)
    append(plog, 5)
    assert plog.high_watermark == 0
    assert not part.update_follower_fetch(2, 5, 0, T0)
    assert plog.high_watermark == 0  # replica 3 has not fetched yet
    assert part.update_follower_fetch(3, 2, 0, T0)
    assert plog.high_watermark == 2
    assert part.update_follower_fetch(3, 5, 0, T0)
    assert plog.high_watermark == 5
    append(plog, 1)
    part.maybe_increment_hw(T0)
    assert plog.high_watermark == 5  # followers have not fetched offset 5 yet


def test_single_replica_partition_commits_on_write(make):
    part, plog, _ = make()
    append(plog, 2, epoch=0)
    part.make_leader(state(isr=(1,), replicas=(1,)), T0)
    assert plog.auto_high_watermark and plog.high_watermark == 2
    append(plog, 3)
    assert plog.high_watermark == 5


def test_high_watermark_frozen_below_min_isr(make):
    part, plog, proposals = make(min_isr=2)
    part.make_leader(state(isr=(1, 2)), T0)
    append(plog, 4)
    part.update_follower_fetch(2, 4, 0, T0)
    assert plog.high_watermark == 4 and not part.under_min_isr()
    # more is written, and replica 2 stops fetching: shrink to [1]
    append(plog, 2)
    change = part.maybe_shrink_isr(T0 + LAG_MS + 1)
    assert change is not None and change.new_isr == (1,) and proposals == [change]
    assert part.apply_isr_change_result(change, ErrorCode.NONE, isr=[1], leader_epoch=1, partition_epoch=1,
                                        now_ms=T0 + LAG_MS + 2) is IsrChangeOutcome.COMMITTED
    assert part.isr == (1,) and part.partition_epoch == 1
    assert part.under_min_isr() and part.min_isr == 2
    assert not part.maybe_increment_hw(T0 + LAG_MS + 3)
    assert plog.high_watermark == 4


def test_min_isr_is_bounded_by_the_replication_factor(make):
    part, plog, _ = make(min_isr=3)
    part.make_leader(state(isr=(1, 2), replicas=(1, 2)), T0)
    assert part.min_isr == 2 and not part.under_min_isr()


def test_expand_counts_toward_the_high_watermark_at_once(make):
    part, plog, proposals = make()
    part.make_leader(state(isr=(1, 2), replicas=(1, 2, 3)), T0)
    append(plog, 4)
    part.update_follower_fetch(2, 4, 0, T0)
    assert plog.high_watermark == 4
    append(plog, 4)
    part.update_follower_fetch(3, 3, 0, T0)  # behind the high watermark: not eligible
    assert part.pending_isr is None
    part.update_follower_fetch(3, 6, 0, T0)
    change = part.pending_isr
    assert change is not None and change.expand and change.new_isr == (1, 2, 3) and proposals == [change]
    assert part.maximal_isr == (1, 2, 3) and part.isr == (1, 2)
    part.update_follower_fetch(2, 8, 0, T0)
    assert plog.high_watermark == 6  # replica 3 (pending) holds it back
    assert part.apply_isr_change_result(change, ErrorCode.NONE, isr=[1, 2, 3], leader_epoch=1, partition_epoch=7,
                                        now_ms=T0) is IsrChangeOutcome.COMMITTED
    assert part.isr == (1, 2, 3) and part.partition_epoch == 7 and part.pending_isr is None


def test_expand_needs_the_start_of_the_leader_epoch_and_a_live_replica(make):
    part, plog, _ = make(live={1, 2})
    append(plog, 6, epoch=0)
    part.make_leader(state(isr=(1, 2)), T0)  # epoch 1 starts at 6
    assert part.update_follower_fetch(2, 6, 0, T0)
    assert plog.high_watermark == 6
    part.update_follower_fetch(3, 6, 0, T0)
    assert part.pending_isr is None  # replica 3 is not alive
    part.is_eligible = lambda r: True
    part.update_follower_fetch(3, 6, 0, T0)
    assert part.pending_isr is not None and part.pending_isr.new_isr == (1, 2, 3)


def test_shrink_counts_only_once_confirmed(make):
    part, plog, _ = make()
    part.make_leader(state(), T0)
    append(plog, 5)
    part.update_follower_fetch(2, 5, 0, T0)
    part.update_follower_fetch(3, 1, 0, T0)
    assert plog.high_watermark == 1
    later = T0 + LAG_MS + 1
    part.update_follower_fetch(2, 5, 0, later)
    assert part.out_of_sync_replicas(later) == [3]
    change = part.maybe_shrink_isr(later)
    assert change.new_isr == (1, 2) and not change.expand
    assert not part.maybe_increment_hw(later)
    assert plog.high_watermark == 1  # replica 3 still counts while the shrink is pending
    # one change at a time: nothing more is proposed meanwhile
    assert part.maybe_shrink_isr(later + LAG_MS) is None
    part.apply_isr_change_result(change, ErrorCode.NONE, isr=[1, 2], leader_epoch=1, partition_epoch=1, now_ms=later)
    assert plog.high_watermark == 5


def test_caught_up_time_follows_kafka_rules(make):
    part, plog, _ = make()
    part.make_leader(state(), T0)
    append(plog, 5)
    part.update_follower_fetch(2, 5, 0, T0 + 100)  # at the end: caught up now
    assert part.followers[2].last_caught_up_ms == T0 + 100
    append(plog, 5)
    # behind the end, but it has everything we had at its previous fetch: caught up back then
    part.update_follower_fetch(2, 5, 0, T0 + 200)
    assert part.followers[2].last_caught_up_ms == T0 + 100
    append(plog, 5)
    part.update_follower_fetch(2, 10, 0, T0 + 300)
    assert part.followers[2].last_caught_up_ms == T0 + 200
    # an ISR member that never fetched gets one lag interval from the leader change
    assert part.out_of_sync_replicas(T0 + LAG_MS) == []
    assert part.out_of_sync_replicas(T0 + LAG_MS + 1) == [3]


@pytest.mark.parametrize("code,outcome,pending", [
    (ErrorCode.INELIGIBLE_REPLICA, IsrChangeOutcome.REVERTED, False),
    (ErrorCode.OPERATION_NOT_ATTEMPTED, IsrChangeOutcome.REVERTED, False),
    (ErrorCode.FENCED_LEADER_EPOCH, IsrChangeOutcome.PENDING, True),
    (ErrorCode.INVALID_UPDATE_VERSION, IsrChangeOutcome.PENDING, True),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, IsrChangeOutcome.PENDING, True),
    (ErrorCode.UNKNOWN_TOPIC_ID, IsrChangeOutcome.PENDING, True),
    (ErrorCode.NOT_CONTROLLER, IsrChangeOutcome.RETRY, True),
    (ErrorCode.UNKNOWN_SERVER_ERROR, IsrChangeOutcome.RETRY, True),
])
def test_isr_change_errors(make, code, outcome, pending):
    part, plog, _ = make()
    part.make_leader(state(), T0)
    change = part.maybe_shrink_isr(T0 + LAG_MS + 1)
    assert part.apply_isr_change_result(change, code) is outcome
    assert (part.pending_isr is change) == pending
    assert part.isr == (1, 2, 3)


def test_isr_answer_for_a_replaced_proposal_is_ignored(make):
    part, plog, _ = make()
    part.make_leader(state(), T0)
    change = part.maybe_shrink_isr(T0 + LAG_MS + 1)
    part.make_leader(state(epoch=2, partition_epoch=3), T0)  # a new LeaderAndIsr drops the proposal
    assert part.pending_isr is None
    assert part.apply_isr_change_result(change, ErrorCode.NONE, isr=[1], leader_epoch=1,
                                        partition_epoch=1) is IsrChangeOutcome.IGNORED
    assert part.isr == (1, 2, 3)


def test_isr_answer_at_another_leader_epoch_stays_pending(make):
    part, plog, _ = make()
    part.make_leader(state(), T0)
    change = part.maybe_shrink_isr(T0 + LAG_MS + 1)
    assert part.apply_isr_change_result(change, ErrorCode.NONE, isr=[1], leader_epoch=5,
                                        partition_epoch=1) is IsrChangeOutcome.PENDING
    assert part.isr == (1, 2, 3)


def test_follower_state_and_stale_partition_epoch(make):
    part, plog, _ = make()
    part.make_leader(state(partition_epoch=5), T0)
    assert not part.make_follower(state(leader=2, epoch=2, partition_epoch=4))
    assert part.is_leader
    assert part.make_follower(state(leader=2, epoch=2, partition_epoch=5))
    assert not part.is_leader and part.leader_id == 2 and part.isr == () and part.followers == {}
    assert not part.update_follower_fetch(3, 0, 0, T0)


def test_leader_epoch_fencing(make):
    part, _, _ = make()
    part.make_leader(state(epoch=5), T0)
    assert part.leader_epoch_error(-1) == ErrorCode.NONE
    assert part.leader_epoch_error(5) == ErrorCode.NONE
    assert part.leader_epoch_error(4) == ErrorCode.FENCED_LEADER_EPOCH
    assert part.leader_epoch_error(6) == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_diverging_epoch(make):
    part, plog, _ = make()
    append(plog, 5, epoch=0)
    append(plog, 3, epoch=2)
    part.make_leader(state(epoch=3), T0)
    append(plog, 2, epoch=3)  # epochs: 0@0, 2@5, 3@8; end 10
    assert part.diverging_epoch(0, 5) is None
    assert part.diverging_epoch(0, 7) == (0, 5)
    assert part.diverging_epoch(1, 5) == (0, 5)  # we never had epoch 1
    assert part.diverging_epoch(2, 8) is None
    assert part.diverging_epoch(2, 9) == (2, 8)
    assert part.diverging_epoch(3, 10) is None
    with pytest.raises(OffsetOutOfRangeError):
        part.diverging_epoch(4, 10)  # an epoch newer than ours
    plog.delete_records_before(0)
    plog.high_watermark = 10
    plog.delete_records_before(6)
    with pytest.raises(OffsetOutOfRangeError):
        part.diverging_epoch(2, 5)  # below our log start
