"""min.insync.replicas above a topic's replication factor: kafkapy against real Kafka 3.9.1 (issue 30).

One broker with the broker default `min.insync.replicas=2`, a topic created with replication factor 1,
and a producer with acks=all. Kafka caps the minimum ISR it enforces at the partition's replica count
(Partition.effectiveMinIsr: min(min.insync.replicas, replicas), in 3.7 and 3.9 alike), so the write is
accepted; the same for `min.insync.replicas=2` set on the topic itself. kafkapy must answer the same.

Both producers are plain (retries=0, not idempotent) so that a refusal shows as the Produce error
code at once instead of retries up to the delivery timeout.
"""
from __future__ import annotations

import os
import time

import pytest

from conformance.real_kafka import REFERENCES, RealKafka, RealKafkaUnavailable
from conformance.differential.runner import kafkapy_target

confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

REFERENCE = "kafka-3.9.1-zk"
BROKER_PROPERTIES = {"min.insync.replicas": "2"}
TOPICS = {"rf1": {}, "rf1-topic-min-isr-2": {"min.insync.replicas": "2"}}

pytestmark = pytest.mark.timeout(180)


def produce_acks_all(bootstrap: str) -> dict[str, str]:
    """Per topic: the error name (and code) of one acks=all write, "NO_ERROR" when it was acked."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=config) for name, config in TOPICS.items()],
                                  operation_timeout=15)
    for future in futures.values():
        future.result(timeout=20)
    deadline = time.monotonic() + 15
    while not all(admin.list_topics(topic=t, timeout=5).topics[t].error is None for t in TOPICS):
        assert time.monotonic() < deadline, "topics not in metadata within 15 s"
        time.sleep(0.1)
    outcome = {}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "retries": 0, "message.timeout.ms": 10000})
    for topic in TOPICS:
        reports: list[str] = []
        producer.produce(topic, value=b"x", on_delivery=lambda err, msg: reports.append(
            "NO_ERROR" if err is None else f"{err.name()} ({err.code()})"))
        producer.flush(15)
        outcome[topic] = reports[0] if reports else "no delivery report"
    return outcome


def test_rf1_topic_under_min_isr_2_accepts_acks_all_as_kafka_does(tmp_path) -> None:
    try:
        with RealKafka(REFERENCES[REFERENCE], tmp_path / REFERENCE, BROKER_PROPERTIES) as real:
            reference = produce_acks_all(real.bootstrap)
    except RealKafkaUnavailable as exc:
        message = f"!!! {REFERENCE} NOT RUN: {exc}"
        if os.environ.get("KAFKAPY_REQUIRE_JAVA") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    with kafkapy_target(tmp_path / "kafkapy", BROKER_PROPERTIES) as kafkapy:
        ours = produce_acks_all(kafkapy.bootstrap)
    print(f"{REFERENCE}: {reference}\nkafkapy: {ours}")
    assert reference == {topic: "NO_ERROR" for topic in TOPICS}, reference
    assert ours == reference, f"kafkapy {ours}, {REFERENCE} {reference}"
