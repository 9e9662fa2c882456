"""ConsumerGroupDescribe's view of a KIP-848 group (kafkapy.groupcoord.consumer.describe)."""
from __future__ import annotations

import uuid

from kafkapy.groupcoord.consumer.describe import (
    MEMBER_TYPE_CLASSIC,
    MEMBER_TYPE_CONSUMER,
    describe_consumer_group,
    preferred_assignor,
)
from kafkapy.groupcoord.consumer.group import ConsumerGroup, ConsumerGroupMember, MemberState, TopicMetadata

A, B, GONE = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


def build() -> ConsumerGroup:
    group = ConsumerGroup("g")
    group.group_epoch, group.assignment_epoch = 4, 3
    group.subscribed_topic_metadata = {"a": TopicMetadata(A, "a", 4)}
    m1 = ConsumerGroupMember("m1", instance_id="i1", rack_id="r1", client_id="c1", client_host="/127.0.0.1",
                             subscribed_topic_names=["a", "b"], server_assignor="range", member_epoch=3,
                             assigned={A: frozenset({2, 0}), GONE: frozenset({0})},
                             pending_revocation={B: frozenset({1})})
    m2 = ConsumerGroupMember("m2", subscribed_topic_regex="a|b", member_epoch=3,
                             classic_protocols=[("range", b"")], state=MemberState.UNREVOKED_PARTITIONS)
    group.add_member(m1)
    group.add_member(m2)
    group.target = {"m1": {A: frozenset({0, 1})}, "m2": {A: frozenset({2, 3}), B: frozenset({0, 1})}}
    return group


def names(topic_id):
    return {B: "b"}.get(topic_id)


def test_describes_state_epochs_assignor_and_members():
    d = describe_consumer_group(build(), "uniform", names)
    assert (d.group_id, d.state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
        "g", "Assigning", 4, 3, "range")
    m1, m2 = d.members
    assert (m1.member_id, m1.instance_id, m1.rack_id, m1.client_id, m1.client_host, m1.member_epoch) == (
        "m1", "i1", "r1", "c1", "/127.0.0.1", 3)
    assert m1.subscribed_topic_names == ["a", "b"] and m1.subscribed_topic_regex is None
    # current assignment: owned partitions only (pending revocation is not shown), deleted topics left out;
    # names come from the cluster lookup first, then the group's topic metadata
    assert [(t.topic_id, t.topic_name, t.partitions) for t in m1.assignment] == [(A, "a", [0, 2])]
    assert m1.partitions(target=True) == {"a": [0, 1]}
    assert m1.member_type == MEMBER_TYPE_CONSUMER
    assert m2.subscribed_topic_regex == "a|b" and m2.member_type == MEMBER_TYPE_CLASSIC
    assert m2.assignment == [] and m2.partitions(target=True) == {"a": [2, 3], "b": [0, 1]}


def test_empty_group_uses_the_default_assignor():
    d = describe_consumer_group(ConsumerGroup("e"), "uniform")
    assert (d.state, d.members, d.assignor_name) == ("Empty", [], "uniform")


def test_preferred_assignor_is_the_most_asked_for():
    group = ConsumerGroup("g")
    for i, name in enumerate(["range", "uniform", "uniform", None]):
        group.add_member(ConsumerGroupMember(f"m{i}", server_assignor=name))
    assert preferred_assignor(group, "range") == "uniform"


def test_consumer_group_describe_handler_checks_group_and_topic_acls(tmp_path):
    """ConsumerGroupDescribe through the broker handler with an authorizer: DESCRIBE on the group, and
    (Kafka 4.0, KAFKA-18813) on every topic of the members' assignments, else the group is not shown;
    UNSUPPORTED_VERSION without the consumer protocol."""
    from kafkapy.metadata.acls import AclOperation, ResourceType
    from kafkapy.protocol import messages as m
    from kafkapy.protocol.error_codes import ErrorCode
    from tests.security.test_acl_matrix import AUTHORIZER, AclBroker

    b = AclBroker(tmp_path, **{"authorizer.class.name": AUTHORIZER, "super.users": "User:admin"})
    try:
        b.create_topic("t", 2)
        topic_id = b.broker.partitions.topic("t").topic_id
        group = ConsumerGroup("cg")
        group.group_epoch = group.assignment_epoch = 1
        group.add_member(ConsumerGroupMember("m1", subscribed_topic_names=["t"], member_epoch=1,
                                             assigned={topic_id: frozenset({0, 1})}))
        group.target = {"m1": {topic_id: frozenset({0, 1})}}
        b.broker.group_coordinator.manager.groups["cg"] = group
        request = m.ConsumerGroupDescribeRequest(group_ids=["cg"], include_authorized_operations=True)

        def describe(user):
            return b.call_as(user, request, 1).groups[0]

        assert describe("alice").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        b.grant("alice", ResourceType.GROUP, "cg", AclOperation.DESCRIBE)
        assert describe("alice").error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert describe("alice").members == []
        b.grant("alice", ResourceType.TOPIC, "t", AclOperation.DESCRIBE)
        shown = describe("alice")
        assert (shown.error_code, shown.group_state, shown.assignor_name) == (0, "Stable", "uniform")
        assert [(t.topic_name, t.partitions) for t in shown.members[0].assignment.topic_partitions] == [("t", [0, 1])]
        assert shown.members[0].member_type == 1
        assert shown.authorized_operations == 1 << AclOperation.DESCRIBE
        # without the consumer protocol, as KafkaApis: every group UNSUPPORTED_VERSION
        b.broker.group_coordinator.config.group_coordinator_rebalance_protocols = ("classic",)
        assert describe("admin").error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        b.close()

