"""ACL enforcement against a real broker process, with confluent-kafka (librdkafka) clients.

One broker with `authorizer.class.name=kafka.security.authorizer.AclAuthorizer` and two listeners:
SASL_PLAINTEXT with PLAIN users admin (a super user), alice and bob, and PLAINTEXT (User:ANONYMOUS).
The admin creates the ACLs with the AdminClient; alice and bob produce, consume and administer
with and without them and get Kafka's errors: TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka",
                                      reason="!!! confluent-kafka not installed: pip install -e '.[test]'")

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # noqa: E402
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

from conformance.broker_process import free_port, start_broker  # noqa: E402

pytestmark = pytest.mark.timeout(180)

PASSWORDS = {"admin": "admin-Pw-31f0", "alice": "alice-Pw-8d2a", "bob": "bob-Pw-55c1"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
        "password=\"admin-Pw-31f0\" " + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
TIMEOUT_S = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    settings = {
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "broker.id": "0",
    }
    b = start_broker(settings, work_dir=tmp_path_factory.mktemp("acl-broker"), port=ports["PLAINTEXT"])
    b.ports = ports
    try:
        yield b
    finally:
        _ADMINS.clear()
        b.close()


def conf(broker, user: str | None, **extra) -> dict:
    """Client settings: `user` over SASL PLAIN, or None for the PLAINTEXT listener (User:ANONYMOUS)."""
    if user is None:
        base = {"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"}
    else:
        base = {"bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": PASSWORDS[user]}
    return {**base, "client.id": f"acl-{user or 'anonymous'}", **extra}


_ADMINS: dict[tuple[int, str | None], AdminClient] = {}


def admin(broker, user: str | None = "admin") -> AdminClient:
    """One AdminClient per broker and user, kept alive (a collected client fails its pending futures)."""
    key = (id(broker), user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(conf(broker, user))
    return _ADMINS[key]


def error_of(future) -> int | None:
    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0].code()
    return None


def create_acls(broker, *bindings: AclBinding) -> None:
    for future in admin(broker).create_acls(list(bindings), request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)
    time.sleep(0.1)


def allow(user: str, rtype: ResourceType, name: str, op: AclOperation,
          pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, permission)


def produce(broker, user: str | None, topic: str, count: int = 5, **extra) -> list:
    """Produce `count` records; the delivery errors (codes), None for each success."""
    producer = Producer(conf(broker, user, **{"message.timeout.ms": 8000, **extra}))
    results: list = []
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(),
                         on_delivery=lambda err, msg: results.append(err.code() if err else None))
    producer.flush(TIMEOUT_S)
    return results


def consume(broker, user: str | None, topic: str, group: str, want: int) -> tuple[int, set[int]]:
    """(records read, error codes seen) within the timeout."""
    consumer = Consumer(conf(broker, user, **{"group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    read, errors = 0, set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline and read < want:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    errors.add(msg.error().code())
                    if msg.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                              KafkaError.TOPIC_AUTHORIZATION_FAILED):
                        break
                continue
            read += 1
    finally:
        consumer.close()
    return read, errors


@pytest.fixture
def names():
    tag = uuid.uuid4().hex[:8]
    return {"topic": f"acl-t-{tag}", "secret": f"acl-t-{tag}-secret", "group": f"acl-g-{tag}",
            "other": f"other-{tag}"}


def test_super_user_does_everything_and_others_nothing_without_acls(broker, names):
    admin_client = admin(broker)
    for future in admin_client.create_topics([NewTopic(names["topic"], 1, 1)], operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)
    assert produce(broker, "admin", names["topic"]) == [None] * 5
    assert produce(broker, "bob", names["topic"], count=1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert produce(broker, None, names["topic"], count=1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # admin APIs: cluster DESCRIBE / ALTER, topic CREATE
    filter_all = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    # (librdkafka's describe_acls hides the response's top-level error: kafka-python shows it)
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    bob = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
                           security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="bob",
                           sasl_plain_password=PASSWORDS["bob"])
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                        permission_type=ACLPermissionType.ANY,
                                        resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                                               ACLResourcePatternType.ANY)))
    finally:
        bob.close()
    assert error_of(admin(broker).describe_acls(filter_all, request_timeout=TIMEOUT_S)) is None
    created = admin(broker, "bob").create_acls([allow("bob", ResourceType.TOPIC, "*", AclOperation.ALL)],
                                              request_timeout=TIMEOUT_S)
    assert [error_of(f) for f in created.values()] == [KafkaError.CLUSTER_AUTHORIZATION_FAILED]
    made = admin(broker, "bob").create_topics([NewTopic(names["other"], 1, 1)], operation_timeout=10)
    assert [error_of(f) for f in made.values()] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_prefixed_allow_a_deny_and_a_group(broker, names):
    admin_client = admin(broker)
    for future in admin_client.create_topics([NewTopic(names["topic"], 1, 1), NewTopic(names["secret"], 1, 1)],
                                             operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)
    prefix = names["topic"]
    create_acls(broker,
                allow("alice", ResourceType.TOPIC, prefix, AclOperation.WRITE, ResourcePatternType.PREFIXED),
                allow("alice", ResourceType.TOPIC, prefix, AclOperation.READ, ResourcePatternType.PREFIXED),
                allow("alice", ResourceType.GROUP, names["group"], AclOperation.READ),
                allow("alice", ResourceType.TOPIC, names["secret"], AclOperation.READ,
                      permission=AclPermissionType.DENY))
    assert produce(broker, "alice", names["topic"]) == [None] * 5
    assert produce(broker, "alice", names["secret"]) == [None] * 5  # only READ is denied there
    read, errors = consume(broker, "alice", names["topic"], names["group"], 5)
    assert (read, errors) == (5, set())
    read, errors = consume(broker, "alice", names["secret"], names["group"], 5)
    assert read == 0 and KafkaError.TOPIC_AUTHORIZATION_FAILED in errors
    # a group alice has no ACL for
    read, errors = consume(broker, "alice", names["topic"], names["group"] + "-x", 5)
    assert read == 0 and KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    # bob has none of it
    assert produce(broker, "bob", names["topic"], count=1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    read, errors = consume(broker, "bob", names["topic"], names["group"], 5)
    assert read == 0 and errors & {KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_idempotent_and_transactional_producers(broker, names):
    for future in admin(broker).create_topics([NewTopic(names["topic"], 1, 1)], operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)
    create_acls(broker, allow("alice", ResourceType.TOPIC, names["topic"], AclOperation.WRITE))
    # WRITE on a topic is enough for InitProducerId without IDEMPOTENT_WRITE (Kafka 3.x)
    assert produce(broker, "alice", names["topic"], **{"enable.idempotence": True}) == [None] * 5
    # a transactional producer needs WRITE on its transactional id
    txn = f"txn-{names['topic']}"
    producer = Producer(conf(broker, "alice", **{"transactional.id": txn, "transaction.timeout.ms": 10000}))
    with pytest.raises(KafkaException) as denied:
        producer.init_transactions(TIMEOUT_S)
    assert denied.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    create_acls(broker, allow("alice", ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE),
                allow("alice", ResourceType.TRANSACTIONAL_ID, txn, AclOperation.DESCRIBE))
    producer = Producer(conf(broker, "alice", **{"transactional.id": txn, "transaction.timeout.ms": 10000}))
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(names["topic"], b"in-txn")
    producer.commit_transaction(TIMEOUT_S)


def test_anonymous_on_plaintext_is_granted_and_denied_by_acls(broker, names):
    for future in admin(broker).create_topics([NewTopic(names["topic"], 1, 1)], operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)
    assert produce(broker, None, names["topic"], count=1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    create_acls(broker, allow("ANONYMOUS", ResourceType.TOPIC, names["topic"], AclOperation.WRITE))
    assert produce(broker, None, names["topic"]) == [None] * 5
    # a DENY for everyone wins over the ALLOW
    create_acls(broker, AclBinding(ResourceType.TOPIC, names["topic"], ResourcePatternType.LITERAL, "User:*", "*",
                                   AclOperation.ALL, AclPermissionType.DENY))
    assert produce(broker, None, names["topic"], count=1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # deleting the DENY takes effect at once
    deleted = admin(broker).delete_acls([AclBindingFilter(
        ResourceType.TOPIC, names["topic"], ResourcePatternType.LITERAL, "User:*", None, AclOperation.ANY,
        AclPermissionType.DENY)], request_timeout=TIMEOUT_S)
    for future in deleted.values():
        assert len(future.result(timeout=TIMEOUT_S)) == 1
    assert produce(broker, None, names["topic"]) == [None] * 5


def test_metadata_lists_only_describable_topics(broker, names):
    for future in admin(broker).create_topics([NewTopic(names["topic"], 1, 1), NewTopic(names["other"], 1, 1)],
                                              operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)
    create_acls(broker, allow("bob", ResourceType.TOPIC, names["other"], AclOperation.DESCRIBE))
    listed = set(admin(broker, "bob").list_topics(timeout=TIMEOUT_S).topics)
    assert names["other"] in listed and names["topic"] not in listed
    assert {names["topic"], names["other"]} <= set(admin(broker).list_topics(timeout=TIMEOUT_S).topics)


# -- cluster mode: the brokers' principal is a super user; ACLs live in ZooKeeper -----------------------

def test_cluster_enforces_acls_written_through_any_broker(tmp_path, names):
    """Two brokers (ZooKeeper mode) talking PLAINTEXT to each other as User:ANONYMOUS, which super.users
    names (their LeaderAndIsr, UpdateMetadata, follower fetches and AlterPartition need CLUSTER_ACTION);
    clients on a SASL_PLAINTEXT listener. ACLs the admin creates through the cluster are enforced by both
    brokers: alice's acks=all produce to an RF=2 topic with a partition led by each broker succeeds
    only once she has WRITE, and her consumer reads everything back; bob stays refused."""
    from conformance.cluster_harness import wait_for_isr, wait_until
    from kafkapy.devcluster.brokers import LocalCluster
    from kafkapy.devcluster.zookeeper import JavaZooKeeper

    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available, cluster tests cannot run: {reason}")
    cluster = LocalCluster(tmp_path, brokers=2, overrides={
        "inter.broker.listener.name": "PLAINTEXT", "default.replication.factor": "2",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin"})
    sasl_ports = {broker_id: free_port() for broker_id in cluster.brokers}
    for broker_id, node in cluster.brokers.items():
        listeners = f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{sasl_ports[broker_id]}"
        node.overrides.update({"listeners": listeners, "advertised.listeners": listeners,
                               "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"})
    try:
        cluster.start(90)

        class Ports:  # what conf() reads
            ports = {"SASL_PLAINTEXT": ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())}

        def sasl_conf(user: str, **extra) -> dict:
            settings = conf(Ports, user, **extra)
            settings["bootstrap.servers"] = Ports.ports["SASL_PLAINTEXT"]
            return settings

        admin_client = AdminClient(sasl_conf("admin"))
        topic = names["topic"]
        wait_until(lambda: admin_client.create_topics([NewTopic(topic, 2, 2)])[topic].result(30) is None, 60,
                   ignore=(Exception,), message="topic created")
        wait_for_isr(cluster, topic, 2)

        def produce_as(user: str, count: int) -> list:
            producer = Producer(sasl_conf(user, **{"acks": "all", "message.timeout.ms": 10000}))
            results: list = []
            for i in range(count):
                producer.produce(topic, f"{user}-{i}".encode(), partition=i % 2,
                                 on_delivery=lambda err, msg: results.append(err.code() if err else None))
            producer.flush(TIMEOUT_S)
            return results

        assert set(produce_as("alice", 2)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
        for future in admin_client.create_acls([
                allow("alice", ResourceType.TOPIC, topic, AclOperation.WRITE),
                allow("alice", ResourceType.TOPIC, topic, AclOperation.READ),
                allow("alice", ResourceType.GROUP, names["group"], AclOperation.READ)],
                request_timeout=TIMEOUT_S).values():
            future.result(timeout=TIMEOUT_S)
        # every broker follows the ZooKeeper change notifications
        wait_until(lambda: produce_as("alice", 2) == [None, None], 30, message="alice allowed on both brokers")
        assert produce_as("alice", 20) == [None] * 20
        assert set(produce_as("bob", 2)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
        consumer = Consumer(sasl_conf("alice", **{"group.id": names["group"], "auto.offset.reset": "earliest"}))
        consumer.subscribe([topic])
        read = 0
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while read < 22 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    read += 1
        finally:
            consumer.close()
        assert read == 22
        for node in cluster.brokers.values():
            assert "Denied Operation = CLUSTER_ACTION" not in node.log_tail(500)
    finally:
        cluster.stop()


def test_cluster_brokers_without_cluster_action_are_refused(tmp_path):
    """As with Kafka: when super.users leaves out the brokers' principal, the controller's requests to
    the other broker are refused (CLUSTER_AUTHORIZATION_FAILED, one INFO line per refusal)."""
    from conformance.cluster_harness import wait_until
    from kafkapy.devcluster.brokers import LocalCluster
    from kafkapy.devcluster.zookeeper import JavaZooKeeper

    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available, cluster tests cannot run: {reason}")
    cluster = LocalCluster(tmp_path, brokers=2, overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
        "controlled.shutdown.enable": "false"})  # it would be refused too, and retried
    try:
        # start() waits (until its deadline) for every broker to know the controller, which the refused
        # UpdateMetadata never tells one of them
        cluster.start(20)
        wait_until(lambda: any("Principal = User:ANONYMOUS is Denied Operation = CLUSTER_ACTION" in node.log_tail(500)
                               for node in cluster.brokers.values()), 30,
                   message="a broker refused the other's inter-broker request")
    finally:
        cluster.stop()


def _wire_call(conn, request, version: int, response_cls, correlation_id: int = 1):
    from kafkapy.protocol.headers import decode_response_header, encode_request_header
    from conformance.kafka_wire import frame
    payload = encode_request_header(request.API_KEY, version, correlation_id, "acl-share") + b"".join(
        bytes(p) for p in request.encode_parts(version))
    raw = conn.roundtrip(frame(payload))
    _, pos = decode_response_header(raw, request.API_KEY, version)
    return response_cls.decode(raw, version, pos)


def test_share_group_apis_are_authorized_as_kafka_does(broker, names):
    """The share group APIs (KIP-932) for User:ANONYMOUS without ACLs: GROUP_AUTHORIZATION_FAILED
    on each; with READ on the group, the topics are checked (DESCRIBE for the heartbeat's
    subscription, READ for fetches) and DeleteShareGroupOffsets still needs DELETE on the group."""
    from conformance.kafka_wire import RawConnection
    from kafkapy.protocol.messages import (
        AlterShareGroupOffsetsRequest as A, AlterShareGroupOffsetsResponse,
        DeleteShareGroupOffsetsRequest as D, DeleteShareGroupOffsetsResponse,
        DescribeShareGroupOffsetsRequest as O, DescribeShareGroupOffsetsResponse,
        ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
        ShareGroupDescribeRequest, ShareGroupDescribeResponse,
        ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse)
    topic, group = names["topic"], names["group"]
    for future in admin(broker).create_topics([NewTopic(topic, 1, 1)], operation_timeout=10).values():
        future.result(timeout=TIMEOUT_S)
    member = uuid.uuid4().hex
    GAF, TAF = KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED

    def heartbeat(conn):
        return _wire_call(conn, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                           subscribed_topic_names=[topic]),
                          1, ShareGroupHeartbeatResponse).error_code

    def delete_offsets(conn):
        return _wire_call(conn, D(group_id=group, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)]),
                          0, DeleteShareGroupOffsetsResponse).error_code

    def alter(conn):
        return _wire_call(conn, A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]),
            0, AlterShareGroupOffsetsResponse).error_code

    with RawConnection(f"127.0.0.1:{broker.ports['PLAINTEXT']}") as conn:
        assert heartbeat(conn) == GAF
        fetch = ShareFetchRequest(group_id=group, member_id=member, share_session_epoch=0, max_wait_ms=0, min_bytes=1,
                                  max_bytes=1 << 20, max_records=10, batch_size=10, topics=[])
        assert _wire_call(conn, fetch, 1, ShareFetchResponse).error_code == GAF
        ack = ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=1, topics=[])
        assert _wire_call(conn, ack, 1, ShareAcknowledgeResponse).error_code == GAF
        [described] = _wire_call(conn, ShareGroupDescribeRequest(group_ids=[group]), 1,
                                 ShareGroupDescribeResponse).groups
        assert described.error_code == GAF
        [offsets] = _wire_call(conn, O(groups=[O.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]),
                               1, DescribeShareGroupOffsetsResponse).groups
        assert offsets.error_code == GAF
        assert alter(conn) == GAF
        assert delete_offsets(conn) == GAF

        create_acls(broker, allow("ANONYMOUS", ResourceType.GROUP, group, AclOperation.READ))
        assert heartbeat(conn) == TAF  # the subscribed topic needs DESCRIBE
        # authorized: the coordinator is checked next; as in Kafka 4.4, altering the offsets of a share group
        # nobody joined creates the (empty) group, so NONE once the coordinator is loaded
        past_acls = (KafkaError.NO_ERROR, KafkaError.GROUP_ID_NOT_FOUND, KafkaError.NOT_COORDINATOR,
                     KafkaError.COORDINATOR_NOT_AVAILABLE)
        assert alter(conn) in past_acls
        assert delete_offsets(conn) == GAF  # needs DELETE on the group
        create_acls(broker, allow("ANONYMOUS", ResourceType.GROUP, group, AclOperation.DELETE))
        assert delete_offsets(conn) in past_acls
