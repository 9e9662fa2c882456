"""The whole pipeline in one command: kafkapy, generator, streaming counts, restart, batch report.

    python spark-integration/run_pipeline.py                       # local kafkapy, Spark local[*]
    python spark-integration/run_pipeline.py --master spark://host:7077 --bootstrap host:9092
    python spark-integration/run_pipeline.py --table                # and the table step (below)

With --table the events topic is also an Iceberg table (kafkapy.iceberg.mode=key_value, docs/tables.md)
and a last step joins a stream of new page views from format("kafka") with each user's history read
from the table (kafkapy_spark/table_history.py); Iceberg's Spark runtime comes from Maven Central.

Without --bootstrap a kafkapy broker is started on a free 127.0.0.1 port for the run.
Exit status 0 means the streaming job's final counts equal the counts computed directly from
the generated events.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from .batch_job import EventRange, build_report, offsets_json, timestamps_json
from .events import WINDOW_MS, PageView, generate_page_views, sink_counts
from .jars import ConnectorJars, ConnectorUnavailable
from .kafka_client import create_topic, latest_values, partition_offsets, publish_page_views
from .session import build_spark_session
from .streaming_job import StreamingJobConfig, process_all_available, start_page_view_counts

log = logging.getLogger("kafkapy_spark.pipeline")


@dataclass(slots=True)
class CountCheck:
    """How the streaming job's final counts compare with counts computed from the events."""

    expected_windows: int
    written_windows: int
    missing: list[str]
    wrong: list[tuple[str, int, int]]  # key, expected, written
    unexpected: list[str]

    @property
    def ok(self) -> bool:
        return not (self.missing or self.wrong or self.unexpected)

    def describe(self) -> str:
        if self.ok:
            return f"counts match: {self.written_windows} (page, window) counts equal the generated events"
        return (
            f"counts differ: {len(self.missing)} missing, {len(self.wrong)} wrong, "
            f"{len(self.unexpected)} unexpected (first wrong: {self.wrong[:3]}, missing: {self.missing[:3]})"
        )


def check_counts(expected: dict[str, int], written: dict[bytes, bytes | None]) -> CountCheck:
    """Compare expected sink counts with the last value per key of the counts topic."""
    actual = {key.decode(): json.loads(value)["views"] for key, value in written.items() if value is not None}
    return CountCheck(
        expected_windows=len(expected),
        written_windows=len(actual),
        missing=sorted(set(expected) - set(actual)),
        wrong=sorted((k, expected[k], actual[k]) for k in expected.keys() & actual.keys() if expected[k] != actual[k]),
        unexpected=sorted(set(actual) - set(expected)),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run_pipeline.py", description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers; default: start a local kafkapy")
    parser.add_argument("--events", type=int, default=20_000, help="page views to generate (default 20000)")
    parser.add_argument("--events-per-minute", type=int, default=1_200, help="event-time density (default 1200)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the events topic (default 8)")
    parser.add_argument("--events-topic", default="page-views")
    parser.add_argument("--counts-topic", default="page-view-counts")
    parser.add_argument("--watermark", default="30 seconds")
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=5_000)
    parser.add_argument("--no-restart", action="store_true",
                        help="run the streaming query once instead of stopping and restarting it midway")
    parser.add_argument("--work-dir", type=Path,
                        help="checkpoints (and the local broker's data); default: a temporary directory")
    parser.add_argument("--ui", action="store_true", help="enable the Spark UI")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--table", action="store_true",
                        help="the table step: the events topic is also an Iceberg table; new page views from "
                             "format(\"kafka\") joined with history from the table")
    parser.add_argument("--table-log-dir", type=Path,
                        help="with --table and --bootstrap: the broker's first log dir (its embedded catalog), "
                             "readable from here; default: the local broker's")
    parser.add_argument("--table-events", type=int, default=2_000,
                        help="new page views the table step streams (default 2000)")
    args = parser.parse_args(argv)
    if args.table and args.bootstrap and args.table_log_dir is None:
        parser.error("--table with --bootstrap needs --table-log-dir (the broker's first log dir)")
    return args


def aligned_start_ms(events: int, events_per_minute: int) -> int:
    """An event-time start on a minute boundary such that the last event is about now."""
    span_ms = events * WINDOW_MS // max(events_per_minute, 1)
    start = int(time.time() * 1000) - span_ms - WINDOW_MS
    return start - start % WINDOW_MS


def run_streaming(spark, config: StreamingJobConfig, bootstrap: str, batches: list[list[PageView]]) -> None:
    """Publish each batch of events, let the query catch up, and restart the query between batches."""
    for number, batch in enumerate(batches, start=1):
        query = start_page_view_counts(spark, config)
        log.info("streaming query %s started (run %d of %d, checkpoint %s)",
                 query.id, number, len(batches), config.checkpoint_dir)
        published = publish_page_views(bootstrap, config.events_topic, batch)
        log.info("published %d page views to %s", published, config.events_topic)
        process_all_available(query, timeout_s=1800)
        progress = query.lastProgress or {}
        log.info("query caught up at batch %s; stopping it", progress.get("batchId"))
        query.stop()


def run_pipeline(args: argparse.Namespace) -> int:
    """Run everything; returns the process exit status."""
    with ExitStack() as cleanup:
        work_dir = args.work_dir
        if work_dir is None:
            work_dir = Path(tempfile.mkdtemp(prefix="kafkapy-spark-"))
            cleanup.callback(shutil.rmtree, work_dir, True)
        work_dir.mkdir(parents=True, exist_ok=True)

        bootstrap = args.bootstrap
        if bootstrap is None:
            sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for conformance/
            from conformance.broker_process import start_broker

            overrides = {"kafkapy.iceberg.commit.interval.ms": "1000"} if args.table else None
            broker = cleanup.enter_context(start_broker(overrides=overrides, work_dir=work_dir / "broker"))
            bootstrap = broker.bootstrap
            log.info("kafkapy broker started at %s (log %s)", bootstrap, broker.log_path)
            if args.table_log_dir is None:
                args.table_log_dir = broker.data_dir

        create_topic(bootstrap, args.events_topic, args.partitions,
                     {"kafkapy.iceberg.mode": "key_value"} if args.table else None)
        create_topic(bootstrap, args.counts_topic, 4, {"cleanup.policy": "compact"})

        events = generate_page_views(
            args.events, aligned_start_ms(args.events, args.events_per_minute), args.events_per_minute
        )
        try:
            connector, extra_conf = None, None
            if args.table:
                connector, extra_conf = table_session_settings(args.table_log_dir)
            spark = build_spark_session(args.master, "kafkapy-pipeline", connector=connector,
                                        shuffle_partitions=args.shuffle_partitions, ui=args.ui, extra_conf=extra_conf)
        except ConnectorUnavailable as error:
            print(f"cannot run the pipeline: {error}", file=sys.stderr)
            return 2
        cleanup.callback(spark.stop)

        config = StreamingJobConfig(
            bootstrap=bootstrap,
            events_topic=args.events_topic,
            counts_topic=args.counts_topic,
            checkpoint_dir=str(work_dir / "checkpoints" / "page_view_counts"),
            watermark=args.watermark,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
        )
        half = len(events) // 2
        batches = [events] if args.no_restart else [events[:half], events[half:]]
        started = time.monotonic()
        run_streaming(spark, config, bootstrap, batches)
        log.info("streaming finished in %.1f s", time.monotonic() - started)

        check = check_counts(sink_counts(events), latest_values(bootstrap, args.counts_topic))
        print(check.describe())

        offsets = partition_offsets(bootstrap, args.events_topic)
        quarter = {p: low + (high - low) // 4 for p, (low, high) in offsets.items()}
        three_quarters = {p: low + 3 * (high - low) // 4 for p, (low, high) in offsets.items()}
        by_offsets = EventRange(
            args.events_topic,
            starting_offsets=offsets_json(args.events_topic, quarter),
            ending_offsets=offsets_json(args.events_topic, three_quarters),
        )
        print(f"\nstartingOffsets={by_offsets.starting_offsets} endingOffsets={by_offsets.ending_offsets}")
        print(build_report(spark, bootstrap, by_offsets).format())

        since_ms = events[len(events) * 3 // 4].event_time_ms
        by_time = EventRange(
            args.events_topic,
            starting_offsets_by_timestamp=timestamps_json(args.events_topic, {p: since_ms for p in offsets}),
        )
        print(f"\nstartingOffsetsByTimestamp={by_time.starting_offsets_by_timestamp} endingOffsets=latest")
        print(build_report(spark, bootstrap, by_time).format())
        table_ok = True
        if args.table:
            fresh = generate_page_views(args.table_events, events[-1].event_time_ms + 1, args.events_per_minute,
                                        seed=11)
            table_ok = run_table_step(spark, bootstrap, args, events, fresh, work_dir)
        return 0 if check.ok and table_ok else 1


def table_session_settings(log_dir: Path):
    """The Kafka connector plus Iceberg's Spark runtime and sqlite-jdbc (Maven Central, pinned as the
    table readers pin them), and the catalog `kafkapy` over the broker's embedded catalog."""
    from .jars import resolve_connector
    from .table_history import iceberg_catalog_conf

    from conformance.maven import MavenUnavailable, jars
    from conformance.tables.readers import ICEBERG_SPARK_RUNTIME, SQLITE_JDBC

    connector = resolve_connector()
    try:
        iceberg = [Path(jar) for jar in jars([ICEBERG_SPARK_RUNTIME, SQLITE_JDBC])]
    except MavenUnavailable as error:
        raise ConnectorUnavailable(f"{ICEBERG_SPARK_RUNTIME} from Maven Central: {error}") from None
    conf = iceberg_catalog_conf("kafkapy", str(log_dir))
    if connector.jars:
        connector = ConnectorJars(jars=connector.jars + iceberg, source=connector.source)
    else:  # the connector through spark.jars.packages: Iceberg's jars beside it
        conf["spark.jars"] = ",".join(str(jar) for jar in iceberg)
    conf["spark.sql.catalog.kafkapy.cache-enabled"] = "false"  # the step polls the table's snapshots
    return connector, conf


def run_table_step(spark, bootstrap: str, args: argparse.Namespace, history: list[PageView],
                   fresh: list[PageView], work_dir: Path, timeout_s: float = 300.0) -> bool:
    """Once the table holds every published view, stream `fresh` views joined with the history from
    the table; True when each fresh view comes out once with its user's views and last page."""
    from collections import Counter

    from .kafka_client import read_all
    from .streaming_job import process_all_available
    from .table_history import TableHistoryConfig, current_snapshot, start_enrichment, table_name

    table = table_name("kafkapy", args.events_topic)
    ends = {p: high for p, (_, high) in partition_offsets(bootstrap, args.events_topic).items()}
    deadline = time.monotonic() + timeout_s
    while True:
        covered = current_snapshot(spark, table).next_offsets
        if all(covered.get(p, 0) >= end for p, end in ends.items() if end > 0):
            break
        if time.monotonic() > deadline:
            print(f"table step: the table covers {covered}, the log ends at {ends}, after {timeout_s:.0f} s")
            return False
        time.sleep(1.0)
    enriched_topic = f"{args.events_topic}-with-history"
    create_topic(bootstrap, enriched_topic, 4)
    config = TableHistoryConfig(bootstrap, args.events_topic, args.partitions, table, enriched_topic,
                                str(work_dir / "checkpoints" / "table_history"),
                                max_offsets_per_trigger=args.max_offsets_per_trigger)
    started = time.monotonic()
    query, snapshot = start_enrichment(spark, config)
    try:
        log.info("table step: history from snapshot %s (next offsets %s); streaming %d new views",
                 snapshot.snapshot_id, snapshot.next_offsets, len(fresh))
        publish_page_views(bootstrap, args.events_topic, fresh)
        process_all_available(query, timeout_s=1800)
    finally:
        query.stop()
    out = [json.loads(m.value()) for m in read_all(bootstrap, enriched_topic)]
    views, last_page = Counter(v.user for v in history), {v.user: v.page for v in history}
    once = sorted((r["user"], r["page"], r["event_time"]) for r in out) == sorted(
        (v.user, v.page, json.loads(v.value)["event_time"]) for v in fresh)
    wrong = [r for r in out if r["history_views"] != views.get(r["user"], 0)
             or r["history_last_page"] != last_page.get(r["user"])]
    ok = once and not wrong
    print(f"\ntable step: {len(out)} new views joined with the history of {len(history)} views from "
          f"{table} (snapshot {snapshot.snapshot_id}) in {time.monotonic() - started:.1f} s: "
          + ("every new view once, with its user's history" if ok else
             f"{'views missing or repeated; ' if not once else ''}{len(wrong)} with the wrong history"))
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return run_pipeline(args)
