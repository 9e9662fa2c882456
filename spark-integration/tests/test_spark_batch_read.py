"""Batch reads with Spark's Kafka source: every column of every record, and offset/timestamp ranges."""

from __future__ import annotations

import time

import pytest

from kafkapy_spark.batch_job import EventRange, build_report, offsets_json, read_range, timestamps_json
from kafkapy_spark.events import generate_page_views
from kafkapy_spark.kafka_client import create_topic, publish_page_views, publish_records, read_all

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 8
PER_PARTITION = 25
BASE_TS = 1_700_000_000_000


def record_plan(topic: str) -> list[dict]:
    """200 records over 8 partitions: null keys and values, 0-3 headers (repeated names, null values)."""
    plan = []
    for partition in range(PARTITIONS):
        for offset in range(PER_PARTITION):
            n = partition * PER_PARTITION + offset
            headers = [(f"h{i % 2}", (f"v{n}-{i}".encode() if (n + i) % 5 else None)) for i in range(n % 4)]
            plan.append({
                "key": None if n % 11 == 0 else f"key-{n}".encode(),
                "value": None if n % 13 == 5 else f"value-{n}-".encode() * (1 + n % 3),
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "timestamp_ms": BASE_TS + n * 1000 + partition,
                "headers": headers,
            })
    return plan


def collect_records(spark, bootstrap: str, topic: str) -> list[dict]:
    from pyspark.sql import functions as F

    rows = (
        read_range(spark, bootstrap, EventRange(topic, include_headers=True))
        .select("key", "value", "topic", "partition", "offset",
                F.unix_millis("timestamp").alias("timestamp_ms"), "timestampType", "headers")
        .collect()
    )
    records = []
    for row in rows:
        record = row.asDict()
        record["key"] = None if record["key"] is None else bytes(record["key"])
        record["value"] = None if record["value"] is None else bytes(record["value"])
        record["headers"] = [(h["key"], None if h["value"] is None else bytes(h["value"]))
                             for h in (record["headers"] or [])]
        records.append(record)
    return sorted(records, key=lambda r: (r["partition"], r["offset"]))


def test_batch_read_returns_every_column_of_every_record(spark, broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    plan = record_plan(topic_name)
    publish_records(broker.bootstrap, topic_name, [
        (r["key"], r["value"], r["timestamp_ms"], r["headers"], r["partition"]) for r in plan
    ])

    records = collect_records(spark, broker.bootstrap, topic_name)

    expected = [{**r, "timestampType": 0} for r in plan]  # 0 = CreateTime
    assert len(records) == len(expected) == PARTITIONS * PER_PARTITION
    for got, want in zip(records, expected):
        assert got == want


def test_log_append_time_topic_reports_broker_timestamps(spark, broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name, 2, {"message.timestamp.type": "LogAppendTime"})
    before_ms = int(time.time() * 1000)
    publish_records(broker.bootstrap, topic_name, [
        (f"k{i}".encode(), f"v{i}".encode(), BASE_TS + i, [("n", str(i).encode())], i % 2) for i in range(20)
    ])
    after_ms = int(time.time() * 1000)

    records = collect_records(spark, broker.bootstrap, topic_name)

    assert len(records) == 20
    assert {r["timestampType"] for r in records} == {1}  # 1 = LogAppendTime
    assert all(before_ms - 1000 <= r["timestamp_ms"] <= after_ms + 1000 for r in records)
    assert sorted(int(r["value"][1:]) for r in records) == list(range(20))
    assert all(r["headers"] == [("n", r["value"][1:])] for r in records)


@pytest.fixture(scope="module")
def events_topic(broker) -> tuple[str, list]:
    """An 8-partition topic of 4000 page views, and what a plain client reads back from it."""
    topic = "page-views-range"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    publish_page_views(broker.bootstrap, topic, generate_page_views(4000, BASE_TS, events_per_minute=1000))
    messages = read_all(broker.bootstrap, topic)
    assert len(messages) == 4000
    return topic, messages


def test_offset_range_as_json(spark, broker, events_topic) -> None:
    topic, messages = events_topic
    ends = {p: sum(1 for m in messages if m.partition() == p) for p in range(PARTITIONS)}
    start = {p: (-2 if p == 0 else p * 3) for p in range(PARTITIONS)}  # -2: earliest
    end = {p: (-1 if p == 1 else ends[p] - p * 5) for p in range(PARTITIONS)}  # -1: latest
    event_range = EventRange(topic, starting_offsets=offsets_json(topic, start), ending_offsets=offsets_json(topic, end))

    rows = read_range(spark, broker.bootstrap, event_range).select("partition", "offset").collect()

    got = sorted((row["partition"], row["offset"]) for row in rows)
    want = sorted(
        (p, o) for p in range(PARTITIONS)
        for o in range(0 if start[p] == -2 else start[p], ends[p] if end[p] == -1 else end[p])
    )
    assert got == want


def test_starting_offsets_by_timestamp(spark, broker, events_topic) -> None:
    topic, messages = events_topic
    since_ms = sorted(m.timestamp()[1] for m in messages)[len(messages) // 2]
    event_range = EventRange(topic, starting_offsets_by_timestamp=timestamps_json(
        topic, {p: since_ms for p in range(PARTITIONS)}))

    rows = read_range(spark, broker.bootstrap, event_range).select("partition", "offset").collect()

    # Kafka's rule: each partition starts at its first offset whose timestamp is >= the given one.
    want = []
    for p in range(PARTITIONS):
        in_partition = sorted((m.offset(), m.timestamp()[1]) for m in messages if m.partition() == p)
        first = next(offset for offset, ts in in_partition if ts >= since_ms)
        want += [(p, offset) for offset, _ in in_partition if offset >= first]
    assert sorted((row["partition"], row["offset"]) for row in rows) == sorted(want)
    assert 0 < len(rows) < len(messages)


def test_batch_report_matches_the_events_in_range(spark, broker, events_topic) -> None:
    import json
    from collections import Counter

    topic, messages = events_topic
    start = {p: 10 for p in range(PARTITIONS)}
    end = {p: 110 for p in range(PARTITIONS)}
    report = build_report(spark, broker.bootstrap, EventRange(
        topic, starting_offsets=offsets_json(topic, start), ending_offsets=offsets_json(topic, end)))

    in_range = [json.loads(m.value()) for m in messages if 10 <= m.offset() < 110]
    assert report.records == len(in_range) == PARTITIONS * 100
    assert report.users == len({e["user"] for e in in_range})
    assert dict(report.views_per_page) == dict(Counter(e["page"] for e in in_range))
    assert [(s.partition, s.records, s.first_offset, s.last_offset) for s in report.partitions] == [
        (p, 100, 10, 109) for p in range(PARTITIONS)
    ]
    assert report.first_event_time == min(e["event_time"] for e in in_range)
    assert report.last_event_time == max(e["event_time"] for e in in_range)
    assert "views per page" in report.format()
