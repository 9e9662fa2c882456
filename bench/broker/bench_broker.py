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
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))

import peers  # noqa: E402  (bench/peers.py)

DOCS_PATH = REPO_ROOT / "docs" / "benchmarks.md"
DOCS_HEADING = "## Broker (bench/broker)"
GOAL_ACCEPT_S = 0.3
GOAL_IDLE_RSS_MB = 80.0
START_TIMEOUT_S = 20.0
CLIENT_TIMEOUT_S = 15.0


# --------------------------------------------------------------------------------------------
# Brokers under test


@dataclass(slots=True)
class BrokerKind:
    """How to launch one broker implementation on a given port and scratch directory."""

    name: str
    command: Callable[[int, Path], list[str]]
    cwd: Path | None = None
    note: str = ""


def _kafkapy_command(port: int, work_dir: Path) -> list[str]:
    from conformance.broker_process import BrokerProcess  # the same argv the conformance tests use

    return BrokerProcess(port=port, data_dir=work_dir / "data", work_dir=work_dir).command()


def _tansu_command(port: int, work_dir: Path) -> list[str]:
    return peers.tansu_command(port)


BROKER_KINDS = {
    "kafkapy": BrokerKind("kafkapy", _kafkapy_command, cwd=REPO_ROOT, note="python -m kafkapy serve, disk log dir"),
    "tansu": BrokerKind("tansu", _tansu_command, note=f"tansu {peers.TANSU_VERSION}, memory://"),
}


class BrokerFailed(RuntimeError):
    """The broker did not start, or died, or did not answer."""


@dataclass
class RunningBroker:
    """One broker process started by this benchmark."""

    kind: BrokerKind
    port: int
    work_dir: Path
    proc: subprocess.Popen
    spawned_at: float
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as error:
            return f"<no log: {error}>"

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise BrokerFailed(f"{self.kind.name} exited with {self.proc.returncode}:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        try:  # children of the broker go with it
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        shutil.rmtree(self.work_dir, ignore_errors=True)


def spawn(kind: BrokerKind) -> RunningBroker:
    """Start a broker process on a free loopback port (returns immediately)."""
    port = peers.free_port()
    work_dir = Path(tempfile.mkdtemp(prefix=f"kafkapy-bench-{kind.name}-"))
    argv = kind.command(port, work_dir)
    log_path = work_dir / "broker.log"
    with open(log_path, "wb") as log:
        spawned_at = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=kind.cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return RunningBroker(kind, port, work_dir, proc, spawned_at, log_path)


def _api_versions_v0(sock: socket.socket, timeout: float) -> None:
    """Send ApiVersions v0 and read one whole response frame."""
    client_id = b"bench"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    sock.settimeout(timeout)
    sock.sendall(struct.pack(">i", len(body)) + body)
    header = _recv_exactly(sock, 4)
    (size,) = struct.unpack(">i", header)
    frame = _recv_exactly(sock, size)
    (correlation_id, error_code) = struct.unpack(">ih", frame[:6])
    if correlation_id != 1 or error_code != 0:
        raise BrokerFailed(f"ApiVersions answered correlation {correlation_id} error {error_code}")


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks += chunk
    return bytes(chunks)


def wait_ready(broker: RunningBroker, timeout: float = START_TIMEOUT_S) -> tuple[float, float]:
    """Wait until the broker accepts TCP and answers ApiVersions; return both delays in seconds."""
    deadline = broker.spawned_at + timeout
    accept_s = None
    while time.perf_counter() < deadline:
        broker.check_alive()
        try:
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=1.0)
        except OSError:
            time.sleep(0.002)
            continue
        with sock:
            if accept_s is None:
                accept_s = time.perf_counter() - broker.spawned_at
            try:
                _api_versions_v0(sock, timeout=max(0.1, deadline - time.perf_counter()))
            except (OSError, ConnectionError, struct.error):
                time.sleep(0.005)  # listening but not serving yet: try again
                continue
            return accept_s, time.perf_counter() - broker.spawned_at
    raise BrokerFailed(f"{broker.kind.name} not ready within {timeout:.0f} s:\n{broker.log_tail()}")


def process_tree_rss_mb(root_pid: int) -> float:
    """Resident set size of a process and all its descendants, in MB (10^6 bytes)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    total_kb = 0
    pending = [root_pid]
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb * 1024 / 1e6


# --------------------------------------------------------------------------------------------
# Measurements


@dataclass(slots=True)
class Case:
    """One throughput configuration."""

    partitions: int
    record_bytes: int
    acks: str

    @property
    def label(self) -> str:
        size = "1 KiB" if self.record_bytes == 1024 else f"{self.record_bytes} B"
        return f"{self.partitions} part, {size}, acks={self.acks}"


@dataclass
class PhaseResult:
    """Outcome of one produce or consume phase."""

    records: int = 0
    seconds: float = 0.0
    error: str | None = None
    first_record_s: float | None = None  # consume only: assign() to the first record

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


@dataclass
class BrokerResult:
    """Everything measured for one broker."""

    name: str
    note: str
    start_error: str | None = None
    accept_s: list[float] = field(default_factory=list)
    api_ready_s: list[float] = field(default_factory=list)
    idle_rss_mb: float | None = None
    idle_rss_samples_mb: list[float] = field(default_factory=list)
    produce: dict[str, PhaseResult] = field(default_factory=dict)
    consume: dict[str, PhaseResult] = field(default_factory=dict)
    # Every repetition's rate (records/s) per "produce <case>" / "consume <case>", for the spread.
    rates: dict[str, list[float]] = field(default_factory=dict)


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
    result.idle_rss_mb = _median(result.idle_rss_samples_mb)


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


def run_case(broker: RunningBroker, case: Case, max_records: int, max_seconds: float) -> tuple[PhaseResult, PhaseResult]:
    """Create a fresh topic, produce into it, read it all back, delete it."""
    topic = f"bench-{case.partitions}p-{case.record_bytes}b-acks{case.acks}-{uuid.uuid4().hex[:6]}"
    try:
        broker.check_alive()
        create_topic(broker.bootstrap, topic, case.partitions)
        produced = run_produce(broker.bootstrap, topic, case, max_records, max_seconds)
        broker.check_alive()
        if produced.records == 0:
            return produced, PhaseResult(error="nothing produced")
        consumed = run_consume(broker.bootstrap, topic, case, produced.records, max_seconds)
        broker.check_alive()
    except Exception as error:  # noqa: BLE001  one failing case must not end the run
        message = _one_line(error)
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
# Report


def _one_line(error: BaseException) -> str:
    """A failure as one line: the exception's first line plus the last line of output it quotes."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    summary = f"{type(error).__name__}: {lines[0]}"
    return summary if len(lines) == 1 else f"{summary} … {lines[-1]}"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt_seconds(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _fmt_rate(phase: PhaseResult | None, record_bytes: int) -> str:
    if phase is None or phase.records == 0:
        return "—" if phase is None or phase.error is None else "error"
    mb_s = phase.records_per_s * record_bytes / 1e6
    text = f"{phase.records_per_s / 1000:.1f}k rec/s ({mb_s:.1f} MB/s)"
    return text + " ⚠" if phase.error else text


def _ratio(ours: float | None, peer: float | None) -> str:
    if not ours or not peer:
        return "—"
    return f"{ours / peer:.2f}×"


def render_markdown(results: list[BrokerResult], cases: list[Case], settings: dict) -> str:
    by_name = {r.name: r for r in results}
    ours = by_name.get("kafkapy")
    peer = by_name.get("tansu")
    names = [r.name for r in results]
    lines: list[str] = []
    lines.append(
        f"Run {settings['date']} on {settings['machine']}; client confluent-kafka {settings['client']}; "
        f"each phase bounded by {settings['records']:,} records or {settings['seconds']:.0f} s, "
        f"median of {settings['repeat']} repetitions (consume rate excludes the client's start-up, shown separately); "
        f"startup = median of {settings['startup_runs']} fresh starts."
    )
    lines.append("")
    lines.append("Brokers: " + "; ".join(f"**{r.name}** ({r.note})" for r in results) + ".")
    lines.append("Ratio column: kafkapy vs tansu, > 1 means kafkapy is better (faster, smaller).")
    lines.append("")
    for r in results:
        if r.start_error:
            lines.append(f"- **{r.name} did not run**: {r.start_error}")
    if any(r.start_error for r in results):
        lines.append("")

    header = "| metric | goal | " + " | ".join(names) + " | ratio |"
    lines.append(header)
    lines.append("|" + "---|" * (len(names) + 3))

    def row(metric: str, goal: str, cells: list[str], ratio: str) -> None:
        lines.append(f"| {metric} | {goal} | " + " | ".join(cells) + f" | {ratio} |")

    accept = {r.name: _median(r.accept_s) for r in results}
    api = {r.name: _median(r.api_ready_s) for r in results}
    row("start → accepting TCP (median)", "", [_fmt_seconds(accept[n]) for n in names],
        _ratio(accept.get("tansu"), accept.get("kafkapy")))
    row("start → first ApiVersions answer (median)", f"≤ {GOAL_ACCEPT_S:.1f} s", [_fmt_seconds(api[n]) for n in names],
        _ratio(api.get("tansu"), api.get("kafkapy")))
    rss = {r.name: r.idle_rss_mb for r in results}
    row("idle RSS after 1 metadata request (median)", f"< {GOAL_IDLE_RSS_MB:.0f} MB",
        ["—" if rss[n] is None else f"{rss[n]:.1f} MB" for n in names], _ratio(rss.get("tansu"), rss.get("kafkapy")))
    for phase_name in ("produce", "consume"):
        for case in cases:
            phases = {r.name: getattr(r, phase_name).get(case.label) for r in results}
            rates = {n: (p.records_per_s if p and p.records else None) for n, p in phases.items()}
            row(f"{phase_name} {case.label}", "≥ peer", [_fmt_rate(phases[n], case.record_bytes) for n in names],
                _ratio(rates.get("kafkapy"), rates.get("tansu")))
    first = {r.name: _median([p.first_record_s for p in r.consume.values() if p.first_record_s is not None])
             for r in results}
    row("consumer assign → first record (median over cases)", "", [_fmt_seconds(first[n]) for n in names],
        _ratio(first.get("tansu"), first.get("kafkapy")))
    lines.append("")

    problems = []
    for r in results:
        for phase_name in ("produce", "consume"):
            for label, phase in getattr(r, phase_name).items():
                if phase.error:
                    problems.append(f"- {r.name} {phase_name} {label}: {phase.error}")
    spread = []
    for r in results:
        for label, rates in r.rates.items():
            good = [rate for rate in rates if rate > 0]
            if len(good) > 1 and max(good) > 2 * min(good):
                spread.append(f"{r.name} {label}: " + ", ".join(f"{rate / 1000:.0f}k" for rate in rates))
    if spread:
        lines.append("Unstable phases (repetitions differ by more than 2×; rec/s of each): "
                     + "; ".join(spread) + ".")
        lines.append("")
    if problems:
        lines.append("⚠ = the phase did not complete cleanly:")
        lines.extend(problems)
        lines.append("")

    if ours is not None and not ours.start_error:
        verdicts = []
        # A listener that cannot answer yet is not "accepting connections" for a client.
        a = api.get("kafkapy")
        verdicts.append(f"serving (ApiVersions answered) ≤ {GOAL_ACCEPT_S} s: "
                        f"{'met' if a is not None and a <= GOAL_ACCEPT_S else 'NOT met'}")
        m = rss.get("kafkapy")
        verdicts.append(f"idle RSS < {GOAL_IDLE_RSS_MB:.0f} MB: {'met' if m is not None and m < GOAL_IDLE_RSS_MB else 'NOT met'}")
        if peer is not None and not peer.start_error:
            behind = 0
            total = 0
            for phase_name in ("produce", "consume"):
                for case in cases:
                    a_phase = getattr(ours, phase_name).get(case.label)
                    b_phase = getattr(peer, phase_name).get(case.label)
                    if a_phase and b_phase and b_phase.records:
                        total += 1
                        if not a_phase.records or a_phase.records_per_s < b_phase.records_per_s:
                            behind += 1
            verdicts.append(f"throughput ≥ peer: {'met' if total and not behind else f'NOT met in {behind} of {total} phases'}")
        lines.append("Goals: " + "; ".join(verdicts) + ".")
        lines.append("")
    lines.append(f"Reproduce: `python bench/broker/bench_broker.py{settings['args']}`")
    return "\n".join(lines)


def write_docs(markdown: str) -> None:
    """Replace the body of the Broker section of docs/benchmarks.md, leaving other sections alone."""
    text = DOCS_PATH.read_text()  # re-read right before editing: other sections change concurrently
    start = text.find(DOCS_HEADING)
    if start < 0:
        text = text.rstrip("\n") + f"\n\n{DOCS_HEADING}\n\n{markdown}\n"
    else:
        body_start = start + len(DOCS_HEADING)
        next_heading = text.find("\n## ", body_start)
        tail = text[next_heading:] if next_heading >= 0 else "\n"
        text = text[:body_start] + "\n\n" + markdown.rstrip("\n") + "\n" + tail
    DOCS_PATH.write_text(text)


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
                result.start_error = _one_line(error)
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
        write_docs(markdown)
        print(f"updated {DOCS_PATH.relative_to(REPO_ROOT)} ({DOCS_HEADING})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
