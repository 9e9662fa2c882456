"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments, AlterReplicaLogDirs handlers."""
from __future__ import annotations

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterReplicaLogDirsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from tests.broker.inprocess import InProcessBroker

NOT_NEEDED = ErrorCode.ELECTION_NOT_NEEDED
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path / "data")
    b.create_topic("t", 3)
    b.create_topic("u", 1)
    yield b
    b.close()


def elect(broker, topics, version, election_type=0):
    wanted = None if topics is None else [ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps)
                                           for t, ps in topics.items()]
    response = broker.call(ElectLeadersRequest(election_type=election_type, topic_partitions=wanted,
                                               timeout_ms=1000), version)
    return response, {r.topic: [(p.partition_id, p.error_code) for p in r.partition_result]
                      for r in response.replica_election_results}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_on_one_broker(broker, version):
    response, results = elect(broker, {"t": [0, 1, 2, 9], "nope": [0]}, version)
    assert response.error_code == 0
    assert results == {"t": [(0, NOT_NEEDED), (1, NOT_NEEDED), (2, NOT_NEEDED), (9, UNKNOWN)], "nope": [(0, UNKNOWN)]}
    messages = [p.error_message for r in response.replica_election_results for p in r.partition_result]
    assert messages == ["Leader election not needed for topic partition."] * 3 + \
        ["No such partition as t-9", "No such topic as nope"]


@pytest.mark.parametrize("election_type", [0, 1])
def test_elect_leaders_for_all_partitions_leaves_out_those_not_needing_one(broker, election_type):
    _, results = elect(broker, None, 2, election_type)
    assert results == {"t": [], "u": []}


def test_elect_leaders_unknown_election_type(broker):
    response, results = elect(broker, {"t": [0]}, 2, election_type=5)
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert results == {"t": [(0, ErrorCode.INVALID_REQUEST)]}


def test_elect_leaders_preferred_election_after_a_leader_change(broker):
    store = broker.broker.metadata
    store.register_broker(1, "127.0.0.1", 9999)      # a second live broker, as far as the store knows
    broker.broker.partitions.create_topic("v", assignments={0: [1, 0]})
    store.set_partition_leader_and_isr("v", 0, 0, [0, 1])  # leadership moved off the preferred replica
    response, results = elect(broker, {"v": [0]}, 2)
    assert results == {"v": [(0, 0)]} and response.replica_election_results[0].partition_result[0].error_message \
        is None
    p = store.get_topic("v").partitions[0]
    assert (p.leader, p.leader_epoch) == (1, 2)
    _, results = elect(broker, None, 2)
    assert results == {"t": [], "u": [], "v": []}


def reassign(broker, targets):
    topics = {}
    for (topic, partition), replicas in targets.items():
        topics.setdefault(topic, []).append(AlterPartitionReassignmentsRequest.ReassignablePartition(
            partition_index=partition, replicas=replicas))
    response = broker.call(AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps) for t, ps in topics.items()]), 0)
    assert (response.error_code, response.error_message) == (0, None)
    return {(t.name, p.partition_index): p.error_code for t in response.responses for p in t.partitions}


def list_reassignments(broker, topics=None):
    wanted = None if topics is None else [
        ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
        for t, ps in topics.items()]
    response = broker.call(ListPartitionReassignmentsRequest(timeout_ms=1000, topics=wanted), 0)
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in response.topics for p in t.partitions}


def test_alter_partition_reassignments_on_one_broker(broker):
    assert reassign(broker, {("t", 0): [0], ("t", 1): [7], ("t", 2): None, ("t", 5): [0], ("nope", 0): [0],
                             ("u", 0): [0, 0]}) == {
        ("t", 0): 0, ("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT, ("t", 2): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        ("t", 5): UNKNOWN, ("nope", 0): UNKNOWN, ("u", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert list_reassignments(broker) == {}
    assert list_reassignments(broker, {"t": [0, 1], "nope": [0]}) == {}


def test_ongoing_reassignment_is_listed_until_cancelled(broker):
    store = broker.broker.metadata
    store.register_broker(1, "127.0.0.1", 9999)
    store.unregister_broker(1)                        # registered but not live: can never catch up
    assert reassign(broker, {("t", 1): [1]}) == {("t", 1): 0}
    assert list_reassignments(broker) == {("t", 1): ([1, 0], [1], [0])}
    assert list_reassignments(broker, {"t": [0, 1, 2]}) == {("t", 1): ([1, 0], [1], [0])}
    assert list_reassignments(broker, {"u": [0]}) == {}
    assert reassign(broker, {("t", 1): None}) == {("t", 1): 0}
    assert list_reassignments(broker) == {}
    assert store.get_topic("t").partitions[1].replicas == (0,)


def alter_log_dirs(broker, moves, version=2):
    dirs = {}
    for (topic, partition), path in moves.items():
        dirs.setdefault(path, {}).setdefault(topic, []).append(partition)
    request = AlterReplicaLogDirsRequest(dirs=[
        AlterReplicaLogDirsRequest.AlterReplicaLogDir(path=path, topics=[
            AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()])
        for path, topics in dirs.items()])
    response = broker.call(request, version)
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs_on_one_log_dir(broker, tmp_path, version):
    data = str(tmp_path / "data")
    long_name = "x" * 249
    assert alter_log_dirs(broker, {("t", 0): data, ("t", 9): data, ("nope", 0): data, ("u", 0): "/elsewhere",
                                   (long_name, 0): data}, version) == {
        ("t", 0): 0, ("t", 9): ErrorCode.REPLICA_NOT_AVAILABLE, ("nope", 0): ErrorCode.REPLICA_NOT_AVAILABLE,
        ("u", 0): ErrorCode.LOG_DIR_NOT_FOUND, (long_name, 0): ErrorCode.INVALID_TOPIC_EXCEPTION}


def test_alter_replica_log_dirs_accepts_a_move_to_another_log_dir(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    b = InProcessBroker(first, **{"log.dirs": f"{first},{second}"})
    try:
        b.create_topic("t", 2)   # one partition per log dir
        homes = {p: str(b.broker.logs.get("t", p).dir.parent) for p in (0, 1)}
        other = {p: str(second) if homes[p] == str(first) else str(first) for p in (0, 1)}
        assert alter_log_dirs(b, {("t", 0): homes[0], ("t", 1): other[1]}) == {("t", 0): 0, ("t", 1): 0}
        # (the move itself runs in the background: tests/log/test_dir_move.py, conformance/test_log_dirs.py)
        assert str(b.broker.logs.get("t", 0).dir.parent) == homes[0]
    finally:
        b.close()
