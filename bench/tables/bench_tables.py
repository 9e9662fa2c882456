#!/usr/bin/env python3
"""Cost of topics as Iceberg tables (issue 34, docs/tables.md): produce throughput with a table on
and off, translation throughput, and the lag a table keeps under a steady load.

One kafkapy broker (`python -m kafkapy serve`, a fresh disk log dir, 127.0.0.1 only,
kafkapy.iceberg.commit.interval.ms = --commit-interval-ms, /metrics on) and confluent-kafka:

1. produce: runs alternate between a topic without a table and one with kafkapy.iceberg.mode=key_value
   (off, on, on, off, ...; same shape: --partitions, --record-bytes, acks=1, linger.ms=5, each run a
   new topic bounded by --records or --seconds); after each `on` run the bench waits until the
   table covers the log, so no translation left over from one run runs during the next. Reported:
   median records/s of each and their ratio (the goal: on/off >= 0.9), and the time from the end
   of an `on` run until its table covered it.
2. translation: MB/s of record bytes committed to the table: the `on` runs' bytes over the time from
   each run's start until its table covered it (translation runs while the producer does).
3. steady load: --steady-rate records/s for --steady-seconds to a table topic; /metrics'
   kafkapy_iceberg_lag_records sampled every 0.25 s: median and maximum lag, in records and in
   seconds of that load.

    python bench/tables/bench_tables.py              # 4 runs each, 200 B records, 4 partitions
    python bench/tables/bench_tables.py --quick      # a smoke test (seconds)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_broker import create_topic, run_produce  # noqa: E402
from broker_report import Case  # noqa: E402

from conformance.broker_process import free_port, start_broker  # noqa: E402
from conformance.tables.readers import TableLocation, next_offsets  # noqa: E402

LAG = re.compile(r'^kafkapy_iceberg_lag_records\{[^}]*topic="([^"]+)"[^}]*\} ([0-9.e+]+)$', re.M)


def create_table_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config={"kafkapy.iceberg.mode": "key_value"})])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        time.sleep(0.05)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tables"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def wait_covered(location: TableLocation, topic: str, ends: dict[int, int], timeout_s: float) -> float:
    """Seconds until the table's kafkapy.next-offsets reach `ends` (perf_counter time when it did)."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        try:
            covered = next_offsets(location, topic)
        except Exception:  # noqa: BLE001  the table may not exist yet
            covered = {}
        if all(covered.get(p, 0) >= end for p, end in ends.items()):
            return time.perf_counter()
        time.sleep(0.05)
    raise TimeoutError(f"table kafka.{topic} did not reach {ends} in {timeout_s} s")


def lag_records(metrics_url: str, topic: str) -> float:
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    return sum(float(value) for name, value in LAG.findall(text) if name == topic)


def steady_load(bootstrap: str, metrics_url: str, location: TableLocation, topic: str, partitions: int,
                record_bytes: int, rate: int, seconds: float) -> dict:
    from confluent_kafka import Producer

    create_table_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "enable.idempotence": False})
    payload = os.urandom(record_bytes)
    samples: list[float] = []
    started = time.perf_counter()
    sent = 0
    next_sample = started
    while (now := time.perf_counter()) < started + seconds:
        due = int((now - started) * rate)
        while sent < due:
            try:
                producer.produce(topic, payload, partition=sent % partitions)
                sent += 1
            except BufferError:
                producer.poll(0.005)
        producer.poll(0)
        if now >= next_sample:
            samples.append(lag_records(metrics_url, topic))
            next_sample += 0.25
        time.sleep(0.002)
    producer.flush(30)
    wait_covered(location, topic, end_offsets(bootstrap, topic, partitions), 120)
    steady = samples[len(samples) // 5:] or samples  # past the first fifth: the first commit and worker start
    return {"rate": rate, "sent": sent, "seconds": seconds, "samples": len(samples),
            "lag_p50": statistics.median(steady), "lag_max": max(steady),
            "lag_p50_s": statistics.median(steady) / rate, "lag_max_s": max(steady) / rate}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--record-bytes", type=int, default=200)
    parser.add_argument("--records", type=int, default=300_000, help="records per produce run (upper bound)")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per produce run (upper bound)")
    parser.add_argument("--repeat", type=int, default=4, help="produce runs per mode")
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--steady-rate", type=int, default=5000, help="records/s of the steady load")
    parser.add_argument("--steady-seconds", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="1 run each, 2 s, 5 s of steady load")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat, args.seconds, args.records, args.steady_seconds, args.steady_rate = 1, 2.0, 50_000, 5.0, 2000

    metrics_port = free_port()
    case = Case(args.partitions, args.record_bytes, "1")
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                     "load_before": os.getloadavg()[0], "case": case.label, "commit_interval_ms": args.commit_interval_ms,
                     "runs": []}
    with start_broker(overrides={"kafkapy.iceberg.commit.interval.ms": args.commit_interval_ms,
                                 "kafkapy.metrics.listener": f"http://127.0.0.1:{metrics_port}"}) as broker:
        location = TableLocation(broker.data_dir)
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        order = ["off", "on", "on", "off"] * ((args.repeat + 1) // 2)
        order = order[: 2 * args.repeat]
        for number, mode in enumerate(order):
            topic = f"bench-{mode}-{number}"
            if mode == "on":
                create_table_topic(broker.bootstrap, topic, args.partitions)
            else:
                create_topic(broker.bootstrap, topic, args.partitions)
            started = time.perf_counter()
            phase = run_produce(broker.bootstrap, topic, case, args.records, args.seconds)
            if phase.error:
                raise SystemExit(f"{mode} run {number}: {phase.error}")
            run = {"mode": mode, "records": phase.records, "rate": phase.records / phase.seconds}
            if mode == "on":
                ended = started + phase.seconds
                covered_at = wait_covered(location, topic, end_offsets(broker.bootstrap, topic, args.partitions), 300)
                run["catch_up_s"] = max(0.0, covered_at - ended)
                run["translation_mb_s"] = phase.records * args.record_bytes / 1e6 / (covered_at - started)
            results["runs"].append(run)
            print(f"  {mode:3} run {number}: {run['rate']:,.0f} rec/s"
                  + (f", table caught up {run['catch_up_s']:.2f} s after, {run['translation_mb_s']:.2f} MB/s"
                     if mode == "on" else ""), flush=True)
        results["steady"] = steady_load(broker.bootstrap, metrics_url, location, "bench-steady", args.partitions,
                                        args.record_bytes, args.steady_rate, args.steady_seconds)
    results["load_after"] = os.getloadavg()[0]

    off = statistics.median(r["rate"] for r in results["runs"] if r["mode"] == "off")
    on_runs = [r for r in results["runs"] if r["mode"] == "on"]
    on = statistics.median(r["rate"] for r in on_runs)
    results.update(off_rate=off, on_rate=on, ratio=on / off,
                   translation_mb_s=statistics.median(r["translation_mb_s"] for r in on_runs),
                   catch_up_s=statistics.median(r["catch_up_s"] for r in on_runs))
    steady = results["steady"]
    print(f"\n{results['date']}, {results['machine']}, load {results['load_before']:.1f} → {results['load_after']:.1f}; "
          f"{case.label}, commit interval {args.commit_interval_ms} ms\n")
    print("| measure | result |\n|---|---|")
    print(f"| produce, table off (median of {len(on_runs)}) | {off:,.0f} rec/s |")
    print(f"| produce, table on (key_value) | {on:,.0f} rec/s |")
    print(f"| on/off | {on / off:.3f} |")
    print(f"| translation (record bytes committed, produce start → table covers the run) | "
          f"{results['translation_mb_s']:.2f} MB/s |")
    print(f"| table caught up after the producer ended | {results['catch_up_s']:.2f} s (median) |")
    print(f"| lag at {steady['rate']:,} rec/s for {steady['seconds']:.0f} s, median / max | "
          f"{steady['lag_p50']:,.0f} / {steady['lag_max']:,.0f} records ({steady['lag_p50_s']:.2f} / "
          f"{steady['lag_max_s']:.2f} s of load) |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
