"""A consumer group member's next assignment on the way to its target (Kafka's CurrentAssignmentBuilder).

The rule that keeps a partition from ever being owned by two members: a member first gives
back what is not in its target (it stays in its epoch, UNREVOKED_PARTITIONS, until its
heartbeat no longer reports those partitions), and only then is given new partitions, each one
only once no other member holds it (UNRELEASED_PARTITIONS until all are free). Pure: it reads
the member, the target and who owns what, and returns the member's next state.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ...protocol.errors import ErrorCode, KafkaError
from .group import Assignment, ConsumerGroupMember, MemberState

__all__ = ["Reconciled", "reconcile", "owns_any"]

# (topic id, partition) -> whether some member (possibly this one) still holds it
IsOwned = Callable[[uuid.UUID, int], bool]


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A member's assignment state after one reconciliation step."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def owns_any(owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None, partitions: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    """Whether the partitions a member reports owning include any of `partitions`.

    None (the member did not say) counts as still owning them, as in Kafka."""
    if owned is None:
        return True
    for topic_id, owned_partitions in owned:
        wanted = partitions.get(topic_id)
        if wanted and any(p in wanted for p in owned_partitions):
            return True
    return False


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Mapping[uuid.UUID, frozenset[int]],
              is_owned: IsOwned, owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None) -> Reconciled | None:
    """The member's next state towards (target_epoch, target), or None if it cannot move (or
    already is reconciled). `owned` is what the member's heartbeat reports owning (None: not sent).

    Raises KafkaError(FENCED_MEMBER_EPOCH) for a member in an unknown state that still owns
    partitions: it must give up everything and rejoin."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return None
        return _next(member, member.member_epoch, target_epoch, target, is_owned, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return None
        return _next(member, member.member_epoch + 1, target_epoch, target, is_owned, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, is_owned, owned)
    # UNKNOWN: only a member holding nothing can be reconciled from scratch
    if owned is None or any(True for _, partitions in owned if partitions):
        raise KafkaError("The consumer group member is in a unknown state. The member must abandon all its"
                         " partitions and rejoin.", ErrorCode.FENCED_MEMBER_EPOCH)
    return _next(member, target_epoch, target_epoch, target, is_owned, owned)


def _next(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: Mapping[uuid.UUID, frozenset[int]],
          is_owned: IsOwned, owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None) -> Reconciled | None:
    current = member.assigned
    kept: Assignment = {}
    revoking: Assignment = {}
    adding: Assignment = {}
    unreleased = False
    for topic_id in set(target) | set(current):
        wanted = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & wanted
        if keep:
            kept[topic_id] = keep
        revoke = have - keep
        if revoke:
            revoking[topic_id] = revoke
        free = []
        for partition in wanted - keep:
            if is_owned(topic_id, partition):
                unreleased = True
            else:
                free.append(partition)
        if free:
            adding[topic_id] = frozenset(free)

    if revoking and owns_any(owned, revoking):
        # give back first: same epoch (previous epoch becomes it too, as Kafka's updateMemberEpoch)
        result = Reconciled(epoch, member.member_epoch, MemberState.UNREVOKED_PARTITIONS, kept, revoking)
    else:
        assigned = dict(kept)
        for topic_id, partitions in adding.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
        new_state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        result = Reconciled(target_epoch, member.member_epoch, new_state, assigned, {})
    if (result.member_epoch == member.member_epoch and result.state is member.state
            and result.assigned == member.assigned and result.pending_revocation == member.pending_revocation
            and result.previous_member_epoch == member.previous_member_epoch):
        return None
    return result
