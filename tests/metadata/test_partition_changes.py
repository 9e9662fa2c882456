"""Leader elections and reassignments: the KRaft controller's rules, and the metadata store applying them."""
from __future__ import annotations

import pytest

from kafkapy.metadata import ChangeKind, EmbeddedMetadataStore
from kafkapy.metadata.partition_changes import cancel_reassignment, elect_leader, reassign
from kafkapy.metadata.store import PartitionMetadata
from kafkapy.protocol.errors import ErrorCode, KafkaError


def part(replicas, isr, leader, epoch=3, adding=(), removing=()) -> PartitionMetadata:
    return PartitionMetadata(0, tuple(replicas), tuple(isr), leader, epoch, 7, tuple(adding), tuple(removing))


def code_of(fn, *args) -> int:
    with pytest.raises(KafkaError) as info:
        fn(*args)
    return info.value.code


# -- elections ------------------------------------------------------------------------------------

def test_preferred_election_not_needed_when_the_first_replica_leads():
    assert code_of(elect_leader, part([0], [0], 0), False, {0}) == ErrorCode.ELECTION_NOT_NEEDED
    assert code_of(elect_leader, part([0, 1], [0, 1], 0), False, {0, 1}) == ErrorCode.ELECTION_NOT_NEEDED


def test_preferred_election_moves_leadership_to_the_first_replica():
    new = elect_leader(part([1, 0], [0, 1], 0), False, {0, 1})
    assert (new.leader, new.isr, new.leader_epoch, new.partition_epoch) == (1, (0, 1), 4, 8)


def test_preferred_election_needs_the_preferred_replica_in_sync_and_live():
    assert code_of(elect_leader, part([1, 0], [0], 0), False, {0, 1}) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert code_of(elect_leader, part([1, 0], [0, 1], 0), False, {0}) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election():
    # A live leader: nothing to do.
    assert code_of(elect_leader, part([1, 0], [0], 0), True, {0, 1}) == ErrorCode.ELECTION_NOT_NEEDED
    # A leader that is gone: an in-sync live replica first...
    assert elect_leader(part([2, 1, 0], [2, 0], 2), True, {0, 1}).leader == 0
    # ...else any live replica, which becomes the only in-sync one.
    new = elect_leader(part([2, 1], [2], 2), True, {0, 1})
    assert (new.leader, new.isr) == (1, (1,))
    assert code_of(elect_leader, part([2, 3], [2], 2), True, {0}) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


# -- reassignments --------------------------------------------------------------------------------

def test_reassigning_to_the_current_replicas_changes_nothing():
    assert reassign(part([0], [0], 0), [0], {0}, {0}) is None


def test_reordering_in_sync_replicas_completes_at_once_without_a_new_leader():
    new = reassign(part([0, 1], [0, 1], 0), [1, 0], {0, 1}, {0, 1})
    assert (new.replicas, new.isr, new.leader, new.leader_epoch) == ((1, 0), (0, 1), 0, 3)
    assert (new.adding_replicas, new.removing_replicas) == ((), ())


def test_dropping_the_leader_elects_a_new_one_and_bumps_the_epoch():
    new = reassign(part([0, 1], [0, 1], 0), [1], {0, 1}, {0, 1})
    assert (new.replicas, new.isr, new.leader, new.leader_epoch) == ((1,), (1,), 1, 4)


@pytest.mark.parametrize("target, message", [
    ([], "The manual partition assignment includes an empty replica list."),
    ([0, 5], "The manual partition assignment includes broker 5, but no such broker is registered."),
    ([0, 0], "The manual partition assignment includes the broker 0 more than once."),
])
def test_invalid_targets(target, message):
    with pytest.raises(KafkaError) as info:
        reassign(part([0], [0], 0), target, {0}, {0})
    assert (info.value.code, str(info.value)) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def test_a_replica_that_cannot_catch_up_keeps_the_reassignment_ongoing_until_cancelled():
    # Broker 1 is registered but not live, so it never joins the ISR.
    ongoing = reassign(part([0], [0], 0), [1], {0, 1}, {0})
    assert (ongoing.replicas, ongoing.isr, ongoing.leader) == ((1, 0), (0,), 0)
    assert (ongoing.adding_replicas, ongoing.removing_replicas) == ((1,), (0,))
    reverted = cancel_reassignment(ongoing, {0})
    assert (reverted.replicas, reverted.isr, reverted.leader) == ((0,), (0,), 0)
    assert (reverted.adding_replicas, reverted.removing_replicas) == ((), ())
    # A new target replacing the ongoing one: back to [0] completes at once.
    back = reassign(ongoing, [0], {0, 1}, {0})
    assert (back.replicas, back.adding_replicas, back.removing_replicas) == ((0,), (), ())


def test_cancel_without_a_reassignment():
    assert code_of(cancel_reassignment, part([0], [0], 0), {0}) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


# -- the store ------------------------------------------------------------------------------------

def test_store_applies_and_persists_reassignments_and_elections(tmp_path):
    store = EmbeddedMetadataStore(tmp_path)
    store.register_broker(1, "localhost", 9093)   # registered, then gone: a broker that is not live
    store.unregister_broker(1)
    store.register_broker(0, "localhost", 9092)
    store.create_topic("t", 2, 1)
    changes = []
    store.add_listener(changes.append)
    assert store.alter_partition_reassignment("t", 0, [0]) == store.get_topic("t").partitions[0]
    assert changes == []                          # nothing changed, nothing announced
    store.alter_partition_reassignment("t", 0, [1])
    assert [c.kind for c in changes] == [ChangeKind.PARTITION_CHANGED]
    reopened = EmbeddedMetadataStore(tmp_path)
    p0 = reopened.get_topic("t").partitions[0]
    assert (p0.replicas, p0.adding_replicas, p0.removing_replicas) == ((1, 0), (1,), (0,))
    reopened.register_broker(0, "localhost", 9092)
    reopened.alter_partition_reassignment("t", 0, None)
    assert reopened.get_topic("t").partitions[0].replicas == (0,)
    assert code_of(reopened.elect_leader, "t", 1) == ErrorCode.ELECTION_NOT_NEEDED
    assert code_of(reopened.elect_leader, "t", 2) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert code_of(reopened.alter_partition_reassignment, "nope", 0, [0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
