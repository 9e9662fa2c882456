#!/usr/bin/env python3
"""Rolling restart under a paced producer: how long each broker's SIGTERM leaves partitions without a leader.

A ZooKeeper-mode cluster (kafkapy.devcluster.LocalCluster: ZooKeeper and `python -m kafkapy serve`
processes on 127.0.0.1) gets one topic with replication factor 3 and min.insync.replicas=2, and an
idempotent acks=all producer (confluent-kafka) sending numbered records round-robin to its partitions
at a fixed rate. After a quiet period that gives the baseline, every broker in turn gets SIGTERM
(controlled shutdown), is started again and must be back in every ISR, and every broker must know
the controller, before the next one; --rounds repeats the whole sequence.

Per restart it prints:
  * leaderless: the longest time, over the partitions, that Metadata (polled every 50 ms from a
    broker that is not the one restarting) showed no leader or the stopped broker as leader, from
    the SIGTERM until the broker was started again (no leader at all: until it was back in the ISR);
  * ack gap: the producer's longest time between two acknowledgements of one partition overlapping
    the restart (the baseline period's longest gap says what is normal at this rate);
  * how long the broker took to exit, to serve again and to be back in every ISR.
At the end the topic is read back: every acknowledged record must be there exactly once.

    python bench/cluster/rolling_restart.py                      # 3 brokers, 6 partitions, 200 records/s
    python bench/cluster/rolling_restart.py --rounds 3 --rate 500 --json build/bench/rolling-restart.json

Everything listens on loopback only, every wait is bounded (--timeout for the whole run), and the
cluster is stopped on the way out; its work directory is removed unless the run failed or
--keep-logs is given.
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

# The measuring parts are the rolling-restart conformance test's own, so the two measure alike.
from conformance.cluster_harness import wait_for_isr  # noqa: E402
from conformance.replication_campaign import wait_for_controller_everywhere  # noqa: E402
from conformance.replication_workload import check_records, client_log, read_topic  # noqa: E402
from conformance.test_cluster_operations import (  # noqa: E402
    OFFSETS_TOPIC,
    OVERRIDES,
    LeaderWatch,
    RestartResult,
    TimedSequenceProducer,
    restart_in_turn,
)
from kafkapy.devcluster.brokers import LocalCluster, LocalClusterStartError  # noqa: E402
from kafkapy.devcluster.zookeeper import JavaZooKeeper, ZooKeeperStartError  # noqa: E402


class RunTimeout(Exception):
    """The whole run took longer than --timeout."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rate", type=float, default=200.0, help="records per second over all partitions")
    parser.add_argument("--rounds", type=int, default=1, help="times every broker is restarted")
    parser.add_argument("--prefill-gb", type=float, default=0.0,
                        help="GB of 1 KiB records written to the topic before the restarts (data the brokers "
                             "reopen and the followers catch up on)")
    parser.add_argument("--baseline-s", type=float, default=5.0, help="quiet producing before the first restart")
    parser.add_argument("--session-timeout-ms", type=int, default=6000, help="zookeeper.session.timeout.ms")
    parser.add_argument("--timeout", type=int, default=600, help="seconds for the whole run, then give up")
    parser.add_argument("--dir", type=Path, help="work directory (default: a new temporary one)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the work directory (broker logs)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser.parse_args(argv)


def run(args: argparse.Namespace, work_dir: Path) -> dict:
    overrides = {**OVERRIDES, "zookeeper.session.timeout.ms": str(args.session_timeout_ms)}
    topic = f"rolling-{uuid.uuid4().hex[:6]}"
    results: list[RestartResult] = []
    with LocalCluster(work_dir, brokers=args.brokers, overrides=overrides) as cluster:
        wait_for_controller_everywhere(cluster)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": client_log})
        new = NewTopic(topic, args.partitions, min(3, args.brokers), config={"min.insync.replicas": "2"})
        admin.create_topics([new], request_timeout=30)[topic].result(timeout=60)
        wait_for_isr(cluster, topic, min(3, args.brokers))
        if args.prefill_gb > 0:
            seconds = _prefill(cluster.bootstrap, topic, args.partitions, int(args.prefill_gb * 1e9))
            wait_for_isr(cluster, topic, min(3, args.brokers), timeout=300)
            print(f"prefilled {args.prefill_gb:g} GB in {seconds:.1f} s", file=sys.stderr, flush=True)
        producer = TimedSequenceProducer(cluster.bootstrap, topic, args.partitions, rate=args.rate)
        watch = LeaderWatch(cluster, topic)
        watch.start()
        producer.start()
        try:
            began = time.monotonic()
            time.sleep(args.baseline_s)
            # the first second is connecting
            baseline = {p: gap for p, (gap, _) in producer.longest_gap(began + 1.0, time.monotonic()).items()}
            for round_no in range(1, args.rounds + 1):
                print(f"round {round_no}/{args.rounds}", file=sys.stderr, flush=True)
                results += restart_in_turn(cluster, topic, watch, producer, also_wait_for=_internal_topics(cluster),
                                           progress=lambda line: print(line, file=sys.stderr, flush=True))
            time.sleep(1.0)
        finally:
            producer.stop(flush_timeout=30.0)
            watch.stop()
        records = [[(offset, value) for offset, value in part if value != PREFILL]
                   for part in read_topic(cluster.bootstrap, topic, args.partitions, timeout=600)]
        check = check_records(records, producer.acked(), producer.sent())
        elapsed = time.monotonic() - began
    return {
        "prefill_gb": args.prefill_gb,
        "brokers": args.brokers, "partitions": args.partitions, "rate": args.rate, "rounds": args.rounds,
        "session_timeout_ms": args.session_timeout_ms, "elapsed_s": round(elapsed, 1),
        "baseline_max_ack_gap_s": max(baseline.values(), default=0.0),
        "restarts": [asdict(r) | {"max_unavailable": r.max_unavailable, "max_ack_gap": r.max_ack_gap}
                     for r in results],
        "acked": check.acked, "read": check.read, "missing": check.missing, "duplicates": check.duplicates,
        "violations": check.violations, "delivery_errors": dict(producer.delivery_errors),
        "fatal_errors": producer.fatal_errors, "leader_polls": len(watch.samples),
        "failed_leader_polls": watch.failed_polls,
    }


PREFILL = b"P" * 1024


def _prefill(bootstrap: str, topic: str, partitions: int, total_bytes: int) -> float:
    """Write `total_bytes` of PREFILL records (acks=all), as fast as the cluster takes them."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 500_000, "logger": client_log})
    failed: list[object] = []
    started = time.perf_counter()
    for i in range(total_bytes // len(PREFILL)):
        while True:
            try:
                producer.produce(topic, PREFILL, partition=i % partitions,
                                 on_delivery=lambda err, _msg: err is not None and failed.append(err))
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(300)
    if left or failed:
        raise RuntimeError(f"prefill: {left} records not delivered, {len(failed)} failed {failed[:1]}")
    return time.perf_counter() - started


def _internal_topics(cluster: LocalCluster) -> list[str]:
    from conformance.cluster_harness import describe

    return [OFFSETS_TOPIC] if describe(cluster, OFFSETS_TOPIC) else []


def render(summary: dict) -> str:
    lines = [
        f"rolling restart: {summary['brokers']} brokers, {summary['partitions']} partitions (RF 3, "
        f"min.insync.replicas=2), idempotent acks=all producer at {summary['rate']:.0f} records/s, "
        f"{summary['rounds']} round(s), zookeeper.session.timeout.ms={summary['session_timeout_ms']}"
        f"{', topic prefilled with %g GB' % summary['prefill_gb'] if summary.get('prefill_gb') else ''}; "
        "times from each broker's SIGTERM",
        "",
        "| # | broker | exit | serving | full ISR | leaderless (max over partitions) | longest ack gap (began) |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(summary["restarts"], start=1):
        worst = max(r["unavailable"], key=r["unavailable"].get, default="-")
        gap_at = max(r["ack_gaps"], key=r["ack_gaps"].get, default="-")
        controller = " (controller)" if r["was_controller"] else ""
        lines.append(f"| {i} | {r['broker']}{controller} | {r['exited_s']:.2f} s | {r['serving_s']:.2f} s | "
                     f"{r['rejoined_s']:.2f} s | {r['max_unavailable']:.3f} s (p{worst}) | "
                     f"{r['max_ack_gap']:.3f} s (p{gap_at}, {r['ack_gaps_began'].get(gap_at, 0.0):+.2f} s) |")
    restarts = summary["restarts"]
    if restarts:
        leaderless = sorted(r["max_unavailable"] for r in restarts)
        gaps = sorted(r["max_ack_gap"] for r in restarts)
        lines += ["", f"leaderless per restart: median {leaderless[len(leaderless) // 2]:.3f} s, "
                      f"worst {leaderless[-1]:.3f} s; longest ack gap per restart: median "
                      f"{gaps[len(gaps) // 2]:.3f} s, worst {gaps[-1]:.3f} s (baseline, no restart: "
                      f"{summary['baseline_max_ack_gap_s']:.3f} s)"]
    lines.append(f"records: {summary['acked']} acknowledged, {summary['read']} read back, "
                 f"{summary['missing']} missing, {summary['duplicates']} duplicates; delivery errors "
                 f"{summary['delivery_errors'] or 'none'}; {summary['elapsed_s']} s in all")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    client_log.setLevel(logging.CRITICAL)  # "connection refused" while a broker restarts is expected
    available, reason = JavaZooKeeper.available()
    if not available:
        print(f"rolling_restart: cannot start ZooKeeper: {reason}", file=sys.stderr)
        return 1
    work_dir = args.dir or Path(tempfile.mkdtemp(prefix="kafkapy-bench-rolling-"))
    print(f"cluster work directory (broker logs): {work_dir}", file=sys.stderr)

    def out_of_time(signum: int, frame: object) -> None:
        raise RunTimeout(f"the run took longer than --timeout {args.timeout} s")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(args.timeout)
    failed = True
    try:
        summary = run(args, work_dir)
        failed = bool(summary["violations"] or summary["fatal_errors"])
    except (RunTimeout, AssertionError, LocalClusterStartError, ZooKeeperStartError) as error:
        print(f"rolling_restart: {error}", file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
        if args.keep_logs or failed or args.dir:
            print(f"broker logs kept in {work_dir}", file=sys.stderr)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    print(render(summary))
    for violation in summary["violations"]:
        print(f"VIOLATION {violation}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
