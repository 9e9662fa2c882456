"""Leader elections and replica reassignments of one partition, as Kafka's KRaft controller decides them.

Pure functions from a partition's current `PartitionMetadata` (and which brokers are registered or
live) to its next one, raising Kafka's errors; the metadata store applies and persists the result.
They follow `ReplicationControlManager.electLeader` / `alterPartitionReassignment` and
`PartitionChangeBuilder`: a reassignment first lists target + removed replicas with adding/removing
sets, and completes once every added replica is in the ISR (on a single kafkapy broker: at once when
the target names only in-sync replicas, never when it names a broker that is registered but not live).
"""
from __future__ import annotations

from collections.abc import Collection, Sequence

from ..protocol.errors import ErrorCode, KafkaError
from .errors import InvalidReplicaAssignmentError
from .store import PartitionMetadata

__all__ = ["NO_LEADER", "cancel_reassignment", "elect_leader", "reassign", "reassignment_in_progress"]

NO_LEADER = -1
_NOT_NEEDED = "Leader election not needed for topic partition."  # Kafka's messages for these codes


def reassignment_in_progress(part: PartitionMetadata) -> bool:
    return bool(part.adding_replicas or part.removing_replicas)


def elect_leader(part: PartitionMetadata, unclean: bool, live: Collection[int]) -> PartitionMetadata:
    """The partition after a preferred (or unclean) election.

    Raises ELECTION_NOT_NEEDED when the preferred replica already leads (preferred) or the partition
    has a live leader (unclean); PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE when
    no acceptable replica exists.
    """
    preferred = part.replicas[0] if part.replicas else NO_LEADER
    if not unclean:
        if part.leader == preferred:
            raise KafkaError(_NOT_NEEDED, ErrorCode.ELECTION_NOT_NEEDED)
        if preferred not in part.isr or preferred not in live:
            raise KafkaError("The preferred leader was not available.",
                             ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
        return _with_leader(part, preferred, part.isr)
    # kafkapy never marks a leader offline in the metadata, so a leader that is not live counts as none.
    if part.leader != NO_LEADER and part.leader in live:
        raise KafkaError(_NOT_NEEDED, ErrorCode.ELECTION_NOT_NEEDED)
    for replica in part.replicas:
        if replica in part.isr and replica in live:
            return _with_leader(part, replica, part.isr)
    for replica in part.replicas:  # unclean: a live replica outside the ISR becomes the only member
        if replica in live:
            return _with_leader(part, replica, (replica,))
    raise KafkaError("Eligible topic partition leaders are not available.",
                     ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)


def validate_assignment(target: Sequence[int], registered: Collection[int]) -> None:
    """Kafka's validateManualPartitionAssignment without a replication-factor constraint."""
    if not target:
        raise InvalidReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(target):
        if broker_id not in registered:
            raise InvalidReplicaAssignmentError(f"The manual partition assignment includes broker {broker_id}, "
                                                "but no such broker is registered.")
        if broker_id == previous:
            raise InvalidReplicaAssignmentError(f"The manual partition assignment includes the broker "
                                                f"{broker_id} more than once.")
        previous = broker_id


def reassign(part: PartitionMetadata, target: Sequence[int], registered: Collection[int],
             live: Collection[int]) -> PartitionMetadata | None:
    """The partition after AlterPartitionReassignments to `target`; None when nothing changes."""
    validate_assignment(target, registered)
    target = tuple(target)
    removing = tuple(r for r in part.replicas if r not in target)
    adding = tuple(r for r in target if r not in part.replicas)
    replicas = target + removing
    if replicas == part.replicas and not removing and not adding and not reassignment_in_progress(part):
        return None
    isr_after = tuple(r for r in part.isr if r not in removing)
    if isr_after and all(r in isr_after for r in adding):
        # Every new replica is in sync already: the reassignment completes in the same change.
        return _settled(part, target, isr_after, live)
    return _settled(part, replicas, part.isr, live, adding=adding, removing=removing)


def cancel_reassignment(part: PartitionMetadata, live: Collection[int]) -> PartitionMetadata:
    """The partition with its ongoing reassignment reverted (NO_REASSIGNMENT_IN_PROGRESS if none)."""
    if not reassignment_in_progress(part):
        raise KafkaError("No partition reassignment is in progress.",
                         ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    replicas = tuple(r for r in part.replicas if r not in part.adding_replicas)
    isr = tuple(r for r in part.isr if r not in part.adding_replicas)
    if not isr:
        # Kafka allows this only with unclean.leader.election.enable; kafkapy never elects uncleanly here.
        raise InvalidReplicaAssignmentError(f"Unable to revert partition assignment for partition "
                                            f"{part.partition} because it would require an unclean leader "
                                            "election.")
    return _settled(part, replicas, isr, live)


def _settled(part: PartitionMetadata, replicas: tuple[int, ...], isr: tuple[int, ...], live: Collection[int], *,
             adding: tuple[int, ...] = (), removing: tuple[int, ...] = ()) -> PartitionMetadata:
    leader = part.leader
    if leader not in isr or leader not in replicas:
        in_sync = [r for r in replicas if r in isr]
        leader = next((r for r in in_sync if r in live), in_sync[0] if in_sync else NO_LEADER)
    # A new leader, or replicas dropped from the assignment, start a new leader epoch (as in Kafka).
    bump = leader != part.leader or any(r not in replicas for r in part.replicas)
    return part._replace(replicas=replicas, isr=isr, leader=leader,
                   leader_epoch=part.leader_epoch + 1 if bump else part.leader_epoch,
                   partition_epoch=part.partition_epoch + 1, adding_replicas=adding, removing_replicas=removing)


def _with_leader(part: PartitionMetadata, leader: int, isr: Sequence[int]) -> PartitionMetadata:
    return part._replace(leader=leader, isr=tuple(isr), leader_epoch=part.leader_epoch + 1,
                   partition_epoch=part.partition_epoch + 1)
