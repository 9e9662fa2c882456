"""The batch job: read a range of the events topic with Spark's Kafka source and report on it.

The range is given the ways Spark's Kafka source takes it:
  - startingOffsets / endingOffsets as JSON, {"events": {"0": 42, "1": -2}} (-2 = earliest,
    -1 = latest), or the words "earliest" / "latest";
  - startingOffsetsByTimestamp as JSON, {"events": {"0": 1763726400000, ...}}: each partition
    starts at its first record whose timestamp is >= the given epoch milliseconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from .streaming_job import parse_events

EARLIEST = -2
LATEST = -1


def offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    """startingOffsets/endingOffsets JSON for one topic: {"topic": {"partition": offset}}."""
    return json.dumps({topic: {str(partition): int(offset) for partition, offset in sorted(offsets.items())}})


def timestamps_json(topic: str, timestamps_ms: Mapping[int, int]) -> str:
    """startingOffsetsByTimestamp JSON for one topic: {"topic": {"partition": epoch_ms}}."""
    return json.dumps({topic: {str(partition): int(ts) for partition, ts in sorted(timestamps_ms.items())}})


@dataclass(slots=True)
class EventRange:
    """Which records of a topic the batch job reads."""

    topic: str
    starting_offsets: str = "earliest"  # "earliest" or offsets JSON
    ending_offsets: str = "latest"  # "latest" or offsets JSON
    starting_offsets_by_timestamp: str | None = None  # JSON; takes precedence over starting_offsets
    fail_on_data_loss: bool = True
    include_headers: bool = False
    extra_options: Mapping[str, str] = field(default_factory=dict)


def read_range(spark, bootstrap: str, event_range: EventRange):
    """The raw Kafka rows of `event_range` (key, value, topic, partition, offset, timestamp, ...)."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", event_range.topic)
        .option("endingOffsets", event_range.ending_offsets)
        .option("failOnDataLoss", str(event_range.fail_on_data_loss).lower())
        .option("includeHeaders", str(event_range.include_headers).lower())
    )
    if event_range.starting_offsets_by_timestamp:
        reader = reader.option("startingOffsetsByTimestamp", event_range.starting_offsets_by_timestamp)
    else:
        reader = reader.option("startingOffsets", event_range.starting_offsets)
    for key, value in event_range.extra_options.items():
        reader = reader.option(key, value)
    return reader.load()


@dataclass(slots=True)
class PartitionSpan:
    """Records read from one partition: how many, and the first and last offset."""

    partition: int
    records: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class BatchReport:
    """What the batch job found in the range it read."""

    topic: str
    records: int
    users: int
    first_event_time: str | None
    last_event_time: str | None
    views_per_page: list[tuple[str, int]]
    partitions: list[PartitionSpan]

    def format(self) -> str:
        """A plain-text report for the terminal."""
        lines = [
            f"batch report for topic {self.topic}",
            f"  records read      {self.records}",
            f"  distinct users    {self.users}",
            f"  event time range  {self.first_event_time} .. {self.last_event_time}",
            "  per partition     " + ", ".join(
                f"p{s.partition}: {s.records} [{s.first_offset}..{s.last_offset}]" for s in self.partitions
            ),
            "  views per page:",
        ]
        width = max((len(page) for page, _ in self.views_per_page), default=4)
        lines += [f"    {page:<{width}}  {views:>8}" for page, views in self.views_per_page]
        return "\n".join(lines)


def build_report(spark, bootstrap: str, event_range: EventRange) -> BatchReport:
    """Read `event_range` and summarise it (three small Spark aggregations over one cached read)."""
    from pyspark.sql import functions as F

    raw = read_range(spark, bootstrap, event_range).cache()
    try:
        spans = [
            PartitionSpan(row["partition"], row["records"], row["first_offset"], row["last_offset"])
            for row in raw.groupBy("partition").agg(
                F.count(F.lit(1)).alias("records"),
                F.min("offset").alias("first_offset"),
                F.max("offset").alias("last_offset"),
            ).orderBy("partition").collect()
        ]
        events = parse_events(raw)
        summary = events.agg(
            F.count(F.lit(1)).alias("records"),
            F.countDistinct("user").alias("users"),
            F.date_format(F.min("event_time"), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("first"),
            F.date_format(F.max("event_time"), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("last"),
        ).collect()[0]
        pages = [
            (row["page"], row["views"])
            for row in events.groupBy("page").agg(F.count(F.lit(1)).alias("views"))
            .orderBy(F.desc("views"), "page").collect()
        ]
    finally:
        raw.unpersist()
    return BatchReport(
        topic=event_range.topic,
        records=summary["records"],
        users=summary["users"],
        first_event_time=summary["first"],
        last_event_time=summary["last"],
        views_per_page=pages,
        partitions=spans,
    )
