"""ACL and replica-management admin APIs with real clients: confluent-kafka (librdkafka) and kafka-python.

confluent-kafka drives CreateAcls/DescribeAcls/DeleteAcls and ElectLeaders; kafka-python (which
confluent-kafka lacks these for) drives AlterPartitionReassignments, ListPartitionReassignments,
DescribeLogDirs and AlterReplicaLogDirs.
"""

from __future__ import annotations

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed: pip install -e '.[test]'")
kafka = pytest.importorskip("kafka", reason="!!! kafka-python not installed: pip install -e '.[test]'")

from confluent_kafka import KafkaError, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka import ElectionType  # noqa: E402
from kafka import KafkaAdminClient  # noqa: E402
from kafka import errors as kafka_errors  # noqa: E402
from kafka.structs import TopicPartition as KpTopicPartition  # noqa: E402
from kafka.structs import TopicPartitionReplica  # noqa: E402

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    # enforcement is on with an authorizer: the test client (User:ANONYMOUS) is a super user
    return {"broker.id": "0", "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "kafkapy-acl-conformance"})


@pytest.fixture
def kp_admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kafkapy-replicas-conformance",
                              request_timeout_ms=TIMEOUT_S * 1000)
    yield client
    client.close()


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)


def results(futures: dict) -> dict:
    return {key: future.result(timeout=TIMEOUT_S) for key, future in futures.items()}


def test_acls_with_librdkafka(admin, topic_name):
    read = AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)
    prefixed = AclBinding(ResourceType.TOPIC, topic_name[:5], ResourcePatternType.PREFIXED, "User:bob", "*",
                          AclOperation.WRITE, AclPermissionType.DENY)
    group = AclBinding(ResourceType.GROUP, "g-" + topic_name, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    assert results(admin.create_acls([read, prefixed, group], request_timeout=TIMEOUT_S)) == \
        {read: None, prefixed: None, group: None}

    on_topic = AclBindingFilter(ResourceType.TOPIC, topic_name, ResourcePatternType.MATCH, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(on_topic, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert sorted(found, key=str) == sorted([read, prefixed], key=str)

    delete_alice = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    deleted = results(admin.delete_acls([delete_alice], request_timeout=TIMEOUT_S))[delete_alice]
    assert sorted(deleted, key=str) == sorted([read, group], key=str)
    left = admin.describe_acls(on_topic, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert left == [prefixed]


def test_invalid_acl_is_refused_by_the_broker(admin, topic_name):
    cluster = AclBinding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, "User:a", "*",
                         AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as info:
        admin.create_acls([cluster], request_timeout=TIMEOUT_S)[cluster].result(timeout=TIMEOUT_S)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_acl_apis_without_an_authorizer_answer_security_disabled(broker_factory, topic_name):
    plain = broker_factory({"broker.id": "0"})
    client = AdminClient({"bootstrap.servers": plain.bootstrap})
    acl = AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:a", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as info:
        client.create_acls([acl], request_timeout=TIMEOUT_S)[acl].result(timeout=TIMEOUT_S)
    assert info.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # (librdkafka's describe_acls reports an empty list for a failed DescribeAcls; kafka-python shows the error.)
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern
    from kafka.admin import ResourceType as KpResourceType
    client = KafkaAdminClient(bootstrap_servers=plain.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        with pytest.raises(kafka_errors.SecurityDisabledError):
            client.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                           permission_type=ACLPermissionType.ANY,
                                           resource_pattern=ResourcePattern(KpResourceType.TOPIC, topic_name)))
    finally:
        client.close()


def test_elect_leaders_with_librdkafka(admin, topic_name):
    create_topic(admin, topic_name, 2)
    partitions = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1), TopicPartition(topic_name, 7)]
    outcome = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(
        timeout=TIMEOUT_S)
    codes = {(tp.topic, tp.partition): (error.code() if error is not None else None) for tp, error in outcome.items()}
    assert codes == {(topic_name, 0): KafkaError.ELECTION_NOT_NEEDED, (topic_name, 1): KafkaError.ELECTION_NOT_NEEDED,
                     (topic_name, 7): KafkaError.UNKNOWN_TOPIC_OR_PART}
    # All partitions: only those where an election happened are reported, i.e. none on one broker.
    everything = admin.elect_leaders(ElectionType.UNCLEAN, None).result(timeout=TIMEOUT_S)
    assert everything == {}


def test_partition_reassignments_with_kafka_python(admin, kp_admin, topic_name):
    create_topic(admin, topic_name, 2)
    tp0, tp1, missing = KpTopicPartition(topic_name, 0), KpTopicPartition(topic_name, 1), KpTopicPartition(topic_name, 9)
    assert kp_admin.alter_partition_reassignments({tp0: [0]}) == {tp0: None}
    assert kp_admin.alter_partition_reassignments({tp0: [3], tp1: None, missing: [0]}) == {
        tp0: kafka_errors.InvalidReplicationAssignmentError, tp1: kafka_errors.NoReassignmentInProgressError,
        missing: kafka_errors.UnknownTopicOrPartitionError}
    assert kp_admin.list_partition_reassignments() == {}
    assert kp_admin.list_partition_reassignments([tp0, tp1]) == {}


def test_alter_replica_log_dirs_with_kafka_python(admin, kp_admin, topic_name):
    create_topic(admin, topic_name, 1)
    described = kp_admin.describe_log_dirs()
    log_dir = described[0]["log_dirs"][0]["log_dir"]
    here, missing, elsewhere = (TopicPartitionReplica(topic_name, 0, 0), TopicPartitionReplica(topic_name, 5, 0),
                                TopicPartitionReplica(topic_name + "-x", 0, 0))
    assert kp_admin.alter_replica_log_dirs({here: log_dir, missing: log_dir}) == {
        here: kafka_errors.NoError, missing: kafka_errors.ReplicaNotAvailableError}
    assert kp_admin.alter_replica_log_dirs({elsewhere: "/no/such/log/dir"}) == {
        elsewhere: kafka_errors.LogDirNotFoundError}
