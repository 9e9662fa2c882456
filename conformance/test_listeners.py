"""Several listeners on one broker, as Kafka's `listeners` / `listener.security.protocol.map` /
`advertised.listeners`: every listener is served, and Metadata, DescribeCluster and FindCoordinator
answer with the endpoints of the listener the request came in on.

- Single node with PLAINTEXT and INTERNAL listeners: each answers with its own address; a producer
  on one and a consumer group on the other work.
- A two-broker cluster whose brokers talk on PLAINTEXT and serve clients on EXTERNAL too: clients
  that only know the EXTERNAL ports see both brokers at their EXTERNAL addresses and produce to and
  consume from a replicated topic.
"""
from __future__ import annotations

import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conformance.broker_process import free_port, start_broker  # noqa: E402
from conformance.cluster_harness import start_cluster, wait_for_isr, wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(180)

PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"


def brokers_seen(bootstrap: str) -> dict[int, tuple[str, int]]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {b.id: (b.host, b.port) for b in metadata.brokers.values()}


def produce_and_consume(bootstrap: str, topic: str, count: int = 50, group: str | None = None) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        wait_until(lambda: values.extend(m.value() for m in consumer.consume(100, 0.5) if not m.error())
                   or len(values) >= count, 60, message="records consumed")
    finally:
        consumer.close()
    return values


def test_single_node_serves_each_listener_with_its_own_address(tmp_path):
    main, internal = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{main},INTERNAL://127.0.0.1:{internal}"
    broker = start_broker({"listeners": listeners, "advertised.listeners": listeners,
                           "listener.security.protocol.map": PROTOCOL_MAP}, work_dir=tmp_path, port=main)
    try:
        assert brokers_seen(f"127.0.0.1:{main}") == {1: ("127.0.0.1", main)}
        assert brokers_seen(f"127.0.0.1:{internal}") == {1: ("127.0.0.1", internal)}
        topic = f"listeners-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{internal}"})  # referenced until the result
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        # the group coordinator is found through the INTERNAL listener, at its INTERNAL address
        values = produce_and_consume(f"127.0.0.1:{internal}", topic)
        assert values == [f"{topic}-{i}".encode() for i in range(50)]
    finally:
        broker.close()


def test_cluster_clients_on_a_second_listener_see_every_broker_there(tmp_path):
    cluster = start_cluster(tmp_path, brokers=2, overrides={"listener.security.protocol.map": PROTOCOL_MAP,
                                                            "inter.broker.listener.name": "PLAINTEXT"})
    try:
        external = {}
        for broker_id, node in sorted(cluster.brokers.items()):
            external[broker_id] = free_port()
            listeners = f"PLAINTEXT://127.0.0.1:{node.port},EXTERNAL://127.0.0.1:{external[broker_id]}"
            node.overrides.update({"listeners": listeners, "advertised.listeners": listeners})
            node.restart()
        bootstrap = ",".join(f"127.0.0.1:{port}" for port in external.values())
        wait_until(lambda: brokers_seen(bootstrap) == {b: ("127.0.0.1", p) for b, p in external.items()}, 60,
                   ignore=(Exception,), message="both brokers at their EXTERNAL addresses")
        # the inter-broker listener still gives the PLAINTEXT addresses
        assert brokers_seen(cluster.bootstrap) == {b: ("127.0.0.1", n.port) for b, n in cluster.brokers.items()}
        topic = f"external-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(lambda: admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30) is None, 60,
                   ignore=(Exception,), message="topic created through EXTERNAL")
        wait_for_isr(cluster, topic, 2)
        values = produce_and_consume(bootstrap, topic)
        assert sorted(values) == sorted(f"{topic}-{i}".encode() for i in range(50))
    finally:
        cluster.stop()
