#!/usr/bin/env python3
"""Broker CPU per consumed record, two git refs side by side: a consume-path A/B that machine load cannot skew.

    python bench/broker/consume_cpu.py BEFORE AFTER [--rounds 4] [--case 8x100:2000000] [--passes 2]
    python bench/broker/consume_cpu.py 5435abc HEAD --profile build/bench/prof   # + cProfile of each pass

Wall-clock rates on a 2-core machine where the client and the broker share the cores move by 20 %
from run to run; the CPU time the broker process spends per record it serves does not depend on
how the cores were shared. For each ref a detached git worktree is made (removed at the end, also on
failure or Ctrl-C); a ref that names an existing directory is used as it is (e.g. a work tree with
uncommitted changes). Each round starts one broker per side, one side after the other, the order
flipping every round (ABBA): `python -m kafkapy serve` with cwd and PYTHONPATH = that side's tree
(checked in /proc: cwd, cmdline and PYTHONPATH of the process), a fresh log dir, Kafka's defaults.
For each case (PARTITIONSxBYTES:RECORDS) a topic is made and filled by a confluent-kafka producer
(not measured), then read from the beginning of every partition --passes times by a fresh
confluent-kafka consumer in assign mode, configured as bench/broker/bench_broker.py configures it.
Over each pass (assign() to the last record, before close()) are measured:

  * broker CPU: the run time of the broker process's threads from /proc/<pid>/task/*/schedstat
    (nanoseconds), and its utime and stime from /proc/<pid>/stat (clock ticks, 10 ms);
  * client CPU: this process's own CPU (getrusage; the consumer's librdkafka threads included);
  * wall time, and the rate.

Reported per case: median over passes and rounds of broker us/record for each side, and the ratio
before/after (>= 1: after spends no more broker CPU per record), with the range of the per-round
ratios; the same for the client; and the wall rates. Markdown on stdout and in
build/bench/consume-cpu-<before>-<after>.md, raw numbers in the .json beside it.

With --profile DIR the brokers run under bench/broker/profiled_serve.py and each consume pass is
profiled alone (cProfile of the event-loop thread, started and stopped by signals): DIR/<side>-r<round>-
<case>-p<pass>.prof. cProfile slows the broker several-fold, so CPU numbers of a --profile run are
not comparable with a plain run's; compare the profiles of the two sides with each other.
This script imports no kafkapy: the same copy measures both refs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILED_SERVE = Path(__file__).resolve().parent / "profiled_serve.py"
OUT_DIR = REPO_ROOT / "build" / "bench"
CLIENT_TIMEOUT_S = 20.0
START_TIMEOUT_S = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Interrupted(Exception):
    """SIGTERM or SIGINT arrived: unwind so that brokers and worktrees are cleaned up."""


@dataclass
class Side:
    label: str  # "before" or "after"
    ref: str
    commit: str
    tree: Path
    made: bool  # a worktree made here (removed at the end)


@dataclass
class Pass:
    side: str
    round: int
    case: str
    index: int
    records: int = 0
    wall_s: float = 0.0
    first_record_s: float | None = None  # assign() to the first records (the client's own start)
    broker_cpu_s: float = 0.0
    broker_user_s: float = 0.0  # clock-tick resolution
    broker_sys_s: float = 0.0
    client_cpu_s: float = 0.0
    error: str | None = None

    @property
    def broker_us(self) -> float | None:
        return 1e6 * self.broker_cpu_s / self.records if self.records else None

    @property
    def client_us(self) -> float | None:
        return 1e6 * self.client_cpu_s / self.records if self.records else None

    @property
    def rate(self) -> float | None:
        """Records per second after the first records arrived (as bench_broker.py: the client's start-up
        is not the broker's speed)."""
        if not self.records or not self.wall_s:
            return None
        steady = self.wall_s - (self.first_record_s or 0.0)
        return self.records / steady if steady > 0 else self.records / self.wall_s


@dataclass
class SideRun:
    side: str
    round: int
    broker_pid: int = 0
    broker_cwd: str = ""
    broker_pythonpath: str = ""
    produce: dict[str, dict] = field(default_factory=dict)
    error: str | None = None


# -- git ---------------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path = REPO_ROOT, timeout: float = 300) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def make_side(label: str, ref: str, work: Path) -> Side:
    if Path(ref).is_dir():
        tree = Path(ref).resolve()
        commit = git("rev-parse", "HEAD", cwd=tree)
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", cwd=tree))
        return Side(label, ref, commit + ("+changes" if dirty else ""), tree, made=False)
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    tree = work / label
    git("worktree", "add", "--detach", str(tree), commit)
    # brokers load cached bytecode, as installed ones do: a module a broker first imports in the
    # middle of a measured phase must not be compiled there (issue 21 made many imports lazy)
    import compileall

    compileall.compile_dir(str(tree / "kafkapy"), quiet=1)
    return Side(label, ref, commit, tree, made=True)


def remove_side(side: Side) -> None:
    if not side.made:
        return
    try:
        git("worktree", "remove", "--force", str(side.tree))
    except (RuntimeError, subprocess.SubprocessError) as error:
        print(f"warning: {error}", file=sys.stderr)
    shutil.rmtree(side.tree, ignore_errors=True)


# -- the broker ----------------------------------------------------------------------------------------------


def proc_cpu_s(pid: int) -> tuple[float, float, float]:
    """(CPU, user, system) seconds of one process, all its threads. User and system come from
    /proc/<pid>/stat in clock ticks (10 ms); the total is the sum of the threads' run time in
    /proc/<pid>/task/*/schedstat (nanoseconds) where the kernel has schedstats, else user + system.
    A thread that ended during the pass would drop out of the schedstat sum: the broker's threads
    (the event loop, asyncio's worker pool) live as long as it does."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    user, system = int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK
    total_ns = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as schedstat:
                    total_ns += int(schedstat.read().split()[0])
            except (OSError, IndexError, ValueError):
                pass
    except OSError:
        total_ns = 0
    return (total_ns / 1e9 if total_ns else user + system), user, system


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Broker:
    """`python -m kafkapy serve` from one tree, on a fresh log dir; optionally under profiled_serve.py."""

    def __init__(self, side: Side, work: Path, profile_to: Path | None) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"consume-cpu-{side.label}-", dir=work))
        self.profile_to = profile_to
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        head = ([sys.executable, str(PROFILED_SERVE), str(self.dir / "current.prof")] if profile_to
                else [sys.executable, "-m", "kafkapy"])
        argv = [*head, "serve", "--override", f"listeners={listener}",
                "--override", f"advertised.listeners={listener}", "--override", f"log.dirs={self.dir / 'data'}"]
        env = dict(os.environ, PYTHONPATH=str(side.tree))
        env.pop("PYTHONSAFEPATH", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # the bytecode compiled by make_side is read
        self.log = open(self.dir / "broker.log", "wb")  # noqa: SIM115  the broker's output, closed in stop()
        self.proc = subprocess.Popen(argv, cwd=side.tree, env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def check_tree(self, tree: Path) -> tuple[str, str]:
        """The process runs `kafkapy serve` from `tree`: its cwd (first on sys.path for -m) and PYTHONPATH."""
        cwd = os.readlink(f"/proc/{self.proc.pid}/cwd")
        with open(f"/proc/{self.proc.pid}/environ", "rb") as raw:
            env = dict(item.split(b"=", 1) for item in raw.read().split(b"\0") if b"=" in item)
        with open(f"/proc/{self.proc.pid}/cmdline", "rb") as raw:
            argv = raw.read().split(b"\0")
        pythonpath = env.get(b"PYTHONPATH", b"").decode()
        if Path(pythonpath).resolve() != tree.resolve() or (b"-m" in argv and Path(cwd).resolve() != tree.resolve()):
            raise RuntimeError(f"broker {self.proc.pid} runs from cwd {cwd} PYTHONPATH {pythonpath}, not {tree}")
        return cwd, pythonpath

    def wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:  # listening first: librdkafka logs every refused connect
            self.check_alive()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                break
            except OSError:
                time.sleep(0.02)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                admin.list_topics(timeout=1.0)
                return
            except Exception:  # noqa: BLE001  not serving yet
                time.sleep(0.05)
        raise RuntimeError(f"broker not ready within {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return "\n".join((self.dir / "broker.log").read_text(errors="replace").splitlines()[-15:])

    def profile(self, on: bool, name: str | None = None) -> None:
        if self.profile_to is None:
            return
        os.kill(self.proc.pid, signal.SIGUSR1 if on else signal.SIGUSR2)
        if not on:
            current = self.dir / "current.prof"
            deadline = time.monotonic() + 30
            while not current.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)  # dump_stats writes in one go; let it finish
            if current.exists():
                self.profile_to.mkdir(parents=True, exist_ok=True)
                shutil.move(str(current), str(self.profile_to / f"{name}.prof"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# -- clients -------------------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=CLIENT_TIMEOUT_S)[topic].result(
        timeout=CLIENT_TIMEOUT_S)
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=CLIENT_TIMEOUT_S).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} has no leaders for all {partitions} partitions")


def produce(bootstrap: str, topic: str, partitions: int, size: int, records: int, batch_records: int | None) -> dict:
    """Fill the topic as bench_broker.py's produce phase does (acks=1, linger.ms=5, no compression): the
    batches then hold what arrived in 5 ms, which depends on the produce rate of the moment. With
    `batch_records` every batch holds exactly that many records instead (a long linger, cut by
    count), so both sides serve the same batches."""
    from confluent_kafka import Producer

    settings = {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "compression.type": "none",
                "enable.idempotence": False, "queue.buffering.max.messages": 500_000,
                "message.timeout.ms": 120_000}
    if batch_records:
        settings.update({"linger.ms": 2000, "batch.num.messages": batch_records, "batch.size": 100_000_000})
    producer = Producer(settings)
    outcome = {"delivered": 0, "failed": 0}

    def on_delivery(error, _message) -> None:
        outcome["failed" if error else "delivered"] += 1

    payload = os.urandom(size)
    started = time.perf_counter()
    sent = 0
    while sent < records:
        try:
            producer.produce(topic, payload, partition=sent % partitions, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.005)
        if not sent & 1023:
            producer.poll(0)
    left = producer.flush(120)
    outcome["seconds"] = time.perf_counter() - started
    if outcome["failed"] or left or outcome["delivered"] != records:
        raise RuntimeError(f"produce: {outcome['delivered']} of {records} delivered, {outcome['failed']} failed")
    return outcome


def count_batches(log_dir: Path, topic: str) -> int:
    """Record batches in the topic's segment files (each: base offset, 4-byte length, that many bytes)."""
    batches = 0
    for segment in log_dir.glob(f"{topic}-*/*.log"):
        with open(segment, "rb") as log:
            data = log.read()
        pos = 0
        while pos + 12 <= len(data):
            length = int.from_bytes(data[pos + 8:pos + 12], "big")
            if length <= 0:
                break
            pos += 12 + length
            batches += 1
    return batches


def consume_pass(broker: Broker, topic: str, partitions: int, expected: int, result: Pass,
                 max_seconds: float) -> None:
    """Read every partition from the beginning; CPU and wall time from assign() to the last record."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"consume-cpu-{uuid.uuid4().hex[:8]}",  # required by the Python client; assign() only
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "queued.min.messages": 2_000_000,  # as bench_broker.py: no client-side fetch back-off
        "queued.max.messages.kbytes": 1_048_576,
        "fetch.queue.backoff.ms": 10,
    })
    received = 0
    try:
        broker.profile(True)
        broker_before, client_before = proc_cpu_s(broker.proc.pid), self_cpu_s()
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        stop_at = started + max_seconds
        while received < expected and time.perf_counter() < stop_at:
            for message in consumer.consume(num_messages=10_000, timeout=0.2):
                if message.error():
                    result.error = result.error or str(message.error())
                else:
                    received += 1
            if received and result.first_record_s is None:
                result.first_record_s = time.perf_counter() - started
        result.wall_s = time.perf_counter() - started
        broker_after = proc_cpu_s(broker.proc.pid)
        result.broker_cpu_s, result.broker_user_s, result.broker_sys_s = (
            a - b for a, b in zip(broker_after, broker_before))
        result.client_cpu_s = self_cpu_s() - client_before
        broker.profile(False, f"{result.side}-r{result.round}-{result.case}-p{result.index}")
    finally:
        consumer.close()
    result.records = received
    if received != expected:
        result.error = f"{received} of {expected} records within {max_seconds:.0f} s" + (
            f"; {result.error}" if result.error else "")


# -- one side, one round -------------------------------------------------------------------------------------


def run_side(side: Side, round_: int, cases: list[tuple[int, int, int]], passes: int, work: Path,
             profile_dir: Path | None, max_seconds: float, batch_records: int | None, out: list[Pass]) -> SideRun:
    run = SideRun(side.label, round_)
    broker = Broker(side, work, profile_dir)
    try:
        run.broker_pid = broker.proc.pid
        broker.wait_ready()
        run.broker_cwd, run.broker_pythonpath = broker.check_tree(side.tree)
        for partitions, size, records in cases:
            name = f"{partitions}x{size}"
            topic = f"consume-cpu-{name}-{uuid.uuid4().hex[:6]}"
            create_topic(broker.bootstrap, topic, partitions)
            broker.profile(True)
            cpu_before = proc_cpu_s(broker.proc.pid)
            run.produce[name] = produce(broker.bootstrap, topic, partitions, size, records, batch_records)
            time.sleep(1.0)  # let the produce's tail (acks, flushes) settle before measuring
            broker.profile(False, f"{side.label}-r{round_}-{name}-produce")
            # the fill's broker CPU too (its first second of idle included: the same on both sides)
            cpu_after = proc_cpu_s(broker.proc.pid)
            run.produce[name]["broker_us"] = (cpu_after[0] - cpu_before[0]) / records * 1e6
            run.produce[name]["broker_user_s"] = cpu_after[1] - cpu_before[1]
            run.produce[name]["broker_sys_s"] = cpu_after[2] - cpu_before[2]
            print(f"    {side.label} {name} produce: broker {run.produce[name]['broker_us']:.3f} us/rec "
                  f"(user {cpu_after[1] - cpu_before[1]:.2f} s, sys {cpu_after[2] - cpu_before[2]:.2f} s)",
                  file=sys.stderr)
            run.produce[name]["batches"] = count_batches(broker.dir / "data", topic)
            for index in range(passes):
                result = Pass(side.label, round_, name, index)
                consume_pass(broker, topic, partitions, records, result, max_seconds)
                out.append(result)
                broker.check_alive()
                print(f"    {side.label} {name} pass {index + 1}: {result.records:,} rec, "
                      f"broker {result.broker_us or 0:.3f} us/rec (user {result.broker_user_s:.2f} s, "
                      f"sys {result.broker_sys_s:.2f} s), client {result.client_us or 0:.2f} us/rec, "
                      f"{(result.rate or 0) / 1000:.0f}k rec/s" + (f" ERROR {result.error}" if result.error else ""),
                      file=sys.stderr)
    except Interrupted:
        raise
    except Exception as error:  # noqa: BLE001  one failing side-run must not end the campaign
        run.error = " ".join(str(error).split())[:500]
        print(f"    {side.label} round {round_ + 1}: ERROR {run.error}", file=sys.stderr)
    finally:
        broker.stop()
    return run


# -- report -------------------------------------------------------------------------------------------------


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def render(passes: list[Pass], runs: list[SideRun], sides: dict[str, Side], settings: dict) -> str:
    lines = [
        (f"Before: `{sides['before'].ref}` ({sides['before'].commit[:10]}); after: `{sides['after'].ref}` "
         f"({sides['after'].commit[:10]}). {settings['machine']}; {settings['rounds']} round(s) ABBA, "
         f"{settings['passes']} consume pass(es) per case and broker; took {settings['duration_s'] / 60:.1f} min."),
        f"Command: `{settings['command']}`",
        "",
        ("CPU per record = CPU seconds over the consume pass / records read (medians over passes and rounds; "
         "the broker's user-mode part, its Python work, pooled over passes: /proc/<pid>/stat counts 10 ms ticks; "
         "the rest is the kernel sending the segment bytes). "
         "Ratio = before/after: >= 1 means after spends no more CPU per record. \"per round\" is the range of the "
         "ratio of each round's pair of medians."),
        "",
        ("| case | records | broker us/rec before | after | ratio | per round | client us/rec before | after | ratio "
         "| rate before | after | ratio | broker user us/rec before | after | rec/batch before | after | passes |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    good = [p for p in passes if not p.error and p.records]
    # The first pass over a freshly written topic costs the broker more than the next ones (see
    # docs/benchmarks.md): its passes are reported apart, so that a median never mixes the two.
    groups = [(case, first) for case in dict.fromkeys(p.case for p in passes)
              for first in ((True, False) if settings["passes"] > 1 else (True,))]
    for case, first in groups:
        row = [p for p in good if p.case == case and (p.index == 0) == first]

        def med(label: str, attr: str, round_: int | None = None, row: list[Pass] = row) -> float | None:
            return _median([getattr(p, attr) for p in row if p.side == label and (round_ is None or p.round == round_)])

        per_round = []
        for round_ in sorted({p.round for p in row}):
            b, a = med("before", "broker_us", round_), med("after", "broker_us", round_)
            if b and a:
                per_round.append(b / a)
        name = case if settings["passes"] == 1 else f"{case}, {'pass 1' if first else 'passes 2+'}"
        cells = [name, f"{max((p.records for p in row), default=0):,}"]
        for attr, fmt, better in (("broker_us", "{:.3f}", "lower"), (None, None, None), ("client_us", "{:.2f}", "lower"),
                                  ("rate", "{:.0f}k", "higher")):
            if attr is None:
                cells.append(f"{min(per_round):.2f}–{max(per_round):.2f}" if per_round else "—")
                continue
            b, a = med("before", attr), med("after", attr)
            scale = 1000 if attr == "rate" else 1
            cells += [fmt.format(b / scale) if b else "—", fmt.format(a / scale) if a else "—"]
            cells.append("—" if not (a and b) else f"{(b / a if better == 'lower' else a / b):.3f}")
        for label in ("before", "after"):  # the broker's own (user-mode) CPU, pooled: ticks are coarse
            mine = [p for p in row if p.side == label]
            records = sum(p.records for p in mine)
            cells.append(f"{1e6 * sum(p.broker_user_s for p in mine) / records:.3f}" if records else "—")
        for label in ("before", "after"):  # the shape of the data each side served
            per_batch = [run.produce[case]["delivered"] / run.produce[case]["batches"] for run in runs
                         if run.side == label and run.produce.get(case, {}).get("batches")]
            cells.append(f"{statistics.median(per_batch):.0f}" if per_batch else "—")
        counts = {label: sum(1 for p in row if p.side == label) for label in ("before", "after")}
        cells.append(f"{counts['before']}+{counts['after']}")
        lines.append("| " + " | ".join(cells) + " |")
    trees = {label: sorted({r.broker_pythonpath for r in runs if r.side == label and r.broker_pythonpath})
             for label in ("before", "after")}
    lines += ["", f"Brokers checked in /proc (cwd and PYTHONPATH): before {trees['before']}, after {trees['after']}."]
    problems = [f"{r.side} round {r.round + 1}: {r.error}" for r in runs if r.error]
    problems += [f"{p.side} round {p.round + 1} {p.case} pass {p.index + 1}: {p.error}" for p in passes if p.error]
    if problems:
        lines += ["", "Problems:"] + [f"- {p}" for p in problems[:20]]
    return "\n".join(lines)


def _parse_case(text: str) -> tuple[int, int, int]:
    shape, _, records = text.partition(":")
    partitions, _, size = shape.partition("x")
    return int(partitions), int(size), int(records or 1_000_000)


def _on_signal(signum, _frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="git ref (or existing directory) of the baseline")
    parser.add_argument("after", help="git ref (or existing directory) to compare against it")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, each runs both sides (default 4)")
    parser.add_argument("--case", action="append", type=_parse_case, metavar="PARTITIONSxBYTES:RECORDS",
                        help="a topic shape and its record count (default 8x100:2000000 and 8x1024:1000000)")
    parser.add_argument("--passes", type=int, default=2, help="consume passes per case and broker (default 2)")
    parser.add_argument("--batch-records", type=int, metavar="N",
                        help="produce batches of exactly N records (default: as bench_broker.py, linger.ms=5)")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="bound on one consume pass")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="cProfile each consume pass into DIR")
    parser.add_argument("--out", type=Path, help="output stem (default build/bench/consume-cpu-<before>-<after>)")
    args = parser.parse_args(argv)
    cases = args.case or [(8, 100, 2_000_000), (8, 1024, 1_000_000)]

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="kafkapy-consume-cpu-"))
    sides: dict[str, Side] = {}
    passes: list[Pass] = []
    runs: list[SideRun] = []
    interrupted = False
    try:
        for label in ("before", "after"):
            sides[label] = side = make_side(label, getattr(args, label), work)
            print(f"[{label}] {side.ref} = {side.commit[:10]} in {side.tree}", file=sys.stderr)
        for round_ in range(args.rounds):
            order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
            for label in order:
                print(f"[round {round_ + 1}/{args.rounds}] {label} ...", file=sys.stderr)
                runs.append(run_side(sides[label], round_, cases, args.passes, work, args.profile, args.max_seconds,
                                     args.batch_records, passes))
    except Interrupted as signal_name:
        print(f"interrupted by {signal_name}; cleaning up, no report written", file=sys.stderr)
        interrupted = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the clean-up
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for side in sides.values():
            remove_side(side)
        shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if interrupted:
        return 130
    if len(sides) < 2:
        return 1

    import confluent_kafka

    settings = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, 1-min load average {load_before:.1f} before and "
                   f"{os.getloadavg()[0]:.1f} after, Python {platform.python_version()}, confluent-kafka "
                   f"{confluent_kafka.version()} / librdkafka {confluent_kafka.libversion()[0]}",
        "rounds": args.rounds,
        "passes": args.passes,
        "cases": [f"{p}x{s}:{r}" for p, s, r in cases],
        "batch_records": args.batch_records,
        "profile": str(args.profile) if args.profile else None,
        "duration_s": round(time.monotonic() - started, 1),
        "command": "python bench/broker/consume_cpu.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    markdown = render(passes, runs, sides, settings)
    print(markdown)
    stem = args.out or OUT_DIR / f"consume-cpu-{sides['before'].commit[:7]}-{sides['after'].commit[:7]}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".md").write_text(markdown + "\n")
    stem.with_suffix(".json").write_text(json.dumps({
        "settings": settings,
        "sides": {label: {"ref": s.ref, "commit": s.commit} for label, s in sides.items()},
        "runs": [asdict(r) for r in runs],
        "passes": [{**asdict(p), "broker_us": p.broker_us, "client_us": p.client_us, "rate": p.rate} for p in passes],
    }, indent=2) + "\n")
    print(f"written {stem.with_suffix('.md')} and {stem.with_suffix('.json')}", file=sys.stderr)
    return 1 if any(r.error for r in runs) or any(p.error for p in passes) else 0


if __name__ == "__main__":
    sys.exit(main())
