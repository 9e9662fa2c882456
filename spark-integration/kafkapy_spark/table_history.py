"""The pipeline's table step: each new page view joined with its user's history from the topic's table.

The events topic has `kafkapy.iceberg.mode=key_value`, so kafkapy also writes its records, exactly
once, to the Iceberg table `kafka.<topic>` (docs/tables.md). History no longer needs a replay of the
log through format("kafka"):

1. the table's current snapshot is read in batch with Iceberg's Spark runtime, together with the
   snapshot's `kafkapy.next-offsets` (per partition, the first offset the table does not hold);
2. history per user: the views in the table and the page of the user's latest view (highest
   offset: a user is a key, so all their views are in one partition);
3. a stream on format("kafka") starts at exactly those offsets, so every record is counted once,
   in the history or in the stream;
4. each streamed view is joined (stream-static, left) with its user's history and written as JSON
   to the enriched topic:

    key   = user
    value = {"user", "page", "event_time", "partition", "offset", "history_views", "history_last_page"}

A user the table has not seen yet gets history_views 0 and history_last_page null.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from .streaming_job import event_schema, EVENT_TIME_FORMAT

NEXT_OFFSETS_PROPERTY = "kafkapy.next-offsets"
EARLIEST = -2


def iceberg_catalog_conf(catalog: str, log_dir: str) -> dict[str, str]:
    """Spark settings for kafkapy's embedded catalog under a broker's first log dir (docs/tables.md)."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": f"jdbc:sqlite:{log_dir}/iceberg/catalog.db",
        f"{prefix}.warehouse": f"file://{log_dir}/iceberg/warehouse",
        f"{prefix}.jdbc.schema-version": "V1",
    }


def table_name(catalog: str, topic: str) -> str:
    """The Spark name of a topic's table: `<catalog>.kafka.`<topic>`` (topics may hold '.' and '-')."""
    return f"{catalog}.kafka.`{topic}`"


@dataclass(slots=True)
class TableSnapshot:
    """The table snapshot the history is read from, and the log offsets it covers."""

    snapshot_id: int | None
    next_offsets: dict[int, int]

    def starting_offsets(self, topic: str, partitions: int) -> str:
        """startingOffsets JSON for the stream: each partition right after the table's last row."""
        return json.dumps({topic: {str(p): self.next_offsets.get(p, EARLIEST) for p in range(partitions)}})


def current_snapshot(spark, table: str) -> TableSnapshot:
    """The table's current snapshot and its kafkapy.next-offsets (none yet: empty)."""
    current = spark.sql(f"SELECT snapshot_id FROM {table}.history WHERE is_current_ancestor "
                        "ORDER BY made_current_at DESC LIMIT 1").collect()
    if not current:
        return TableSnapshot(None, {})
    snapshot_id = current[0].snapshot_id
    summary = spark.sql(f"SELECT summary FROM {table}.snapshots WHERE snapshot_id = {snapshot_id}").collect()[0].summary
    covered = json.loads(summary.get(NEXT_OFFSETS_PROPERTY) or "{}")
    return TableSnapshot(snapshot_id, {int(p): int(o) for p, o in covered.items()})


def parse_table_events(rows):
    """Table rows (the `kafka` struct and the JSON `value`) → (user, page, partition, offset) rows."""
    from pyspark.sql import functions as F

    event = F.from_json(F.col("value").cast("string"), event_schema(), {"timestampFormat": EVENT_TIME_FORMAT})
    return (rows.select(event.alias("event"), F.col("kafka.partition").alias("partition"),
                        F.col("kafka.offset").alias("offset"))
            .select("event.user", "event.page", "partition", "offset")
            .where(F.col("user").isNotNull()))


def user_history(spark, table: str, snapshot: TableSnapshot):
    """Per user, from the snapshot: views and the page of the latest view (max_by offset)."""
    from pyspark.sql import functions as F

    if snapshot.snapshot_id is None:
        return spark.createDataFrame([], "user string, history_views long, history_last_page string")
    rows = spark.read.option("snapshot-id", str(snapshot.snapshot_id)).table(table)
    return (parse_table_events(rows).groupBy("user")
            .agg(F.count(F.lit(1)).alias("history_views"),
                 F.max_by("page", F.struct("partition", "offset")).alias("history_last_page")))


@dataclass(slots=True)
class TableHistoryConfig:
    """Where the step reads (topic, table), writes and checkpoints."""

    bootstrap: str
    events_topic: str
    partitions: int
    table: str  # table_name(catalog, events topic)
    enriched_topic: str
    checkpoint_dir: str
    max_offsets_per_trigger: int | None = None
    sink_options: Mapping[str, str] = field(default_factory=dict)
    query_name: str = "page_views_with_history"


def start_enrichment(spark, config: TableHistoryConfig):
    """Start the stream joined with the table's history; returns (StreamingQuery, TableSnapshot)."""
    from pyspark.sql import functions as F

    snapshot = current_snapshot(spark, config.table)
    history = user_history(spark, config.table, snapshot)
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", config.bootstrap)
              .option("subscribe", config.events_topic)
              .option("startingOffsets", snapshot.starting_offsets(config.events_topic, config.partitions))
              .option("failOnDataLoss", "true"))
    if config.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    event = F.from_json(F.col("value").cast("string"), event_schema(), {"timestampFormat": EVENT_TIME_FORMAT})
    views = (reader.load()
             .select(event.alias("event"), "partition", "offset")
             .select("event.*", "partition", "offset")
             .where(F.col("user").isNotNull()))
    enriched = (views.join(history, "user", "left")
                .select(F.col("user").alias("key"), F.to_json(F.struct(
                    "user", "page", F.date_format("event_time", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("event_time"),
                    "partition", "offset",
                    F.coalesce("history_views", F.lit(0)).alias("history_views"), "history_last_page",
                )).alias("value")))
    writer = (enriched.writeStream.format("kafka").queryName(config.query_name).outputMode("append")
              .option("kafka.bootstrap.servers", config.bootstrap)
              .option("topic", config.enriched_topic)
              .option("checkpointLocation", config.checkpoint_dir))
    for key, value in config.sink_options.items():
        writer = writer.option(key, value)
    return writer.start(), snapshot
