#!/usr/bin/env python3
"""Cluster benchmark: what replication costs and how long a leader failover takes, on 3 local brokers.

Two ZooKeeper-mode clusters of 3 kafkapy brokers (kafkapy.devcluster.LocalCluster: ZooKeeper and
`python -m kafkapy serve` processes on 127.0.0.1, disk log dirs) are started one after the other:

  * throughput: in one cluster, the same confluent-kafka producer and consumer code as
    bench/broker against topics of {RF1 acks=1, RF3 acks=1, RF3 acks=all} (same partitions, same
    record size), interleaved per repetition; each phase stops at --records records or --seconds
    seconds. Reported: records/s, MB/s, CPU of the brokers and of the client, and the ratio
    RF3 acks=all / RF1 acks=1.
  * failover: a second cluster and an RF3 topic; a producer with acks=all sends one record every
    --interval-ms to the partition led by the broker about to be stopped; failover time = from
    the signal to the first acknowledgement of a record sent after it. --kills samples with
    kill -9 (the controller notices through ZooKeeper session expiry, so
    zookeeper.session.timeout.ms, --session-timeout-ms, dominates) and --terms samples with
    SIGTERM (controlled shutdown). The stopped broker rotates; it is started again and the ISR
    waited for between samples. At the end the topic is read back and every acknowledged
    record must be there. A third cluster repeats a few kill -9 samples with Kafka's default
    session timeout of 18000 ms (--compare-session-timeout-ms, --compare-kills).

All brokers, ZooKeeper and the client run on the same machine (2 cores here); everything listens
on loopback only, every wait is bounded and every process is stopped on the way out.

    python bench/cluster/bench_cluster.py                  # full run (about 15 min)
    python bench/cluster/bench_cluster.py --quick          # smoke run (< 2 min)
    python bench/cluster/bench_cluster.py --skip-failover  # throughput only
    python bench/cluster/bench_cluster.py --write-docs     # also update docs/benchmarks.md
    python bench/cluster/bench_cluster.py --render build/bench/cluster.json --write-docs  # docs from a saved run

Results: a markdown table on stdout, raw results as JSON in build/bench/cluster.json (--json).
A broker log that shows a problem is kept: the cluster work directories are printed and are
removed only when the run had no error (--keep-logs keeps them always).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO_ROOT / "bench" / "broker"))
sys.path.insert(0, str(REPO_ROOT))

from bench_broker import run_consume, run_produce  # noqa: E402  (bench/broker: the same client code)
from broker_processes import process_tree_cpu_s  # noqa: E402
from broker_report import Case, one_line  # noqa: E402
from cluster_failover import measure_failover  # noqa: E402
from cluster_report import (  # noqa: E402
    DOCS_HEADING,
    LAYOUTS,
    REPLICATED,
    Layout,
    Phase,
    Results,
    failover_stats,
    render_markdown,
    results_from_json,
    write_docs,
)

from conformance.cluster_harness import describe, wait_for_isr, wait_until  # noqa: E402
from kafkapy.devcluster.brokers import LocalCluster, LocalClusterStartError  # noqa: E402
from kafkapy.devcluster.zookeeper import JavaZooKeeper, ZooKeeperStartError  # noqa: E402

DOCS_PATH = REPO_ROOT / "docs" / "benchmarks.md"
DEFAULT_JSON = REPO_ROOT / "build" / "bench" / "cluster.json"
CLIENT_TIMEOUT_S = 15.0
BROKERS = 3
QUIET_BUSY_PCT = 25.0  # "quiet": the whole machine below a quarter of one core (the idle cluster included)
# Lines in a broker's output that deserve a look after a run (errors, tracebacks, ZooKeeper trouble).
LOG_ALARMS = ("Traceback", " ERROR ", " CRITICAL ", "session expired", "SESSION_EXPIRED", "Expired")


class WarningsSeen(logging.Handler):
    """Collects what LocalCluster warns about (brokers that had to be killed on stop, ...)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def admin(cluster: LocalCluster):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 10_000})


def create_topic(cluster: LocalCluster, topic: str, partitions: int, replication_factor: int,
                 notes: list[str] | None = None) -> None:
    """Create the topic and wait for a full ISR. A CreateTopics that times out is retried (twice)
    with a new client: right after a cluster starts, librdkafka's admin client now and then waits
    15 s "for controller" and gives up although every broker already names the controller."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    for attempt in range(3):
        client = admin(cluster)  # must outlive the future: a destroyed AdminClient fails it with _DESTROY
        futures = client.create_topics([NewTopic(topic, partitions, replication_factor)],
                                       request_timeout=CLIENT_TIMEOUT_S)
        try:
            futures[topic].result(timeout=2 * CLIENT_TIMEOUT_S)
            break
        except KafkaException as error:
            code = error.args[0].code() if error.args else None
            if code == KafkaError.TOPIC_ALREADY_EXISTS and attempt:
                break
            if code != KafkaError._TIMED_OUT or attempt == 2:
                raise
            if notes is not None:
                notes.append(f"creating {topic}: {error.args[0].str()}; retried")
    wait_for_isr(cluster, topic, replication_factor, timeout=30)


def delete_topic(cluster: LocalCluster, topic: str, problems: list[str]) -> None:
    try:
        client = admin(cluster)  # must outlive the future
        futures = client.delete_topics([topic], request_timeout=CLIENT_TIMEOUT_S)
        futures[topic].result(timeout=2 * CLIENT_TIMEOUT_S)
        wait_until(lambda: not describe(cluster, topic), timeout=30, message=f"{topic} gone from metadata")
    except Exception as error:  # noqa: BLE001  only frees disk space; noted, the run goes on
        problems.append(f"deleting topic {topic}: {one_line(error)}")


def cluster_cpu_s(cluster: LocalCluster) -> float:
    return sum(process_tree_cpu_s(node.pid) for node in cluster.brokers.values() if node.pid is not None)


def check_running(cluster: LocalCluster) -> None:
    dead = [node for node in cluster.brokers.values() if not node.is_running()]
    if dead:
        raise RuntimeError("broker(s) exited: " + "; ".join(
            f"{node.broker_id} (code {node.proc.returncode if node.proc else None}, log {node.log_path})"
            for node in dead))


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores, everything but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def wait_quiet(max_wait_s: float, busy_pct: float = QUIET_BUSY_PCT, window_s: float = 0.5) -> float:
    """Wait (at most `max_wait_s`) until the whole machine uses less than `busy_pct` of one core over
    `window_s`: other work on the shared cores otherwise decides the rate. Returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < max_wait_s:
        before = machine_busy_s()
        time.sleep(window_s)
        if 100 * (machine_busy_s() - before) / window_s < busy_pct:
            break
    return time.monotonic() - started


def measured(cluster: LocalCluster, run, quiet_wait_s: float = 0.0) -> Phase:
    """Run one produce/consume phase (a bench/broker PhaseResult) and add the CPU used meanwhile."""
    waited = wait_quiet(quiet_wait_s) if quiet_wait_s > 0 else 0.0
    brokers_before, client_before, wall_before = cluster_cpu_s(cluster), time.process_time(), time.perf_counter()
    busy_before = machine_busy_s()
    outcome = run()
    phase = Phase(records=outcome.records, seconds=outcome.seconds, error=outcome.error)
    phase.wall_s = time.perf_counter() - wall_before
    phase.brokers_cpu_s = cluster_cpu_s(cluster) - brokers_before
    phase.client_cpu_s = time.process_time() - client_before
    # everything else on the machine (ZooKeeper included, which is idle here): other work competing for the cores
    phase.other_cpu_s = max(0.0, machine_busy_s() - busy_before - phase.brokers_cpu_s - phase.client_cpu_s)
    phase.quiet_wait_s = waited
    return phase


def run_layout(cluster: LocalCluster, layout: Layout, args: argparse.Namespace, results: Results) -> tuple[Phase, Phase]:
    topic = f"bench-rf{layout.replication_factor}-acks{layout.acks}-{uuid.uuid4().hex[:6]}"
    case = Case(args.partitions, args.record_bytes, layout.acks)
    try:
        check_running(cluster)
        create_topic(cluster, topic, args.partitions, layout.replication_factor, results.log_alarms)
        produced = measured(cluster, lambda: run_produce(cluster.bootstrap, topic, case, args.records, args.seconds),
                            args.quiet_wait)
        check_running(cluster)
        if produced.records == 0:
            return produced, Phase(error="nothing produced")
        consumed = measured(cluster, lambda: run_consume(cluster.bootstrap, topic, case, produced.records,
                                                         args.seconds + 10), args.quiet_wait)
        check_running(cluster)
    except Exception as error:  # noqa: BLE001  one failing phase must not end the run
        message = one_line(error)
        return Phase(error=message), Phase(error=message)
    delete_topic(cluster, topic, results.problems)
    return produced, consumed


def start_cluster(work_dir: Path, args: argparse.Namespace, session_timeout_ms: int | None = None) -> LocalCluster:
    overrides = {"zookeeper.session.timeout.ms": session_timeout_ms or args.session_timeout_ms}
    return LocalCluster(work_dir, brokers=BROKERS, overrides=overrides, await_registration=True)


def throughput_part(args: argparse.Namespace, results: Results, work_dir: Path) -> None:
    with start_cluster(work_dir, args) as cluster:
        # Not measured: the first consumer makes the cluster create __consumer_offsets (50 partitions,
        # RF3), which would otherwise land in whichever phase comes first; also warms the page cache.
        print("[throughput] warm-up (not measured) ...", file=sys.stderr)
        warm = argparse.Namespace(**{**vars(args), "records": min(args.records, 5_000), "seconds": 3.0,
                                     "quiet_wait": 0.0})
        produced, consumed = run_layout(cluster, REPLICATED, warm, results)
        if produced.error or consumed.error:
            results.problems.append(f"warm-up: {produced.error or consumed.error}")
        try:
            if describe(cluster, "__consumer_offsets"):
                wait_for_isr(cluster, "__consumer_offsets", 3, timeout=60)
        except AssertionError as error:
            results.problems.append(f"warm-up: {str(error).splitlines()[0]}")
        for rep in range(args.repeat):
            order = LAYOUTS[rep % len(LAYOUTS):] + LAYOUTS[:rep % len(LAYOUTS)]  # drift hits each alike
            for layout in order:
                print(f"[throughput {rep + 1}/{args.repeat}] {layout.label} ...", file=sys.stderr)
                produced, consumed = run_layout(cluster, layout, args, results)
                for name, phase in (("produce", produced), ("consume", consumed)):
                    results.phases.setdefault(f"{name} {layout.label}", []).append(phase)
                    print(f"    {name}: {phase.records} rec, {phase.records_per_s:,.0f}/s, "
                          f"brokers CPU {phase.cpu_pct(phase.brokers_cpu_s) or 0:.0f}%, "
                          f"client CPU {phase.cpu_pct(phase.client_cpu_s) or 0:.0f}%, "
                          f"other processes {phase.cpu_pct(phase.other_cpu_s) or 0:.0f}%"
                          f"{f' (waited {phase.quiet_wait_s:.1f} s for quiet)' if phase.quiet_wait_s else ''}"
                          f"{' ERROR ' + phase.error if phase.error else ''}", file=sys.stderr)


def read_back(cluster: LocalCluster, topic: str, partitions: int, timeout_s: float) -> tuple[int, set[bytes]]:
    """Every record of `topic` from the beginning: (count, distinct values)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    ends = {}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        for p in range(partitions):
            ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=CLIENT_TIMEOUT_S)[1]
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        positions = {p: 0 for p in range(partitions)}
        count, values = 0, set()
        deadline = time.monotonic() + timeout_s
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error():
                    continue
                count += 1
                values.add(message.value())
                positions[message.partition()] = message.offset() + 1
    finally:
        consumer.close()
    return count, values


def failover_part(args: argparse.Namespace, results: Results, work_dir: Path, session_timeout_ms: int | None = None,
                  kills: int | None = None, terms: int | None = None) -> None:
    """One cluster, one RF3 topic, `kills` kill -9 samples then `terms` SIGTERM samples; at the end the
    topic is read back and every acknowledged record must be in it (counted over all failover parts)."""
    session_timeout_ms = args.session_timeout_ms if session_timeout_ms is None else session_timeout_ms
    kills = args.kills if kills is None else kills
    terms = args.terms if terms is None else terms
    topic = f"bench-failover-{uuid.uuid4().hex[:6]}"
    signal_names = ["SIGKILL"] * kills + ["SIGTERM"] * terms
    acked: set[bytes] = set()
    with start_cluster(work_dir, args, session_timeout_ms) as cluster:
        create_topic(cluster, topic, args.partitions, 3, results.log_alarms)
        print(f"[failover] {kills} x kill -9, {terms} x SIGTERM, "
              f"zookeeper.session.timeout.ms={session_timeout_ms} ...", file=sys.stderr)
        samples = measure_failover(
            cluster, topic, args.partitions, signal_names, args.interval_ms / 1000, session_timeout_ms / 1000,
            acked, progress=lambda line: print(line, file=sys.stderr))
        for sample in samples:
            sample.session_timeout_ms = session_timeout_ms
        results.failover.extend(samples)
        results.acked_total += len(acked)
        try:
            wait_for_isr(cluster, topic, 3, timeout=30)
        except AssertionError as error:
            results.problems.append(f"before reading the failover topic back: {str(error).splitlines()[0]}")
        try:
            count, values = read_back(cluster, topic, args.partitions, timeout_s=120)
            results.read_back = (results.read_back or 0) + count
            results.acked_missing = (results.acked_missing or 0) + len(acked - values)
        except Exception as error:  # noqa: BLE001
            results.problems.append(f"reading the failover topic back: {one_line(error)}")


def compare_part(args: argparse.Namespace, results: Results, work_dir: Path) -> None:
    """A few kill -9 samples with another session timeout (Kafka's default 18000 ms), in a third cluster."""
    failover_part(args, results, work_dir, session_timeout_ms=args.compare_session_timeout_ms,
                  kills=args.compare_kills, terms=0)


def scan_logs(work_dir: Path, results: Results, limit: int = 12) -> None:
    """Quote the broker log lines that look like trouble, so the report points at them."""
    for log_path in sorted(work_dir.glob("*/broker-*.log")):
        hits = []
        for line in log_path.read_text(errors="replace").splitlines():
            if any(alarm in line for alarm in LOG_ALARMS):
                hits.append(line.strip())
        if hits:
            shown = "; ".join(f"`{line[:220]}`" for line in hits[:3])
            results.log_alarms.append(f"{log_path.relative_to(work_dir)}: {len(hits)} line(s) like {shown}")
            if len(results.log_alarms) >= limit:
                return


def zookeeper_version() -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "zookeeper"], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip().split("-")[0] + " (Debian package)" if out.returncode == 0 else "(version unknown)"
    except (OSError, subprocess.SubprocessError):
        return "(version unknown)"


def _reproducible_args(argv: list[str]) -> list[str]:
    """The command-line arguments that change what is measured (not where output goes)."""
    kept: list[str] = []
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
        elif arg == "--json":
            skip_value = True
        elif not (arg.startswith("--json=") or arg in ("--write-docs", "--keep-logs")):
            kept.append(arg)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3, help="partitions per topic (default 3)")
    parser.add_argument("--record-bytes", type=int, default=1024, help="record value size (default 1024)")
    parser.add_argument("--records", type=int, default=500_000, help="max records per throughput phase")
    parser.add_argument("--seconds", type=float, default=15.0, help="max seconds per throughput phase")
    parser.add_argument("--repeat", type=int, help="throughput repetitions, median reported (default 5, --quick 1)")
    parser.add_argument("--kills", type=int, help="kill -9 failover samples (default 21, --quick 2)")
    parser.add_argument("--terms", type=int, help="SIGTERM failover samples (default 9, --quick 1)")
    parser.add_argument("--quiet-wait", type=float, help="before each throughput phase wait up to this many s for "
                        f"the machine to go quiet (< {QUIET_BUSY_PCT:.0f}%% of a core busy; default 20, --quick 0)")
    parser.add_argument("--interval-ms", type=float, default=5.0, help="failover producer: ms between records")
    parser.add_argument("--session-timeout-ms", type=int, default=6000, help="zookeeper.session.timeout.ms")
    parser.add_argument("--compare-session-timeout-ms", type=int, default=18000,
                        help="a third cluster with this zookeeper.session.timeout.ms (default 18000, Kafka's)")
    parser.add_argument("--compare-kills", type=int, help="kill -9 samples in that cluster (default 6, --quick 0)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: <= 20k records, <= 3 s per phase, 1 repetition, 2 + 1 failover samples")
    parser.add_argument("--json", type=Path, help="raw results (default build/bench/cluster.json, with --quick "
                        "build/bench/cluster-quick.json)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the clusters' work directories")
    parser.add_argument("--write-docs", action="store_true", help=f"update '{DOCS_HEADING}' in docs/benchmarks.md")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="measure nothing: print the tables of an earlier run's JSON (with --write-docs: into the docs)")
    args = parser.parse_args(argv)
    if args.render:
        markdown = render_markdown(results_from_json(json.loads(args.render.read_text())))
        print(markdown)
        if args.write_docs:
            write_docs(markdown, DOCS_PATH)
            print(f"updated {DOCS_PATH.relative_to(REPO_ROOT)} ({DOCS_HEADING})", file=sys.stderr)
        return 0
    if args.quick:
        args.records, args.seconds = min(args.records, 20_000), min(args.seconds, 3.0)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 5
    if args.json is None:
        args.json = DEFAULT_JSON.with_name("cluster-quick.json") if args.quick else DEFAULT_JSON
    if args.quiet_wait is None:
        args.quiet_wait = 0.0 if args.quick else 20.0
    if args.kills is None:
        args.kills = 2 if args.quick else 21
    if args.compare_kills is None:
        args.compare_kills = 0 if args.quick else 6
    if args.terms is None:
        args.terms = 1 if args.quick else 9
    if args.partitions < BROKERS:
        parser.error(f"--partitions must be at least {BROKERS}, so that every broker leads one")

    import confluent_kafka

    available, reason = JavaZooKeeper.available()
    if not available:
        print(f"cannot run: ZooKeeper is not available: {reason}", file=sys.stderr)
        return 1

    load_before = os.getloadavg()[0]
    started = time.monotonic()
    results = Results()
    work_root = Path(tempfile.mkdtemp(prefix="kafkapy-bench-cluster-"))
    print(f"cluster work directories (broker logs) under {work_root}", file=sys.stderr)
    parts = [("throughput", throughput_part, args.skip_throughput), ("failover", failover_part, args.skip_failover),
             ("failover-compare", compare_part, args.skip_failover or not args.compare_kills)]
    for name, part, skipped in parts:
        if skipped:
            continue
        warnings = WarningsSeen()
        logging.getLogger("kafkapy.devcluster").addHandler(warnings)
        try:
            part(args, results, work_root / name)
        except (LocalClusterStartError, ZooKeeperStartError, Exception) as error:  # noqa: BLE001
            results.cluster_errors.append(f"{name}: {one_line(error)}")
            print(f"[{name}] failed: {error}", file=sys.stderr)
        finally:
            logging.getLogger("kafkapy.devcluster").removeHandler(warnings)
        # e.g. "broker 3 (pid 356) still running 10 s after it was asked to stop; killing it"
        # Not a result problem: the last broker to stop cannot hand its leaderships to anyone and
        # retries controlled shutdown as Kafka does (3 x 5 s), longer than LocalCluster waits.
        results.log_alarms.extend(f"{name} cluster: {message}" for message in warnings.messages)
    scan_logs(work_root, results)
    for alarm in results.log_alarms:
        print(f"log: {alarm}", file=sys.stderr)

    passed = _reproducible_args(argv if argv is not None else sys.argv[1:])
    results.settings = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores (1-min load average {load_before:.1f} before, "
                   f"{os.getloadavg()[0]:.1f} after the run), Python {platform.python_version()}",
        "client": f"{getattr(confluent_kafka, '__version__', '?')} / librdkafka {confluent_kafka.libversion()[0]}",
        "zookeeper": zookeeper_version(),
        "partitions": args.partitions,
        "record_bytes": args.record_bytes,
        "records": args.records,
        "seconds": args.seconds,
        "repeat": args.repeat if not args.skip_throughput else 0,
        "kills": args.kills if not args.skip_failover else 0,
        "terms": args.terms if not args.skip_failover else 0,
        "interval_ms": args.interval_ms,
        "quiet_wait_s": args.quiet_wait,
        "session_timeout_ms": args.session_timeout_ms,
        "compare_session_timeout_ms": args.compare_session_timeout_ms if args.compare_kills else None,
        "compare_kills": args.compare_kills if not args.skip_failover else 0,
        "duration_s": round(time.monotonic() - started, 1),
        "work_dir": str(work_root),
        "args": (" " + " ".join(passed)) if passed else "",
    }
    markdown = render_markdown(results)
    print(markdown)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    summary = {sig: failover_stats([s for s in results.failover if s.signal == sig]) for sig in ("SIGKILL", "SIGTERM")}
    args.json.write_text(json.dumps({**asdict(results), "failover_summary": summary}, indent=2, default=str))
    print(f"raw results in {args.json}", file=sys.stderr)
    if args.write_docs:
        write_docs(markdown, DOCS_PATH)
        print(f"updated {DOCS_PATH.relative_to(REPO_ROOT)} ({DOCS_HEADING})", file=sys.stderr)
    trouble = (results.cluster_errors or results.problems or any(s.error for s in results.failover)
               or any(p.error for phases in results.phases.values() for p in phases) or results.acked_missing)
    if args.keep_logs or trouble:
        print(f"broker logs kept in {work_root}", file=sys.stderr)
    else:
        shutil.rmtree(work_root, ignore_errors=True)
    return 1 if results.cluster_errors else 0


if __name__ == "__main__":
    sys.exit(main())
