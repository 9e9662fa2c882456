"""The Structured Streaming job: page views per page in 1-minute event-time windows.

Reads the events topic with Spark's Kafka source, counts views per (page, window) with a
watermark, and writes each changed count to a compacted topic with Spark's Kafka sink:

    key   = "<page>|<window start, UTC ISO 8601>"        e.g. "/cart|2026-11-21T12:00:00Z"
    value = {"page": ..., "window_start": ..., "window_end": ..., "views": N}

The query runs in update mode: every micro-batch writes the new count of each window it
touched, so the compacted topic's last value per key is the window's current count. The
checkpoint holds the source offsets and the aggregation state; a query restarted from it
resumes at the first unfinished micro-batch, so no window is lost and no event is counted
twice in the final values (a re-run micro-batch may write a count again, with the same value).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

WINDOW_DURATION = "1 minute"
DEFAULT_WATERMARK = "30 seconds"
WINDOW_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss'Z'"
# from_json's default timestamp format rejects a literal "Z"; this one reads the generator's output.
EVENT_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss[.SSS]XXX"


def event_schema():
    """Spark schema of the events' JSON values."""
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    return StructType([
        StructField("user", StringType()),
        StructField("page", StringType()),
        StructField("event_time", TimestampType()),
    ])


def parse_events(kafka_rows):
    """Kafka source rows -> (user, page, event_time) rows; undecodable values become nulls and are dropped."""
    from pyspark.sql import functions as F

    parsed = kafka_rows.select(
        F.from_json(F.col("value").cast("string"), event_schema(),
                    {"timestampFormat": EVENT_TIME_FORMAT}).alias("event")
    ).select("event.*")
    return parsed.where(F.col("page").isNotNull() & F.col("event_time").isNotNull())


def count_page_views(events, watermark: str = DEFAULT_WATERMARK):
    """Views per page per 1-minute event-time window, with a watermark bounding the state."""
    from pyspark.sql import functions as F

    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", WINDOW_DURATION).alias("window"), F.col("page"))
        .agg(F.count(F.lit(1)).alias("views"))
    )


def to_sink_rows(counts):
    """Counts -> (key, value) string columns for Spark's Kafka sink."""
    from pyspark.sql import functions as F

    start = F.date_format(F.col("window.start"), WINDOW_TIME_FORMAT)
    end = F.date_format(F.col("window.end"), WINDOW_TIME_FORMAT)
    return counts.select(
        F.concat_ws("|", F.col("page"), start).alias("key"),
        F.to_json(F.struct(
            F.col("page"), start.alias("window_start"), end.alias("window_end"), F.col("views"),
        )).alias("value"),
    )


@dataclass(slots=True)
class StreamingJobConfig:
    """Where the streaming job reads, writes and checkpoints, and how it paces itself."""

    bootstrap: str
    events_topic: str
    counts_topic: str
    checkpoint_dir: str
    watermark: str = DEFAULT_WATERMARK
    starting_offsets: str = "earliest"
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    trigger_interval: str | None = None  # None: start the next micro-batch as soon as one ends
    query_name: str = "page_view_counts"
    source_options: Mapping[str, str] = field(default_factory=dict)
    sink_options: Mapping[str, str] = field(default_factory=dict)


def read_events_stream(spark, config: StreamingJobConfig):
    """The Kafka source for the events topic, as a streaming DataFrame."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("subscribe", config.events_topic)
        .option("startingOffsets", config.starting_offsets)
        .option("failOnDataLoss", str(config.fail_on_data_loss).lower())
    )
    if config.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    for key, value in config.source_options.items():
        reader = reader.option(key, value)
    return reader.load()


def start_page_view_counts(spark, config: StreamingJobConfig):
    """Start the streaming query (resuming from the checkpoint if there is one); returns the StreamingQuery."""
    rows = to_sink_rows(count_page_views(parse_events(read_events_stream(spark, config)), config.watermark))
    writer = (
        rows.writeStream.format("kafka")
        .queryName(config.query_name)
        .outputMode("update")
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("topic", config.counts_topic)
        .option("checkpointLocation", config.checkpoint_dir)
    )
    for key, value in config.sink_options.items():
        writer = writer.option(key, value)
    if config.trigger_interval:
        writer = writer.trigger(processingTime=config.trigger_interval)
    return writer.start()


class QueryStalled(RuntimeError):
    """A streaming query did not catch up with its source within the allowed time."""


def process_all_available(query, timeout_s: float = 120.0) -> None:
    """query.processAllAvailable(), but bounded: raises QueryStalled with the query's status on timeout.

    processAllAvailable() blocks until every record available at the call has been
    processed, or forever if the query stops making progress; a pipeline run and a test
    must end, so the wait runs in a helper thread and is given up after `timeout_s`.
    """
    import threading

    failure: list[BaseException] = []

    def wait() -> None:
        try:
            query.processAllAvailable()
        except BaseException as error:  # handed to the caller below
            failure.append(error)

    waiter = threading.Thread(target=wait, name=f"wait-{query.name}", daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    if waiter.is_alive():
        raise QueryStalled(
            f"query {query.name} ({query.id}) did not catch up within {timeout_s:.0f} s; "
            f"status={query.status} lastProgress={query.lastProgress}"
        )
    if failure:
        raise failure[0]
