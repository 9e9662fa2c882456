"""Share groups in a three-broker cluster: the share group's heartbeats go to its coordinator,
share fetches and acknowledgements to each partition's leader (the share-partition leader), the
same request path as on one node. Two ShareConsumers on a three-partition topic whose leaders
are on different brokers receive every record once."""
from __future__ import annotations

import time
import uuid

import pytest

from conformance.cluster_harness import cluster_fixture, describe, wait_for_isr

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+ needed)", allow_module_level=True)
from confluent_kafka import Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(240)

cluster = cluster_fixture(3, {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "zookeeper.session.timeout.ms": "6000",
})

PARTITIONS = 3


def _describe_group_config(bootstrap: str, group: str, name: str) -> str | None:
    """DescribeConfigs of a GROUP resource sent to one given broker."""
    from conformance.kafka_wire import RawConnection, frame
    from kafkapy.protocol.headers import decode_response_header, encode_request_header
    from kafkapy.protocol.messages import DescribeConfigsRequest as R
    from kafkapy.protocol.messages import DescribeConfigsResponse

    request = R(resources=[R.DescribeConfigsResource(resource_type=32, resource_name=group,
                                                     configuration_keys=[name])])
    payload = encode_request_header(request.API_KEY, 4, 1, "share-test") + b"".join(
        bytes(part) for part in request.encode_parts(4))
    with RawConnection(bootstrap) as conn:
        raw = conn.roundtrip(frame(payload))
    _, pos = decode_response_header(raw, request.API_KEY, 4)
    [result] = DescribeConfigsResponse.decode(raw, 4, pos).results
    assert result.error_code == 0
    return {c.name: c.value for c in result.configs}.get(name)


def test_share_consumers_read_every_partition_from_its_leader(cluster):
    topic, group = f"share-{uuid.uuid4().hex[:8]}", f"share-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)], request_timeout=30)[topic].result(60)
    wait_for_isr(cluster, topic, 3)
    leaders = {p: state.leader for p, state in describe(cluster, topic).items()}
    assert len(set(leaders.values())) > 1, leaders  # the share-partition leaders are on several brokers
    members = [ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                              "max.poll.records": 20}) for _ in range(2)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    try:
        for member in members:
            member.subscribe([topic])
        # share.auto.offset.reset is latest: warm up until every partition's share-partition exists
        warm: set[int] = set()
        deadline = time.monotonic() + 90
        while len(warm) < PARTITIONS and time.monotonic() < deadline:
            for p in range(PARTITIONS):
                producer.produce(topic, value=b"warm-up", partition=p)
            producer.flush(30)
            for member in members:
                warm |= {m.partition() for m in member.poll(0.5) or [] if m.error() is None}
        assert warm == set(range(PARTITIONS))
        values = [b"record-%04d" % i for i in range(300)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        seen: list[tuple[int, bytes, int]] = []
        by_member = [0, 0]
        deadline = time.monotonic() + 90
        while len([v for _, v, _ in seen if v != b"warm-up"]) < len(values) and time.monotonic() < deadline:
            for i, member in enumerate(members):
                for m in member.poll(0.3) or []:
                    assert m.error() is None, m.error()
                    seen.append((m.partition(), m.value(), m.delivery_count()))
                    by_member[i] += 1
        got = sorted(v for _, v, _ in seen if v != b"warm-up")
        assert got == values                       # every record, each once
        assert all(count == 1 for _, _, count in seen)
        assert {p for p, _, _ in seen} == set(range(PARTITIONS))
    finally:
        for member in members:
            member.close()


def test_share_state_survives_the_share_partition_leader_being_killed(cluster):
    """Acknowledged records are not delivered again after the partition's leader is SIGKILLed; the
    ones in flight come back with their delivery counts from the new leader, which reads the
    state from the share coordinator (__share_group_state, ReadShareGroupState)."""
    from confluent_kafka import AcknowledgeType

    from conformance.cluster_harness import wait_for_leader

    from kafkapy.groupcoord.offsets_topic import partition_for
    from kafkapy.groupcoord.share.state_store import SHARE_STATE_TOPIC, coordinator_key

    topic = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=30)[topic].result(60)
    wait_for_isr(cluster, topic, 3)
    if SHARE_STATE_TOPIC not in admin.list_topics(timeout=10).topics:
        warm = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "warm-up"})
        warm.subscribe([topic])
        deadline = time.monotonic() + 30
        while SHARE_STATE_TOPIC not in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
            warm.poll(0.5)
        warm.close()
    wait_for_isr(cluster, SHARE_STATE_TOPIC, 3)
    # a group whose state partition is led by another broker than the topic's partition: the
    # share-partition leader then goes through WriteShareGroupState / ReadShareGroupState
    from conformance.cluster_harness import _metadata

    [entry] = [t for t in _metadata(cluster, [topic], None).topics if t.name == topic]
    topic_id = uuid.UUID(str(entry.topic_id))
    leader = describe(cluster, topic)[0].leader
    state_leaders = {p: st.leader for p, st in describe(cluster, SHARE_STATE_TOPIC).items()}
    group = f"share-g-{uuid.uuid4().hex[:8]}"
    for _ in range(500):
        candidate = f"share-g-{uuid.uuid4().hex[:8]}"
        if state_leaders[partition_for(coordinator_key(candidate, topic_id, 0), len(state_leaders))] != leader:
            group = candidate
            break
    else:
        pytest.fail(f"no group found whose state partition is led elsewhere than broker {leader}")
    # group configs are kept in ZooKeeper: whichever broker the admin client sends them to, the
    # share-partition leader reads them
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)
    for node in cluster.brokers.values():   # each broker describes the same value
        assert _describe_group_config(node.bootstrap, group, "share.auto.offset.reset") == "earliest"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(6):
        producer.produce(topic, value=b"k%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 6 and time.monotonic() < deadline:
        got += [m for m in consumer.poll(0.5) or [] if m.error() is None]
    assert sorted(m.offset() for m in got) == list(range(6))
    for m in got:
        if m.offset() < 3:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        else:
            consumer.acknowledge(m, AcknowledgeType.RELEASE)
    consumer.commit_sync(15)
    consumer.close()
    old_leader = describe(cluster, topic)[0].leader
    cluster.broker(old_leader).kill9()
    try:
        wait_for_leader(cluster, topic, 0, not_in=[old_leader])
        after = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        after.subscribe([topic])
        again = []
        deadline = time.monotonic() + 60
        while len(again) < 3 and time.monotonic() < deadline:
            again += [m for m in after.poll(0.5) or [] if m.error() is None]
        end = time.monotonic() + 2
        while time.monotonic() < end:
            again += [m for m in after.poll(0.5) or [] if m.error() is None]
        after.close()
        # 0-2 were accepted before the kill; 3-5 were released once and come back as second deliveries
        assert sorted((m.offset(), m.delivery_count()) for m in again) == [(3, 2), (4, 2), (5, 2)]
    finally:
        cluster.broker(old_leader).start()


def test_reset_offsets_reach_a_share_partition_leader_on_another_broker(cluster):
    """`kafkapy share-groups reset-offsets` of a group whose coordinator is not the partition's
    leader: the coordinator writes the new state (a new state epoch) to the share coordinator; the
    leader, which still holds the old state in memory, loads the new one when a member opens a
    share session, so the records from the new start offset are delivered again."""
    from kafkapy.admin.client import AdminClient as KafkapyAdmin
    from kafkapy.cli import main as kafkapy_main

    topic = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=30)[topic].result(60)
    wait_for_isr(cluster, topic, 3)
    leader = describe(cluster, topic)[0].leader
    with KafkapyAdmin(cluster.bootstrap, timeout_s=30) as client:
        for _ in range(200):
            group = f"share-g-{uuid.uuid4().hex[:8]}"
            if client.coordinator(group) != leader:
                break
        else:
            pytest.fail(f"no group found whose coordinator is not broker {leader}")
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)])]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=b"r%d" % i, partition=0)
    assert producer.flush(30) == 0

    def consume(want: int) -> list[int]:
        consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        consumer.subscribe([topic])
        got: list[int] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < want and time.monotonic() < deadline:
                got += [m.offset() for m in consumer.poll(0.5) or [] if m.error() is None]
            consumer.poll(0.5)  # acknowledges what the last poll returned
        finally:
            consumer.close()
        return sorted(got)

    assert consume(10) == list(range(10))
    # the group is empty once the member has left: its coordinator accepts the reset
    deadline = time.monotonic() + 30
    while True:
        code = kafkapy_main(["share-groups", "reset-offsets", group, "--topic", topic, "--to-offset", "4",
                             "--execute", "--bootstrap-server", cluster.bootstrap])
        if code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert code == 0
    assert consume(6) == list(range(4, 10))
