"""The log cleaner in a real kafkapy process: a compacted topic is cleaned in the background
(worker process), consumers read the latest value per key, the cleaner-offset-checkpoint
survives a restart so the clean log is not cleaned again, and an idempotent producer goes on
producing after the cleaning and the restart without errors."""
from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conformance.broker_process import start_broker
from kafkapy.log.checkpoints import read_offset_checkpoint

pytestmark = pytest.mark.timeout(120)

KEYS = 20


def produce(bootstrap, topic, rounds, tag):
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "batch.size": 8192})
    for r in range(rounds):
        for k in range(KEYS):
            producer.produce(topic, b"%s-%d" % (tag, r) + b"x" * 200, key=b"key%02d" % k,
                             on_delivery=lambda err, msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []


def consume_all(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: dict[bytes, list[bytes]] = {}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(msg.error())
            values.setdefault(msg.key(), []).append(msg.value())
    finally:
        consumer.close()
    return values


def active_base(partition_dir):
    return max(int(name[:20]) for name in os.listdir(partition_dir) if name.endswith(".log"))


def wait_for_checkpoint(data_dir, topic, at_least, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        offsets = read_offset_checkpoint(data_dir / "cleaner-offset-checkpoint")
        if offsets.get((topic, 0), -1) >= at_least:
            return offsets[(topic, 0)]
        time.sleep(0.2)
    raise AssertionError(f"no cleaner checkpoint >= {at_least} for {topic}-0")


def test_compacted_topic_cleaned_and_checkpoint_kept_across_restart(tmp_path):
    broker = start_broker(overrides={"num.partitions": "1", "log.cleaner.backoff.ms": "200",
                                     "offsets.topic.num.partitions": "1"}, work_dir=tmp_path)
    try:
        topic = "compacted"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1, config={
                "cleanup.policy": "compact", "segment.bytes": "32768",
                "min.cleanable.dirty.ratio": "0.01"})]).values():
            future.result(30)
        produce(broker.bootstrap, topic, 30, b"a")
        # Cleaned up to the active segment: nothing is left to clean.
        checkpoint = wait_for_checkpoint(broker.data_dir, topic, active_base(broker.data_dir / f"{topic}-0"))
        values = consume_all(broker.bootstrap, topic)
        # Closed segments hold one value per key; only the active segment may hold more.
        assert set(values) == {b"key%02d" % k for k in range(KEYS)}
        assert all(v[-1].startswith(b"a-29") for v in values.values())
        assert sum(len(v) for v in values.values()) < 30 * KEYS / 2
        segment_files = {name: os.stat(broker.data_dir / f"{topic}-0" / name).st_mtime_ns
                         for name in os.listdir(broker.data_dir / f"{topic}-0") if name.endswith(".log")}

        log_size = broker.log_path.stat().st_size
        broker.restart()
        time.sleep(1.5)  # several cleaner backoffs: a log cleaned already must stay untouched
        assert read_offset_checkpoint(broker.data_dir / "cleaner-offset-checkpoint")[(topic, 0)] == checkpoint
        after = {name: os.stat(broker.data_dir / f"{topic}-0" / name).st_mtime_ns
                 for name in os.listdir(broker.data_dir / f"{topic}-0") if name.endswith(".log")}
        assert {n: t for n, t in after.items() if n in segment_files} == segment_files
        with open(broker.log_path, "rb") as f:
            f.seek(log_size)
            assert b"cleaned compacted-0" not in f.read()

        # A new idempotent producer (and the cleaned producer state) after the restart: no error,
        # and the new dirty data is cleaned from the checkpoint on.
        produce(broker.bootstrap, topic, 30, b"b")
        wait_for_checkpoint(broker.data_dir, topic, active_base(broker.data_dir / f"{topic}-0"))
        values = consume_all(broker.bootstrap, topic)
        assert all(v[-1].startswith(b"b-29") for v in values.values())
    finally:
        broker.close()
