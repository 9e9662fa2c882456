"""Kafka's ZooKeeper-mode election strategies (kafkapy.controller.leader_election)."""
from kafkapy.controller.leader_election import (
    NO_LEADER,
    RECOVERING,
    controlled_shutdown_election,
    new_partition_state,
    offline_election,
    preferred_election,
    remove_replicas_from_isr,
)
from kafkapy.metadata.zk.paths import LeaderIsr


def test_new_partition_first_live_replica_leads_with_live_isr():
    state = new_partition_state([3, 1, 2], live={1, 2}, controller_epoch=4)
    assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch) == (1, 0, [1, 2], 4)
    assert new_partition_state([3], live={1}, controller_epoch=1) is None


def test_offline_election_takes_first_assigned_live_isr_member():
    state = LeaderIsr(1, 5, [1, 3, 2], 1)
    elected = offline_election(state, [1, 2, 3], live={2, 3}, unclean=False, controller_epoch=2)
    # assignment order decides, not ISR order
    assert (elected.leader, elected.leader_epoch, elected.isr) == (2, 6, [3, 2])
    assert elected.leader_recovery_state == 0


def test_offline_election_without_isr_member_needs_unclean():
    state = LeaderIsr(1, 5, [1], 1)
    assert offline_election(state, [1, 2, 3], live={2, 3}, unclean=False, controller_epoch=2) is None
    elected = offline_election(state, [1, 2, 3], live={3, 2}, unclean=True, controller_epoch=2)
    assert (elected.leader, elected.isr, elected.leader_recovery_state) == (2, [2], RECOVERING)


def test_preferred_election_keeps_isr():
    state = LeaderIsr(2, 3, [2, 1], 1)
    elected = preferred_election(state, [1, 2], live={1, 2}, controller_epoch=1)
    assert (elected.leader, elected.leader_epoch, elected.isr) == (1, 4, [2, 1])
    assert preferred_election(LeaderIsr(2, 3, [2], 1), [1, 2], live={1, 2}, controller_epoch=1) is None


def test_controlled_shutdown_moves_leader_and_drops_stopping_broker():
    state = LeaderIsr(1, 0, [1, 2, 3], 1)
    elected = controlled_shutdown_election(state, [1, 2, 3], live={1, 2, 3}, shutting_down={1}, controller_epoch=1)
    assert (elected.leader, elected.isr, elected.leader_epoch) == (2, [2, 3], 1)


def test_removing_replicas_never_empties_the_isr():
    state = LeaderIsr(1, 7, [1, 2], 1)
    shrunk = remove_replicas_from_isr(state, {2}, controller_epoch=3)
    assert (shrunk.leader, shrunk.isr, shrunk.leader_epoch, shrunk.controller_epoch) == (1, [1], 8, 3)
    gone = remove_replicas_from_isr(LeaderIsr(1, 7, [1], 1), {1}, controller_epoch=3)
    assert (gone.leader, gone.isr) == (NO_LEADER, [1])
    assert remove_replicas_from_isr(LeaderIsr(1, 7, [1], 1), {5}, controller_epoch=3) is None
