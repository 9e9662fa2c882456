"""AlterPartitionReassignments v1's AllowReplicationFactorChange (KIP-860) on a two-broker cluster.

Kafka 4.4's controller refuses, with AllowReplicationFactorChange false, a target whose size differs from the
partition's replication factor (INVALID_REPLICATION_FACTOR, "The replication factor is changed from 1 to 2"),
after the target's own checks (unknown brokers, duplicates); a move that keeps the factor goes through, and
v0 or true allow the change. The single-broker wire behaviour is compared with Kafka 4.4 in
conformance/differential/test_newest_versions.py; one broker cannot reach this check (a second replica is an
unknown broker there), so the cluster case runs against kafkapy's ZooKeeper-mode controller (in-memory
ZooKeeper, two brokers in this process).
"""
from __future__ import annotations

import time

import pytest

from conformance.differential.wire_versions import WireClient
from kafkapy.controller.reassignment import ReplicaAssignment, replication_factor_change
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import AlterPartitionReassignmentsRequest
from kafkapy.testing import KafkaCluster

pytestmark = pytest.mark.timeout(120)

TOPIC = "rf-guard"


def test_factor_of_a_settled_partition() -> None:
    assert replication_factor_change([1, 2], ReplicaAssignment((1, 2))) is None
    assert replication_factor_change([3], ReplicaAssignment((1,))) is None
    assert replication_factor_change([1, 2], ReplicaAssignment((1,))) == (
        ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 1 to 2")


def test_factor_during_a_reassignment_is_the_one_it_heads_for() -> None:
    # moving {1, 2} to {2, 3}: replicas 2, 3, 1 with 3 adding and 1 removing -> factor 2
    moving = ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,))
    assert replication_factor_change([4, 5], moving) is None
    assert replication_factor_change([4], moving) == (
        ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 1")
    # growing {1} to {1, 2, 3}: factor 3
    growing = ReplicaAssignment((1, 2, 3), adding=(2, 3))
    assert replication_factor_change([1, 2], growing) is not None
    assert replication_factor_change([3, 2, 1], growing) is None


def _reassign(client: WireClient, version: int, replicas: list[int] | None, allow: bool = True) -> tuple[int, str | None]:
    request = AlterPartitionReassignmentsRequest(timeout_ms=10000, allow_replication_factor_change=allow, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name=TOPIC, partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=replicas)])])
    answer = client.exchange(request, version).decoded
    assert answer is not None and answer["error_code"] == 0, answer
    if version >= 1:
        assert answer["allow_replication_factor_change"] is allow
    partition = answer["responses"][0]["partitions"][0]
    return partition["error_code"], partition["error_message"]


def _replicas(cluster: KafkaCluster) -> tuple[int, ...]:
    return cluster.describe(TOPIC)[0].replicas


def _wait_replicas(cluster: KafkaCluster, expected: tuple[int, ...], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while _replicas(cluster) != expected:
        assert time.monotonic() < deadline, f"replicas {_replicas(cluster)}, expected {expected}"
        time.sleep(0.1)


def test_two_brokers_refuse_a_factor_change_only_when_asked() -> None:
    # brokers in child processes: in-process ones timed out waiting for each other after tests/broker
    # had run in the same pytest process (not diagnosed; each passes alone)
    with KafkaCluster(brokers=2, isolation="process") as cluster:
        cluster.create_topic(TOPIC, 1, replication_factor=1)
        (first,) = _replicas(cluster)
        other = 3 - first
        client = WireClient(cluster.broker(cluster.controller()).bootstrap_servers, timeout_s=15)
        try:
            assert _reassign(client, 1, [first, other], allow=False) == (
                ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 1 to 2")
            # the target's own checks come first
            assert _reassign(client, 1, [first, 7], allow=False)[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
            assert _replicas(cluster) == (first,)
            # same factor: a move is allowed
            assert _reassign(client, 1, [other], allow=False) == (0, None)
            _wait_replicas(cluster, (other,))
            # true (v1's default) and v0 allow the change
            assert _reassign(client, 1, [other, first], allow=True) == (0, None)
            _wait_replicas(cluster, (other, first))
            assert _reassign(client, 0, [first]) == (0, None)
            _wait_replicas(cluster, (first,))
        finally:
            client.close()
