"""Replication throttles with real processes (ZooKeeper + two kafkapy brokers on loopback), set the
way kafka-reassign-partitions --throttle sets them: a rate on a broker through an incremental
AlterConfigs of the BROKER resource, the throttled replicas through the topic's config.

A follower is stopped, 3 MB are produced to the leader, and the follower is started again; the
time from its launch to its return to the ISR is measured:
- without throttles (the control run) it is fast;
- with follower.replication.throttled.rate on the follower and the partition listed in
  follower.replication.throttled.replicas for it, it takes about size/rate;
- with leader.replication.throttled.rate on the leader and the partition listed in
  leader.replication.throttled.replicas for it, likewise.
"""
from __future__ import annotations

import os
import time
import uuid

import pytest

from conformance.cluster_harness import cluster_fixture, describe, wait_for_isr, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

pytestmark = pytest.mark.timeout(180)

FETCH_MAX_BYTES = 262144  # replica.fetch.max.bytes: what one follower fetch may bring before the quota bites
RATE = 300_000  # bytes/s
VALUE_BYTES = 10_000
VALUES = 300  # 3 MB per run
SIZE = VALUE_BYTES * VALUES
CONTROL_LIMIT_S = 6.0  # below the throttled floor: the throttle, not start-up, makes the difference

cluster = cluster_fixture(2, {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "auto.leader.rebalance.enable": "false",
    "replica.fetch.max.bytes": str(FETCH_MAX_BYTES),
})


def admin_for(cluster) -> AdminClient:
    # A fresh client per call: librdkafka forgets a broker that a metadata refresh did not list
    # (while it was stopped) and sends requests for its BROKER resource nowhere until the next
    # periodic refresh.
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def alter(cluster, resource_type: ResourceType, name: str, **configs: str | None) -> None:
    """IncrementalAlterConfigs: SET each config given a value, DELETE each given None."""
    entries = [ConfigEntry(key.replace("_", "."), value,
                           incremental_operation=AlterConfigOpType.SET if value is not None
                           else AlterConfigOpType.DELETE)
               for key, value in configs.items()]
    admin = admin_for(cluster)  # kept until the answer: destroying the client fails its futures
    futures = admin.incremental_alter_configs([ConfigResource(resource_type, name, incremental_configs=entries)])
    for future in futures.values():
        future.result(30)


def described(cluster, resource_type: ResourceType, name: str, config: str) -> str | None:
    resource = ConfigResource(resource_type, name)
    admin = admin_for(cluster)
    return admin.describe_configs([resource])[resource].result(30)[config].value


def produce_bytes(bootstrap: str, topic: str) -> None:
    # batches well below replica.fetch.max.bytes, so that no fetch brings more than that
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                                         "batch.size": 65536, "enable.idempotence": False,
                                         "message.timeout.ms": 30000})
    failures = []
    for _ in range(VALUES):
        producer.produce(topic, value=os.urandom(VALUE_BYTES), partition=0,
                         on_delivery=lambda err, msg: failures.append(err) if err is not None else None)
        producer.poll(0)
    assert producer.flush(40) == 0 and failures == []


def catch_up_seconds(cluster, topic: str, leader: int, follower: int) -> float:
    """Stop the follower, produce SIZE bytes, start it again: seconds from its launch to the ISR
    (from the launch: the follower may fetch before its start-up is seen to be complete)."""
    cluster.broker(follower).stop()
    wait_until(lambda: describe(cluster, topic, via=leader)[0].isr == (leader,), 30,
               message=f"{topic}: the stopped follower {follower} out of the ISR")
    produce_bytes(cluster.broker(leader).bootstrap, topic)
    started = time.monotonic()
    cluster.broker(follower).start()
    wait_for_isr(cluster, topic, 2, timeout=60)
    assert describe(cluster, topic)[0].leader == leader
    return time.monotonic() - started


def test_replication_throttles_slow_a_returning_follower_to_the_rate(cluster):
    topic = f"throttled-{uuid.uuid4().hex[:8]}"
    admin = admin_for(cluster)
    admin.create_topics([NewTopic(topic, 1, 2)], request_timeout=30)[topic].result(60)
    state = wait_for_isr(cluster, topic, 2)
    leader = state[0].leader
    follower = next(b for b in state[0].replicas if b != leader)
    # at least the bytes past the first fetch, at the rate; a second of slack for scheduling
    throttled_floor = (SIZE - FETCH_MAX_BYTES) / RATE - 1.0
    timings: dict[str, float] = {}

    timings["control"] = catch_up_seconds(cluster, topic, leader, follower)

    # follower side: the rate on the follower (sent to it), the partition listed for it
    alter(cluster, ResourceType.BROKER, str(follower), follower_replication_throttled_rate=str(RATE))
    alter(cluster, ResourceType.TOPIC, topic, follower_replication_throttled_replicas=f"0:{follower}")
    assert described(cluster, ResourceType.BROKER, str(follower), "follower.replication.throttled.rate") == str(RATE)
    timings["follower throttled"] = catch_up_seconds(cluster, topic, leader, follower)
    # the restarted follower read its rate back from ZooKeeper
    assert described(cluster, ResourceType.BROKER, str(follower), "follower.replication.throttled.rate") == str(RATE)
    alter(cluster, ResourceType.BROKER, str(follower), follower_replication_throttled_rate=None)
    alter(cluster, ResourceType.TOPIC, topic, follower_replication_throttled_replicas=None)

    # leader side: the rate on the leader, the partition listed for it
    alter(cluster, ResourceType.BROKER, str(leader), leader_replication_throttled_rate=str(RATE))
    alter(cluster, ResourceType.TOPIC, topic, leader_replication_throttled_replicas=f"0:{leader}")
    timings["leader throttled"] = catch_up_seconds(cluster, topic, leader, follower)
    alter(cluster, ResourceType.BROKER, str(leader), leader_replication_throttled_rate=None)
    alter(cluster, ResourceType.TOPIC, topic, leader_replication_throttled_replicas=None)

    print(f"\ncatch-up of {SIZE} bytes at {RATE} bytes/s (floor {throttled_floor:.1f} s): "
          + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    assert timings["control"] < CONTROL_LIMIT_S, timings
    assert timings["follower throttled"] >= throttled_floor, timings
    assert timings["leader throttled"] >= throttled_floor, timings
    # bounded too: the throttle slows replication down, it does not stop it
    assert timings["follower throttled"] < SIZE / RATE + 10, timings
    assert timings["leader throttled"] < SIZE / RATE + 10, timings


def test_bad_throttled_replicas_are_invalid_config(cluster):
    topic = f"bad-throttle-{uuid.uuid4().hex[:8]}"
    admin = admin_for(cluster)
    futures = admin.create_topics([NewTopic(topic, 1, 2, config={"leader.replication.throttled.replicas": "0-1"})],
                                  request_timeout=30)
    with pytest.raises(confluent_kafka.KafkaException) as error:
        futures[topic].result(30)
    assert error.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    admin.create_topics([NewTopic(topic, 1, 2)], request_timeout=30)[topic].result(60)
    with pytest.raises(confluent_kafka.KafkaException) as error:
        alter(cluster, ResourceType.TOPIC, topic, follower_replication_throttled_replicas="*,0:1")
    assert error.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
