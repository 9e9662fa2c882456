"""ACL enforcement per API, in process: each API family as a principal without the ACL it needs (the
right *_AUTHORIZATION_FAILED), with it (no authorization error), and as a super user (always through).

Requests run through the handlers with a connection-like object carrying the principal and the
client address, as KafkaConnection does for a real client.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Callable

import pytest

from kafkapy.broker.dispatch import HANDLERS, RequestContext
from kafkapy.metadata.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkapy.protocol import messages as m
from kafkapy.protocol.error_codes import ErrorCode
from kafkapy.protocol.headers import RequestHeader
from kafkapy.protocol.records import build_batch
from kafkapy.security.principal import KafkaPrincipal
from tests.broker.inprocess import InProcessBroker

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
TAF, GAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
CAF, XAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
AUTH_ERRORS = {TAF, GAF, CAF, XAF, ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED}
CLIENT_HOST = "10.0.0.1"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@dataclass
class FakeConnection:
    """What the handlers read from a KafkaConnection."""

    principal: KafkaPrincipal
    peer: str
    listener: object = None
    session: object = None


class AclBroker(InProcessBroker):
    """An in-process broker with an authorizer and running group and transaction coordinators (on a loop
    of its own); `call_as` sends a request as a principal from a host."""

    def __init__(self, data_dir, **props):
        single = {"offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 1,
                  "transaction.state.log.replication.factor": 1, "transaction.state.log.num.partitions": 1,
                  "transaction.state.log.min.isr": 1}
        super().__init__(data_dir, **{**single, **props})
        self.loop = asyncio.new_event_loop()
        self.broker.group_coordination.start(self.loop)
        self.broker.transaction_coordination.start(self.loop)
        self.broker.group_coordination.offsets_topic()  # creates __consumer_offsets; this broker coordinates every group
        self.loop.run_until_complete(asyncio.sleep(0.05))

    def call_as(self, user: str, request, version: int, host: str = CLIENT_HOST):
        key = request.API_KEY
        low, high = self.broker.advertised_versions[key]
        assert low <= version <= high, f"version {version} of api key {key} is not advertised ({low}-{high})"
        decoded = type(request).decode(request.encode(version), version)
        connection = FakeConnection(KafkaPrincipal.user(user), f"{host}:50000")
        ctx = RequestContext(self.broker, connection, RequestHeader(key, version, 1, "acl-matrix"))
        response = self.loop.run_until_complete(asyncio.wait_for(HANDLERS[key](ctx, decoded), 10))
        return type(response).decode(response.encode(version), version)

    def close(self) -> None:
        self.broker.transaction_coordinator.close() if hasattr(self.broker.transaction_coordinator, "close") \
            else None
        super().close()
        self.loop.close()

    def grant(self, user: str, rtype: ResourceType, name: str, op: AclOperation, *, pattern=PatternType.LITERAL,
              permission=AclPermissionType.ALLOW, host: str = "*") -> None:
        self.broker.metadata.create_acls([AclBinding(rtype, name, pattern, f"User:{user}", host, op, permission)])

    def revoke_all(self) -> None:
        self.broker.metadata.delete_acls([AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None,
                                                           Op.ANY, AclPermissionType.ANY)])


def error_codes(obj) -> set[int]:
    """Every error code anywhere in a response."""
    found: set[int] = set()
    if isinstance(obj, list):
        for item in obj:
            found |= error_codes(item)
        return found
    for name in getattr(type(obj), "__slots__", ()):
        value = getattr(obj, name, None)
        if name.endswith("error_code") and isinstance(value, int):
            found.add(value)
        elif isinstance(value, list) or hasattr(type(value), "__slots__") and hasattr(value, "encode_parts") is False \
                and getattr(type(value), "__module__", "").startswith("kafkapy.protocol.messages"):
            found |= error_codes(value)
    return found


@pytest.fixture
def acl_broker(tmp_path):
    b = AclBroker(tmp_path, **{"authorizer.class.name": AUTHORIZER, "super.users": "User:admin"})
    b.create_topic("t", 1)
    b.create_topic("t2", 1)
    b.create_topic("secret-1", 1)
    yield b
    b.close()


def _batch() -> bytes:
    return build_batch([(b"k", b"v")])


# (id, request factory, version, the error without ACLs, the ACLs that let it through)
Case = tuple[str, Callable[[], object], int, int, list[tuple[ResourceType, str, AclOperation]]]
CASES: list[Case] = [
    ("produce", lambda: m.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
        name="t", partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=_batch())])]),
     9, TAF, [(TOPIC, "t", Op.WRITE)]),
    ("produce-transactional", lambda: m.ProduceRequest(
        transactional_id="tx", acks=1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
            name="t", partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=_batch())])]),
     9, XAF, [(TXN, "tx", Op.WRITE), (TOPIC, "t", Op.WRITE)]),
    ("fetch", lambda: m.FetchRequest(max_wait_ms=0, min_bytes=0, topics=[m.FetchRequest.FetchTopic(
        topic="t", partitions=[m.FetchRequest.FetchPartition(partition=0, partition_max_bytes=1024)])]),
     12, TAF, [(TOPIC, "t", Op.READ)]),
    ("list-offsets", lambda: m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
        name="t", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]),
     7, TAF, [(TOPIC, "t", Op.DESCRIBE)]),
    ("list-offsets-by-read", lambda: m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
        name="t", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]),
     7, TAF, [(TOPIC, "t", Op.READ)]),  # READ implies DESCRIBE
    ("metadata", lambda: m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="t")],
                                           allow_auto_topic_creation=False), 9, TAF, [(TOPIC, "t", Op.DESCRIBE)]),
    ("metadata-auto-create", lambda: m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="new")],
                                                       allow_auto_topic_creation=True),
     9, TAF, [(TOPIC, "new", Op.DESCRIBE), (TOPIC, "new", Op.CREATE)]),
    ("offset-for-leader-epoch", lambda: m.OffsetForLeaderEpochRequest(
        replica_id=-1, topics=[m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic="t", partitions=[
                m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, leader_epoch=0)])]),
     4, TAF, [(TOPIC, "t", Op.DESCRIBE)]),
    ("offset-commit-group", lambda: m.OffsetCommitRequest(group_id="g", topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]),
     8, GAF, [(GROUP, "g", Op.READ), (TOPIC, "t", Op.READ)]),
    ("offset-commit-topic", lambda: m.OffsetCommitRequest(group_id="g2", topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]),
     8, GAF, [(GROUP, "g2", Op.READ), (TOPIC, "t", Op.READ)]),
    ("offset-fetch", lambda: m.OffsetFetchRequest(group_id="g", topics=[
        m.OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]),
     7, GAF, [(GROUP, "g", Op.DESCRIBE), (TOPIC, "t", Op.DESCRIBE)]),
    ("offset-fetch-v8", lambda: m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id="g", topics=[m.OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]),
     8, GAF, [(GROUP, "g", Op.READ), (TOPIC, "t", Op.READ)]),
    ("offset-delete", lambda: m.OffsetDeleteRequest(group_id="g", topics=[
        m.OffsetDeleteRequest.OffsetDeleteRequestTopic(name="t", partitions=[
            m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]),
     0, GAF, [(GROUP, "g", Op.DELETE)]),  # the topic's READ: test_offset_delete_needs_read_on_the_topic
    ("find-coordinator-group", lambda: m.FindCoordinatorRequest(key="g", key_type=0), 3, GAF,
     [(GROUP, "g", Op.DESCRIBE)]),
    ("find-coordinator-txn", lambda: m.FindCoordinatorRequest(key="tx", key_type=1), 3, XAF,
     [(TXN, "tx", Op.DESCRIBE)]),
    ("find-coordinator-batched", lambda: m.FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]), 4, GAF,
     [(GROUP, "g", Op.READ)]),
    ("join-group", lambda: m.JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                              protocol_type="consumer", protocols=[
                                                  m.JoinGroupRequest.JoinGroupRequestProtocol(name="range")]),
     5, GAF, [(GROUP, "g", Op.READ)]),
    ("sync-group", lambda: m.SyncGroupRequest(group_id="g", generation_id=1, member_id="m"), 3, GAF,
     [(GROUP, "g", Op.READ)]),
    ("heartbeat", lambda: m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), 3, GAF,
     [(GROUP, "g", Op.READ)]),
    ("leave-group", lambda: m.LeaveGroupRequest(group_id="g", members=[
        m.LeaveGroupRequest.MemberIdentity(member_id="m")]), 3, GAF, [(GROUP, "g", Op.READ)]),
    ("describe-groups", lambda: m.DescribeGroupsRequest(groups=["g"]), 5, GAF, [(GROUP, "g", Op.DESCRIBE)]),
    ("delete-groups", lambda: m.DeleteGroupsRequest(groups_names=["g"]), 2, GAF, [(GROUP, "g", Op.DELETE)]),
    ("create-topics-cluster", lambda: m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name="new", num_partitions=1, replication_factor=1)]), 5, TAF,
     [(CLUSTER, "kafka-cluster", Op.CREATE), (TOPIC, "new", Op.DESCRIBE_CONFIGS)]),  # configs shown with it
    ("create-topics-topic", lambda: m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name="new", num_partitions=1, replication_factor=1)]), 5, TAF,
     [(TOPIC, "new", Op.CREATE), (TOPIC, "new", Op.DESCRIBE_CONFIGS)]),
    ("delete-topics", lambda: m.DeleteTopicsRequest(topic_names=["t2"], timeout_ms=1000), 4, TAF,
     [(TOPIC, "t2", Op.DELETE)]),
    ("create-partitions", lambda: m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(
        name="t", count=2, assignments=None)], timeout_ms=1000), 1, TAF, [(TOPIC, "t", Op.ALTER)]),
    ("describe-configs-topic", lambda: m.DescribeConfigsRequest(resources=[
        m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None)]),
     1, TAF, [(TOPIC, "t", Op.DESCRIBE_CONFIGS)]),
    ("describe-configs-topic-by-alter", lambda: m.DescribeConfigsRequest(resources=[
        m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None)]),
     1, TAF, [(TOPIC, "t", Op.ALTER_CONFIGS)]),  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    ("describe-configs-broker", lambda: m.DescribeConfigsRequest(resources=[
        m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None)]),
     1, CAF, [(CLUSTER, "kafka-cluster", Op.DESCRIBE_CONFIGS)]),
    ("alter-configs-topic", lambda: m.AlterConfigsRequest(resources=[m.AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name="t", configs=[m.AlterConfigsRequest.AlterableConfig(
            name="retention.ms", value="100000")])], validate_only=True), 1, TAF, [(TOPIC, "t", Op.ALTER_CONFIGS)]),
    ("incremental-alter-configs-broker", lambda: m.IncrementalAlterConfigsRequest(resources=[
        m.IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=4, resource_name="0", configs=[
            m.IncrementalAlterConfigsRequest.AlterableConfig(name="log.cleaner.backoff.ms", config_operation=0,
                                                             value="20000")])], validate_only=True),
     0, CAF, [(CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS)]),
    ("delete-records", lambda: m.DeleteRecordsRequest(topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name="t", partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=0)])],
        timeout_ms=1000), 2, TAF, [(TOPIC, "t", Op.DELETE)]),
    ("init-producer-id-idempotent", lambda: m.InitProducerIdRequest(transactional_id=None), 4, CAF,
     [(CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE)]),
    ("init-producer-id-idempotent-by-topic-write", lambda: m.InitProducerIdRequest(transactional_id=None), 4, CAF,
     [(TOPIC, "t", Op.WRITE)]),
    ("init-producer-id-transactional", lambda: m.InitProducerIdRequest(transactional_id="tx",
                                                                       transaction_timeout_ms=10000),
     4, XAF, [(TXN, "tx", Op.WRITE)]),
    ("add-partitions-to-txn", lambda: m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])]),
     3, XAF, [(TXN, "tx", Op.WRITE), (TOPIC, "t", Op.WRITE)]),
    ("add-partitions-to-txn-broker", lambda: m.AddPartitionsToTxnRequest(transactions=[
        m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=1, producer_epoch=0, verify_only=True,
            topics=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])])]),
     4, CAF, [(CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)]),
    ("add-offsets-to-txn", lambda: m.AddOffsetsToTxnRequest(transactional_id="tx", producer_id=1, producer_epoch=0,
                                                            group_id="g"),
     3, XAF, [(TXN, "tx", Op.WRITE), (GROUP, "g", Op.READ)]),
    ("end-txn", lambda: m.EndTxnRequest(transactional_id="tx", producer_id=1, producer_epoch=0, committed=True),
     3, XAF, [(TXN, "tx", Op.WRITE)]),
    ("txn-offset-commit", lambda: m.TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, topics=[
            m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="t", partitions=[
                m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]),
     3, XAF, [(TXN, "tx", Op.WRITE), (GROUP, "g", Op.READ), (TOPIC, "t", Op.READ)]),
    ("write-txn-markers", lambda: m.WriteTxnMarkersRequest(markers=[m.WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[m.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="t", partition_indexes=[0])])]),
     1, CAF, [(CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)]),
    ("describe-transactions", lambda: m.DescribeTransactionsRequest(transactional_ids=["tx"]), 0, XAF,
     [(TXN, "tx", Op.DESCRIBE)]),
    ("describe-producers", lambda: m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
        name="t", partition_indexes=[0])]), 0, TAF, [(TOPIC, "t", Op.READ)]),
    ("describe-acls", lambda: m.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                                    pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                    operation=1, permission_type=1),
     3, CAF, [(CLUSTER, "kafka-cluster", Op.DESCRIBE)]),
    ("create-acls", lambda: m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
        resource_type=2, resource_name="x", resource_pattern_type=3, principal="User:bob", host="*", operation=3,
        permission_type=3)]), 3, CAF, [(CLUSTER, "kafka-cluster", Op.ALTER)]),
    ("delete-acls", lambda: m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=2, resource_name_filter="x", pattern_type_filter=3, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)]), 3, CAF, [(CLUSTER, "kafka-cluster", Op.ALTER)]),
    ("describe-log-dirs", lambda: m.DescribeLogDirsRequest(topics=None), 3, CAF,
     [(CLUSTER, "kafka-cluster", Op.DESCRIBE)]),
    ("alter-replica-log-dirs", lambda: m.AlterReplicaLogDirsRequest(dirs=[
        m.AlterReplicaLogDirsRequest.AlterReplicaLogDir(path="/nonexistent", topics=[
            m.AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name="t", partitions=[0])])]),
     2, CAF, [(CLUSTER, "kafka-cluster", Op.ALTER)]),
    ("elect-leaders", lambda: m.ElectLeadersRequest(election_type=0, topic_partitions=[
        m.ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0])], timeout_ms=1000), 2, CAF,
     [(CLUSTER, "kafka-cluster", Op.ALTER)]),
    ("alter-partition-reassignments", lambda: m.AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[
        m.AlterPartitionReassignmentsRequest.ReassignableTopic(name="t", partitions=[
            m.AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=None)])]),
     0, CAF, [(CLUSTER, "kafka-cluster", Op.ALTER)]),
    ("list-partition-reassignments", lambda: m.ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None), 0,
     CAF, [(CLUSTER, "kafka-cluster", Op.DESCRIBE)]),
    ("describe-topic-partitions", lambda: m.DescribeTopicPartitionsRequest(topics=[
        m.DescribeTopicPartitionsRequest.TopicRequest(name="t")]), 0, TAF, [(TOPIC, "t", Op.DESCRIBE)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_api_needs_its_acl(acl_broker, case):
    _, make, version, denied_code, grants = case
    # without any ACL: the API's authorization error
    assert denied_code in error_codes(acl_broker.call_as("alice", make(), version))
    # with only part of what it needs (when it needs several): still refused
    for missing in range(len(grants)):
        acl_broker.revoke_all()
        for i, (rtype, name, op) in enumerate(grants):
            if i != missing:
                acl_broker.grant("alice", rtype, name, op)
        assert error_codes(acl_broker.call_as("alice", make(), version)) & AUTH_ERRORS, \
            f"allowed without {grants[missing]}"
    # with every ACL it needs: no authorization error (whatever else the request meets)
    acl_broker.revoke_all()
    for rtype, name, op in grants:
        acl_broker.grant("alice", rtype, name, op)
    assert not error_codes(acl_broker.call_as("alice", make(), version)) & AUTH_ERRORS
    # another principal is not helped by alice's ACLs; a super user needs none
    assert denied_code in error_codes(acl_broker.call_as("bob", make(), version))
    acl_broker.revoke_all()
    assert not error_codes(acl_broker.call_as("admin", make(), version)) & AUTH_ERRORS


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_without_an_authorizer_nothing_is_checked(tmp_path, case):
    b = AclBroker(tmp_path)
    b.create_topic("t", 1)
    b.create_topic("t2", 1)
    try:
        _, make, version, _, _ = case
        assert not error_codes(b.call_as("alice", make(), version)) & AUTH_ERRORS
    finally:
        b.close()


def _produce(topic: str):
    return m.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=_batch())])])


def _fetch(topic: str):
    return m.FetchRequest(max_wait_ms=0, min_bytes=0, topics=[m.FetchRequest.FetchTopic(
        topic=topic, partitions=[m.FetchRequest.FetchPartition(partition=0, partition_max_bytes=1024)])])


def test_prefixed_allow_and_deny_as_kafka(acl_broker):
    acl_broker.grant("alice", TOPIC, "*", Op.ALL)
    acl_broker.grant("alice", TOPIC, "secret-", Op.READ, pattern=PatternType.PREFIXED,
                     permission=AclPermissionType.DENY)
    assert error_codes(acl_broker.call_as("alice", _fetch("t"), 12)) == {0}
    assert TAF in error_codes(acl_broker.call_as("alice", _fetch("secret-1"), 12))
    assert error_codes(acl_broker.call_as("alice", _produce("secret-1"), 9)) == {0}  # only READ is denied
    acl_broker.revoke_all()
    acl_broker.grant("bob", TOPIC, "t", Op.WRITE, pattern=PatternType.PREFIXED)
    assert error_codes(acl_broker.call_as("bob", _produce("t2"), 9)) == {0}
    assert TAF in error_codes(acl_broker.call_as("bob", _produce("secret-1"), 9))


def test_produce_creates_a_topic_only_with_create(acl_broker):
    acl_broker.grant("alice", TOPIC, "new-", Op.WRITE, pattern=PatternType.PREFIXED)
    assert error_codes(acl_broker.call_as("alice", _produce("new-1"), 9)) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert acl_broker.broker.partitions.topic("new-1") is None
    acl_broker.grant("alice", TOPIC, "new-", Op.CREATE, pattern=PatternType.PREFIXED)
    assert error_codes(acl_broker.call_as("alice", _produce("new-1"), 9)) == {0}


def test_wildcard_principal_and_hosts(acl_broker):
    acl_broker.grant("*", TOPIC, "t", Op.READ)
    acl_broker.grant("alice", TOPIC, "t2", Op.READ, host="10.0.0.2")
    assert error_codes(acl_broker.call_as("anyone", _fetch("t"), 12)) == {0}
    assert TAF in error_codes(acl_broker.call_as("alice", _fetch("t2"), 12, host="10.0.0.1"))
    assert error_codes(acl_broker.call_as("alice", _fetch("t2"), 12, host="10.0.0.2")) == {0}


def test_metadata_hides_what_cannot_be_described_and_reports_operations(acl_broker):
    acl_broker.grant("alice", TOPIC, "t", Op.READ)
    acl_broker.grant("alice", CLUSTER, "kafka-cluster", Op.DESCRIBE)
    response = acl_broker.call_as("alice", m.MetadataRequest(topics=None, include_topic_authorized_operations=True,
                                                             include_cluster_authorized_operations=True), 10)
    assert [t.name for t in response.topics] == ["t"]
    assert response.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert response.cluster_authorized_operations == 1 << Op.DESCRIBE
    response = acl_broker.call_as("admin", m.MetadataRequest(topics=None, include_topic_authorized_operations=True), 9)
    assert sorted(t.name for t in response.topics if not t.name.startswith("__")) == ["secret-1", "t", "t2"]
    assert {t.topic_authorized_operations for t in response.topics} == {0b0000_1101_1111_1000}
    described = acl_broker.call_as("alice", m.DescribeClusterRequest(include_cluster_authorized_operations=True), 0)
    assert described.cluster_authorized_operations == 1 << Op.DESCRIBE


def test_list_groups_shows_only_describable_groups(acl_broker):
    listed = acl_broker.call_as("alice", m.ListGroupsRequest(), 4)
    assert listed.error_code in (0, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
    assert listed.groups == []


def test_acl_changes_take_effect_on_the_next_request(acl_broker):
    assert TAF in error_codes(acl_broker.call_as("alice", _fetch("t"), 12))
    acl_broker.grant("alice", TOPIC, "t", Op.READ)
    assert error_codes(acl_broker.call_as("alice", _fetch("t"), 12)) == {0}
    acl_broker.revoke_all()
    assert TAF in error_codes(acl_broker.call_as("alice", _fetch("t"), 12))


def test_allow_everyone_if_no_acl_found(tmp_path):
    b = AclBroker(tmp_path, **{"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"})
    b.create_topic("t", 1)
    b.create_topic("t2", 1)
    try:
        assert error_codes(b.call_as("alice", _fetch("t"), 12)) == {0}
        b.grant("bob", TOPIC, "t", Op.READ)  # now t has an ACL, and it is not alice's
        assert TAF in error_codes(b.call_as("alice", _fetch("t"), 12))
        assert error_codes(b.call_as("alice", _fetch("t2"), 12)) == {0}
    finally:
        b.close()


def test_offset_delete_needs_read_on_the_topic(acl_broker):
    commit = m.OffsetCommitRequest(group_id="g", topics=[m.OffsetCommitRequest.OffsetCommitRequestTopic(
        name="t", partitions=[m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0,
                                                                                 committed_offset=0)])])
    assert error_codes(acl_broker.call_as("admin", commit, 8)) == {0}
    delete = m.OffsetDeleteRequest(group_id="g", topics=[m.OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name="t", partitions=[m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
    acl_broker.grant("alice", GROUP, "g", Op.DELETE)
    assert error_codes(acl_broker.call_as("alice", delete, 0)) == {0, TAF}
    acl_broker.grant("alice", TOPIC, "t", Op.READ)
    assert error_codes(acl_broker.call_as("alice", delete, 0)) == {0}


def test_in_process_calls_without_a_connection_are_not_checked(acl_broker):
    assert error_codes(acl_broker.call(_fetch("t"), 12)) == {0}


_ = uuid  # topic ids are not needed here
