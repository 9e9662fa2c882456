"""A share consumer stays subscribed while its topic is deleted and created again under the same
name (issue 31): Kafka keys share state by topic id, so the new topic's share-partition starts
fresh (share.auto.offset.reset) and the member receives the records produced to it, each with
delivery count 1. kafkapy kept the old topic's share-partition (keyed by name) whose start offset
was past the new topic's end, so the member never received them.

confluent-kafka's ShareConsumer (librdkafka 2.16) against one kafkapy broker with a 1 s share
heartbeat interval, so the member learns the new topic id (its assignment) within seconds.
"""
from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+ needed)", allow_module_level=True)

from confluent_kafka import KafkaException, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from conformance.broker_process import start_broker  # noqa: E402

pytestmark = pytest.mark.timeout(120)

OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.heartbeat.interval.ms": "1000",
}
NEW_RECORDS_WITHIN_S = 45


@pytest.fixture(scope="module")
def share_broker():
    with start_broker(overrides=OVERRIDES) as broker:
        yield broker


def _create_topic(admin: AdminClient, topic: str, deadline: float) -> None:
    while True:   # the deletion of the old one may still be under way
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
            return
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(15) == 0


def _poll_values(consumer: ShareConsumer, want: int, within_s: float) -> list[tuple[bytes, int]]:
    """(value, delivery count) of the records received until `want` or the time is up; errors
    (the deleted topic's, while the member catches up) are skipped."""
    got: list[tuple[bytes, int]] = []
    deadline = time.monotonic() + within_s
    while len(got) < want and time.monotonic() < deadline:
        for message in consumer.poll(0.5) or []:
            if message.error() is None:
                got.append((message.value(), message.delivery_count()))
    return got


def test_member_receives_the_records_of_a_topic_deleted_and_created_again(share_broker, topic_name):
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create_topic(admin, topic_name, time.monotonic() + 15)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)
    old = [b"old-%d" % i for i in range(8)]
    _produce(bootstrap, topic_name, old)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic_name])
        first = _poll_values(consumer, len(old), 30)
        assert sorted(v for v, _ in first) == old
        _poll_values(consumer, 1, 1.0)   # the next poll acknowledges them (implicit acknowledgement)
        admin.delete_topics([topic_name])[topic_name].result(15)
        _create_topic(admin, topic_name, time.monotonic() + 15)
        new = [b"new-%d" % i for i in range(3)]
        _produce(bootstrap, topic_name, new)
        got = _poll_values(consumer, len(new), NEW_RECORDS_WITHIN_S)
        assert sorted(got) == [(v, 1) for v in new], got
    finally:
        consumer.close()
