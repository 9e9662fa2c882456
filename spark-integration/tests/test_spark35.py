"""Spark 3.5 (pyspark 3.5.7, connector 3.5.7 with kafka-clients 3.4.1) against kafkapy.

The Spark side runs in a child process with the 3.5 venv's python (the `spark35` fixture); the
records are written and checked here with confluent-kafka. A batch read of every column, the
streaming job (Kafka source, windowed counts, Kafka sink) stopped and resumed from its checkpoint,
and a batch write through Spark's Kafka sink.
"""

from __future__ import annotations

import pytest

from kafkapy_spark.events import generate_page_views, sink_counts
from kafkapy_spark.kafka_client import create_topic, latest_values, publish_page_views, publish_records, read_all
from kafkapy_spark.pipeline import check_counts

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 4
PER_PARTITION = 75
BASE_TS = 1_700_000_000_000
START_MS = 1_763_726_400_000  # a minute boundary


def test_spark35_runs_pyspark_3_5(spark35) -> None:
    assert spark35.spark_version == "3.5.7"


def test_spark35_batch_read_returns_every_column_of_every_record(spark35, broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    plan = []
    for partition in range(PARTITIONS):
        for offset in range(PER_PARTITION):
            n = partition * PER_PARTITION + offset
            headers = [(f"h{i % 2}", (f"v{n}-{i}".encode() if (n + i) % 5 else None)) for i in range(n % 4)]
            plan.append((None if n % 11 == 0 else f"key-{n}".encode(),
                         None if n % 13 == 5 else f"value-{n}-".encode() * (1 + n % 3),
                         BASE_TS + n * 1000 + partition, headers, partition, offset))
    publish_records(broker.bootstrap, topic_name, [record[:5] for record in plan])

    rows = spark35.call("batch_read", bootstrap=broker.bootstrap, topic=topic_name)

    def hexed(data: bytes | None) -> str | None:
        return None if data is None else data.hex()

    got = sorted(rows, key=lambda r: (r["partition"], r["offset"]))
    want = [{"key": hexed(key), "value": hexed(value), "topic": topic_name, "partition": partition,
             "offset": offset, "timestamp_ms": ts, "timestampType": 0,
             "headers": [[name, hexed(data)] for name, data in headers]}
            for key, value, ts, headers, partition, offset in plan]
    assert len(got) == len(want) == PARTITIONS * PER_PARTITION
    for got_row, want_row in zip(got, want):
        assert got_row == want_row


def test_spark35_streaming_counts_resume_from_checkpoint(spark35, broker, topic_name, tmp_path) -> None:
    events_topic, counts_topic = f"{topic_name}-events", f"{topic_name}-counts"
    create_topic(broker.bootstrap, events_topic, PARTITIONS)
    create_topic(broker.bootstrap, counts_topic, 2, {"cleanup.policy": "compact"})
    events = generate_page_views(600, START_MS, events_per_minute=300)
    first, second = events[:400], events[400:]
    run = dict(bootstrap=broker.bootstrap, events_topic=events_topic, counts_topic=counts_topic,
               checkpoint_dir=str(tmp_path / "checkpoint"))

    publish_page_views(broker.bootstrap, events_topic, first)
    before = spark35.call("page_view_counts", **run)
    publish_page_views(broker.bootstrap, events_topic, second)  # arrives while the query is down
    after = spark35.call("page_view_counts", **run)

    assert before["input_rows"] == len(first) and after["input_rows"] == len(second)
    assert after["id"] == before["id"]  # the same query, resumed from its checkpoint
    assert min(after["batch_ids"]) > max(before["batch_ids"])
    check = check_counts(sink_counts(events), latest_values(broker.bootstrap, counts_topic))
    assert check.ok, check.describe()


def test_spark35_sink_writes_every_row_once(spark35, broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name, 3)

    spark35.call("write_rows", bootstrap=broker.bootstrap, topic=topic_name, rows=500)

    messages = read_all(broker.bootstrap, topic_name)
    assert sorted(int(m.value().split(b"-")[1]) for m in messages) == list(range(500))
    assert all(m.key() == str(int(m.value().split(b"-")[1]) % 97).encode() for m in messages)
