"""Topics as Iceberg tables in a 3-broker ZooKeeper-mode cluster (issue 34): one catalog (SQLite on a
shared path) and one warehouse for all brokers; each partition's leader translates and commits it,
conditionally on the table's kafkapy.next-offsets, so leaders SIGKILLed while an idempotent producer
writes (acks=all, replication factor 3, min.insync.replicas 2) leave every acknowledged record in the
table exactly once."""
from __future__ import annotations

import collections
import random
import threading
import time

import pytest

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.timeout(420)

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conformance.cluster_harness import describe, start_cluster, wait_for_isr, wait_for_leader  # noqa: E402
from conformance.test_tables_core import (  # noqa: E402
    log_end_offsets,
    open_table_catalog,
    table_rows,
    wait_for_table,
)

PARTITIONS = 3
KILLS = 3


def test_leaders_killed_every_acked_record_once(tmp_path):
    shared = tmp_path / "iceberg"
    shared.mkdir()
    catalog_uri = f"sqlite:///{shared}/catalog.db"
    warehouse = str(shared / "warehouse")
    cluster = start_cluster(tmp_path / "cluster", 3, {
        "kafkapy.iceberg.catalog.uri": catalog_uri, "kafkapy.iceberg.warehouse": warehouse,
        "kafkapy.iceberg.commit.interval.ms": "300"})
    try:
        topic = "tables-cluster"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={
            "kafkapy.iceberg.mode": "key_value", "min.insync.replicas": "2"})])[topic].result(30)
        wait_for_isr(cluster, topic, 3)
        acked: dict[tuple[int, int], bytes] = {}
        failed: list[str] = []
        stop = threading.Event()

        def on_delivery(err, msg):
            if err is not None:
                failed.append(str(err))
            else:
                acked[(msg.partition(), msg.offset())] = msg.value()

        def produce() -> None:
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                                 "linger.ms": 5, "message.timeout.ms": 120000})
            i = 0
            while not stop.is_set():
                try:
                    producer.produce(topic, value=b"r%08d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
                    i += 1
                except BufferError:
                    producer.poll(0.05)
                    continue
                if i % 50 == 0:
                    producer.poll(0)
                    time.sleep(0.01)
            assert producer.flush(120) == 0

        writer = threading.Thread(target=produce, name="idempotent-producer")
        writer.start()
        rng = random.Random(341)
        try:
            for round_number in range(KILLS):
                time.sleep(rng.uniform(1.5, 3.0))
                partition = round_number % PARTITIONS
                leader = describe(cluster, topic)[partition].leader
                cluster.broker(leader).kill9()
                wait_for_leader(cluster, topic, partition, not_in=(leader,))
                time.sleep(rng.uniform(0.5, 1.5))
                cluster.broker(leader).start()
                wait_for_isr(cluster, topic, 3, timeout=60)
            time.sleep(1.5)
        finally:
            stop.set()
            writer.join(150)
        assert not writer.is_alive()
        assert not failed, failed[:5]
        assert len(acked) > 300
        ends = log_end_offsets(cluster.bootstrap, topic, PARTITIONS)
        catalog = open_table_catalog(tmp_path, catalog_uri, warehouse)
        offsets = wait_for_table(catalog, topic, ends, timeout=120)
        assert offsets == ends
        rows = table_rows(catalog, topic)
        count = collections.Counter((r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows)
        duplicates = {k: n for k, n in count.items() if n != 1}
        assert not duplicates, list(duplicates.items())[:10]
        values = {(r["kafka"]["partition"], r["kafka"]["offset"]): r["value"] for r in rows}
        missing = [k for k in acked if k not in values]
        assert not missing, f"{len(missing)} acked records missing, e.g. {missing[:10]}"
        assert all(values[k] == v for k, v in acked.items())
        assert len(rows) == sum(ends.values())
        print(f"{len(acked)} acked, {KILLS} leaders SIGKILLed, {len(rows)} rows, next offsets {offsets}")
    finally:
        cluster.stop()
