"""Reading records that DeleteRecords or retention removed: failOnDataLoss decides.

failOnDataLoss=true must fail with Spark's data-loss error; failOnDataLoss=false must go on
with the records that are still there.
"""

from __future__ import annotations

import time

import pytest

from kafkapy_spark.batch_job import EventRange, offsets_json, read_range
from kafkapy_spark.kafka_client import create_topic, delete_records, partition_offsets, publish_records

pytestmark = pytest.mark.timeout(180)

# Spark's KAFKA_DATA_LOSS error (KafkaIllegalStateException): the general text, naming the
# option, then the reason; a record range that cannot be read is COULD_NOT_READ_OFFSET_RANGE.
DATA_LOSS_TEXT = "Some data may have been lost"
DATA_LOSS_REASON = "Could not read records in offset"


def publish(bootstrap: str, topic: str, partition: int, first: int, count: int, timestamp_ms: int | None = None,
            producer_config: dict | None = None) -> None:
    publish_records(bootstrap, topic, [
        (f"k{n}".encode(), f"{n}".encode(), timestamp_ms if timestamp_ms is not None else int(time.time() * 1000),
         None, partition)
        for n in range(first, first + count)
    ], producer_config)


def read_offsets(spark, bootstrap: str, topic: str, start: dict[int, int], fail_on_data_loss: bool) -> list[tuple[int, int]]:
    event_range = EventRange(topic, starting_offsets=offsets_json(topic, start), fail_on_data_loss=fail_on_data_loss)
    rows = read_range(spark, bootstrap, event_range).select("partition", "offset").collect()
    return sorted((row["partition"], row["offset"]) for row in rows)


def assert_data_loss_error(error: BaseException) -> None:
    text = str(error)
    assert DATA_LOSS_TEXT in text and "failOnDataLoss" in text and DATA_LOSS_REASON in text, text[:3000]


def test_batch_read_after_delete_records(spark, broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    for partition in (0, 1):
        publish(broker.bootstrap, topic_name, partition, 0, 100)
    assert delete_records(broker.bootstrap, topic_name, {0: 40}) == {0: 40}
    assert partition_offsets(broker.bootstrap, topic_name) == {0: (40, 100), 1: (0, 100)}

    with pytest.raises(Exception) as failure:
        read_offsets(spark, broker.bootstrap, topic_name, {0: 0, 1: 0}, fail_on_data_loss=True)
    assert_data_loss_error(failure.value)

    got = read_offsets(spark, broker.bootstrap, topic_name, {0: 0, 1: 0}, fail_on_data_loss=False)
    assert got == [(0, o) for o in range(40, 100)] + [(1, o) for o in range(100)]


def start_offsets_query(spark, bootstrap: str, topic: str, output_dir: str, fail_on_data_loss: bool):
    """A pass-through streaming query of (partition, offset) into Parquet files (exactly-once file sink)."""
    rows = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
        .load()
        .select("partition", "offset")
    )
    return (rows.writeStream.format("parquet").outputMode("append")
            .option("path", f"{output_dir}/data").option("checkpointLocation", f"{output_dir}/checkpoint").start())


def seen_offsets(spark, output_dir: str) -> list[int]:
    """Offsets the query has committed to its output so far, over all its runs."""
    return sorted(row["offset"] for row in spark.read.parquet(f"{output_dir}/data").collect())


def test_streaming_restart_after_delete_records(spark, broker, topic_name, tmp_path) -> None:
    from kafkapy_spark.streaming_job import process_all_available

    output_dir = str(tmp_path / "offsets-query")
    create_topic(broker.bootstrap, topic_name, 1)
    publish(broker.bootstrap, topic_name, 0, 0, 100)
    query = start_offsets_query(spark, broker.bootstrap, topic_name, output_dir, True)
    try:
        process_all_available(query)
        assert seen_offsets(spark, output_dir) == list(range(100))
    finally:
        query.stop()

    # While the query is down, 100 more records arrive and the first 50 of them are deleted.
    publish(broker.bootstrap, topic_name, 0, 100, 100)
    assert delete_records(broker.bootstrap, topic_name, {0: 150}) == {0: 150}

    failing = start_offsets_query(spark, broker.bootstrap, topic_name, output_dir, True)
    try:
        with pytest.raises(Exception) as failure:
            process_all_available(failing)
        assert_data_loss_error(failure.value)
        assert failing.exception() is not None
    finally:
        failing.stop()

    going_on = start_offsets_query(spark, broker.bootstrap, topic_name, output_dir, False)
    try:
        process_all_available(going_on)
    finally:
        going_on.stop()
    # Resumed after offset 99, skipped the deleted 100..149, and wrote nothing twice.
    assert seen_offsets(spark, output_dir) == list(range(100)) + list(range(150, 200))


def test_batch_read_after_retention_deleted_segments(spark, broker_factory, topic_name) -> None:
    retention_broker = broker_factory({"log.retention.check.interval.ms": "300"})
    bootstrap = retention_broker.bootstrap
    create_topic(bootstrap, topic_name, 1, {"segment.bytes": "1024", "retention.ms": "60000"})
    hour_ago = int(time.time() * 1000) - 3_600_000
    small_batches = {"linger.ms": 0, "batch.num.messages": 8}  # a batch must fit in a 1 KiB segment
    publish(bootstrap, topic_name, 0, 0, 200, hour_ago, small_batches)  # expired on arrival
    publish(bootstrap, topic_name, 0, 200, 50, None, small_batches)  # current: kept

    deadline = time.monotonic() + 30
    while partition_offsets(bootstrap, topic_name)[0][0] == 0:
        assert time.monotonic() < deadline, "retention removed nothing within 30 s"
        time.sleep(0.3)
    log_start, high = partition_offsets(bootstrap, topic_name)[0]
    assert 0 < log_start <= 200 and high == 250

    with pytest.raises(Exception) as failure:
        read_offsets(spark, bootstrap, topic_name, {0: 0}, fail_on_data_loss=True)
    assert_data_loss_error(failure.value)

    got = read_offsets(spark, bootstrap, topic_name, {0: 0}, fail_on_data_loss=False)
    assert got == [(0, o) for o in range(log_start, 250)]
