"""A member's reconciliation towards its target (Kafka's CurrentAssignmentBuilder cases)."""
from __future__ import annotations

import uuid

import pytest

from kafkapy.groupcoord.consumer.group import ConsumerGroupMember, MemberState
from kafkapy.groupcoord.consumer.reconciliation import reconcile
from kafkapy.protocol.errors import ErrorCode, KafkaError

T = uuid.UUID(int=1)


def member(epoch: int, assigned=(), pending=(), state=MemberState.STABLE) -> ConsumerGroupMember:
    m = ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1, state=state)
    m.assigned = {T: frozenset(assigned)} if assigned else {}
    m.pending_revocation = {T: frozenset(pending)} if pending else {}
    return m


def free(t, p) -> bool:
    return False


def test_reconciled_member_does_not_move():
    assert reconcile(member(3, [0, 1]), 3, {T: frozenset({0, 1})}, free, [(T, [0, 1])]) is None


def test_new_partitions_move_the_member_to_the_target_epoch():
    step = reconcile(member(3, [0]), 5, {T: frozenset({0, 1})}, free, [(T, [0])])
    assert (step.member_epoch, step.previous_member_epoch, step.state) == (5, 3, MemberState.STABLE)
    assert step.assigned == {T: frozenset({0, 1})} and step.pending_revocation == {}


def test_revocation_comes_first_and_keeps_the_epoch():
    step = reconcile(member(3, [0, 1, 2]), 5, {T: frozenset({0, 3})}, free, [(T, [0, 1, 2])])
    assert step.state is MemberState.UNREVOKED_PARTITIONS and step.member_epoch == 3
    assert step.assigned == {T: frozenset({0})} and step.pending_revocation == {T: frozenset({1, 2})}


def test_revoked_partitions_reported_gone_let_the_member_advance():
    m = member(3, [0], pending=[1, 2], state=MemberState.UNREVOKED_PARTITIONS)
    assert reconcile(m, 5, {T: frozenset({0, 3})}, free, [(T, [0, 1])]) is None  # still owns 1
    assert reconcile(m, 5, {T: frozenset({0, 3})}, free, None) is None  # did not say: still owns
    step = reconcile(m, 5, {T: frozenset({0, 3})}, free, [(T, [0])])
    assert step.state is MemberState.STABLE and step.member_epoch == 5
    assert step.assigned == {T: frozenset({0, 3})}


def test_a_partition_still_owned_elsewhere_is_not_given():
    owned_elsewhere = {(T, 3)}
    step = reconcile(member(3, [0]), 5, {T: frozenset({0, 3, 4})}, lambda t, p: (t, p) in owned_elsewhere, [(T, [0])])
    assert step.state is MemberState.UNRELEASED_PARTITIONS and step.member_epoch == 5
    assert step.assigned == {T: frozenset({0, 4})}
    m = member(5, [0, 4], state=MemberState.UNRELEASED_PARTITIONS)
    step = reconcile(m, 5, {T: frozenset({0, 3, 4})}, free, [(T, [0, 4])])
    assert step.state is MemberState.STABLE and step.assigned == {T: frozenset({0, 3, 4})}


def test_a_member_that_already_gave_partitions_back_does_not_wait():
    # the member's heartbeat no longer lists the partitions to revoke: no UNREVOKED step needed
    step = reconcile(member(3, [0, 1]), 5, {T: frozenset({0})}, free, [(T, [0])])
    assert step.state is MemberState.STABLE and step.member_epoch == 5 and step.assigned == {T: frozenset({0})}


def test_unknown_state_is_fenced_unless_the_member_owns_nothing():
    m = member(3, [0], state=MemberState.UNKNOWN)
    with pytest.raises(KafkaError) as err:
        reconcile(m, 5, {T: frozenset({0})}, free, [(T, [0])])
    assert err.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    step = reconcile(m, 5, {T: frozenset({0})}, free, [])
    assert step.member_epoch == 5 and step.state is MemberState.STABLE
