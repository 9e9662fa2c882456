"""Cluster mode with real processes: ZooKeeper and three kafkapy brokers on loopback.

- A replication-factor-3 topic has its leaders spread over the brokers and an ISR of 3, as
  kafka-python's and confluent-kafka's metadata show it.
- kafka-python and confluent-kafka produce (acks=all) to partitions led by different brokers and
  read everything back; consumers only ever see acknowledged records.
- Admin requests go to the controller (others answer NOT_CONTROLLER), configs written on one
  broker reach every broker, and topic deletion removes the replicas everywhere.
"""
from __future__ import annotations

import time
import uuid

import pytest

from conformance.cluster_harness import (  # noqa: F401  (cluster3 is a fixture)
    cluster3,
    controller_id,
    describe,
    wait_for_isr,
    wait_until,
)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 10000})


def create_topic(cluster, name: str, partitions: int, replication_factor: int = 3,
                 config: dict[str, str] | None = None) -> None:
    client = admin(cluster)  # kept alive until the result: a destroyed handle fails its futures
    futures = client.create_topics([NewTopic(name, partitions, replication_factor, config=config or {})],
                                   request_timeout=30)
    futures[name].result(timeout=60)


def test_rf3_topic_has_spread_leaders_and_full_isr(cluster3):
    topic = unique("spread")
    create_topic(cluster3, topic, 6)
    state = wait_for_isr(cluster3, topic, 3)
    assert sorted(state) == list(range(6))
    assert {p.leader for p in state.values()} == {1, 2, 3}
    for p in state.values():
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isr) == [1, 2, 3]
        assert p.leader == p.replicas[0]  # the preferred replica leads a new partition
    # every broker reports the same leaders and the same controller
    for broker_id in (1, 2, 3):
        assert {k: v.leader for k, v in describe(cluster3, topic, via=broker_id).items()} == \
            {k: v.leader for k, v in state.items()}
    controllers = {controller_id(cluster3, via=b) for b in (1, 2, 3)}
    assert len(controllers) == 1 and controllers.pop() in (1, 2, 3)
    # kafka-python's view
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap)
    try:
        described = client.describe_topics([topic])[0]
        assert {p["partition_index"]: p["leader_id"] for p in described["partitions"]} == \
            {k: v.leader for k, v in state.items()}
        assert all(len(p["isr_nodes"]) == 3 for p in described["partitions"])
    finally:
        client.close()
    # confluent-kafka's view
    md = admin(cluster3).list_topics(topic, timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    assert all(len(p.isrs) == 3 for p in md.topics[topic].partitions.values())


def test_kafka_python_and_confluent_produce_and_consume_across_leaders(cluster3):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique("rw")
    create_topic(cluster3, topic, 6)
    state = wait_for_isr(cluster3, topic, 3)
    count = 600
    producer = KafkaProducer(bootstrap_servers=cluster3.bootstrap, acks="all", linger_ms=5)
    for i in range(count):
        producer.send(topic, value=f"kp-{i}".encode(), partition=i % 6)
    producer.flush(60)
    producer.close()
    cproducer = confluent_kafka.Producer({"bootstrap.servers": cluster3.bootstrap, "acks": "all",
                                          "enable.idempotence": True, "linger.ms": 5})
    errors = []
    for i in range(count):
        cproducer.produce(topic, value=f"ck-{i}".encode(), partition=i % 6,
                          on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert cproducer.flush(60) == 0 and not errors
    # every partition (led by all three brokers) holds 200 records, read with both clients
    consumer = KafkaConsumer(bootstrap_servers=cluster3.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    parts = [TopicPartition(topic, p) for p in range(6)]
    consumer.assign(parts)
    seen: dict[int, list[bytes]] = {p: [] for p in range(6)}
    deadline = time.monotonic() + 60
    while sum(len(v) for v in seen.values()) < 2 * count and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            seen[tp.partition].extend(r.value for r in records)
    consumer.close()
    for p in range(6):
        assert seen[p] == [f"kp-{i}".encode() for i in range(p, count, 6)] + \
            [f"ck-{i}".encode() for i in range(p, count, 6)], f"partition {p} led by {state[p].leader}"
    cconsumer = confluent_kafka.Consumer({"bootstrap.servers": cluster3.bootstrap, "group.id": unique("g"),
                                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
    cconsumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(6)])
    got = 0
    deadline = time.monotonic() + 60
    while got < 2 * count and time.monotonic() < deadline:
        msg = cconsumer.poll(1.0)
        if msg is not None and not msg.error():
            got += 1
    cconsumer.close()
    assert got == 2 * count


def test_admin_requests_go_to_the_controller_and_configs_reach_every_broker(cluster3):
    import asyncio

    from kafkapy.net.client import BrokerConnection
    from kafkapy.protocol.messages import CreateTopicsRequest

    controller = controller_id(cluster3)
    other = next(b for b in (1, 2, 3) if b != controller)

    async def create_on(node) -> int:
        host, port = node.bootstrap.split(":")
        connection = BrokerConnection(host, int(port))
        try:
            response = await connection.send(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=unique("nc"), num_partitions=1, replication_factor=1)], timeout_ms=5000), 5)
        finally:
            connection.close()
        return response.topics[0].error_code

    assert asyncio.run(create_on(cluster3.broker(other))) == 41  # NOT_CONTROLLER

    topic = unique("cfg")
    create_topic(cluster3, topic, 2, config={"retention.ms": "123456"})
    wait_for_isr(cluster3, topic, 3)
    client = admin(cluster3)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, topic,
        incremental_configs=[confluent_kafka.admin.ConfigEntry(
            "retention.ms", "654321", incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])]
    )[resource].result(timeout=30)
    for broker_id in (1, 2, 3):
        single = AdminClient({"bootstrap.servers": cluster3.broker(broker_id).bootstrap})

        def value() -> str | None:
            configs = single.describe_configs([resource])[resource].result(timeout=10)
            return configs["retention.ms"].value

        wait_until(lambda: value() == "654321", 20, message=f"retention.ms on broker {broker_id}")


def test_delete_topic_removes_replicas_everywhere(cluster3):
    topic = unique("del")
    create_topic(cluster3, topic, 3)
    wait_for_isr(cluster3, topic, 3)
    dirs = [cluster3.broker(b).log_dir for b in (1, 2, 3)]
    assert all(any(d.glob(f"{topic}-*")) for d in dirs)
    client = admin(cluster3)
    client.delete_topics([topic], request_timeout=30)[topic].result(timeout=60)
    wait_until(lambda: not describe(cluster3, topic), 30, message="topic gone from metadata")
    wait_until(lambda: not any(p for d in dirs for p in d.glob(f"{topic}-*") if not p.name.endswith("-delete")),
               30, message="replica directories removed")
