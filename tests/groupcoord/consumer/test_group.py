"""The KIP-848 consumer group model: derived states, ownership bookkeeping, offset checks, loading."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from kafkapy.groupcoord.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    OwnershipError,
)
from kafkapy.groupcoord.group import GroupState, OffsetAndMetadata
from kafkapy.protocol.errors import ErrorCode as E

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def test_state_follows_members_and_epochs():
    group = ConsumerGroup("g")
    assert group.state is ConsumerGroupState.EMPTY
    assert group.is_in(GroupState.EMPTY)  # the classic state with the same name matches too
    member = ConsumerGroupMember("a", subscribed_topic_names=["t"])
    group.add_member(member)
    group.group_epoch = 1
    assert group.state is ConsumerGroupState.ASSIGNING
    group.assignment_epoch = 1
    assert group.state is ConsumerGroupState.RECONCILING  # member epoch 0 < 1
    member.member_epoch = 1
    assert group.state is ConsumerGroupState.STABLE and group.is_in(GroupState.STABLE)
    member.state = MemberState.UNRELEASED_PARTITIONS
    assert group.state is ConsumerGroupState.RECONCILING
    group.remove_member("a")
    assert group.state is ConsumerGroupState.EMPTY
    group.transition_to(GroupState.DEAD, 5)
    assert group.state is ConsumerGroupState.DEAD and group.is_in(GroupState.DEAD)
    with pytest.raises(RuntimeError):
        ConsumerGroup("h").transition_to(GroupState.STABLE, 0)


def test_a_partition_has_one_owner():
    group = ConsumerGroup("g")
    a, b = ConsumerGroupMember("a"), ConsumerGroupMember("b")
    group.add_member(a)
    group.add_member(b)
    group.set_member_assignment(a, {T: [0, 1]}, {U: [3]})
    assert group.owners == {(T, 0): "a", (T, 1): "a", (U, 3): "a"}
    with pytest.raises(OwnershipError):
        group.set_member_assignment(b, {T: [2]}, {U: [3]})
    # the refused change left b as it was
    assert b.assigned == {} and (T, 2) not in group.owners
    group.set_member_assignment(a, {T: [0]}, {})
    group.set_member_assignment(b, {T: [1, 2]}, {U: [3]})
    assert group.owner_of(T, 1) == "b" and group.owner_of(U, 3) == "b"
    group.remove_member("b")
    assert group.owners == {(T, 0): "a"}


def test_static_members_are_indexed_by_instance_id():
    group = ConsumerGroup("g")
    group.add_member(ConsumerGroupMember("a", instance_id="i1"))
    assert group.static_member_id("i1") == "a" and group.static_member_id(None) is None
    group.remove_member("a")
    assert group.static_member_id("i1") is None


def test_subscriptions_include_resolved_regexes():
    group = ConsumerGroup("g")
    group.add_member(ConsumerGroupMember("a", subscribed_topic_names=["x"]))
    group.add_member(ConsumerGroupMember("b", subscribed_topic_regex="y.*"))
    group.resolved_regexes = {"y.*": frozenset({"y1", "y2"})}
    assert group.subscribed_topic_names() == {"x", "y1", "y2"}
    assert group.is_subscribed_to("y2") and not group.is_subscribed_to("z")


def test_offset_commit_and_fetch_checks():
    group = ConsumerGroup("g")
    # no members: an admin commit (epoch -1) is fine
    assert group.validate_offset_commit("", None, -1) is None
    member = ConsumerGroupMember("a", member_epoch=3)
    group.add_member(member)
    assert group.validate_offset_commit("", None, -1) == E.UNKNOWN_MEMBER_ID
    assert group.validate_offset_commit("a", None, 3) is None
    assert group.validate_offset_commit("a", None, 2) == E.STALE_MEMBER_EPOCH
    assert group.validate_offset_commit("a", None, 3, api_version=8) == E.UNSUPPORTED_VERSION
    assert group.validate_offset_fetch(None, -1) is None
    assert group.validate_offset_fetch("a", 3) is None
    assert group.validate_offset_fetch("a", 4) == E.STALE_MEMBER_EPOCH
    assert group.validate_offset_fetch("zz", 3) == E.UNKNOWN_MEMBER_ID
    member.classic_protocols = [("range", b"")]
    assert group.validate_offset_commit("a", None, 2, api_version=8) == E.ILLEGAL_GENERATION


def test_from_stored_rebuilds_members_targets_and_ownership():
    stored = SimpleNamespace(
        group_id="g", group_epoch=4, assignment_epoch=4,
        members={"a": SimpleNamespace(instance_id="i", rack_id=None, client_id="c", client_host="/h",
                                      rebalance_timeout_ms=1000, subscribed_topic_names=["t"],
                                      subscribed_topic_regex=None, server_assignor="range",
                                      classic_protocols=None)},
        target={"a": {T: frozenset({0, 1})}},
        current={"a": SimpleNamespace(member_epoch=4, previous_member_epoch=3, state=1,
                                      assigned={T: frozenset({0})}, pending_revocation={T: frozenset({2})})},
        topics={})
    offsets = {("t", 0): OffsetAndMetadata(5)}
    group = ConsumerGroup.from_stored(stored, offsets)
    member = group.members["a"]
    assert member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch == 4
    assert group.owners == {(T, 0): "a", (T, 2): "a"}
    assert group.static_member_id("i") == "a" and group.target["a"] == {T: frozenset({0, 1})}
    assert group.offsets == offsets and group.state is ConsumerGroupState.RECONCILING
