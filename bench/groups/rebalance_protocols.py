#!/usr/bin/env python3
"""Rebalance times of the consumer protocol (KIP-848) against the classic protocol, same broker, same run.

Every consumer is a confluent-kafka (librdkafka) Consumer in its own OS process (this script
re-run with --worker), polling continuously (poll(0.05)); it reports each assignment change to
the parent as a JSON line with a CLOCK_MONOTONIC timestamp, which is one clock for all processes
on a Linux host, so events from different consumers can be ordered against each other.

Client modes compared (the same group size, topic and broker process for all of them):
  consumer     group.protocol=consumer (server-side assignor, the broker's default "uniform")
  classic      group.protocol=classic, partition.assignment.strategy=range (eager, stop-the-world)
  cooperative  group.protocol=classic, partition.assignment.strategy=cooperative-sticky (KIP-429)

Phases of one repetition (a new group id per repetition, on one topic with 60 partitions):
  form   10 consumers, already created and connected, are told "go" at t0 and subscribe.
  leave  one of the group (chosen at random) is told to close() (a graceful leave) at t0.
  join   a new consumer, already created and connected, is told "go" at t0.
After "form", --cycles (default 2) leave+join pairs follow. Before each leave and join the parent sleeps a random
0 to one heartbeat interval: members that joined together heartbeat in step, and a fixed pause would start every
leave/join at the same point of their heartbeat cycle (measuring that point, not the protocol).

Definitions (measured from the consumers' own callbacks, not from the broker):
  owned    time from t0 to the first moment at which every partition of the topic is owned by
           exactly one of the phase's members and every member owns at least one partition.
           For "form" this is "10 consumers own all partitions".
  settled  the phase ends once ownership is "owned" as above and no member's assignment has changed
           for a quiet window (QUIET_S plus the heartbeat interval in play, so a pending incremental
           step - a revocation waiting for the next heartbeat - is always seen); "settled" is the time
           from t0 to the last change of what a phase member owns before that window (callbacks that
           change nothing do not count). The leaver's own revocation does not count; the phase's
           members are the group after the change.
  unowned  partition-seconds with no owner between t0 and "settled": what the rebalance costs
           consumption (eager revokes every partition, incremental protocols only those that move).
  overlap  the most owners any partition had at once over the whole repetition, from the ordered
           events (1 = a partition was never owned twice at once as the consumers see it).
  broker agrees  (consumer protocol) after the phase, ConsumerGroupDescribe says Stable and every
           member is at the assignment epoch with assignment = target = what the consumer reports.

Broker profiles (each a fresh kafkapy process; every value not named is Kafka's default):
  default  group.initial.rebalance.delay.ms=3000 (Kafka's default; only classic waits on it),
           group.consumer.heartbeat.interval.ms=5000 (Kafka's default; the consumer protocol
           reacts to a change at a member's next heartbeat). Clients use librdkafka's defaults
           (classic: session.timeout.ms=45000, heartbeat.interval.ms=3000).
  fast     group.initial.rebalance.delay.ms=0, group.consumer.heartbeat.interval.ms=500 and
           group.consumer.min.heartbeat.interval.ms=500; classic clients heartbeat.interval.ms=500.
Both profiles also set offsets.topic.replication.factor=1 (a one-broker cluster);
group.coordinator.rebalance.protocols is left at its default "classic,consumer" (Kafka 4.0's).

    python bench/groups/rebalance_protocols.py                       # both profiles, 3 repetitions
    python bench/groups/rebalance_protocols.py --profiles fast --modes consumer,cooperative --reps 2
    python bench/groups/rebalance_protocols.py --write-docs          # also update docs/benchmarks.md
    python bench/groups/rebalance_protocols.py --quick               # smoke run: 3 consumers, 6 partitions
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

DOCS_PATH = REPO_ROOT / "docs" / "benchmarks.md"
DOCS_HEADING = "## Consumer groups: consumer protocol (KIP-848) against classic"
DOCS_BEGIN = "<!-- bench/groups/rebalance_protocols.py: generated table begins -->"
DOCS_END = "<!-- bench/groups/rebalance_protocols.py: generated table ends -->"
PHASES = ("form", "leave", "join")
MODES = ("consumer", "classic", "cooperative")
QUIET_S = 1.0
PHASE_TIMEOUT_S = 60.0
WORKER_READY_TIMEOUT_S = 30.0

COMMON_OVERRIDES = {"offsets.topic.replication.factor": "1"}
PROFILES = {
    "default": {"broker": {"group.initial.rebalance.delay.ms": "3000",
                           "group.consumer.heartbeat.interval.ms": "5000"},
                "classic_client": {}, "consumer_hb_s": 5.0, "classic_hb_s": 3.0},
    "fast": {"broker": {"group.initial.rebalance.delay.ms": "0",
                        "group.consumer.heartbeat.interval.ms": "500",
                        "group.consumer.min.heartbeat.interval.ms": "500"},
             "classic_client": {"heartbeat.interval.ms": 500}, "consumer_hb_s": 0.5, "classic_hb_s": 0.5},
}


# ---------------------------------------------------------------- worker (one consumer process)

def worker_main(spec: dict) -> int:
    """One consumer: wait for "go", subscribe, poll and report every assignment change until "leave"."""
    from confluent_kafka import Consumer, KafkaException

    out_lock = threading.Lock()

    def emit(**event) -> None:
        event.setdefault("t", time.monotonic())
        with out_lock:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    owned: set[int] = set()

    # confluent-kafka's Python API does not expose rd_kafka_rebalance_protocol(); the mode decides it.
    incremental = spec["incremental"]

    def on_assign(consumer, partitions) -> None:
        t = time.monotonic()
        got = {p.partition for p in partitions}
        if incremental:
            owned.update(got)
        else:
            owned.clear()
            owned.update(got)
        emit(ev="assign", t=t, owned=sorted(owned), delta=sorted(got))

    def on_revoke(consumer, partitions) -> None:
        t = time.monotonic()
        gone = {p.partition for p in partitions}
        if incremental:
            owned.difference_update(gone)
        else:
            owned.clear()
        emit(ev="revoke", t=t, owned=sorted(owned), delta=sorted(gone))

    def on_error(err) -> None:
        emit(ev="error", msg=str(err))

    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"],
                         "client.id": spec["name"], "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "error_cb": on_error, **spec["config"]})
    # Connect (metadata) before "go" so that t0 does not include process start and the first connection.
    consumer.list_topics(spec["topic"], timeout=20)
    emit(ev="ready")
    if sys.stdin.readline().strip() != "go":
        consumer.close()
        return 0
    stop = threading.Event()

    def read_commands() -> None:
        sys.stdin.readline()  # "leave" or EOF (the parent went away): either way, leave
        stop.set()

    threading.Thread(target=read_commands, daemon=True).start()
    consumer.subscribe([spec["topic"]], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while not stop.is_set():
        try:
            msg = consumer.poll(0.05)
        except KafkaException as exc:
            emit(ev="error", msg=str(exc))
            continue
        if msg is not None and msg.error() is not None:
            emit(ev="error", msg=str(msg.error()))
    emit(ev="leaving")
    consumer.close()
    emit(ev="closed")
    return 0


# ---------------------------------------------------------------- parent side

@dataclass
class Worker:
    """The parent's handle on one consumer process; a reader thread collects its events."""

    name: str
    proc: subprocess.Popen
    events: list[dict]
    lock: threading.Lock
    ready: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    def send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def stop(self, timeout: float = 15.0) -> None:
        self.send("leave")
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def spawn_worker(name: str, spec: dict, events: list[dict], lock: threading.Lock, log_dir: Path) -> Worker:
    stderr = open(log_dir / f"{name}.stderr", "w")
    proc = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps({**spec, "name": name})],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1)
    stderr.close()
    worker = Worker(name, proc, events, lock)

    def read() -> None:
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["member"] = name
            if event["ev"] == "ready":
                worker.ready.set()
            with lock:
                events.append(event)

    worker.reader = threading.Thread(target=read, daemon=True)
    worker.reader.start()
    return worker


def ownership_at(events: list[dict], until: float) -> dict[str, set[int]]:
    """Each member's owned partitions after every assignment event up to `until`."""
    owned: dict[str, set[int]] = {}
    for e in sorted(events, key=lambda e: e["t"]):
        if e["t"] > until:
            break
        if e["ev"] in ("assign", "revoke"):
            owned[e["member"]] = set(e["owned"])
    return owned


def real_changes(events: list[dict]) -> list[dict]:
    """The assignment events, in time order, that changed what their member owns (callbacks can be no-ops)."""
    owned: dict[str, list[int]] = {}
    out = []
    for e in sorted(events, key=lambda e: e["t"]):
        if e["ev"] in ("assign", "revoke") and owned.get(e["member"], []) != e["owned"]:
            owned[e["member"]] = e["owned"]
            out.append(e)
    return out


def is_owned(owned: dict[str, set[int]], members: list[str], partitions: int) -> bool:
    counts: dict[int, int] = {}
    for m in members:
        for p in owned.get(m, ()):
            counts[p] = counts.get(p, 0) + 1
    return (len(counts) == partitions and all(c == 1 for c in counts.values())
            and all(owned.get(m) for m in members))


def max_overlap(events: list[dict]) -> int:
    owned: dict[str, set[int]] = {}
    worst = 0
    for e in sorted(events, key=lambda e: e["t"]):
        if e["ev"] not in ("assign", "revoke"):
            continue
        owned[e["member"]] = set(e["owned"])
        counts: dict[int, int] = {}
        for parts in owned.values():
            for p in parts:
                counts[p] = counts.get(p, 0) + 1
        worst = max(worst, max(counts.values(), default=0))
    return worst


def unowned_partition_seconds(events: list[dict], partitions: int, t0: float, t1: float) -> float:
    """Integral over [t0, t1] of the number of partitions no consumer owned: what a rebalance costs in
    consumption (an eager rebalance stops every partition; an incremental one only those that move)."""
    owned: dict[str, set[int]] = {}
    total, last_t = 0.0, t0
    for e in sorted(events, key=lambda e: e["t"]):
        if e["ev"] not in ("assign", "revoke"):
            continue
        if e["t"] > t0:
            end = min(e["t"], t1)
            if end > last_t:
                total += (partitions - len(set().union(*owned.values()))) * (end - last_t)
                last_t = end
        if e["t"] > t1:
            break
        owned[e["member"]] = set(e["owned"])
    if t1 > last_t:
        total += (partitions - len(set().union(*owned.values()))) * (t1 - last_t)
    return total


def wait_phase(events: list[dict], lock: threading.Lock, members: list[str], partitions: int, t0: float,
               quiet_s: float) -> dict[str, float]:
    """Wait until the phase's members own every partition once and nothing changed for quiet_s."""
    deadline = t0 + PHASE_TIMEOUT_S
    while True:
        now = time.monotonic()
        with lock:
            snapshot = list(events)
        changes = [e for e in real_changes(snapshot) if e["t"] >= t0 and e["member"] in members]
        last = max((e["t"] for e in changes), default=None)
        if last is not None and now - last >= quiet_s and is_owned(ownership_at(snapshot, now), members, partitions):
            first_owned = None
            for t in sorted({e["t"] for e in changes}):
                if is_owned(ownership_at(snapshot, t), members, partitions):
                    first_owned = t
                    break
            return {"owned": first_owned - t0, "settled": last - t0,
                    "unowned_ps": unowned_partition_seconds(snapshot, partitions, t0, last)}
        if now > deadline:
            owned = ownership_at(snapshot, now)
            summary = {m: len(owned.get(m, ())) for m in members}
            errors = [e["msg"] for e in snapshot if e["ev"] == "error"][-3:]
            raise TimeoutError(f"not settled after {PHASE_TIMEOUT_S:.0f} s; partitions per member {summary}; "
                               f"last errors {errors}")
        time.sleep(0.02)


def broker_view(bootstrap: str, group: str, members: list[str], events: list[dict], lock: threading.Lock) -> dict:
    """ConsumerGroupDescribe after a consumer-protocol phase: is the group Stable, every member at the assignment
    epoch with its assignment equal to its target, and is that what each consumer itself reports owning?"""
    from conformance.consumer_group_clients import describe_consumer_group

    try:
        described = describe_consumer_group(bootstrap, group)
    except Exception as exc:  # the measurement stands without the broker's view; say why it is missing
        return {"error": f"{type(exc).__name__}: {exc}"}
    with lock:
        owned = ownership_at(list(events), time.monotonic())

    def partitions(assignment) -> list[int]:
        return sorted(p for tp in assignment.topic_partitions for p in tp.partitions)

    by_client = {m.client_id: m for m in described.members}
    converged = (sorted(by_client) == sorted(members) and all(
        m.member_epoch == described.assignment_epoch and partitions(m.assignment) == partitions(m.target_assignment)
        and partitions(m.assignment) == sorted(owned.get(m.client_id, ())) for m in described.members))
    return {"state": described.group_state, "group_epoch": described.group_epoch,
            "assignment_epoch": described.assignment_epoch, "converged": converged}


def wait_ready(workers: list[Worker]) -> None:
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
    for w in workers:
        if not w.ready.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"consumer process {w.name} not ready (exit code {w.proc.poll()})")


def client_config(mode: str, profile: dict) -> dict:
    if mode == "consumer":
        return {"group.protocol": "consumer"}
    strategy = "range" if mode == "classic" else "cooperative-sticky"
    return {"group.protocol": "classic", "partition.assignment.strategy": strategy, **profile["classic_client"]}


def one_repetition(bootstrap: str, topic: str, partitions: int, size: int, cycles: int, mode: str, profile: dict,
                   rng: random.Random, log_dir: Path) -> dict:
    """Form a group of `size`, then `cycles` times: one member leaves, a new one joins. Times in seconds."""
    spec = {"bootstrap": bootstrap, "group": f"rb-{mode}-{uuid.uuid4().hex[:8]}", "topic": topic,
            "config": client_config(mode, profile), "incremental": mode != "classic"}
    hb_s = profile["consumer_hb_s"] if mode == "consumer" else profile["classic_hb_s"]
    quiet_s = QUIET_S + hb_s
    events: list[dict] = []
    lock = threading.Lock()
    workers: list[Worker] = []
    result: dict = {"marks": [], "leave": [], "join": []}

    def phase(name: str, group: list[Worker], t0: float) -> dict:
        result["marks"].append((name, t0))
        timing = wait_phase(events, lock, [w.name for w in group], partitions, t0, quiet_s)
        if mode == "consumer":
            timing["broker"] = broker_view(bootstrap, spec["group"], [w.name for w in group], events, lock)
        return timing

    def unsynchronised_pause() -> None:
        # Members heartbeat in step since they joined together; without a random offset every leave/join would
        # start at the same point of the heartbeat cycle and measure that point, not the protocol.
        time.sleep(rng.uniform(0.0, hb_s))

    try:
        workers = [spawn_worker(f"c{i}", spec, events, lock, log_dir) for i in range(size + cycles)]
        group, joiners = workers[:size], workers[size:]
        wait_ready(workers)
        t0 = time.monotonic()
        for w in group:
            w.send("go")
        result["form"] = phase("form", group, t0)
        for joiner in joiners:
            unsynchronised_pause()
            leaver = group.pop(rng.randrange(len(group)))
            t0 = time.monotonic()
            leaver.send("leave")
            result["leave"].append(phase("leave", group, t0))
            unsynchronised_pause()
            group.append(joiner)
            t0 = time.monotonic()
            joiner.send("go")
            result["join"].append(phase("join", group, t0))
    finally:
        for w in workers:
            w.send("leave")
        for w in workers:
            w.stop()
        for w in workers:
            if w.reader is not None:
                w.reader.join(5)
    with lock:
        result["overlap"] = max_overlap(events)
        result["errors"] = sorted({e["msg"] for e in events if e["ev"] == "error"})[:5]
        base = min((e["t"] for e in events), default=0.0)
        result["events"] = [{**e, "t": round(e["t"] - base, 4)} for e in sorted(events, key=lambda e: e["t"])]
        result["marks"] = [(name, round(t - base, 4)) for name, t in result["marks"]]
    return result


@contextmanager
def running_broker(profile_name: str, work: Path) -> Iterator[str]:
    from conformance.broker_process import start_broker

    overrides = {**COMMON_OVERRIDES, **PROFILES[profile_name]["broker"]}
    with start_broker(overrides=overrides, work_dir=work / f"broker-{profile_name}") as broker:
        yield broker.bootstrap


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=20).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 20
    while True:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not ready")
        time.sleep(0.2)


def warm_up(bootstrap: str, topic: str) -> None:
    """Join and leave a throwaway group so that __consumer_offsets exists before the first measured phase."""
    from confluent_kafka import Consumer

    assigned = threading.Event()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"warm-up-{uuid.uuid4().hex[:6]}"})
    try:
        consumer.subscribe([topic], on_assign=lambda c, parts: assigned.set())
        deadline = time.monotonic() + 30
        while not assigned.is_set():
            if time.monotonic() > deadline:
                raise RuntimeError("warm-up consumer got no assignment in 30 s")
            consumer.poll(0.1)
    finally:
        consumer.close()


def run_profile(profile_name: str, modes: list[str], reps: int, partitions: int, size: int, cycles: int, seed: int,
                work: Path) -> dict:
    """All modes against one broker process, repetitions interleaved (mode A, B, C, A, B, C, ...)."""
    profile = PROFILES[profile_name]
    rng = random.Random(seed)
    began, load_before = time.monotonic(), os.getloadavg()[0]
    samples: dict[str, list[dict]] = {m: [] for m in modes}
    failures: dict[str, list[str]] = {m: [] for m in modes}
    log_dir = work / f"workers-{profile_name}"
    log_dir.mkdir(parents=True, exist_ok=True)
    with running_broker(profile_name, work) as bootstrap:
        topic = f"rebalance-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, partitions)
        warm_up(bootstrap, topic)
        for rep in range(reps):
            for mode in modes:
                started = time.monotonic()
                try:
                    sample = one_repetition(bootstrap, topic, partitions, size, cycles, mode, profile, rng, log_dir)
                    samples[mode].append(sample)
                    timings = [("form", sample["form"])] + [(name, t) for name in ("leave", "join")
                                                            for t in sample[name]]
                    print(f"[{profile_name}] rep {rep + 1} {mode}: " + ", ".join(
                        f"{name} {t['owned'] * 1000:.0f}/{t['settled'] * 1000:.0f} ms" for name, t in timings)
                          + f" (owned/settled), overlap {sample['overlap']} ({time.monotonic() - started:.0f} s)",
                          file=sys.stderr, flush=True)
                except Exception as exc:  # reported in the table; the other modes still run
                    failures[mode].append(f"{type(exc).__name__}: {exc}")
                    for stderr in sorted(log_dir.glob("*.stderr")):
                        tail = stderr.read_text(errors="replace").strip().splitlines()[-5:]
                        if tail:
                            print(f"  {stderr.name}: " + " | ".join(tail), file=sys.stderr)
                            break
                    print(f"[{profile_name}] rep {rep + 1} {mode} FAILED: {exc}", file=sys.stderr, flush=True)
    return {"samples": samples, "failures": failures, "loadavg": [load_before, os.getloadavg()[0]],
            "seconds": time.monotonic() - began}


def stats(values: list[float]) -> tuple[float, float, float] | None:
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def fmt(st: tuple[float, float, float] | None) -> str:
    if st is None:
        return "failed"
    med, lo, hi = st
    return f"{med * 1000:.0f} ({lo * 1000:.0f}-{hi * 1000:.0f})"


def fmt_ps(st: tuple[float, float, float] | None) -> str:
    if st is None:
        return "failed"
    med, lo, hi = st
    return f"{med:.1f} ({lo:.1f}-{hi:.1f})"


def markdown(results: dict[str, dict], modes: list[str], reps: int, partitions: int, size: int, cycles: int,
             command: str) -> str:
    lines = [f"confluent-kafka {client_version()} consumers, each in its own process; a {partitions}-partition topic; "
             f"{size} consumers form a group, then {cycles} times one (chosen at random) leaves and a new one joins; "
             f"{reps} repetitions per mode, a new group each, so form has {reps} samples and leave/join "
             f"{reps * cycles}; all modes against the same broker process in the same run, interleaved. Before each "
             "leave/join a random pause (0 to one heartbeat interval) so that it does not start at a fixed point of "
             "the members' heartbeat cycle. Milliseconds: median (min-max). \"owned\" = every partition owned by "
             "exactly one member and every member owning some; \"settled\" = time to the last assignment change "
             f"before the group stayed unchanged for {QUIET_S:g} s + one heartbeat interval. Modes: consumer = "
             "group.protocol=consumer (broker assignor uniform); classic = eager range; cooperative = classic with "
             "cooperative-sticky. unowned = partition-seconds without an owner between t0 and "
             "settled (what the rebalance costs consumption: eager stops all partitions, incremental only the ones "
             "that move). overlap = most owners a partition ever had at once (1 = never owned twice). "
             "broker agrees (consumer protocol only) = phases after which ConsumerGroupDescribe reported the group "
             "Stable, every member at the assignment epoch with its assignment equal to its target and to what the "
             "consumer itself reported.", ""]
    for profile_name, res in results.items():
        prof = PROFILES[profile_name]
        overrides = ", ".join(f"{k}={v}" for k, v in {**COMMON_OVERRIDES, **prof["broker"]}.items())
        client = ", ".join(f"{k}={v}" for k, v in prof["classic_client"].items()) or "librdkafka defaults"
        load = res.get("loadavg", [float("nan")] * 2)
        lines.append(f"Profile **{profile_name}**: broker {overrides}; classic clients: {client}. "
                     f"{res.get('seconds', 0):.0f} s; load average {load[0]:.1f} at the start, {load[1]:.1f} at "
                     "the end (2 cores).")
        lines.append("")
        lines.append("| mode | form: owned | form: settled | leave: settled | join: settled | leave: unowned | "
                     "join: unowned | overlap | broker agrees | failed |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        table: dict[str, dict[str, tuple | None]] = {}
        for mode in modes:
            samples = res["samples"].get(mode, [])
            row = {"form_owned": stats([s["form"]["owned"] for s in samples]),
                   "form": stats([s["form"]["settled"] for s in samples])}
            for p in ("leave", "join"):
                row[p] = stats([t["settled"] for s in samples for t in s[p]])
                row[f"{p}_unowned"] = stats([t["unowned_ps"] for s in samples for t in s[p]])
            table[mode] = row
            overlap = max((s["overlap"] for s in samples), default=0)
            nfail = len(res["failures"].get(mode, []))
            views = [t["broker"] for s in samples for t in [s["form"], *s["leave"], *s["join"]] if "broker" in t]
            agrees = (f"{sum(1 for v in views if v.get('state') == 'Stable' and v.get('converged'))}/{len(views)}"
                      if views else "n/a")
            lines.append(f"| {mode} | {fmt(row['form_owned'])} | {fmt(row['form'])} | {fmt(row['leave'])} | "
                         f"{fmt(row['join'])} | {fmt_ps(row['leave_unowned'])} | {fmt_ps(row['join_unowned'])} | "
                         f"{overlap or 'n/a'} | {agrees} | {nfail}/{reps} |")
        if "consumer" in table:
            for other in (m for m in modes if m != "consumer"):
                parts = []
                for key, label in (("form_owned", "form owned"), ("form", "form settled"), ("leave", "leave"),
                                   ("join", "join"), ("leave_unowned", "leave unowned"),
                                   ("join_unowned", "join unowned")):
                    a, b = table["consumer"].get(key), table[other].get(key)
                    parts.append(f"{label} {a[0] / b[0]:.2f}" if a and b and b[0] else f"{label} n/a")
                lines.append("")
                lines.append(f"Ratio consumer / {other} (median; < 1: the consumer protocol is faster): "
                             + ", ".join(parts) + ".")
        for mode, fails in res["failures"].items():
            for f in fails[:2]:
                lines.append(f"\n{profile_name}/{mode} failure: `{f[:300]}`")
        lines.append("")
    lines.append(f"Command: `{command}`")
    return "\n".join(lines)


def client_version() -> str:
    try:
        import confluent_kafka

        return f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})"
    except Exception:  # the table still prints without a version
        return "?"


def write_docs(section: str) -> None:
    """Replace the generated table between this benchmark's markers in docs/benchmarks.md; the prose around the
    markers (the reading of the numbers) is left alone. Without markers the section is appended."""
    text = DOCS_PATH.read_text()
    start, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if start != -1 and end > start:
        DOCS_PATH.write_text(text[:start + len(DOCS_BEGIN)] + "\n" + section + "\n" + text[end:])
        return
    DOCS_PATH.write_text(text.rstrip("\n") + f"\n\n{DOCS_HEADING}\n\n{DOCS_BEGIN}\n{section}\n{DOCS_END}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--profiles", default="default,fast")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--size", type=int, default=10, help="consumers that form the group")
    parser.add_argument("--cycles", type=int, default=2, help="leave+join cycles after the group formed")
    parser.add_argument("--seed", type=int, default=14, help="seed of the random pauses and of who leaves")
    parser.add_argument("--quick", action="store_true", help="smoke run: fast profile, 1 repetition, 3 consumers, "
                        "6 partitions")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(json.loads(args.worker))
    if args.quick:
        args.profiles, args.reps, args.size, args.partitions, args.cycles = "fast", 1, 3, 6, 1
    modes = [m for m in args.modes.split(",") if m]
    profiles = [p for p in args.profiles.split(",") if p]
    for name in modes:
        if name not in MODES:
            parser.error(f"unknown mode {name!r}; known: {', '.join(MODES)}")
    for name in profiles:
        if name not in PROFILES:
            parser.error(f"unknown profile {name!r}; known: {', '.join(PROFILES)}")
    command = "python bench/groups/rebalance_protocols.py " + " ".join(a for a in (argv or sys.argv[1:])
                                                                       if a != "--write-docs")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as tmp:
        for name in profiles:
            results[name] = run_profile(name, modes, args.reps, args.partitions, args.size, args.cycles, args.seed,
                                        Path(tmp))
    section = markdown(results, modes, args.reps, args.partitions, args.size, args.cycles, command.strip())
    print(section)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.write_docs:
        write_docs(section)
    failed = sum(len(f) for r in results.values() for f in r["failures"].values())
    return 1 if failed and args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
