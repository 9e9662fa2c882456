#!/usr/bin/env python3
"""Broker benchmark: kafkapy and the tansu peer side by side in one run, reported as ratios.

Measured per broker (each listens on 127.0.0.1 only; everything is bounded in time):
  * startup: wall time from spawning the process to (a) a TCP connect succeeding and (b) the
    first ApiVersions answer; median of --startup-runs fresh starts.
  * idle RSS: resident memory of the broker's process tree after start plus one metadata
    request (confluent-kafka AdminClient.list_topics) and 1 s idle, before any data is written;
    median over the same fresh starts.
  * produce / consume throughput with confluent-kafka (librdkafka) for each case of
    {1, 8 partitions} x {100 B, 1 KiB records} x {acks=1, acks=all}; each phase stops at
    --records records or --seconds seconds, whichever comes first, and reports the rate
    actually achieved.

Goals for kafkapy: answer ApiVersions within 0.3 s of process start (a bound listener that
cannot answer yet does not count), idle RSS < 80 MB, throughput >= peer.
kafkapy runs as `python -m kafkapy serve` on a fresh temporary log dir (disk); tansu runs with
memory storage (see bench/peers.py). A broker that fails to start, or a case that fails, is
reported as such and the run continues.

    python bench/broker/bench_broker.py                     # both brokers, print markdown
    python bench/broker/bench_broker.py --brokers tansu     # one broker only
    python bench/broker/bench_broker.py --quick             # smaller cases (smoke test)
    python bench/broker/bench_broker.py --write-docs        # also update docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_processes import (  # noqa: E402  (bench/broker/broker_processes.py)
    BROKER_KINDS,
    REPO_ROOT,
    BrokerFailed,
    BrokerKind,
    RunningBroker,
    peers,
    process_tree_cpu_s,
    process_tree_rss_mb,
    spawn,
    wait_ready,
)
from broker_report import (  # noqa: E402
    DOCS_HEADING,
    BrokerResult,
    Case,
    PhaseResult,
    median,
    one_line,
    render_markdown,
    write_docs,
)

DOCS_PATH = REPO_ROOT / "docs" / "benchmarks.md"
CLIENT_TIMEOUT_S = 15.0


def measure_startup(kind: BrokerKind, runs: int, result: BrokerResult) -> None:
    """Time `runs` fresh starts; each also gives one idle-RSS sample (the median is reported)."""
    for _ in range(runs):
        broker = spawn(kind)
        try:
            accept_s, api_s = wait_ready(broker)
            result.accept_s.append(accept_s)
            result.api_ready_s.append(api_s)
            result.idle_rss_samples_mb.append(measure_idle_rss(broker))
        finally:
            broker.stop()
    result.idle_rss_mb = median(result.idle_rss_samples_mb)


def measure_idle_rss(broker: RunningBroker) -> float:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.list_topics(timeout=CLIENT_TIMEOUT_S)
    time.sleep(1.0)  # let lazily started work settle
    broker.check_alive()
    return process_tree_rss_mb(broker.proc.pid)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=CLIENT_TIMEOUT_S)
    futures[topic].result(timeout=CLIENT_TIMEOUT_S)
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while time.monotonic() < deadline:  # wait until every partition has a leader in metadata
        meta = admin.list_topics(topic, timeout=CLIENT_TIMEOUT_S).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
            p.leader >= 0 for p in meta.partitions.values()
        ):
            return
        time.sleep(0.05)
    raise BrokerFailed(f"topic {topic} has no leaders for all {partitions} partitions")


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    try:
        admin.delete_topics([topic], operation_timeout=CLIENT_TIMEOUT_S)[topic].result(timeout=CLIENT_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001  best effort: only frees the peer's memory
        print(f"  note: deleting {topic} failed: {error}", file=sys.stderr)


def run_produce(bootstrap: str, topic: str, case: Case, max_records: int, max_seconds: float) -> PhaseResult:
    from confluent_kafka import KafkaException, Producer

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": case.acks,
        "linger.ms": 5,
        "compression.type": "none",
        "enable.idempotence": False,
        "queue.buffering.max.messages": 500_000,
        "message.timeout.ms": int((max_seconds + CLIENT_TIMEOUT_S) * 1000),
    })
    outcome = {"delivered": 0, "failed": 0, "first_error": None}

    def on_delivery(error, _message) -> None:
        if error is None:
            outcome["delivered"] += 1
        else:
            outcome["failed"] += 1
            outcome["first_error"] = outcome["first_error"] or str(error)

    payload = os.urandom(case.record_bytes)
    started = time.perf_counter()
    stop_at = started + max_seconds
    sent = 0
    while sent < max_records and (sent & 1023 or time.perf_counter() < stop_at):
        try:
            producer.produce(topic, payload, partition=sent % case.partitions, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.005)
        except KafkaException as error:
            return PhaseResult(outcome["delivered"], time.perf_counter() - started, f"produce: {error}")
        if not sent & 1023:
            producer.poll(0)
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    error = None
    if outcome["failed"] or remaining:
        error = f"{outcome['failed']} failed, {remaining} undelivered; first error: {outcome['first_error']}"
    return PhaseResult(outcome["delivered"], elapsed, error)


def run_consume(bootstrap: str, topic: str, case: Case, expected: int, max_seconds: float) -> PhaseResult:
    """Read `expected` records from the beginning of every partition (assign mode).

    The rate is measured from the first consume() call that returned records to the last record,
    so the client's one-off start (metadata, offset lookup) does not dominate short runs; that
    start-up delay is reported separately as `first_record_s`.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",  # required by the Python client; assign() only
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        # librdkafka pauses fetching for fetch.queue.backoff.ms (1 s) whenever its local queue
        # passes queued.min.messages (100k): a client artefact that made runs bimodal. Keep the
        # whole run below the thresholds so only the broker limits the rate.
        "queued.min.messages": 2_000_000,
        "queued.max.messages.kbytes": 1_048_576,
        "fetch.queue.backoff.ms": 10,
    })
    first_error = None
    received = 0
    first_batch = 0
    first_at = None
    try:
        assigned_at = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(case.partitions)])
        stop_at = assigned_at + max_seconds
        last_at = assigned_at
        while received < expected and time.perf_counter() < stop_at:
            messages = consumer.consume(num_messages=10_000, timeout=0.2)
            good = 0
            for message in messages:
                if message.error():
                    first_error = first_error or str(message.error())
                else:
                    good += 1
            if good:
                last_at = time.perf_counter()
                if first_at is None:
                    first_at, first_batch = last_at, good
                received += good
    finally:
        consumer.close()
    result = PhaseResult(received, 0.0, first_error)
    if first_at is not None:
        result.first_record_s = first_at - assigned_at
        steady = received - first_batch
        if steady > 0 and last_at > first_at:
            result.seconds = (last_at - first_at) * received / steady  # scale to all records
        else:
            result.seconds = last_at - assigned_at
    if received < expected:
        result.error = f"only {received} of {expected} within {max_seconds:.0f} s" + (
            f"; {first_error}" if first_error else "")
    return result


def _with_broker_cpu(broker: RunningBroker, phase: Callable[[], PhaseResult]) -> PhaseResult:
    """Run one phase and record the broker's CPU time over it, to tell broker-bound from client-bound."""
    cpu_before, wall_before = process_tree_cpu_s(broker.proc.pid), time.perf_counter()
    result = phase()
    result.broker_cpu_s = process_tree_cpu_s(broker.proc.pid) - cpu_before
    result.wall_s = time.perf_counter() - wall_before
    return result


def run_case(broker: RunningBroker, case: Case, max_records: int, max_seconds: float) -> tuple[PhaseResult, PhaseResult]:
    """Create a fresh topic, produce into it, read it all back, delete it."""
    topic = f"bench-{case.partitions}p-{case.record_bytes}b-acks{case.acks}-{uuid.uuid4().hex[:6]}"
    try:
        broker.check_alive()
        create_topic(broker.bootstrap, topic, case.partitions)
        produced = _with_broker_cpu(broker, lambda: run_produce(broker.bootstrap, topic, case, max_records,
                                                                max_seconds))
        broker.check_alive()
        if produced.records == 0:
            return produced, PhaseResult(error="nothing produced")
        consumed = _with_broker_cpu(broker, lambda: run_consume(broker.bootstrap, topic, case, produced.records,
                                                                max_seconds))
        broker.check_alive()
    except Exception as error:  # noqa: BLE001  one failing case must not end the run
        message = one_line(error)
        return PhaseResult(error=message), PhaseResult(error=message)
    delete_topic(broker.bootstrap, topic)
    return produced, consumed


def median_phase(phases: list[PhaseResult]) -> PhaseResult:
    """The repetition with the median rate; a failed repetition wins so errors stay visible."""
    failed = [p for p in phases if p.error]
    if failed:
        return failed[0]
    return sorted(phases, key=lambda p: p.records_per_s)[len(phases) // 2]


# --------------------------------------------------------------------------------------------


def _reproducible_args(argv: list[str]) -> list[str]:
    """The command-line arguments that change what is measured (not where output goes)."""
    kept: list[str] = []
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
        elif arg == "--json":
            skip_value = True
        elif not (arg.startswith("--json=") or arg == "--write-docs"):
            kept.append(arg)
    return kept


def build_cases(quick: bool) -> list[Case]:
    partitions = (1, 8)
    sizes = (100, 1024)
    acks = ("1", "all")
    if quick:
        return [Case(1, 100, "1"), Case(8, 1024, "all")]
    return [Case(p, s, a) for p in partitions for s in sizes for a in acks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="kafkapy,tansu", help="comma-separated: kafkapy,tansu")
    parser.add_argument("--records", type=int, default=200_000, help="max records per phase")
    parser.add_argument("--seconds", type=float, default=10.0, help="max seconds per phase")
    parser.add_argument("--startup-runs", type=int, help="fresh starts to time (default 5, --quick 3)")
    parser.add_argument("--repeat", type=int, help="repetitions per case, median reported (default 3, --quick 1)")
    parser.add_argument("--quick", action="store_true", help="2 cases, <= 20k records, <= 3 s, 3 startups, 1 repetition")
    parser.add_argument("--json", type=Path, help="also write raw results to this file")
    parser.add_argument("--write-docs", action="store_true", help=f"update '{DOCS_HEADING}' in docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.seconds = min(args.records, 20_000), min(args.seconds, 3.0)
    if args.startup_runs is None:
        args.startup_runs = 3 if args.quick else 5
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    unknown = [n for n in names if n not in BROKER_KINDS]
    if unknown:
        parser.error(f"unknown broker(s) {unknown}; known: {sorted(BROKER_KINDS)}")
    cases = build_cases(args.quick)

    import confluent_kafka

    load_before = os.getloadavg()[0]
    results: list[BrokerResult] = []
    running: dict[str, RunningBroker] = {}
    try:
        for name in names:
            kind = BROKER_KINDS[name]
            result = BrokerResult(name, kind.note)
            results.append(result)
            print(f"[{name}] startup x{args.startup_runs} ...", file=sys.stderr)
            try:
                measure_startup(kind, args.startup_runs, result)
                broker = spawn(kind)
                running[name] = broker
                wait_ready(broker)
            except (BrokerFailed, peers.PeerUnavailable, OSError, Exception) as error:  # noqa: BLE001
                result.start_error = one_line(error)
                print(f"[{name}] failed to start: {result.start_error}", file=sys.stderr)
                if name in running:
                    running.pop(name).stop()
        # Cases run broker after broker for each case, so slow drift on the machine hits both.
        for case in cases:
            for result in results:
                broker = running.get(result.name)
                if broker is None:
                    continue
                print(f"[{result.name}] {case.label} ...", file=sys.stderr)
                repetitions = [run_case(broker, case, args.records, args.seconds) for _ in range(args.repeat)]
                result.produce[case.label] = median_phase([r[0] for r in repetitions])
                result.consume[case.label] = median_phase([r[1] for r in repetitions])
                result.rates[f"produce {case.label}"] = [r[0].records_per_s for r in repetitions]
                result.rates[f"consume {case.label}"] = [r[1].records_per_s for r in repetitions]
                for produced, consumed in repetitions:
                    for phase_name, phase in (("produce", produced), ("consume", consumed)):
                        print(f"    {phase_name}: {phase.records} rec, {phase.records_per_s:,.0f}/s"
                              f"{' ERROR ' + phase.error if phase.error else ''}", file=sys.stderr)
    finally:
        for broker in running.values():
            broker.stop()

    passed = _reproducible_args(argv if argv is not None else sys.argv[1:])
    settings = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores (1-min load average {load_before:.1f} before, "
                   f"{os.getloadavg()[0]:.1f} after the run), Python {platform.python_version()}",
        "client": f"{getattr(confluent_kafka, '__version__', '?')} / librdkafka {confluent_kafka.libversion()[0]}",
        "records": args.records,
        "seconds": args.seconds,
        "startup_runs": args.startup_runs,
        "repeat": args.repeat,
        "args": (" " + " ".join(passed)) if passed else "",
    }
    markdown = render_markdown(results, cases, settings)
    print(markdown)
    if args.json:
        args.json.write_text(json.dumps({"settings": settings, "results": [asdict(r) for r in results]}, indent=2))
    if args.write_docs:
        write_docs(markdown, DOCS_PATH)
        print(f"updated {DOCS_PATH.relative_to(REPO_ROOT)} ({DOCS_HEADING})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
