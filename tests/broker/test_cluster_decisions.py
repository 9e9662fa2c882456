"""The controller's decisions behind the membership (broker.cluster) in ZooKeeper mode: ClusterMember
hands ElectLeaders and reassignments to its controller object and groups the outcomes by topic, the
shape ZooKeeper-mode Kafka answers (the single-node shape is pinned by test_replicas.py)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafkapy.broker.cluster_member import ClusterMember
from kafkapy.protocol.errors import ErrorCode

NONE, NOT_NEEDED = ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED


class FakeController:
    def __init__(self, active: bool = True):
        self.active = active
        self.asked = None

    async def elect_leaders(self, keys, unclean):
        self.asked = keys
        return {key: (NOT_NEEDED, "not needed") if key[1] == 1 else (NONE, None) for key in keys}

    async def alter_partition_reassignments(self, targets, allow_replication_factor_change=True):
        self.asked = targets
        return None if not self.active else {key: (NONE, None) for key in targets}

    async def list_partition_reassignments(self, keys):
        self.asked = keys
        if not self.active:
            return None
        moving = SimpleNamespace(replicas=(2, 1), adding=(2,), removing=(1,))
        return {("b", 0): moving, ("a", 1): moving, ("a", 0): moving}


def member(active: bool = True) -> ClusterMember:
    m = object.__new__(ClusterMember)  # no ZooKeeper: only the decision methods are used
    leader = SimpleNamespace(leader=1, replicas=[1, 2])
    m.metadata = SimpleNamespace(list_topics=lambda: [SimpleNamespace(name="b", partition_count=2)],
                                 cache=SimpleNamespace(partition=lambda topic, partition: leader))
    m.controller = FakeController(active)
    return m


def test_is_active_controller_follows_the_controller_object():
    assert member(True).is_active_controller() and not member(False).is_active_controller()


def test_elect_leaders_groups_by_topic_and_leaves_out_not_needed_only_for_every_partition():
    m = member()
    everything = asyncio.run(m.elect_leaders(None, False, 1000))
    assert m.controller.asked == [("b", 0), ("b", 1)]
    assert everything == [("b", [(0, NONE, None)])]
    asked = asyncio.run(m.elect_leaders([("b", [1]), ("c", [0]), ("b", [0])], False, 1000))
    assert asked == [("b", [(1, NOT_NEEDED, "not needed"), (0, NONE, None)]), ("c", [(0, NONE, None)])]


def test_reassignments_answer_none_when_not_the_active_controller():
    m = member()
    targets = [("b", [(0, [2, 1]), (1, None)]), ("a", [(0, [1])])]
    assert asyncio.run(m.alter_partition_reassignments(targets)) == [
        ("b", [(0, NONE, None), (1, NONE, None)]), ("a", [(0, NONE, None)])]
    assert m.controller.asked == {("b", 0): [2, 1], ("b", 1): None, ("a", 0): [1]}
    assert asyncio.run(member(False).alter_partition_reassignments(targets)) is None
    assert asyncio.run(member(False).list_partition_reassignments(None)) is None


def test_list_partition_reassignments_sorted_by_topic_and_partition():
    m = member()
    assert asyncio.run(m.list_partition_reassignments([("b", [0]), ("a", [1, 0])])) == [
        ("a", [(0, [2, 1], [2], [1]), (1, [2, 1], [2], [1])]), ("b", [(0, [2, 1], [2], [1])])]
    assert m.controller.asked == [("b", 0), ("a", 1), ("a", 0)]
