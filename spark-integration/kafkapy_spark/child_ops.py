"""What a child Spark driver (child_driver.py) can be asked to do; JSON in, JSON out.

Every operation takes the SparkSession first and returns only JSON values: bytes as hex strings
(None stays None), timestamps as epoch milliseconds.
"""

from __future__ import annotations

from .batch_job import EventRange, read_range
from .streaming_job import StreamingJobConfig, process_all_available, start_page_view_counts


def _hex(data) -> str | None:
    return None if data is None else bytes(data).hex()


def batch_read(spark, bootstrap: str, topic: str, starting_offsets: str = "earliest",
               ending_offsets: str = "latest", fail_on_data_loss: bool = True) -> list[dict]:
    """Every record of `topic` in range, as Spark's Kafka source returns it (headers included)."""
    from pyspark.sql import functions as F

    event_range = EventRange(topic, starting_offsets=starting_offsets, ending_offsets=ending_offsets,
                             fail_on_data_loss=fail_on_data_loss, include_headers=True)
    rows = (read_range(spark, bootstrap, event_range)
            .select("key", "value", "topic", "partition", "offset",
                    F.expr("unix_millis(timestamp)").alias("timestamp_ms"), "timestampType", "headers")
            .collect())
    return [{
        "key": _hex(row["key"]), "value": _hex(row["value"]), "topic": row["topic"],
        "partition": row["partition"], "offset": row["offset"], "timestamp_ms": row["timestamp_ms"],
        "timestampType": row["timestampType"],
        "headers": [[h["key"], _hex(h["value"])] for h in (row["headers"] or [])],
    } for row in rows]


def write_rows(spark, bootstrap: str, topic: str, rows: int, options: dict[str, str] | None = None) -> None:
    """Write rows 0..rows-1 (key id % 97, value "value-<id>") with Spark's Kafka sink, 4 tasks."""
    frame = spark.range(rows).selectExpr(
        "CAST(id % 97 AS STRING) AS key", "CONCAT('value-', CAST(id AS STRING)) AS value").repartition(4)
    writer = frame.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    writer.save()


def page_view_counts(spark, bootstrap: str, events_topic: str, counts_topic: str, checkpoint_dir: str,
                     max_offsets_per_trigger: int | None = None, timeout_s: float = 120.0) -> dict:
    """Run the streaming job (Kafka source -> windowed counts -> Kafka sink) until it has caught up.

    Resumes from `checkpoint_dir` if a previous run left one. Returns the run's query id, the ids
    of the micro-batches it ran and how many input rows they read.
    """
    config = StreamingJobConfig(bootstrap, events_topic, counts_topic, checkpoint_dir,
                                max_offsets_per_trigger=max_offsets_per_trigger)
    query = start_page_view_counts(spark, config)
    try:
        process_all_available(query, timeout_s)
    finally:
        query.stop()
    progress = query.recentProgress
    return {"id": str(query.id), "batch_ids": [p["batchId"] for p in progress],
            "input_rows": sum(p["numInputRows"] for p in progress)}
