"""The plain-Kafka-client side of the pipeline: topics, publishing events, reading results.

Spark only reads and writes through its own Kafka connector; this module uses
confluent-kafka (librdkafka) to set things up and to check what Spark wrote, so that the
checks do not depend on the code under test.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .events import PageView

log = logging.getLogger(__name__)

OPERATION_TIMEOUT_S = 30.0


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None,
    exist_ok: bool = True,
) -> None:
    """Create `topic` (replication factor 1) and wait until the broker has it."""
    admin = admin_client(bootstrap)  # must outlive the futures: a destroyed handle fails them
    futures = admin.create_topics(
        [NewTopic(topic, partitions, 1, config=dict(config or {}))], operation_timeout=OPERATION_TIMEOUT_S
    )
    try:
        futures[topic].result(OPERATION_TIMEOUT_S)
    except KafkaException as error:
        if exist_ok and error.args[0].name() == "TOPIC_ALREADY_EXISTS":
            log.info("topic %s already exists", topic)
            return
        raise


def delete_records(bootstrap: str, topic: str, before_offsets: Mapping[int, int]) -> dict[int, int]:
    """DeleteRecords: move each partition's log start offset up to the given offset.

    Returns the new low watermark per partition as the broker reported it.
    """
    admin = admin_client(bootstrap)
    requested = [TopicPartition(topic, partition, offset) for partition, offset in before_offsets.items()]
    futures = admin.delete_records(requested, operation_timeout=OPERATION_TIMEOUT_S)
    result = {}
    for tp, future in futures.items():
        deleted = future.result(OPERATION_TIMEOUT_S)
        result[tp.partition] = deleted.low_watermark
    return result


def publish_records(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple],
    producer_config: Mapping[str, object] | None = None,
) -> int:
    """Produce (key, value, timestamp_ms[, headers[, partition]]) tuples and wait for every ack."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        # Java's partitioner, so a key lands where a Java/Spark producer would put it.
        "partitioner": "murmur2_random",
        "linger.ms": 20,
        "enable.idempotence": True,
        **(producer_config or {}),
    })
    failures: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    sent = 0
    for record in records:
        key, value, timestamp_ms = record[0], record[1], record[2]
        kwargs = {"key": key, "value": value, "timestamp": timestamp_ms, "on_delivery": on_delivery}
        if len(record) > 3 and record[3] is not None:
            kwargs["headers"] = record[3]
        if len(record) > 4 and record[4] is not None:
            kwargs["partition"] = record[4]
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain, then retry this record
                producer.poll(0.05)
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(OPERATION_TIMEOUT_S * 4)
    if remaining or failures:
        raise RuntimeError(
            f"publishing to {topic}: {remaining} record(s) unacknowledged, {len(failures)} failed"
            + (f", first error: {failures[0]}" if failures else "")
        )
    return sent


def publish_page_views(bootstrap: str, topic: str, events: Iterable[PageView]) -> int:
    """Publish page views: user as key, JSON value, event time as CreateTime."""
    return publish_records(bootstrap, topic, ((e.key, e.value, e.event_time_ms) for e in events))


def partition_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """(log start offset, high watermark) of every partition of `topic`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkapy-spark-offsets",
                         "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=OPERATION_TIMEOUT_S)
        partitions = sorted(metadata.topics[topic].partitions)
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=OPERATION_TIMEOUT_S)
                for p in partitions}
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list:
    """Every record of `topic` from its log start offset up to the high watermark seen now."""
    ends = partition_offsets(bootstrap, topic)
    wanted = {p: high for p, (low, high) in ends.items() if high > low}
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "kafkapy-spark-reader", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "enable.partition.eof": False,
    })
    messages = []
    try:
        consumer.assign([TopicPartition(topic, p, low) for p, (low, high) in ends.items() if high > low])
        deadline = time.monotonic() + timeout_s
        while wanted and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                messages.append(message)
                if message.offset() + 1 >= wanted.get(message.partition(), 0):
                    wanted.pop(message.partition(), None)
        if wanted:
            raise TimeoutError(f"reading {topic}: partitions {sorted(wanted)} not read to their end in {timeout_s} s")
    finally:
        consumer.close()
    return messages


def latest_values(bootstrap: str, topic: str) -> dict[bytes, bytes | None]:
    """The compacted view of `topic`: the last value written for each key."""
    values: dict[bytes, bytes | None] = {}
    for message in sorted(read_all(bootstrap, topic), key=lambda m: (m.partition(), m.offset())):
        values[message.key()] = message.value()
    return values
