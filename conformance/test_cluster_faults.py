"""Replication under faults, with real processes (ZooKeeper + three kafkapy brokers on loopback).

- min.insync.replicas=2 with two of three brokers down: acks=all answers NOT_ENOUGH_REPLICAS, acks=1
  still works; when the brokers return the ISR grows back to 3.
- min.insync.replicas=2 on a topic with one replica: acks=all is taken (the minimum is capped at the
  replica count, as Kafka's effectiveMinIsr).
- A follower that was down catches up and rejoins the ISR.
- A follower holding records the new leader never had (the old leader appended them, acks=1, while
  its followers were paused, then was killed) truncates that tail when it returns, catches up and
  rejoins the ISR; its log then equals the leader's byte for byte.
"""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from conformance.cluster_harness import cluster_fixture, describe, wait_for_isr, wait_for_leader, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(300)

cluster = cluster_fixture(3, {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "auto.leader.rebalance.enable": "false",
}, scope="function")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(cluster, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=config or {})], request_timeout=30)[name].result(60)
    wait_for_isr(cluster, name, 3)


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str, timeout: float = 20) -> list:
    """Produce with a fresh producer; returns the per-record delivery error (None = acknowledged)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                                         "message.timeout.ms": int(timeout * 1000), "retries": 0,
                                         "enable.idempotence": False})
    results: list = [None] * len(values)
    done = [False] * len(values)

    def callback(index):
        def on_delivery(err, msg):
            results[index] = err
            done[index] = True
        return on_delivery

    for index, value in enumerate(values):
        producer.produce(topic, value=value, partition=0, on_delivery=callback(index))
    producer.flush(timeout + 10)
    assert all(done), "every record got a delivery report"
    return results


def read_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("r"),
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    consumer.close()
    return values


def test_min_insync_replicas_with_two_brokers_down(cluster):
    topic = unique("minisr")
    create_topic(cluster, topic, config={"min.insync.replicas": "2"})
    leader = describe(cluster, topic)[0].leader
    assert produce(cluster.bootstrap, topic, [b"before"], "all") == [None]
    others = [b for b in (1, 2, 3) if b != leader]
    for broker_id in others:
        cluster.broker(broker_id).kill9()
    # the controller (maybe a new one) shrinks the ISR to the leader once the sessions expire
    wait_until(lambda: describe(cluster, topic, via=leader)[0].isr == (leader,), 30,
               message="ISR shrunk to the leader")
    errors = produce(cluster.broker(leader).bootstrap, topic, [b"all-1", b"all-2"], "all", timeout=5)
    assert all(e is not None and e.code() == confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS for e in errors), errors
    assert produce(cluster.broker(leader).bootstrap, topic, [b"one-1", b"one-2"], "1") == [None, None]
    for broker_id in others:
        cluster.broker(broker_id).start()
    state = wait_for_isr(cluster, topic, 3, timeout=60)
    assert sorted(state[0].isr) == [1, 2, 3]
    assert produce(cluster.bootstrap, topic, [b"after"], "all") == [None]
    assert read_values(cluster.bootstrap, topic, 4) == [b"before", b"one-1", b"one-2", b"after"]


def test_min_insync_replicas_is_capped_at_the_replica_count(cluster):
    # Kafka's Partition.effectiveMinIsr (3.7 and 4.x): acks=all on a topic with fewer replicas than
    # min.insync.replicas needs the whole ISR, not min.insync.replicas (kafka-topics --replica-assignment 1,1,1)
    topic = unique("rf1")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replica_assignment=[[1], [1], [1]],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_until(lambda: all(p.leader == 1 for p in describe(cluster, topic).values()) and
               len(describe(cluster, topic)) == 3, 30, message="the RF-1 topic led by broker 1")
    assert produce(cluster.bootstrap, topic, [b"a", b"b", b"c"], "all") == [None, None, None]


def partition_log_bytes(log_dir: Path, topic: str) -> bytes:
    """The concatenated segment files of `topic`-0 on one broker."""
    directory = log_dir / f"{topic}-0"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def test_follower_that_was_down_catches_up(cluster):
    topic = unique("catchup")
    create_topic(cluster, topic)
    leader = describe(cluster, topic)[0].leader
    follower = next(b for b in (1, 2, 3) if b != leader)
    cluster.broker(follower).stop()
    values = [f"v{i}".encode() for i in range(500)]
    assert all(e is None for e in produce(cluster.bootstrap, topic, values, "all"))
    cluster.broker(follower).start()
    wait_for_isr(cluster, topic, 3, timeout=60)
    leader_dir = cluster.broker(leader).log_dir
    follower_dir = cluster.broker(follower).log_dir
    wait_until(lambda: partition_log_bytes(follower_dir, topic) == partition_log_bytes(leader_dir, topic), 30,
               message="follower log equals the leader's")


def test_divergent_follower_truncates_to_the_new_leader(cluster):
    topic = unique("diverge")
    create_topic(cluster, topic)
    old_leader = describe(cluster, topic)[0].leader
    common = [f"common-{i}".encode() for i in range(50)]
    assert all(e is None for e in produce(cluster.bootstrap, topic, common, "all"))
    wait_for_isr(cluster, topic, 3)
    followers = [b for b in (1, 2, 3) if b != old_leader]
    # pause the followers so that they never fetch what the leader appends next (acks=1)
    for broker_id in followers:
        os.kill(cluster.broker(broker_id).pid, signal.SIGSTOP)
    try:
        # a follower fetch already parked at the leader completes within replica.fetch.wait.max.ms
        # (500 ms) into the paused follower's socket; only what is appended after that is never fetched
        time.sleep(1.0)
        lost = [f"lost-{i}".encode() for i in range(20)]
        results = produce(cluster.broker(old_leader).bootstrap, topic, lost, "1", timeout=5)
        assert all(e is None for e in results), results
        cluster.broker(old_leader).kill9()
    finally:
        for broker_id in followers:
            os.kill(cluster.broker(broker_id).pid, signal.SIGCONT)
    new_leader = wait_for_leader(cluster, topic, 0, not_in=(old_leader,), timeout=60)
    assert new_leader in followers
    fresh = [f"new-{i}".encode() for i in range(30)]
    assert all(e is None for e in produce(cluster.bootstrap, topic, fresh, "all", timeout=30))
    cluster.broker(old_leader).start()
    wait_for_isr(cluster, topic, 3, timeout=60)
    leader_dir = cluster.broker(new_leader).log_dir
    old_dir = cluster.broker(old_leader).log_dir
    wait_until(lambda: partition_log_bytes(old_dir, topic) == partition_log_bytes(leader_dir, topic), 30,
               message="the old leader's log equals the new leader's, byte for byte")
    assert read_values(cluster.bootstrap, topic, 80) == common + fresh


def elect_preferred(cluster, topic: str, partition: int) -> int:
    """ElectLeaders (preferred) sent to the controller; the partition's error code."""
    import asyncio

    from conformance.cluster_harness import controller_id
    from kafkapy.net.client import BrokerConnection
    from kafkapy.protocol.messages import ElectLeadersRequest

    async def send() -> int:
        host, port = cluster.broker(controller_id(cluster)).bootstrap.split(":")
        connection = BrokerConnection(host, int(port))
        try:
            response = await connection.send(ElectLeadersRequest(
                election_type=0, timeout_ms=10000,
                topic_partitions=[ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[partition])]), 2)
        finally:
            connection.close()
        return response.replica_election_results[0].partition_result[0].error_code

    return asyncio.run(send())


def test_leadership_round_trip_on_an_idle_partition(cluster):
    """A broker that led an idle partition for a while (its epoch recorded at its log end, no batch
    written) follows again after a preferred election and stays in the ISR."""
    topic = unique("idle")
    create_topic(cluster, topic)
    assert all(e is None for e in produce(cluster.bootstrap, topic, [b"a", b"b", b"c"], "all"))
    preferred = describe(cluster, topic)[0].leader
    cluster.broker(preferred).kill9()
    interim = wait_for_leader(cluster, topic, 0, not_in=(preferred,), timeout=60)
    cluster.broker(preferred).start()
    wait_for_isr(cluster, topic, 3, timeout=60)
    assert elect_preferred(cluster, topic, 0) == 0
    wait_until(lambda: describe(cluster, topic)[0].leader == preferred, 30, message="preferred leader back")
    time.sleep(6)  # past replica.lag.time.max.ms (4000): a follower stuck diverging would be dropped
    state = wait_for_isr(cluster, topic, 3, timeout=20)
    assert interim in state[0].isr
    assert read_values(cluster.bootstrap, topic, 3) == [b"a", b"b", b"c"]
