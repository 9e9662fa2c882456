"""The long fault campaign of issue 23 (not in CI): faults of every kind, one per round, on a
3-broker cluster in network namespaces, under the recorded workload of conformance/fault_workload.py.
Each broker has two log dirs (JBOD) and a fault-injection control endpoint (on the loopback of its
own namespace, reached from inside it: BrokerNode.control_request) for the disk faults.

Each round injects one fault, heals it, and waits until every partition has its whole ISR again
and both the producer and the transform application make progress. At the end the history
checker (kafkapy.testing.history) judges everything the clients saw. Fault kinds:

    kill9_leader         kill -9 the leader of a source partition, start it again after failover
    pause_leader         SIGSTOP a leader beyond the ZooKeeper session timeout, then SIGCONT
    isolate_leader       cut a leader off from ZooKeeper and the other brokers (clients still reach it)
    isolate_controller   cut the controller off from the other brokers (not from ZooKeeper)
    broker_from_zk       cut one broker (not the controller) off from ZooKeeper only
    zookeeper_down       stop ZooKeeper for ZK_DOWN_S seconds
    one_way_follower     drop a follower's packets to its leader only (one-way partition)
    disk_full_leader     the log dir of a source partition's leader replica fails writes with ENOSPC
                         (the dir goes "full", leadership moves); then space comes back: the dir is
                         online again without a restart
    disk_error_leader    the same dir fails with EIO: offline until a restart, as in Kafka; healed by
                         clearing the fault and restarting that broker (SIGTERM, controlled shutdown)
    clock_jump           one broker's wall clock jumps CLOCK_JUMP_S forward, stays there CLOCK_HOLD_S, then
                         jumps back to the true time (kafkapy.devcluster.clock: its CLOCK_REALTIME
                         only; monotonic time goes on, as when NTP steps a clock)

    python -m conformance.fault_campaign --rounds 100 --out build/fault-campaign.json

Needs root, iproute2, nftables, Java and ZooKeeper.
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from conformance.cluster_harness import (
    ClusterUnreachable,
    controller_id,
    describe,
    start_cluster,
    wait_for_isr,
    wait_until,
)
from conformance.fault_workload import FAULT_OVERRIDES, FaultWorkload
from kafkapy.devcluster.brokers import LocalCluster
from kafkapy.devcluster.clock import ClockShift
from kafkapy.devcluster.netns import NetworkLab
from kafkapy.groupcoord.offsets_topic import partition_for
from kafkapy.testing.history import longest_ack_gap

__all__ = ["FAULT_KINDS", "CampaignResult", "main", "run_campaign"]

log = logging.getLogger(__name__)

FAULT_KINDS = ("kill9_leader", "pause_leader", "isolate_leader", "isolate_controller", "broker_from_zk",
               "zookeeper_down", "one_way_follower", "disk_full_leader", "disk_error_leader", "clock_jump")
SESSION_S = int(FAULT_OVERRIDES["zookeeper.session.timeout.ms"]) / 1000
LAG_S = int(FAULT_OVERRIDES["replica.lag.time.max.ms"]) / 1000
ZK_DOWN_S = 20.0
HOLD_S = SESSION_S + 4  # how long a partition or pause lasts: beyond the session timeout
RECOVERY_TIMEOUT_S = 120.0
CLOCK_JUMP_S = 3600.0
# A jump is held beyond the transaction coordinator's check for timed-out transactions (Kafka's
# transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s): that check reads the wall clock.
CLOCK_HOLD_S = 12.0
LOG_DIRS = 2  # per broker: a disk fault takes one of them away, the broker serves on from the other
# Broker settings of the campaign: kafkapy probes a full log dir for space this often (Kafka has no
# such recovery: its full dir stays offline until a restart).
CAMPAIGN_OVERRIDES = {**FAULT_OVERRIDES, "kafkapy.log.dir.space.check.interval.ms": "500"}


@dataclass(slots=True)
class RoundResult:
    index: int
    kind: str
    broker: int | None
    started_s: float
    recovered_s: float | None = None  # fault until healed, ISR whole and progress again
    ack_gap_s: float | None = None  # longest time any source partition went without an acknowledgement
    error: str | None = None


@dataclass(slots=True)
class CampaignResult:
    work_dir: str
    rounds_planned: int
    rounds: list[RoundResult] = field(default_factory=list)
    report: dict[str, object] = field(default_factory=dict)  # the history checker's
    violations: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations and bool(self.report.get("ok"))

    def by_kind(self) -> dict[str, dict[str, object]]:
        """Per fault kind: rounds, and the worst and mean longest-ack-gap and recovery times."""
        out: dict[str, dict[str, object]] = {}
        for kind in FAULT_KINDS:
            rounds = [r for r in self.rounds if r.kind == kind and r.error is None]
            if not rounds:
                continue
            gaps = [r.ack_gap_s or 0.0 for r in rounds]
            recoveries = [r.recovered_s or 0.0 for r in rounds]
            out[kind] = {"rounds": len(rounds), "ack_gap_max_s": max(gaps),
                         "ack_gap_mean_s": round(sum(gaps) / len(gaps), 1),
                         "recovery_max_s": max(recoveries), "recovery_mean_s": round(sum(recoveries) / len(recoveries), 1)}
        return out

    def summary(self) -> str:
        lines = [f"{'kind':<20}{'rounds':>7}{'ack gap max s':>15}{'mean':>7}{'recovery max s':>16}{'mean':>7}"]
        for kind, f in self.by_kind().items():
            lines.append(f"{kind:<20}{f['rounds']:>7}{f['ack_gap_max_s']:>15.1f}{f['ack_gap_mean_s']:>7.1f}"
                         f"{f['recovery_max_s']:>16.1f}{f['recovery_mean_s']:>7.1f}")
        totals = self.report.get("totals", {})
        lines.append(f"rounds {len([r for r in self.rounds if r.error is None])}/{self.rounds_planned} in "
                     f"{self.duration_s:.0f} s; " + ", ".join(f"{k} {v}" for k, v in totals.items()))
        lines += [f"violation: {v}" for v in self.violations + list(self.report.get("violations", []))]
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)


def _leaders(cluster: LocalCluster, topic: str) -> list[int]:
    return [s.leader for s in describe(cluster, topic).values() if s.leader > 0]


def _controller(cluster: LocalCluster) -> int:
    return wait_until(lambda: max(controller_id(cluster), 0), 30, ignore=(ClusterUnreachable,), message="a controller")


def _moved_away(cluster: LocalCluster, workload: FaultWorkload, broker: int, timeout: float) -> None:
    witness = next(b for b in cluster.brokers if b != broker)
    wait_until(lambda: not any(s.leader == broker for t in (workload.source, workload.sink)
                               for s in describe(cluster, t, via=witness).values()),
               timeout, interval=0.2, ignore=(ClusterUnreachable,), message=f"leaders away from broker {broker}")


def _inject(kind: str, lab: NetworkLab, cluster: LocalCluster, workload: FaultWorkload, rng: random.Random) -> int | None:
    """Inject `kind`, hold it, heal it; returns the broker it hit (None: ZooKeeper)."""
    controller = _controller(cluster)
    leaders = _leaders(cluster, workload.source) or list(cluster.brokers)
    others = [b for b in leaders if b != controller]
    if kind == "kill9_leader":
        broker = rng.choice(leaders)
        cluster.broker(broker).kill9()
        _moved_away(cluster, workload, broker, SESSION_S + 30)
        cluster.broker(broker).start(60)
        return broker
    if kind == "pause_leader":
        broker = rng.choice(leaders)
        cluster.broker(broker).pause()
        try:
            time.sleep(HOLD_S)
        finally:
            cluster.broker(broker).resume()
        return broker
    if kind == "isolate_leader":
        broker = rng.choice(others or leaders)
        lab.isolate(f"broker-{broker}", ["zookeeper", *(f"broker-{b}" for b in cluster.brokers if b != broker)])
        time.sleep(HOLD_S + LAG_S)
        lab.heal()
        return broker
    if kind == "isolate_controller":
        lab.isolate(f"broker-{controller}", [f"broker-{b}" for b in cluster.brokers if b != controller])
        time.sleep(LAG_S + 3)
        lab.heal()
        return controller
    if kind == "broker_from_zk":
        broker = rng.choice([b for b in cluster.brokers if b != controller])
        lab.cut(f"broker-{broker}", "zookeeper")
        time.sleep(HOLD_S)
        lab.heal()
        return broker
    if kind == "zookeeper_down":
        assert cluster.zookeeper is not None
        cluster.zookeeper.stop()
        try:
            time.sleep(ZK_DOWN_S)
        finally:
            cluster.zookeeper.start()
        return None
    if kind == "one_way_follower":
        state = describe(cluster, workload.source)[rng.randrange(len(describe(cluster, workload.source)))]
        follower = rng.choice([r for r in state.replicas if r != state.leader])
        lab.cut(f"broker-{follower}", f"broker-{state.leader}", both_ways=False)
        time.sleep(LAG_S + 3)
        lab.heal()
        return follower
    if kind in ("disk_full_leader", "disk_error_leader"):
        partition = rng.randrange(len(describe(cluster, workload.source)))
        broker = describe(cluster, workload.source)[partition].leader
        node = cluster.broker(broker)
        log_dir = node.log_dir_of(workload.source, partition)
        if log_dir is None:
            raise AssertionError(f"broker {broker} leads {workload.source}-{partition} but has no replica of it")
        error = "ENOSPC" if kind == "disk_full_leader" else "EIO"
        witness = next(b for b in cluster.brokers if b != broker)
        node.control_request("POST", "/storage-faults", {"log_dir": str(log_dir), "error": error})
        wait_until(lambda: describe(cluster, workload.source, via=witness)[partition].leader not in (broker, -1),
                   60, interval=0.2, ignore=(ClusterUnreachable, KeyError),
                   message=f"leadership of {workload.source}-{partition} away from broker {broker} ({error})")
        time.sleep(LAG_S)
        if kind == "disk_full_leader":
            node.control_request("DELETE", "/storage-faults")
            wait_until(lambda: _dir_status(node, log_dir) == "online", 30, interval=0.2,
                       message=f"{log_dir} of broker {broker} back online once space returned")
        elif node.is_running():  # an offline dir comes back only with a restart, as in Kafka
            node.restart(timeout=60)
        return broker
    if kind == "clock_jump":
        # half the time the workload's transaction coordinator, whose transaction timeouts (as
        # Kafka's) are measured on the wall clock; else any broker
        coordinator = describe(cluster, "__transaction_state").get(
            partition_for(workload.transactional_id, int(FAULT_OVERRIDES["transaction.state.log.num.partitions"])))
        broker = coordinator.leader if coordinator is not None and coordinator.leader > 0 and rng.random() < 0.5 \
            else rng.choice(sorted(cluster.brokers))
        clock = cluster.broker(broker).clock
        if clock is None:
            raise RuntimeError("clock_jump needs a cluster started with clocks=True")
        clock.set(CLOCK_JUMP_S)
        try:
            time.sleep(CLOCK_HOLD_S)
        finally:
            clock.set(0)
        return broker
    raise ValueError(f"unknown fault kind {kind!r}; expected one of {FAULT_KINDS}")


def _dir_status(node, log_dir: Path) -> str:
    states = node.control_request("GET", "/log-dirs")["log_dirs"]
    return next(state["status"] for state in states if state["path"] == str(log_dir))


def _recover(lab: NetworkLab, cluster: LocalCluster, workload: FaultWorkload) -> None:
    lab.heal()
    for node in cluster.brokers.values():
        if not node.is_running():
            node.start(60)
    for topic in (workload.source, workload.sink):
        wait_for_isr(cluster, topic, 3, timeout=RECOVERY_TIMEOUT_S)
    workload.wait_progress(RECOVERY_TIMEOUT_S, "after the round")


def run_campaign(work_dir: Path, rounds: int, kinds: Sequence[str] = FAULT_KINDS, seed: int = 23,
                 time_budget_s: float | None = None, say: Callable[[str], None] = print) -> CampaignResult:
    work_dir = Path(work_dir).resolve()
    began = time.monotonic()
    rng = random.Random(seed)
    result = CampaignResult(work_dir=str(work_dir), rounds_planned=rounds)
    with NetworkLab() as lab:
        cluster = start_cluster(work_dir, 3, CAMPAIGN_OVERRIDES, network=lab, control=True, log_dirs=LOG_DIRS,
                                clocks="clock_jump" in kinds)
        with cluster:
            # a slower producer than the CI tests': the history of a long campaign stays in memory
            workload = FaultWorkload(cluster, work_dir, rate=50.0, max_restarts=rounds)
            workload.start()
            try:
                for index in range(1, rounds + 1):
                    if time_budget_s is not None and time.monotonic() - began > time_budget_s:
                        say(f"time budget of {time_budget_s:.0f} s used up after {index - 1} round(s)")
                        break
                    kind = kinds[(index - 1) % len(kinds)]
                    start_ns = time.monotonic_ns()
                    current = RoundResult(index, kind, None, round(time.monotonic() - began, 1))
                    result.rounds.append(current)
                    try:
                        current.broker = _inject(kind, lab, cluster, workload, rng)
                        _recover(lab, cluster, workload)
                    except Exception as exc:  # the round failed to recover: stop, still check
                        current.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                        result.violations.append(f"round {index} ({kind}): {current.error}")
                        say(f"round {index}: {kind} did not recover: {current.error}")
                        break
                    end_ns = time.monotonic_ns()
                    current.recovered_s = round((end_ns - start_ns) / 1e9, 1)
                    gaps = longest_ack_gap(workload.history, start_ns, end_ns, workload.source)
                    current.ack_gap_s = max(gaps.values(), default=0.0)
                    say(f"round {index}: {kind} (broker {current.broker}): longest ack gap {current.ack_gap_s:.1f} s, "
                        f"recovered in {current.recovered_s:.1f} s, acked {workload.acked()}")
            finally:
                lab.heal()
                try:
                    report = workload.finish()
                except Exception as exc:  # e.g. a read-back that cannot reach the end: say so, keep the rounds
                    result.violations.append(f"final check failed: {type(exc).__name__}: {exc}")
                    say(f"final check failed: {exc!r}")
                else:
                    result.report = report.to_dict()
                    say(report.text())
    result.duration_s = round(time.monotonic() - began, 1)
    say(result.summary())
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.fault_campaign", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--kinds", default=",".join(FAULT_KINDS), help="comma-separated fault kinds, in turn")
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--time-budget", type=float, default=None, help="seconds for the fault rounds")
    parser.add_argument("--out", type=Path, default=None, help="write the result here as JSON")
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("conformance.replication_workload.rdkafka").setLevel(logging.CRITICAL)
    ok, why = NetworkLab.available()
    if not ok:
        print(f"fault campaign: network namespaces unavailable: {why}", file=sys.stderr)
        return 2
    kinds = [k for k in args.kinds.split(",") if k]
    if "clock_jump" in kinds:
        ok, why = ClockShift.available()
        if not ok:
            print(f"fault campaign: clock jumps unavailable, running without clock_jump: {why}", file=sys.stderr)
            kinds = [k for k in kinds if k != "clock_jump"]
            if not kinds:
                return 2
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="kafkapy-fault-campaign-"))

    def say(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    result = run_campaign(work_dir, args.rounds, kinds, args.seed,
                          args.time_budget, say)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({**asdict(result), "ok": result.ok, "by_kind": result.by_kind()}, indent=2)
                            + "\n")
        print(f"wrote {args.out}")
    print(f"broker logs: {work_dir}/broker-*.log")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
