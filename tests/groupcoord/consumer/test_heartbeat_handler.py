"""The ConsumerGroupHeartbeat handler on an in-process broker: ACL checks as KafkaApis does them,
topic ids on the wire, the broker's topic view following topic changes, the protocol switch."""
from __future__ import annotations

from kafkapy.metadata.acls import AclOperation, ResourceType
from kafkapy.protocol import messages as m
from kafkapy.protocol.error_codes import ErrorCode
from tests.security.test_acl_matrix import AUTHORIZER, AclBroker


def join(member_id: str, topics=("t",), epoch: int = 0, owned=None):
    return m.ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=30000 if epoch == 0 else -1,
        subscribed_topic_names=list(topics) if epoch == 0 else None,
        topic_partitions=[] if owned is None else owned)


def test_acls_topic_ids_and_topic_changes(tmp_path):
    b = AclBroker(tmp_path, **{"authorizer.class.name": AUTHORIZER, "super.users": "User:admin"})
    try:
        b.create_topic("t", 2)
        topic_id = b.broker.partitions.topic("t").topic_id
        assert b.call_as("alice", join("m-1"), 1).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        b.grant("alice", ResourceType.GROUP, "cg", AclOperation.READ)
        denied = b.call_as("alice", join("m-1"), 1)
        assert denied.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and "t" in denied.error_message
        assert "cg" not in b.broker.group_coordinator.manager.groups  # nothing was created
        b.grant("alice", ResourceType.TOPIC, "t", AclOperation.DESCRIBE)
        joined = b.call_as("alice", join("m-1"), 1)
        assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, "m-1", 1)
        assert joined.heartbeat_interval_ms == 5000
        assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == [(topic_id, [0, 1])]
        owned = [m.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=[0, 1])]
        quiet = b.call_as("alice", join("m-1", epoch=1, owned=owned), 1)
        assert (quiet.error_code, quiet.member_epoch, quiet.assignment) == (0, 1, None)
        # more partitions: the topic view moves, the next heartbeat brings a new epoch with them
        b.broker.metadata.create_partitions("t", 3)
        grown = b.call_as("alice", join("m-1", epoch=1, owned=owned), 1)
        assert grown.member_epoch == 2
        assert [tp.partitions for tp in grown.assignment.topic_partitions] == [[0, 1, 2]]
        # v0: the coordinator makes the member id
        v0 = b.call_as("alice", join(""), 0)
        assert v0.error_code == 0 and len(v0.member_id) == 22
        # v1 needs the client's member id
        assert b.call_as("alice", join(""), 1).error_code == ErrorCode.INVALID_REQUEST
    finally:
        b.close()


def test_consumer_protocol_disabled(tmp_path):
    b = AclBroker(tmp_path, **{"group.coordinator.rebalance.protocols": "classic"})
    try:
        b.create_topic("t", 1)
        # not advertised (as Kafka); a client that sends it anyway is still refused by the handler
        assert 68 not in b.broker.advertised_versions and 69 not in b.broker.advertised_versions
        b.broker.advertised_versions[68] = (0, 1)
        assert b.call_as("alice", join("m-1"), 1).error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        b.close()
