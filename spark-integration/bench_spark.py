#!/usr/bin/env python3
"""Spark against kafkapy, measured: batch read rate over 1,000,000 records, streaming end-to-end latency.

    python spark-integration/bench_spark.py                       # kafkapy and tansu, 1M records
    python spark-integration/bench_spark.py --brokers kafkapy --records 200000 --probes 10

Batch read: an 8-partition topic holds `--records` page views (JSON values, ~90 B); a Spark
batch query reads all of it with the Kafka source (format("kafka"), startingOffsets earliest,
endingOffsets latest) and sums the value lengths, so every record is fetched and deserialised.
Records per second = records / wall time of that action (median of `--rounds`, brokers
alternating round by round in one SparkSession).

Streaming latency: the page-view counting query (streaming_job, default trigger: the next
micro-batch starts as soon as the previous one ends) runs while a background producer
publishes `--load-rate` events/s. Once a second a probe event for a page of its own is
published; its latency is the time from the produce call to the moment a plain consumer of
the counts topic sees the count for that page (generator -> broker -> Spark source -> window
state -> Spark sink -> broker -> consumer).

The peer is tansu (bench/peers.py), run in the same process, with the same Spark session.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(REPO_ROOT), str(REPO_ROOT / "bench")]

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from kafkapy_spark.events import PageView, generate_page_views  # noqa: E402
from kafkapy_spark.kafka_client import create_topic, publish_page_views  # noqa: E402
from kafkapy_spark.session import build_spark_session  # noqa: E402
from kafkapy_spark.streaming_job import StreamingJobConfig, start_page_view_counts  # noqa: E402


def start_brokers(names: list[str], stack: ExitStack, work_dir: Path) -> dict[str, str]:
    bootstraps = {}
    for name in names:
        if name == "kafkapy":
            from conformance.broker_process import start_broker

            broker = stack.enter_context(start_broker(work_dir=work_dir / "kafkapy"))
        elif name == "tansu":
            from peers import start_tansu

            broker = stack.enter_context(start_tansu(log_path=work_dir / "tansu.log"))
        else:
            raise SystemExit(f"unknown broker {name!r} (kafkapy, tansu)")
        bootstraps[name] = broker.bootstrap
    return bootstraps


def batch_read_seconds(spark, bootstrap: str, topic: str) -> tuple[float, int]:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    row = (
        spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
        .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
        .agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0]
    )
    return time.perf_counter() - started, row["n"]


def consumer_read_seconds(bootstrap: str, topic: str, expected: int, partitions: int = 8) -> float:
    """Reference point: a plain librdkafka consumer reading the same records (no Spark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-reference",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, -2) for p in range(partitions)])  # -2: beginning
    seen = 0
    deadline = time.monotonic() + 300
    try:
        while seen < expected and time.monotonic() < deadline:
            seen += sum(1 for m in consumer.consume(10_000, timeout=0.5) if m.error() is None)
    finally:
        consumer.close()
    if seen < expected:
        raise RuntimeError(f"plain consumer read {seen} of {expected} records")
    return time.perf_counter() - started


class CountsWatcher:
    """Reads the counts topic from its end and notes when each probe page's count first appears."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.seen: dict[str, float] = {}
        self.created_ms: dict[str, int] = {}
        self.seen_ms: dict[str, float] = {}
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        self._consumer.assign([TopicPartition(topic, p, -1) for p in range(partitions)])  # -1: end
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(500, timeout=0.05):
                if message.error() is None and message.key() and message.key().startswith(b"/probe-"):
                    page = message.key().split(b"|")[0].decode()
                    if page not in self.seen:
                        self.seen[page] = time.perf_counter()
                        self.created_ms[page] = message.timestamp()[1]  # when Spark's sink made it
                        self.seen_ms[page] = time.time() * 1000

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def streaming_latency(spark, bootstrap: str, name: str, probes: int, load_rate: int, work_dir: Path) -> dict:
    events_topic, counts_topic = f"lat-events-{name}", f"lat-counts-{name}"
    create_topic(bootstrap, events_topic, 8)
    create_topic(bootstrap, counts_topic, 4, {"cleanup.policy": "compact"})
    config = StreamingJobConfig(bootstrap, events_topic, counts_topic, str(work_dir / f"checkpoint-{name}"),
                                query_name=f"latency_{name}")
    query = start_page_view_counts(spark, config)
    watcher = CountsWatcher(bootstrap, counts_topic, 4)
    stop_load = threading.Event()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "partitioner": "murmur2_random"})

    def background_load() -> None:
        n = 0
        while not stop_load.is_set():
            now_ms = int(time.time() * 1000)
            for _ in range(max(load_rate // 20, 1)):
                event = PageView(f"user-{n % 50}", f"/page-{n % 12}", now_ms)
                producer.produce(events_topic, key=event.key, value=event.value, timestamp=now_ms)
                n += 1
            producer.poll(0)
            stop_load.wait(0.05)

    load = threading.Thread(target=background_load, daemon=True)
    load.start()
    sent: dict[str, float] = {}
    sent_ms: dict[str, float] = {}
    acked: dict[str, float] = {}
    try:
        time.sleep(8)  # let the query get past its first (slow) micro-batches
        for i in range(probes):
            probe = PageView("user-probe", f"/probe-{i}", int(time.time() * 1000))
            sent[probe.page] = time.perf_counter()
            sent_ms[probe.page] = time.time() * 1000
            producer.produce(events_topic, key=probe.key, value=probe.value, timestamp=probe.event_time_ms,
                             on_delivery=lambda err, msg, page=probe.page: acked.setdefault(page, time.perf_counter()))
            producer.flush(5)  # serves the delivery callback as soon as the ack arrives
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - sent[probe.page])))
        deadline = time.monotonic() + 60
        while len(watcher.seen) < probes and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop_load.set()
        load.join(5)
        producer.flush(10)
        progress = query.recentProgress
        query.stop()
        watcher.close()
    latencies = sorted((watcher.seen[p] - sent[p]) * 1000 for p in sent if p in watcher.seen)
    # Where the time goes: produce -> ack; produce -> Spark's sink creates the count record;
    # count record created -> consumer sees it.
    breakdown = {
        "probe_ack_ms": statistics.median((acked[p] - sent[p]) * 1000 for p in acked) if acked else None,
        "to_sink_record_ms": statistics.median(watcher.created_ms[p] - sent_ms[p] for p in watcher.created_ms)
        if watcher.created_ms else None,
        "sink_record_to_consumer_ms": statistics.median(watcher.seen_ms[p] - watcher.created_ms[p]
                                                        for p in watcher.created_ms) if watcher.created_ms else None,
    }
    busy = [p for p in progress[2:] if p.get("numInputRows")]
    batch_ms = [p["durationMs"]["triggerExecution"] for p in busy]
    phases = {phase: statistics.median(p["durationMs"].get(phase, 0) for p in busy)
              for phase in ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")} if busy else {}
    return {
        "probes": probes,
        "seen": len(latencies),
        "p50_ms": statistics.median(latencies) if latencies else None,
        "p95_ms": latencies[max(0, int(len(latencies) * 0.95) - 1)] if latencies else None,
        "max_ms": latencies[-1] if latencies else None,
        "micro_batch_ms_median": statistics.median(batch_ms) if batch_ms else None,
        "micro_batch_phases_ms_median": phases,
        "breakdown_ms_median": breakdown,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="kafkapy,tansu")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--probes", type=int, default=30)
    parser.add_argument("--load-rate", type=int, default=500, help="background events per second")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]

    results: dict[str, dict] = {name: {} for name in names}
    with ExitStack() as stack:
        # Removed only after a clean run, so a failed one leaves its broker logs to read.
        work_dir = Path(tempfile.mkdtemp(prefix="kafkapy-bench-spark-"))
        print(f"work dir (broker logs, checkpoints): {work_dir}", file=sys.stderr)
        bootstraps = start_brokers(names, stack, work_dir)
        events = generate_page_views(args.records, 1_763_726_400_000, events_per_minute=60_000)
        for name, bootstrap in bootstraps.items():
            create_topic(bootstrap, "bench-events", 8)
            started = time.perf_counter()
            publish_page_views(bootstrap, "bench-events", events)
            results[name]["publish_records_per_s"] = args.records / (time.perf_counter() - started)
            print(f"{name}: published {args.records} records", file=sys.stderr)
        del events
        for name, bootstrap in bootstraps.items():
            try:
                seconds = consumer_read_seconds(bootstrap, "bench-events", args.records)
                results[name]["consumer_records_per_s"] = args.records / seconds
            except RuntimeError as error:
                print(f"{name}: {error}", file=sys.stderr)

        spark = build_spark_session(args.master, "kafkapy-bench", shuffle_partitions=4)
        stack.callback(spark.stop)
        for name, bootstrap in bootstraps.items():  # warm-up: JIT and Spark code generation
            batch_read_seconds(spark, bootstrap, "bench-events")
        for round_number in range(args.rounds):
            for name, bootstrap in bootstraps.items():
                if "error" in results[name]:
                    continue
                seconds, count = batch_read_seconds(spark, bootstrap, "bench-events")
                if count != args.records:
                    # A broker whose ListOffsets/Fetch mislead Spark gets no numbers, only the reason.
                    results[name]["error"] = f"Spark's batch read returned {count:,} of {args.records:,} records"
                    print(f"{name}: {results[name]['error']}", file=sys.stderr)
                    continue
                results[name].setdefault("batch_read_s", []).append(seconds)
                print(f"{name}: round {round_number + 1}: {count} records in {seconds:.2f} s", file=sys.stderr)
        for name, bootstrap in bootstraps.items():
            if "error" in results[name]:
                continue
            times = results[name]["batch_read_s"]
            results[name]["batch_records_per_s"] = args.records / statistics.median(times)
            results[name]["latency"] = streaming_latency(spark, bootstrap, name, args.probes, args.load_rate, work_dir)
            print(f"{name}: latency {results[name]['latency']}", file=sys.stderr)

    shutil.rmtree(work_dir, ignore_errors=True)
    print(format_table(results, names, args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def format_table(results: dict, names: list[str], args: argparse.Namespace) -> str:
    def number(value, fmt="{:,.0f}") -> str:
        return "—" if value is None else fmt.format(value)

    header = "| metric | " + " | ".join(names) + (" | ratio kafkapy/peer |" if len(names) == 2 else " |")
    lines = [header, "|" + "---|" * (len(names) + 1 + (len(names) == 2))]

    def row(label: str, values: list, ratio: float | None = None, fmt="{:,.0f}") -> None:
        cells = " | ".join(number(v, fmt) for v in values)
        extra = f" | {number(ratio, '{:.2f}')} |" if len(names) == 2 else " |"
        lines.append(f"| {label} | {cells}{extra}")

    def ratio(key_path: list[str], higher_is_better: bool) -> float | None:
        if len(names) != 2:
            return None
        values = []
        for name in names:
            value = results[name]
            for key in key_path:
                value = value.get(key) if isinstance(value, dict) else None
            values.append(value)
        if None in values or not values[1] or not values[0]:
            return None
        return values[0] / values[1] if higher_is_better else values[1] / values[0]

    row(f"publish {args.records:,} records (confluent-kafka), rec/s",
        [results[n].get("publish_records_per_s") for n in names], ratio(["publish_records_per_s"], True))
    row(f"plain consumer read of {args.records:,} records (confluent-kafka), rec/s",
        [results[n].get("consumer_records_per_s") for n in names], ratio(["consumer_records_per_s"], True))
    row(f"Spark batch read of {args.records:,} records, rec/s (median of {args.rounds})",
        [results[n].get("batch_records_per_s") for n in names], ratio(["batch_records_per_s"], True))
    for key, label in (("p50_ms", "median"), ("p95_ms", "p95"), ("max_ms", "max")):
        row(f"streaming end-to-end latency, {label} ms",
            [results[n].get("latency", {}).get(key) for n in names], ratio(["latency", key], False))
    row("streaming micro-batch duration, median ms",
        [results[n].get("latency", {}).get("micro_batch_ms_median") for n in names],
        ratio(["latency", "micro_batch_ms_median"], False))
    for name in names:
        if "error" in results[name]:
            lines.append(f"\n{name}: no Spark numbers: {results[name]['error']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
