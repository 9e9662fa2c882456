"""Network partitions and a paused leader under a recorded workload (issue 23).

ZooKeeper and each broker run in a network namespace of their own (kafkapy.devcluster.netns),
the test's clients in ours, so that nftables can cut any pair. One cluster, three faults in turn,
each healed and followed by a whole ISR and new progress before the next:

- a leader cut off from ZooKeeper and from its followers while clients still reach it: it must
  stop acknowledging acks=all (its followers stop fetching, and it cannot shrink the ISR without
  the controller), the controller moves its partitions once its session expires, and when the
  partition heals it follows the new leader and truncates what it wrote alone;
- the controller cut off from the other brokers (not from ZooKeeper): the cluster waits for it
  and converges once healed;
- a leader paused (SIGSTOP) beyond its ZooKeeper session timeout, which wakes up to find its
  partitions led elsewhere.

Under an idempotent acks=all producer, a tailing consumer and an exactly-once transform
application; the history checker (kafkapy.testing.history) must pass: nothing acknowledged lost,
nothing read that was later truncated, no duplicates, read_committed never saw an aborted record.
Needs root, iproute2 and nftables: skipped loudly without them.
"""
from __future__ import annotations

import time

import pytest

from conformance.cluster_harness import (
    ClusterUnreachable,
    controller_id,
    describe,
    start_cluster,
    wait_for_isr,
    wait_until,
)
from conformance.fault_workload import FAULT_OVERRIDES, FaultWorkload
from kafkapy.devcluster.netns import NetworkLab
from kafkapy.testing.history import longest_ack_gap

pytest.importorskip("confluent_kafka")
AVAILABLE, WHY_NOT = NetworkLab.available()
pytestmark = [pytest.mark.timeout(480),
              pytest.mark.skipif(not AVAILABLE, reason=f"!!! network partitions cannot be made here: {WHY_NOT}")]

LAG_S = int(FAULT_OVERRIDES["replica.lag.time.max.ms"]) / 1000
SESSION_S = int(FAULT_OVERRIDES["zookeeper.session.timeout.ms"]) / 1000
# Everything the broker needs to notice (lag + session), plus the controller's election and the
# clients' metadata refresh, on a loaded 2-core machine.
FAILOVER_BOUND_S = LAG_S + SESSION_S + 15


def led_by(cluster, topic: str, broker: int, via: int) -> list[int]:
    return [p for p, state in describe(cluster, topic, via=via).items() if state.leader == broker]


def wait_moved_away(cluster, workload: FaultWorkload, broker: int, via: int, timeout: float) -> float:
    """Wait until broker `via` sees no partition of the workload led by `broker`; returns the seconds."""
    began = time.monotonic()
    wait_until(lambda: not any(led_by(cluster, t, broker, via) for t in (workload.source, workload.sink)),
               timeout, interval=0.2, ignore=(ClusterUnreachable,),
               message=f"leadership moved away from broker {broker} (as broker {via} sees it)")
    return time.monotonic() - began


def heal_and_converge(lab: NetworkLab, cluster, workload: FaultWorkload) -> None:
    lab.heal()
    for topic in (workload.source, workload.sink):
        wait_for_isr(cluster, topic, 3, timeout=90)
    workload.wait_progress(90, "after healing")


def test_partitions_and_a_paused_leader(tmp_path):
    figures: dict[str, dict[str, object]] = {}
    with NetworkLab() as lab:
        cluster = start_cluster(tmp_path, 3, FAULT_OVERRIDES, network=lab)
        with cluster:
            workload = FaultWorkload(cluster, tmp_path)
            workload.start()
            try:
                # 1. a leader (not the controller) cut off from ZooKeeper and its followers
                controller = controller_id(cluster)
                leaders = [state.leader for state in describe(cluster, workload.source).values()]
                victim = next((b for b in leaders if b != controller),
                              next(b for b in cluster.brokers if b != controller))
                witness = next(b for b in cluster.brokers if b != victim)
                led = led_by(cluster, workload.source, victim, witness)
                start = time.monotonic_ns()
                lab.isolate(f"broker-{victim}", ["zookeeper", *(f"broker-{b}" for b in cluster.brokers if b != victim)])
                moved_s = wait_moved_away(cluster, workload, victim, witness, FAILOVER_BOUND_S + 10)
                workload.wait_progress(60, f"with broker {victim} isolated")
                heal_and_converge(lab, cluster, workload)
                figures["leader isolated"] = {"broker": victim, "partitions": led, "moved_s": round(moved_s, 1),
                                              "ack_gap_s": longest_ack_gap(workload.history, start,
                                                                           time.monotonic_ns(), workload.source)}
                assert moved_s < FAILOVER_BOUND_S, figures

                # 2. the controller cut off from the other brokers, not from ZooKeeper
                controller = wait_until(lambda: max(controller_id(cluster), 0), 30, ignore=(ClusterUnreachable,),
                                        message="a controller")
                start = time.monotonic_ns()
                lab.isolate(f"broker-{controller}", [f"broker-{b}" for b in cluster.brokers if b != controller])
                time.sleep(LAG_S + 5)
                heal_and_converge(lab, cluster, workload)
                figures["controller cut from brokers"] = {
                    "broker": controller, "ack_gap_s": longest_ack_gap(workload.history, start, time.monotonic_ns(),
                                                                       workload.source)}

                # 3. a leader paused beyond its session timeout
                state = describe(cluster, workload.source)
                paused = state[0].leader
                witness = next(b for b in cluster.brokers if b != paused)
                start = time.monotonic_ns()
                cluster.broker(paused).pause()
                try:
                    moved_s = wait_moved_away(cluster, workload, paused, witness, FAILOVER_BOUND_S + 10)
                    time.sleep(max(0.0, SESSION_S + 2 - moved_s))
                finally:
                    cluster.broker(paused).resume()
                heal_and_converge(lab, cluster, workload)
                figures["leader paused"] = {"broker": paused, "moved_s": round(moved_s, 1),
                                            "ack_gap_s": longest_ack_gap(workload.history, start, time.monotonic_ns(),
                                                                         workload.source)}
            finally:
                lab.heal()
                report = workload.finish()
    print(f"fault figures: {figures}\n{report.text()}")
    assert report.ok, report.text()
