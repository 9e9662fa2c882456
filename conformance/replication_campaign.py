"""Kafka's replication system test (kafkatest/tests/core/replication_test.py), redone for kafkapy.

A ZooKeeper-mode cluster of 3 brokers, one topic of 3 partitions with replication factor 3 and
min.insync.replicas=2, an idempotent acks=all producer and a consumer running throughout, and one
fault per round on the leader of partition 0 or on the controller:

    clean_shutdown  SIGTERM, wait for the cluster to fail over, start again
    hard_kill       kill -9, wait for the cluster to fail over, start again
    clean_bounce    SIGTERM, start again at once
    hard_bounce     kill -9, start again at once

After each round the ISR of every partition must be back to 3 and every partition must take
acknowledged writes again. At the end the topic is read again from offset 0: every acknowledged
record exactly once, each partition's records in sequence order, nothing that was never sent.

    result = run_campaign(Path("/tmp/c"), rounds=8)
    assert result.ok, result.report()

    python -m conformance.replication_campaign --rounds 50 --out build/replication-campaign.json
"""
from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from confluent_kafka.admin import AdminClient, NewTopic

from conformance.broker_process import PYTHON_ENV
from conformance.cluster_harness import ClusterUnreachable, controller_id, describe, wait_for_isr, wait_until
from conformance.replication_workload import (
    SequenceProducer,
    TailingConsumer,
    check_records,
    client_log,
    high_watermarks,
    read_topic,
)
from kafkapy.devcluster.brokers import BrokerNode, LocalCluster, LocalClusterStartError

__all__ = [
    "CLUSTER_OVERRIDES",
    "FAULT_KINDS",
    "TARGETS",
    "CampaignResult",
    "CampaignViolation",
    "RoundResult",
    "main",
    "round_plan",
    "run_campaign",
    "wait_for_controller_everywhere",
]

log = logging.getLogger(__name__)

FAULT_KINDS = ("clean_shutdown", "hard_kill", "clean_bounce", "hard_bounce")
TARGETS = ("leader", "controller")
CLUSTER_OVERRIDES = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "unclean.leader.election.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.lag.time.max.ms": "10000",
    "zookeeper.session.timeout.ms": "6000",
}
BROKERS = 3
PARTITIONS = 3
REPLICATION_FACTOR = 3

MIN_DOWNTIME_S = 2.0  # a stopped broker stays down at least this long (clean_shutdown, hard_kill)
FAILOVER_TIMEOUT_S = 30.0  # session timeout 6 s, then the controller moves leaders
CLEAN_STOP_TIMEOUT_S = 30.0  # SIGTERM: controlled shutdown, then exit; after this, SIGKILL
START_TIMEOUT_S = 60.0  # a hard-bounced broker may wait for its old ZooKeeper session to expire
ISR_TIMEOUT_S = 60.0
PROGRESS_TIMEOUT_S = 60.0
WARMUP_ACKS_PER_PARTITION = 50
LOG_LINES_IN_REPORT = 12
SESSION_TIMEOUT_S = int(CLUSTER_OVERRIDES["zookeeper.session.timeout.ms"]) / 1000
# What a broker says when its id is still registered by the session of its killed predecessor.
REGISTERED_ELSEWHERE = "already registered in zookeeper"


class CampaignViolation(AssertionError):
    """The campaign found lost, duplicated, reordered or invented records, or a round did not recover."""


@dataclass(slots=True)
class RoundResult:
    """One fault and the cluster's recovery from it."""

    index: int
    kind: str
    target: str
    broker: int
    started_s: float  # since the campaign started
    stop_s: float = 0.0  # how long the broker took to exit
    exit_code: int | None = None
    start_attempts: int = 0  # >1: the restart was refused while the killed broker's session lived
    failover_s: float | None = None  # fault until no partition led by the broker and a live controller
    recovery_s: float | None = None  # fault until ISR 3 everywhere and every partition acked again
    acked_before: int = 0
    acked_after: int = 0
    error: str | None = None


@dataclass(slots=True)
class CampaignResult:
    """Counts and verdict of a campaign; `violations` empty means it passed."""

    work_dir: str
    topic: str
    rounds_planned: int
    settings: dict[str, object] = field(default_factory=dict)  # broker overrides, faults, producer rate
    rounds_done: int = 0
    acked: int = 0
    sent: int = 0
    not_acked: int = 0  # delivery reports with an error (timed out, purged, ...)
    read: int = 0
    duplicates: int = 0
    missing: int = 0
    out_of_order: int = 0
    unexpected: int = 0
    moved: int = 0
    unacked_present: int = 0
    consumed_then_lost: int = 0
    delivery_errors: dict[str, int] = field(default_factory=dict)
    consumer_errors: dict[str, int] = field(default_factory=dict)
    fatal_producer_errors: list[str] = field(default_factory=list)
    rounds: list[RoundResult] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # odd but allowed: slow stops, purged records
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def recovery_seconds(self) -> list[float | None]:
        return [r.recovery_s for r in self.rounds]

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}

    def summary_table(self) -> str:
        lines = [f"{'#':>3}  {'kind':<15}{'target':<11}{'broker':>6}{'stop s':>8}{'exit':>6}{'starts':>7}"
                 f"{'failover s':>11}{'recovery s':>11}{'acked':>9}  error"]
        for r in self.rounds:
            lines.append(f"{r.index:>3}  {r.kind:<15}{r.target:<11}{r.broker:>6}{r.stop_s:>8.1f}"
                         f"{_fmt(r.exit_code):>6}{r.start_attempts:>7}{_fmt(r.failover_s):>11}{_fmt(r.recovery_s):>11}"
                         f"{r.acked_after:>9}  {r.error or ''}")
        recoveries = [s for s in self.recovery_seconds if s is not None]
        lines.append(
            f"rounds {self.rounds_done}/{self.rounds_planned}  sent {self.sent}  acked {self.acked}  "
            f"not acked {self.not_acked}  read {self.read}  duplicates {self.duplicates}  missing {self.missing}  "
            f"out of order {self.out_of_order}  unexpected {self.unexpected}  moved {self.moved}  "
            f"consumed then lost {self.consumed_then_lost}  unacked present {self.unacked_present}")
        if recoveries:
            lines.append(f"recovery s: min {min(recoveries):.1f}  max {max(recoveries):.1f}  "
                         f"mean {sum(recoveries) / len(recoveries):.1f}  in {self.duration_s:.0f} s total")
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)

    def report(self) -> str:
        """Summary, violations, notes and the broker logs' warnings: the text of a failed assertion."""
        parts = [self.summary_table()]
        parts += [f"violation: {v}" for v in self.violations]
        parts += [f"note: {n}" for n in self.notes]
        parts.append(broker_log_excerpt(Path(self.work_dir)))
        return "\n".join(parts)


def _fmt(value: float | int | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def broker_log_excerpt(work_dir: Path, lines: int = LOG_LINES_IN_REPORT) -> str:
    """The last WARNING/ERROR/Traceback lines of each broker log under `work_dir`."""
    out = []
    for path in sorted(work_dir.glob("broker-*.log")):
        picked = [line for line in path.read_text(errors="replace").splitlines()
                  if " ERROR " in line or " WARNING " in line or line.startswith("Traceback")]
        if picked:
            out.append(f"--- {path} ({len(picked)} warning/error lines, last {min(lines, len(picked))}):")
            out += [line[:300] for line in picked[-lines:]]
    return "\n".join(out)


def round_plan(rounds: int, kinds: Sequence[str], targets: Sequence[str]) -> list[tuple[str, str]]:
    """(kind, target) per round: every kind on every target, rotating."""
    combos = [(kind, target) for kind in kinds for target in targets]
    return list(itertools.islice(itertools.cycle(combos), rounds))


# ------------------------------------------------------------------ faults

def _pick_broker(cluster: LocalCluster, topic: str, target: str) -> int:
    """The broker id `target` names right now: the leader of partition 0, or the controller."""
    if target == "leader":
        def leader() -> int:
            state = describe(cluster, topic).get(0)
            return state.leader if state is not None and state.leader > 0 else 0

        return wait_until(leader, 30, message=f"{topic}-0 has a leader", ignore=(ClusterUnreachable,))
    if target == "controller":
        return wait_until(lambda: max(controller_id(cluster), 0), 30, message="the cluster has a controller",
                          ignore=(ClusterUnreachable,))
    raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")


def wait_for_controller_everywhere(cluster: LocalCluster, timeout: float = 30.0) -> int:
    """Wait until every running broker names the same controller; returns its id.

    A broker serves requests before the controller's first UpdateMetadata reaches it, and until
    then its Metadata lists no brokers and no controller; librdkafka's admin client does not
    retry such an answer soon enough, so a topic created at that moment times out.
    """
    def agreed() -> int:
        seen = {controller_id(cluster, via=n.broker_id) for n in cluster.brokers.values() if n.is_running()}
        return seen.pop() if len(seen) == 1 and -1 not in seen else 0

    return wait_until(agreed, timeout, message="every broker knows the controller", ignore=(ClusterUnreachable,))


def _failed_over(cluster: LocalCluster, topic: str, broker: int) -> bool:
    """No partition is led by `broker`, and a broker other than it is the controller."""
    state = describe(cluster, topic)
    controller = controller_id(cluster)
    return bool(state) and all(p.leader > 0 and p.leader != broker for p in state.values()) \
        and controller > 0 and controller != broker


def _stop(node: BrokerNode, kind: str, result: RoundResult) -> None:
    began = time.monotonic()
    if kind in ("clean_shutdown", "clean_bounce"):
        result.exit_code = node.stop(signal.SIGTERM, timeout=CLEAN_STOP_TIMEOUT_S)
    else:
        result.exit_code = node.kill9()
    result.stop_s = round(time.monotonic() - began, 3)


def _inject(cluster: LocalCluster, topic: str, kind: str, node: BrokerNode, result: RoundResult,
            fault_at: float) -> None:
    """Stop the broker the way `kind` says and start it again; raises AssertionError or
    LocalClusterStartError when the cluster does not fail over or the broker does not come back."""
    _stop(node, kind, result)
    if kind in ("clean_shutdown", "hard_kill"):
        try:
            wait_until(lambda: _failed_over(cluster, topic, node.broker_id), FAILOVER_TIMEOUT_S,
                       message=f"leaders and controller away from broker {node.broker_id}",
                       ignore=(ClusterUnreachable,))
            result.failover_s = round(time.monotonic() - fault_at, 3)
        finally:
            time.sleep(max(0.0, fault_at + MIN_DOWNTIME_S - time.monotonic()))
            _start_again(node, result)
    else:
        _start_again(node, result)


def _start_again(node: BrokerNode, result: RoundResult) -> None:
    """Start the broker, at once.

    After a kill -9 the dead broker's ZooKeeper session holds /brokers/ids/<id> until it expires,
    and meanwhile a new process with that id refuses to start, as Kafka 3.7's does (Kafka's own
    hard_bounce waits for the deregistration). LocalCluster's brokers wait for that themselves
    when they await their registration; otherwise a refused start is retried here until the
    session timeout has surely passed.
    """
    deadline = time.monotonic() + SESSION_TIMEOUT_S + 5.0
    while True:
        result.start_attempts += 1
        try:
            node.start(START_TIMEOUT_S)
            return
        except LocalClusterStartError as exc:
            if REGISTERED_ELSEWHERE not in str(exc).lower() or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def _recover(cluster: LocalCluster, topic: str, producer: SequenceProducer, acked_at_fault: list[int]) -> None:
    """Wait for ISR 3 on every partition and for new acknowledgements on every partition."""
    wait_for_isr(cluster, topic, REPLICATION_FACTOR, timeout=ISR_TIMEOUT_S)
    wait_until(lambda: all(now > then for now, then in zip(producer.acked_counts(), acked_at_fault)),
               PROGRESS_TIMEOUT_S, interval=0.2,
               message=f"new acknowledgements on every partition (acked at the fault {acked_at_fault})")


# ------------------------------------------------------------------ the campaign

def run_campaign(work_dir: Path | str, rounds: int = 8, kinds: Sequence[str] = FAULT_KINDS,
                 target: str | Sequence[str] = TARGETS, *, rate: float = 300.0,
                 time_budget_s: float | None = None, python: str | None = None,
                 progress: Callable[[str], None] | None = None,
                 raise_on_violation: bool = False) -> CampaignResult:
    """Start a 3-broker cluster under `work_dir`, run `rounds` faults (every kind in `kinds` on every
    target in `target`, rotating) under a producer and a consumer, stop the cluster, and check the topic.

    `time_budget_s` bounds the fault rounds (the final checks come on top, bounded too); rounds not
    started within it are not done (`rounds_done` says how many were). A round that does not
    recover ends the rounds early. With `raise_on_violation`, a failed check raises CampaignViolation.
    """
    targets = (target,) if isinstance(target, str) else tuple(target)
    for kind in kinds:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected some of {FAULT_KINDS}")
    say = progress or (lambda line: log.info("%s", line))
    work_dir = Path(work_dir).resolve()  # ZooKeeper runs in another directory: a relative path breaks it
    began = time.monotonic()
    topic = f"replication-{uuid.uuid4().hex[:8]}"
    result = CampaignResult(work_dir=str(work_dir), topic=topic, rounds_planned=rounds, settings={
        "broker_overrides": CLUSTER_OVERRIDES, "brokers": BROKERS, "partitions": PARTITIONS,
        "replication_factor": REPLICATION_FACTOR, "kinds": list(kinds), "targets": list(targets), "rate": rate})
    cluster = LocalCluster(work_dir, BROKERS, CLUSTER_OVERRIDES,
                           python=python or os.environ.get(PYTHON_ENV) or None)
    with cluster:
        say(f"cluster up: {cluster.bootstrap} (logs {work_dir}/broker-*.log)")
        wait_for_controller_everywhere(cluster)
        _create_topic(cluster, topic)
        wait_for_isr(cluster, topic, REPLICATION_FACTOR, timeout=ISR_TIMEOUT_S)
        producer = SequenceProducer(cluster.bootstrap, topic, PARTITIONS, rate=rate)
        consumer = TailingConsumer(cluster.bootstrap, topic, PARTITIONS)
        producer.start()
        consumer.start()
        try:
            wait_until(lambda: min(producer.acked_counts()) >= WARMUP_ACKS_PER_PARTITION, 60,
                       message="first acknowledgements on every partition")
            _run_rounds(cluster, topic, producer, round_plan(rounds, kinds, targets), result, began,
                        time_budget_s, say)
        finally:
            producer.stop(flush_timeout=60.0)
            _finish_consumer(cluster, topic, consumer, result)
        _restart_stopped(cluster, result)
        _check_topic(cluster, topic, producer, consumer, result)
    result.duration_s = round(time.monotonic() - began, 3)
    say(result.summary_table())
    if raise_on_violation and not result.ok:
        raise CampaignViolation(result.report())
    return result


def _create_topic(cluster: LocalCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 10000, "logger": client_log})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, REPLICATION_FACTOR)], request_timeout=30)
    futures[topic].result(timeout=60)


def _run_rounds(cluster: LocalCluster, topic: str, producer: SequenceProducer, plan: list[tuple[str, str]],
                result: CampaignResult, began: float, time_budget_s: float | None,
                say: Callable[[str], None]) -> None:
    for index, (kind, target) in enumerate(plan, start=1):
        if time_budget_s is not None and time.monotonic() - began > time_budget_s:
            result.notes.append(f"time budget of {time_budget_s:.0f} s used up after {index - 1} round(s)")
            return
        try:
            broker = _pick_broker(cluster, topic, target)
        except AssertionError as exc:
            result.violations.append(f"round {index} ({kind} of the {target}): no broker to pick: {exc}")
            return
        fault_at = time.monotonic()
        acked_at_fault = producer.acked_counts()
        current = RoundResult(index=index, kind=kind, target=target, broker=broker,
                              started_s=round(fault_at - began, 3), acked_before=sum(acked_at_fault))
        result.rounds.append(current)
        try:
            _inject(cluster, topic, kind, cluster.broker(broker), current, fault_at)
            _recover(cluster, topic, producer, acked_at_fault)
        except (AssertionError, LocalClusterStartError) as exc:
            current.error = str(exc).splitlines()[0][:300]
            result.violations.append(f"round {index} ({kind} of the {target}, broker {broker}): {exc}")
            say(f"round {index}: {kind} of the {target} (broker {broker}) did not recover: {current.error}")
            return
        finally:
            current.acked_after = producer.acked_total()
        current.recovery_s = round(time.monotonic() - fault_at, 3)
        if kind.startswith("clean") and current.exit_code not in (0, None):
            result.notes.append(f"round {index}: broker {broker} exited with {current.exit_code} after SIGTERM "
                                f"(took {current.stop_s:.1f} s)")
        result.rounds_done = index
        say(f"round {index}: {kind} of the {target} (broker {broker}): stop {current.stop_s:.1f} s, "
            f"failover {_fmt(current.failover_s)} s, recovered in {current.recovery_s:.1f} s, "
            f"acked {current.acked_after}")


def _finish_consumer(cluster: LocalCluster, topic: str, consumer: TailingConsumer, result: CampaignResult) -> None:
    try:
        ends = high_watermarks(cluster.bootstrap, topic, PARTITIONS)
        if not consumer.wait_caught_up(ends, 60.0):
            result.violations.append(f"the tailing consumer reached {consumer.positions()}, not the high "
                                     f"watermarks {ends}, within 60 s")
    except Exception as exc:  # the check below still runs; say why the consumer could not finish
        result.violations.append(f"could not wait for the tailing consumer: {exc!r}")
    finally:
        consumer.stop()
        if consumer.restarts:
            result.notes.append(f"the tailing consumer stalled inside librdkafka and was replaced "
                                f"{consumer.restarts} time(s) (librdkafka issue #5476)")


def _restart_stopped(cluster: LocalCluster, result: CampaignResult) -> None:
    """After a failed round a broker may still be down; the read-back wants all replicas."""
    for node in cluster.brokers.values():
        if not node.is_running():
            try:
                node.start(START_TIMEOUT_S)
            except LocalClusterStartError as exc:
                result.violations.append(f"broker {node.broker_id} does not start for the final check: {exc}")


def _check_topic(cluster: LocalCluster, topic: str, producer: SequenceProducer, consumer: TailingConsumer,
                 result: CampaignResult) -> None:
    acked, sent = producer.acked(), producer.sent()
    result.acked, result.sent = sum(len(a) for a in acked), sum(sent)
    result.not_acked = producer.not_acked_total()
    result.delivery_errors = dict(producer.delivery_errors)
    result.consumer_errors = dict(consumer.errors)
    result.fatal_producer_errors = list(producer.fatal_errors)
    if producer.fatal_errors:
        result.violations.append(f"{len(producer.fatal_errors)} fatal idempotent-producer error(s), first: "
                                 f"{producer.fatal_errors[0]}")
    result.violations += [f"producer: {m}" for m in producer.misplaced[:5]]
    result.violations += [f"tailing consumer read an offset twice with different values: {c}"
                           for c in consumer.changed[:5]]
    if producer.unflushed:
        result.notes.append(f"{producer.unflushed} record(s) had no delivery report even after a purge")
    try:
        wait_for_isr(cluster, topic, REPLICATION_FACTOR, timeout=30.0)
    except AssertionError as exc:
        result.notes.append(f"before the read-back: {exc}")
    try:
        records = read_topic(cluster.bootstrap, topic, PARTITIONS, timeout=120.0)
    except Exception as exc:
        result.violations.append(f"read-back failed: {exc!r}")
        return
    check = check_records(records, acked, sent, consumer.seen())
    for name in ("read", "duplicates", "missing", "out_of_order", "unexpected", "moved", "unacked_present",
                 "consumed_then_lost"):
        setattr(result, name, getattr(check, name))
    result.violations += check.violations


# ------------------------------------------------------------------ command line

def main(argv: Sequence[str] | None = None) -> int:
    """`python -m conformance.replication_campaign`: the long campaign; exit 0 when it passed."""
    parser = argparse.ArgumentParser(prog="python -m conformance.replication_campaign", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--kinds", default=",".join(FAULT_KINDS), help="comma-separated fault kinds")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated: leader, controller")
    parser.add_argument("--rate", type=float, default=300.0, help="records per second, all partitions")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds for the fault rounds")
    parser.add_argument("--out", type=Path, default=None, help="write the result here as JSON")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="cluster data and broker logs (default: a new temporary directory, kept)")
    parser.add_argument("--verbose", action="store_true", help="also show the clients' own log lines")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # connection errors while a broker is down are the point, not news
        logging.getLogger("conformance.replication_workload.rdkafka").setLevel(logging.CRITICAL)
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="kafkapy-replication-campaign-"))

    def say(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    result = run_campaign(work_dir, args.rounds, tuple(k for k in args.kinds.split(",") if k),
                          tuple(t for t in args.targets.split(",") if t), rate=args.rate,
                          time_budget_s=args.time_budget, progress=say)
    for line in result.violations:
        print(f"violation: {line}")
    for line in result.notes:
        print(f"note: {line}")
    if not result.ok:
        print(broker_log_excerpt(work_dir))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result.to_json(), indent=2) + "\n")
        print(f"wrote {args.out}")
    print(f"broker logs: {work_dir}/broker-*.log")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
