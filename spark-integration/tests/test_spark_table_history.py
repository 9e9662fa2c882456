"""The pipeline's table step: the stream from format("kafka") joined with history from the topic's table.

The events topic has kafkapy.iceberg.mode=key_value (commits every 500 ms). After a first batch of
page views is in the table, the step reads the table's snapshot with Iceberg's Spark runtime and
starts its stream at the snapshot's kafkapy.next-offsets; a second batch is published. Every
record of the second batch comes out once, enriched with its user's views and last page among the
first batch (computed here directly from the events), and no record of the first batch does.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from kafkapy_spark.events import generate_page_views
from kafkapy_spark.kafka_client import create_topic, partition_offsets, publish_page_views, read_all
from kafkapy_spark.streaming_job import process_all_available
from kafkapy_spark.table_history import TableHistoryConfig, start_enrichment, table_name

pytestmark = pytest.mark.timeout(180)

START_MS = 1_763_726_400_000
PARTITIONS = 4


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"kafkapy.iceberg.commit.interval.ms": "500"}


def test_stream_joined_with_table_history(iceberg_spark, broker, topic_name, checkpoint_dir) -> None:
    pytest.importorskip("pyiceberg")
    events_topic, enriched_topic = f"{topic_name}-events", f"{topic_name}-enriched"
    create_topic(broker.bootstrap, events_topic, PARTITIONS, {"kafkapy.iceberg.mode": "key_value"})
    create_topic(broker.bootstrap, enriched_topic, 2)
    views = generate_page_views(1500, START_MS, events_per_minute=600, users=40, max_disorder_ms=0)
    history, fresh = views[:1000], views[1000:]

    publish_page_views(broker.bootstrap, events_topic, history)
    ends = {p: high for p, (_, high) in partition_offsets(broker.bootstrap, events_topic).items()}
    from conformance.tables.readers import TableLocation, wait_for_table

    wait_for_table(TableLocation(broker.data_dir), events_topic, ends)

    spark = iceberg_spark(broker.data_dir)
    config = TableHistoryConfig(broker.bootstrap, events_topic, PARTITIONS, table_name("kafkapy", events_topic),
                                enriched_topic, checkpoint_dir)
    query, snapshot = start_enrichment(spark, config)
    try:
        assert snapshot.next_offsets == {p: end for p, end in ends.items() if end > 0}
        publish_page_views(broker.bootstrap, events_topic, fresh)
        process_all_available(query)
    finally:
        query.stop()

    out = [json.loads(m.value()) for m in read_all(broker.bootstrap, enriched_topic)]
    # each record of the second batch once; none of the first (the stream starts where the table ends)
    assert sorted((r["user"], r["page"], r["event_time"]) for r in out) == sorted(
        (v.user, v.page, json.loads(v.value)["event_time"]) for v in fresh)
    assert all(r["offset"] >= ends[r["partition"]] for r in out)
    views_by_user = Counter(v.user for v in history)
    last_page = {v.user: v.page for v in history}  # one producer, a user's views in order in one partition
    for record in out:
        assert record["history_views"] == views_by_user.get(record["user"], 0), record
        assert record["history_last_page"] == last_page.get(record["user"]), record
