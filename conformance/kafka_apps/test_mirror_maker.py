"""MirrorMaker 2 (Kafka 3.7, dedicated mode) replicating between two kafkapy brokers.

Clusters A and B are two kafkapy processes. org.apache.kafka.connect.mirror.MirrorMaker runs the
A->B flow: MirrorSourceConnector copies topic T to `A.T` on B (with offset syncs), the
MirrorCheckpointConnector turns a consumer group's committed offsets on A into checkpoints on B
(`A.checkpoints.internal`) and, with sync.group.offsets.enabled, into the group's offsets on B, and
MirrorHeartbeatConnector writes heartbeats. Its Connect workers keep their state in topics on B.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from conformance.kafka_apps.kafka_jars import KafkaDist, stop_process

pytestmark = pytest.mark.timeout(180)

RECORDS = 500
MIRROR_TIMEOUT_S = 60.0


def test_mirror_maker_replicates_records_and_checkpoints(broker_factory, tmp_path: Path) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed")
    from confluent_kafka.admin import AdminClient, NewTopic

    dist = KafkaDist.get("3.7")
    cp = dist.mirror_classpath()
    a, b = broker_factory(), broker_factory()
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"mm2-orders-{suffix}", f"mm2-group-{suffix}"
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": a.bootstrap})
    sent = [f"order-{i}".encode() for i in range(RECORDS)]
    for i, value in enumerate(sent):
        producer.produce(topic, key=str(i).encode(), value=value, partition=i % 2)
    assert producer.flush(30) == 0
    # The group on A has read everything and left. (Its offsets are the log ends: MM2 translates an
    # offset through the latest offset sync at or before it, and the last record's sync is always
    # sent, while syncs for earlier offsets may be coalesced away when the source task is slow.)
    per_partition = RECORDS // 2
    committer = confluent_kafka.Consumer({"bootstrap.servers": a.bootstrap, "group.id": group})
    try:
        committer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, per_partition) for p in (0, 1)],
                         asynchronous=False)
    finally:
        committer.close()

    config = tmp_path / "mm2.properties"
    config.write_text("\n".join([
        "clusters = A, B",
        f"A.bootstrap.servers = {a.bootstrap}",
        f"B.bootstrap.servers = {b.bootstrap}",
        "A->B.enabled = true",
        f"A->B.topics = {topic}",
        "B->A.enabled = false",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        "config.storage.replication.factor = 1",
        "sync.topic.acls.enabled = false",
        "sync.topic.configs.enabled = true",
        "emit.checkpoints.interval.seconds = 1",
        "sync.group.offsets.enabled = true",
        "sync.group.offsets.interval.seconds = 1",
        "refresh.topics.interval.seconds = 2",
        "refresh.groups.interval.seconds = 2",
        "emit.heartbeats.interval.seconds = 1",
        "offset.lag.max = 0",
        # The source task sends the offset syncs it held back when its offsets are committed (a worker
        # setting: prefixed with the target cluster, where MM2 runs its workers).
        "B.offset.flush.interval.ms = 1000",
        "",
    ]))
    log = tmp_path / "mm2.log"
    proc = dist.java_process(cp, "org.apache.kafka.connect.mirror.MirrorMaker", str(config), "--clusters", "B",
                             log_path=log)
    mirrored = f"A.{topic}"
    try:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"check-{suffix}",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                             "topic.metadata.refresh.interval.ms": 1000})
        received: dict[int, list[bytes]] = {0: [], 1: []}
        try:
            consumer.subscribe([mirrored])
            deadline = time.monotonic() + MIRROR_TIMEOUT_S
            while sum(map(len, received.values())) < RECORDS:
                _check_alive(proc, log, deadline, f"{RECORDS} records in {mirrored} on B")
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    received[message.partition()].append(message.value())
        finally:
            consumer.close()
        assert received == {p: sent[p::2] for p in (0, 1)}, "B's copy differs from A's topic"

        # The group's offsets on A reach B as checkpoints, then as the group's own offsets there.
        reader = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                                           "enable.auto.commit": False})
        try:
            deadline = time.monotonic() + MIRROR_TIMEOUT_S
            offsets = []
            while True:
                _check_alive(proc, log, deadline, f"group {group}'s offsets ({per_partition} per partition) synced to B, "
                                                  f"last seen {[o.offset for o in offsets] if offsets else None}")
                offsets = reader.committed([confluent_kafka.TopicPartition(mirrored, p) for p in (0, 1)], timeout=10)
                # (a first checkpoint may translate through an earlier sync; later ones move it on)
                if [o.offset for o in offsets] == [per_partition, per_partition]:
                    break
                time.sleep(0.5)
        finally:
            reader.close()
        # Through the sync of each partition's last record (upstream 249 -> downstream 249): 249 + 1.
        assert [o.offset for o in offsets] == [per_partition, per_partition], offsets
        checkpoints = _count(confluent_kafka, b.bootstrap, "A.checkpoints.internal", suffix)
        heartbeats = _count(confluent_kafka, b.bootstrap, "heartbeats", suffix)
        assert checkpoints > 0 and heartbeats > 0, (checkpoints, heartbeats)
        text = log.read_text(errors="replace")
        assert " ERROR " not in text, _tail(log)
    finally:
        stop_process(proc, timeout=20)


def _count(confluent_kafka, bootstrap: str, topic: str, suffix: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{suffix}-{topic}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:
            return 0
        return sum(consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
                   for p in metadata.partitions)
    finally:
        consumer.close()


def _check_alive(proc, log: Path, deadline: float, what: str) -> None:
    if proc.poll() is not None:
        pytest.fail(f"waiting for {what}: MirrorMaker exited {proc.returncode}\n{_tail(log)}", pytrace=False)
    if time.monotonic() > deadline:
        pytest.fail(f"no {what} within {MIRROR_TIMEOUT_S:.0f} s\n{_tail(log)}", pytrace=False)


def _tail(log: Path, chars: int = 8000) -> str:
    return f"----- {log} -----\n" + log.read_text(errors="replace")[-chars:]
