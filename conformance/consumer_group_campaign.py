"""A long randomized campaign against one KIP-848 consumer group (group.protocol=consumer), not run in CI.

One kafkapy broker (CONSUMER_PROTOCOL_OVERRIDES: 1 s heartbeats, 10 s sessions), a 12-partition
topic, a paced producer running throughout, and a group of Java (kafka-clients 3.9.1) and
confluent-kafka consumers in their own processes. Every few seconds one random action:

    join           a new dynamic member (Java or librdkafka)
    join_static    a new static member (Java, group.instance.id)
    leave          a member closes cleanly
    kill           a member is SIGKILLed (its partitions move after the session timeout)
    bounce_static  a static member closes and comes back under the same instance id
    broker_kill    the broker is SIGKILLed and restarted on the same data directory

At the end production stops, the members left read up to the log end and close, and the run is
checked as the CI tests check theirs: every record read, in order within each assignment; no
partition owned by two members at once (from the members' timed assign/revoke events, a killed
member's ownership ending at its kill); committed offsets never backwards; final commits at the
log end.

    python -m conformance.consumer_group_campaign --minutes 5 --seed 1 --out build/kip848-campaign.json
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from conformance.broker_process import start_broker
from conformance.consumer_group_clients import (
    CONSUMER_PROTOCOL_OVERRIDES,
    WireCommitMonitor,
    confluent_member,
    java_member,
    kill_member,
    ownership_overlaps,
    stop_members,
)
from conformance.test_groups_tools import (
    ConsumerProcess,
    Consumption,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    wait_until,
)

PARTITIONS = 12
ACTIONS = ("join", "join_static", "leave", "kill", "bounce_static", "broker_kill")
WEIGHTS = (4, 1, 3, 2, 1, 1)
MIN_MEMBERS, MAX_MEMBERS = 1, 6


@dataclass
class CampaignResult:
    seed: int
    seconds: float
    records: int = 0
    deliveries: int = 0
    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    missing: int = 0
    backwards: list[str] = field(default_factory=list)
    lost_events: int = 0
    final_commits_at_log_end: bool = False

    @property
    def ok(self) -> bool:
        return not (self.problems or self.overlaps or self.missing or self.backwards) \
            and self.final_commits_at_log_end


def _java_programs():
    from conformance.java import test_java_clients as jc

    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        raise SystemExit("java/javac not found")
    classpath = jc._fetch_classpath()
    return jc.JavaPrograms(java=java, classes_dir=jc._compile(javac, classpath), classpath=classpath)


def run_campaign(work: Path, minutes: float, seed: int, rate: int = 3_000) -> CampaignResult:
    rng = random.Random(seed)
    programs = _java_programs()
    broker = start_broker(overrides=CONSUMER_PROTOCOL_OVERRIDES, work_dir=work / "broker")
    result = CampaignResult(seed=seed, seconds=minutes * 60)
    bs = broker.bootstrap
    topic, group = f"kip848-campaign-{seed}", f"kip848-campaign-group-{seed}"
    everyone: list[ConsumerProcess] = []
    live: list[ConsumerProcess] = []
    static_ids: dict[str, str] = {}  # member name -> instance id
    killed: dict[str, int] = {}
    counter = 0
    stop_producing = threading.Event()
    produced = [0]

    def new_member(static: bool = False, instance_id: str | None = None) -> ConsumerProcess:
        nonlocal counter
        counter += 1
        if static or instance_id:
            instance_id = instance_id or f"static-{counter}"
            member = java_member(programs, bs, group, topic, work, f"java-static-{counter}", instance_id=instance_id)
            static_ids[member.name] = instance_id
        elif rng.random() < 0.5:
            member = java_member(programs, bs, group, topic, work, f"java-{counter}")
        else:
            member = confluent_member(bs, group, topic, work, f"confluent-{counter}")
        everyone.append(member)
        live.append(member.start())
        return member

    def producer() -> None:
        batch = rate  # one second of records per call
        while not stop_producing.is_set():
            produce(bs, topic, batch, start=produced[0], rate_per_s=rate)
            produced[0] += batch

    monitor = WireCommitMonitor(bs, group, topic, PARTITIONS)
    started = time.monotonic()
    try:
        create_topic(bs, topic, PARTITIONS)
        for _ in range(2):
            new_member()
        wait_until(lambda: len(set().union(*(m.assigned() for m in live))) == PARTITIONS, 60, "a first assignment")
        monitor.start()
        production = threading.Thread(target=producer, daemon=True)
        production.start()
        while time.monotonic() - started < minutes * 60:
            time.sleep(rng.uniform(3, 8))
            action = rng.choices(ACTIONS, WEIGHTS)[0]
            statics = [m for m in live if m.name in static_ids]
            if action in ("leave", "kill") and len(live) <= MIN_MEMBERS \
                    or action.startswith("join") and len(live) >= MAX_MEMBERS \
                    or action == "bounce_static" and not statics:
                action = "join" if len(live) < MAX_MEMBERS else "leave"
            if action == "join":
                member = new_member()
            elif action == "join_static":
                member = new_member(static=True)
            elif action == "leave":
                member = rng.choice(live)
                live.remove(member)
                stop_members([member])
            elif action == "kill":
                member = rng.choice(live)
                live.remove(member)
                killed[member.name] = kill_member(member)
            elif action == "bounce_static":
                member = rng.choice(statics)
                live.remove(member)
                stop_members([member])
                member = new_member(instance_id=static_ids[member.name])
            else:
                member = None
                broker.kill9()
                time.sleep(rng.uniform(0, 4))
                broker.start()
            line = f"{time.monotonic() - started:6.1f}s {action} {member.name if member else ''}".rstrip()
            result.actions.append(line)
            print(line, f"({len(live)} members)", flush=True)
        stop_producing.set()
        production.join(120)
        ends = end_offsets(bs, topic, PARTITIONS)
        result.records = sum(ends.values())
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == ends, 120,
                   "the members left to commit up to the log end")
        result.final_commits_at_log_end = True
    finally:
        stop_members(live)
        monitor.halt.set()
        monitor.join(10)
        broker.close()

    seen = Consumption()
    for member in everyone:
        seen.add(member)
    result.deliveries = seen.deliveries
    result.problems = seen.problems[:50]
    result.missing = len(seen.missing(ends))
    result.overlaps = ownership_overlaps(everyone, killed)[:50]
    result.backwards = monitor.backwards()[:50]
    result.lost_events = sum(1 for m in everyone for e in m.events() if e[0] == "V" and e[-1] == "lost")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--rate", type=int, default=3_000, help="records per second")
    parser.add_argument("--work", type=Path, default=None, help="keep events and logs here")
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="kip848-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    result = run_campaign(work, args.minutes, args.seed, args.rate)
    summary = {**asdict(result), "ok": result.ok}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "actions"}, indent=2))
    print(f"{'OK' if result.ok else 'FAILED'}: {result.records} records, {result.deliveries} deliveries, "
          f"{len(result.actions)} actions; events and logs in {work}")
    if args.work is None and result.ok:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
