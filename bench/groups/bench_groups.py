#!/usr/bin/env python3
"""Consumer-group benchmark: kafkapy and the tansu peer side by side in one run, as ratios.

Measured per broker with confluent-kafka (librdkafka) consumers, medians over --runs trials:
  * first record: from creating a consumer in a new group (subscribe mode) to its first
    record, on a 12-partition topic that already holds records. This is FindCoordinator,
    JoinGroup (twice, KIP-394), SyncGroup, OffsetFetch, ListOffsets and the first Fetch.
  * rebalance of 10 consumers, three ways: 10 consumers started together until each owns
    partitions ("form"); one of 10 leaves until the other 9 have their new assignment
    ("leave"); an 11th joins until all 11 have theirs ("join").

Both brokers see identical clients (heartbeat.interval.ms=500). kafkapy runs with
group.initial.rebalance.delay.ms=0 (Kafka's default 3000 ms would add 3 s to "first record"
and "form"; the peer has no such delay) and offsets.topic.replication.factor=1 (one broker).
Ratios > 1 mean kafkapy is faster. A broker or case that fails is reported and the run goes on.

    python bench/groups/bench_groups.py                  # both brokers, print markdown
    python bench/groups/bench_groups.py --brokers kafkapy
    python bench/groups/bench_groups.py --brokers kafkapy,tansu,kafkapy-3s   # + Kafka's 3 s delay
    python bench/groups/bench_groups.py --write-docs     # also update docs/benchmarks.md
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))

import peers  # noqa: E402  (bench/peers.py)
from conformance.broker_process import start_broker  # noqa: E402

DOCS_PATH = REPO_ROOT / "docs" / "benchmarks.md"
DOCS_HEADING = "## Groups (bench/groups)"
PARTITIONS = 12
PRELOADED_RECORDS = 12_000
GROUP_SIZE = 10
PHASE_TIMEOUT_S = 60.0
KAFKAPY_OVERRIDES = {"offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0",
                     "group.min.session.timeout.ms": "1000"}
CONSUMER_CONFIG = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100,
                   "auto.offset.reset": "earliest", "enable.auto.commit": False}


@contextmanager
def running(name: str, work: Path):
    if name.startswith("kafkapy"):
        overrides = dict(KAFKAPY_OVERRIDES)
        if name == "kafkapy-3s":  # Kafka's default initial rebalance delay
            overrides["group.initial.rebalance.delay.ms"] = "3000"
        with start_broker(overrides=overrides, work_dir=work / name) as broker:
            yield broker.bootstrap
    else:
        with peers.start_tansu(log_path=work / "tansu.log") as peer:
            yield peer.bootstrap


def prepare_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=20).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 20
    while True:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == PARTITIONS:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not ready")
        time.sleep(0.2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(PRELOADED_RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=b"x" * 100, partition=i % PARTITIONS)
    if producer.flush(60):
        raise RuntimeError("preloading records timed out")


def first_record_s(bootstrap: str, topic: str) -> float:
    from confluent_kafka import Consumer

    started = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"first-{uuid.uuid4().hex[:8]}",
                         **CONSUMER_CONFIG})
    try:
        consumer.subscribe([topic])
        while time.perf_counter() - started < PHASE_TIMEOUT_S:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                return time.perf_counter() - started
        raise TimeoutError("no record within the phase timeout")
    finally:
        consumer.close()


class Member(threading.Thread):
    """One consumer polling in its own thread; records when each assignment arrives."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_CONFIG})
        self.topic = topic
        self.assigned_at: list[float] = []
        self.owned: set[int] = set()
        self.halt = threading.Event()

    def run(self) -> None:
        def on_assign(consumer, partitions):
            self.owned = {p.partition for p in partitions}
            self.assigned_at.append(time.perf_counter())

        def on_revoke(consumer, partitions):
            self.owned = set()

        self.consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        while not self.halt.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def wait_assigned(members: list[Member], since: float) -> float:
    """Seconds from `since` until every member got an assignment after it and all partitions are owned."""
    deadline = time.perf_counter() + PHASE_TIMEOUT_S
    while time.perf_counter() < deadline:
        latest = [max((t for t in m.assigned_at if t >= since), default=None) for m in members]
        owned = set().union(*(m.owned for m in members))
        if all(t is not None for t in latest) and len(owned) == PARTITIONS and all(m.owned for m in members):
            return max(latest) - since
        time.sleep(0.01)
    raise TimeoutError("the group did not settle within the phase timeout")


def rebalance_s(bootstrap: str, topic: str) -> dict[str, float]:
    group = f"rebalance-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, topic) for _ in range(GROUP_SIZE)]
    try:
        began = time.perf_counter()
        for m in members:
            m.start()
        form = wait_assigned(members, began)
        time.sleep(1.0)
        leaver = members.pop()
        began = time.perf_counter()
        leaver.stop()
        leave = wait_assigned(members, began)
        time.sleep(1.0)
        joiner = Member(bootstrap, group, topic)
        members.append(joiner)
        began = time.perf_counter()
        joiner.start()
        join = wait_assigned(members, began)
        return {"form": form, "leave": leave, "join": join}
    finally:
        for m in members:
            m.halt.set()
        for m in members:
            m.join(30)


def measure(name: str, runs: int, work: Path) -> dict:
    result: dict = {"broker": name}
    try:
        with running(name, work) as bootstrap:
            topic = f"bench-groups-{uuid.uuid4().hex[:6]}"
            prepare_topic(bootstrap, topic)
            firsts = [first_record_s(bootstrap, topic) for _ in range(runs)]
            rebalances = [rebalance_s(bootstrap, topic) for _ in range(max(1, runs // 2))]
            result["first_record_s"] = statistics.median(firsts)
            for phase in ("form", "leave", "join"):
                result[f"rebalance_{phase}_s"] = statistics.median(r[phase] for r in rebalances)
            result["samples"] = {"first_record_s": firsts, "rebalances": rebalances}
    except Exception as exc:  # reported in the table; the other broker still runs
        result["error"] = f"{type(exc).__name__}: {exc}"
    return result


ROWS = [("first record after consumer start", "first_record_s"),
        ("rebalance: 10 consumers form a group", "rebalance_form_s"),
        ("rebalance: 1 of 10 leaves", "rebalance_leave_s"),
        ("rebalance: an 11th joins", "rebalance_join_s")]


def markdown(results: dict[str, dict], runs: int) -> str:
    kp, peer = results.get("kafkapy", {}), results.get("tansu", {})
    lines = [f"confluent-kafka consumers, 12-partition topic, median of {runs} (first record) and "
             f"{max(1, runs // 2)} (rebalances) runs; heartbeat.interval.ms=500. kafkapy with "
             "group.initial.rebalance.delay.ms=0. Lower is better; ratio = tansu / kafkapy (> 1: kafkapy faster).",
             "", "| measure | kafkapy | tansu | ratio |", "|---|---|---|---|"]
    for label, key in ROWS:
        a, b = kp.get(key), peer.get(key)
        ratio = f"{b / a:.2f}" if a and b else "n/a"
        lines.append(f"| {label} | {fmt(a, kp)} | {fmt(b, peer)} | {ratio} |")
    slow = results.get("kafkapy-3s")
    if slow and "error" not in slow:
        lines.append("")
        lines.append("With Kafka's default group.initial.rebalance.delay.ms=3000, kafkapy's first record comes after "
                     f"{fmt(slow.get('first_record_s'), slow)} and 10 consumers form a group in "
                     f"{fmt(slow.get('rebalance_form_s'), slow)} (the delay waits for more members, as in Kafka).")
    for name, res in results.items():
        if "error" in res:
            lines.append(f"\n{name} failed: `{res['error']}`")
    return "\n".join(lines)


def fmt(value, result: dict) -> str:
    if value is None:
        return "failed" if "error" in result else "n/a"
    return f"{value * 1000:.0f} ms"


def write_docs(section: str) -> None:
    text = DOCS_PATH.read_text()
    start = text.index(DOCS_HEADING)
    end = text.find("\n## ", start + len(DOCS_HEADING))
    body = f"{DOCS_HEADING}\n\n{section}\n"
    DOCS_PATH.write_text(text[:start] + body + (text[end:] if end != -1 else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="kafkapy,tansu")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    import tempfile

    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as tmp:
        for name in args.brokers.split(","):
            results[name] = measure(name, args.runs, Path(tmp))
            print(json.dumps(results[name]), file=sys.stderr)
    section = markdown(results, args.runs)
    print(section)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.write_docs:
        write_docs(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
