"""Disk faults on a leader under the recorded workload (issue 23).

A 3-broker ZooKeeper-mode cluster on 127.0.0.1 whose brokers have two log dirs each (JBOD) and a
fault-injection control endpoint (kafkapy.control.listener, loopback only); the storage faults
are injected through it. One cluster, two faults in turn, each healed and followed by a whole
ISR and new progress before the next:

- the log dir holding the replica of a source partition's leader fills up (ENOSPC): the dir goes
  "full", its partitions answer KAFKA_STORAGE_ERROR, the broker tells the controller
  (/log_dir_event_notification) and leadership moves to healthy replicas; producers go on with the
  new leaders; once space is back (the fault cleared) the dir comes back online without a
  restart (beyond Kafka, which needs one) and the replicas rejoin the ISR;
- the same dir of another leader returns I/O errors (EIO): the dir goes offline until a restart,
  as in Kafka, leadership moves, the broker keeps serving from its other dir; healing is clearing
  the fault and restarting that broker (the injected fault lives in the process, so a restart
  clears it), after which its replicas catch up and the ISR is whole.

Under an idempotent acks=all producer, a tailing consumer and an exactly-once transform
application; the history checker (kafkapy.testing.history) must pass: nothing acknowledged lost,
duplicated or reordered, nothing read that was later truncated, read_committed saw no aborted or
open transaction's records, the application's output holds every input record exactly once.
No network namespaces needed: no root.
"""
from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conformance.cluster_harness import (  # noqa: E402
    ClusterUnreachable,
    controller_id,
    describe,
    start_cluster,
    wait_for_isr,
    wait_until,
)
from conformance.fault_campaign import CLOCK_HOLD_S, CLOCK_JUMP_S  # noqa: E402
from conformance.fault_workload import FAULT_OVERRIDES, FaultWorkload  # noqa: E402
from conformance.replication_workload import client_log, read_topic  # noqa: E402
from kafkapy.devcluster.clock import ClockShift  # noqa: E402
from kafkapy.groupcoord.offsets_topic import partition_for  # noqa: E402
from kafkapy.testing.history import READ_COMMITTED, longest_ack_gap  # noqa: E402

pytestmark = pytest.mark.timeout(360)

# How often a full log dir is probed for space again (kafkapy's own setting; Kafka has no
# such recovery: its full dir stays offline until a restart).
DISK_OVERRIDES = {**FAULT_OVERRIDES, "kafkapy.log.dir.space.check.interval.ms": "300"}
LAG_S = int(FAULT_OVERRIDES["replica.lag.time.max.ms"]) / 1000
# A dir's failure reaches the controller through ZooKeeper at once (no session to expire), then
# the election and the clients' metadata refresh, on a loaded 2-core machine.
FAILOVER_BOUND_S = 30.0


def dir_status(node, log_dir) -> str:
    states = node.control_request("GET", "/log-dirs")["log_dirs"]
    return next(state["status"] for state in states if state["path"] == str(log_dir))


def pick_leader(cluster, workload: FaultWorkload, avoid: set[int]) -> tuple[int, int]:
    """(partition, leader) of a source partition whose leader is not in `avoid` (if one is)."""
    state = describe(cluster, workload.source)
    choices = sorted(state.items(), key=lambda item: item[1].leader in avoid)
    partition, leader = choices[0][0], choices[0][1].leader
    return partition, leader


def wait_leader_moved(cluster, topic: str, partition: int, broker: int, timeout: float) -> float:
    """Wait until another broker than `broker` leads topic-partition (as a third broker sees it)."""
    witness = next(b for b in cluster.brokers if b != broker)
    began = time.monotonic()
    wait_until(lambda: describe(cluster, topic, via=witness)[partition].leader not in (broker, -1), timeout,
               interval=0.2, ignore=(ClusterUnreachable, KeyError),
               message=f"leadership of {topic}-{partition} moved away from broker {broker}")
    return time.monotonic() - began


def wait_out_of_isr(cluster, topic: str, partition: int, broker: int, timeout: float = 30.0) -> None:
    """The controller took `broker`'s replica (in a failed dir) out of the ISR and lists it offline."""
    witness = next(b for b in cluster.brokers if b != broker)

    def out() -> bool:
        state = describe(cluster, topic, via=witness)[partition]
        return broker not in state.isr and broker in state.offline_replicas

    wait_until(out, timeout, interval=0.2, ignore=(ClusterUnreachable, KeyError),
               message=f"broker {broker} out of the ISR of {topic}-{partition}")


def converge(cluster, workload: FaultWorkload, what: str) -> None:
    for topic in (workload.source, workload.sink):
        wait_for_isr(cluster, topic, 3, timeout=90)
    workload.wait_progress(90, what)


def test_a_full_and_a_failing_log_dir_on_leaders(tmp_path):
    figures: dict[str, dict[str, object]] = {}
    cluster = start_cluster(tmp_path, 3, DISK_OVERRIDES, control=True, log_dirs=2)
    with cluster:
        workload = FaultWorkload(cluster, tmp_path)
        workload.start()
        try:
            # (a) the leader's log dir fills up: leadership moves, the dir comes back by itself
            partition, victim = pick_leader(cluster, workload, {controller_id(cluster)})
            node = cluster.broker(victim)
            full_dir = node.log_dir_of(workload.source, partition)
            assert full_dir is not None, f"no replica of {workload.source}-{partition} on broker {victim}"
            start = time.monotonic_ns()
            node.control_request("POST", "/storage-faults", {"log_dir": str(full_dir), "error": "ENOSPC"})
            moved_s = wait_leader_moved(cluster, workload.source, partition, victim, FAILOVER_BOUND_S + 30)
            wait_out_of_isr(cluster, workload.source, partition, victim)
            workload.wait_progress(60, f"with a full log dir on broker {victim}")
            assert dir_status(node, full_dir) == "full"
            node.control_request("DELETE", "/storage-faults")
            wait_until(lambda: dir_status(node, full_dir) == "online", 30, message=f"{full_dir} back online")
            converge(cluster, workload, "after space came back")
            assert node.is_running()
            figures["disk full"] = {"broker": victim, "partition": partition, "moved_s": round(moved_s, 1),
                                    "ack_gap_s": longest_ack_gap(workload.history, start, time.monotonic_ns(),
                                                                 workload.source)}
            assert moved_s < FAILOVER_BOUND_S, figures

            # (b) I/O errors in a leader's log dir: offline until the broker restarts
            partition, victim = pick_leader(cluster, workload, {victim})
            node = cluster.broker(victim)
            failing_dir = node.log_dir_of(workload.source, partition)
            assert failing_dir is not None, f"no replica of {workload.source}-{partition} on broker {victim}"
            start = time.monotonic_ns()
            node.control_request("POST", "/storage-faults", {"log_dir": str(failing_dir), "error": "EIO"})
            moved_s = wait_leader_moved(cluster, workload.source, partition, victim, FAILOVER_BOUND_S + 30)
            wait_out_of_isr(cluster, workload.source, partition, victim)
            workload.wait_progress(60, f"with a failed log dir on broker {victim}")
            assert dir_status(node, failing_dir) == "offline"
            assert node.is_running(), "a broker with one healthy log dir left must keep running, as Kafka's does"
            node.restart()
            assert dir_status(node, failing_dir) == "online"
            converge(cluster, workload, f"after broker {victim} restarted")
            figures["disk error"] = {"broker": victim, "partition": partition, "moved_s": round(moved_s, 1),
                                     "ack_gap_s": longest_ack_gap(workload.history, start, time.monotonic_ns(),
                                                                  workload.source)}
            assert moved_s < FAILOVER_BOUND_S, figures
        finally:
            report = workload.finish()
    print(f"fault figures: {figures}\n{report.text()}")
    assert report.ok, report.text()


def test_a_wall_clock_jump_on_a_transaction_coordinator(tmp_path):
    """One broker's wall clock jumps an hour forward and, 12 s later, back (devcluster/clock.py:
    CLOCK_REALTIME only, as when NTP steps a clock). It is the transaction coordinator of a probe
    producer whose transaction is open across the jump: the coordinator measures transaction
    timeouts on the wall clock, as Kafka's does, so at its next check (every 10 s) it aborts that
    transaction, and the probe's commit fails; read_committed never sees its record. The recorded
    workload runs on through both jumps and the checker passes."""
    available, why = ClockShift.available()
    if not available:
        pytest.skip(f"!!! wall-clock jumps cannot be made here: {why}")
    cluster = start_cluster(tmp_path, 3, FAULT_OVERRIDES, clocks=True)
    with cluster:
        workload = FaultWorkload(cluster, tmp_path)
        workload.start()
        try:
            probe_topic, probe_id = f"clock-probe-{workload.group[-8:]}", f"clock-probe-txn-{workload.group[-8:]}"
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_topics([NewTopic(probe_topic, 1, 3)])[probe_topic].result(30)
            state_partition = partition_for(probe_id, int(FAULT_OVERRIDES["transaction.state.log.num.partitions"]))
            probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": probe_id,
                                              "transaction.timeout.ms": 60000, "logger": client_log})
            probe.init_transactions(30)
            coordinator = describe(cluster, "__transaction_state")[state_partition].leader
            probe.begin_transaction()
            probe.produce(probe_topic, b"open across the jump")
            probe.flush(30)
            start = time.monotonic_ns()
            clock = cluster.broker(coordinator).clock
            clock.set(CLOCK_JUMP_S)
            try:
                time.sleep(CLOCK_HOLD_S)
                workload.wait_progress(60, f"with broker {coordinator}'s clock an hour ahead")
            finally:
                clock.set(0)
            with pytest.raises(confluent_kafka.KafkaException) as refused:
                probe.commit_transaction(30)
            workload.wait_progress(60, f"with broker {coordinator}'s clock back")
            for topic in (workload.source, workload.sink):
                wait_for_isr(cluster, topic, 3, timeout=60)
            print(f"clock jump on broker {coordinator}: the open transaction's commit answered {refused.value}; "
                  f"ack gap {longest_ack_gap(workload.history, start, time.monotonic_ns(), workload.source)}")
            assert read_topic(cluster.bootstrap, probe_topic, 1, 30.0, None, READ_COMMITTED) == [[]]
        finally:
            report = workload.finish()
    print(report.text())
    assert report.ok, report.text()
