"""The Java clients (kafka-clients 3.9.1) against a three-broker kafkapy cluster (ZooKeeper mode).

- ClusterCheck: AdminClient describeCluster/describeTopics (leaders on every broker, ISR of 3), and a
  default producer and an assign-mode consumer on partitions led by different brokers.
- ClusterOpsCheck, the AdminClient calls behind kafka-reassign-partitions, kafka-leader-election and
  kafka-log-dirs: a two-partition topic moved from broker 1 to brokers 2 and 3 with 20 MB in it,
  replication factor raised and lowered, Kafka's errors for bad reassignments; preferred leader
  election after a broker's restart moved leaders away, and with the preferred replica down;
  describeLogDirs/describeReplicaLogDirs. (kafka-python's run of the same reassignments is
  conformance/test_cluster_reassignment.py.)

All tests share one cluster with the replication campaign's settings and no automatic leader
rebalance, so leaders stay where the tests put them.
"""
from __future__ import annotations

import uuid

import pytest

from conformance.cluster_harness import (
    cluster_fixture,
    controller_id,
    describe,
    wait_for_isr,
    wait_for_leader,
    wait_until,
)
from conformance.java.test_java_clients import JavaPrograms, java_programs  # noqa: F401
from conformance.replication_campaign import CLUSTER_OVERRIDES, wait_for_controller_everywhere

pytestmark = pytest.mark.timeout(300)

cluster = cluster_fixture(3, {**CLUSTER_OVERRIDES, "auto.leader.rebalance.enable": "false"})

ELECT_PARTITIONS = 3
REJOIN_TIMEOUT_S = 60.0
# 20 MB produced, moved, copied again and read twice: about 6 s on a quiet machine
REASSIGN_TIMEOUT_S = 240.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def partition_dirs(cluster, broker_id: int, topic: str) -> list[str]:
    return sorted(p.name for p in cluster.broker(broker_id).log_dir.glob(f"{topic}-*") if p.is_dir())


def test_java_clients_see_and_use_the_cluster(cluster, java_programs: JavaPrograms) -> None:  # noqa: F811
    wait_for_controller_everywhere(cluster)
    java_programs.run("ClusterCheck", cluster.bootstrap, f"java-cluster-{uuid.uuid4().hex[:8]}", "3", "6", "3000")


def test_java_admin_reassigns_partitions(cluster, java_programs: JavaPrograms) -> None:  # noqa: F811
    """Move, replication factor up and down, Kafka's errors for bad requests (ClusterOpsCheck reassign)."""
    wait_for_controller_everywhere(cluster)
    topic = unique("java-reassign")
    java_programs.run("ClusterOpsCheck", "reassign", cluster.bootstrap, topic, timeout=REASSIGN_TIMEOUT_S)
    # Removed replicas are deleted from disk: partition 0 ended on [3], partition 1 on [2, 3].
    wait_until(lambda: (partition_dirs(cluster, 1, topic), partition_dirs(cluster, 2, topic),
                        partition_dirs(cluster, 3, topic)) == ([], [f"{topic}-1"], [f"{topic}-0", f"{topic}-1"]),
               30, message="partition directories left where the replicas are")


def test_java_admin_elects_preferred_leaders(cluster, java_programs: JavaPrograms) -> None:  # noqa: F811
    """A broker's SIGTERM restart moves its leaderships away (controlled shutdown) and, with automatic
    rebalance off, they stay away; electLeaders PREFERRED brings them back (ClusterOpsCheck elect)."""
    wait_for_controller_everywhere(cluster)
    topic = unique("java-elect")
    java_programs.run("ClusterOpsCheck", "create", cluster.bootstrap, topic, str(ELECT_PARTITIONS))
    state = wait_for_isr(cluster, topic, 3)
    controller = controller_id(cluster)
    # Not the controller's broker: restarting it would move the controller too, which is not the point.
    leaders = [s.leader for _, s in sorted(state.items())]
    victim = next((b for b in leaders if b != controller), leaders[0])
    cluster.broker(victim).restart()
    state = wait_for_isr(cluster, topic, 3, timeout=REJOIN_TIMEOUT_S)
    wait_for_controller_everywhere(cluster)
    assert any(s.leader != s.replicas[0] for s in state.values()), \
        f"broker {victim}'s restart left every partition on its preferred leader: {state}"
    java_programs.run("ClusterOpsCheck", "elect", cluster.bootstrap, topic)


def test_java_admin_preferred_election_with_the_preferred_replica_down(
        cluster, java_programs: JavaPrograms) -> None:  # noqa: F811
    """electLeaders PREFERRED for a partition whose preferred replica's broker is stopped:
    PreferredLeaderNotAvailableException, nothing changes (ClusterOpsCheck elect-unavailable)."""
    wait_for_controller_everywhere(cluster)
    topic = unique("java-elect-down")
    java_programs.run("ClusterOpsCheck", "create", cluster.bootstrap, topic, str(ELECT_PARTITIONS))
    state = wait_for_isr(cluster, topic, 3)
    controller = controller_id(cluster)
    partition, down = next(((p, s.replicas[0]) for p, s in sorted(state.items()) if s.replicas[0] != controller),
                           (0, state[0].replicas[0]))
    node = cluster.broker(down)
    node.stop()
    try:
        wait_for_leader(cluster, topic, partition, not_in=(down,))
        wait_until(lambda: down not in describe(cluster, topic)[partition].isr, 30,
                   message=f"broker {down} out of {topic}-{partition}'s ISR")
        java_programs.run("ClusterOpsCheck", "elect-unavailable", cluster.bootstrap, topic, str(partition))
    finally:
        node.start()
    wait_for_isr(cluster, topic, 3, timeout=REJOIN_TIMEOUT_S)
    wait_for_controller_everywhere(cluster)


def test_java_admin_describes_log_dirs(cluster, java_programs: JavaPrograms) -> None:  # noqa: F811
    """describeLogDirs/describeReplicaLogDirs name each broker's log.dirs and the replicas in it
    (ClusterOpsCheck logdirs). Moving a replica between two log dirs while it is written to is
    test_java_clients.py's test_java_admin_moves_a_replica_between_log_dirs (LogDirMoveCheck)."""
    wait_for_controller_everywhere(cluster)
    dirs = ",".join(f"{broker_id}={node.log_dir}" for broker_id, node in sorted(cluster.brokers.items()))
    java_programs.run("ClusterOpsCheck", "logdirs", cluster.bootstrap, unique("java-logdirs"), dirs)
