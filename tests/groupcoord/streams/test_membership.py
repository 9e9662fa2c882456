"""StreamsGroupHeartbeat processing on a manual clock: topology statuses, tasks spread and moved
only after revocation, errors that leave the group alone, leaving, static members, fencing by the
session and rebalance timeouts, and a randomized run that checks no active task is ever held by
two members."""
from __future__ import annotations

import random

from kafkapy.groupcoord.config import GroupCoordinatorConfig
from kafkapy.groupcoord.consumer.group import TopicMetadata
from kafkapy.groupcoord.consumer.topic_view import StaticTopicView
from kafkapy.groupcoord.streams.group import MemberState, StreamsGroup
from kafkapy.groupcoord.streams.membership import StreamsGroupMembership, StreamsHeartbeat
from kafkapy.groupcoord.streams.topology import Subtopology, TopicInfo, Topology
from kafkapy.protocol.errors import ErrorCode as E
from tests.groupcoord.fakes import ManualScheduler

TOPOLOGY = Topology(0, (Subtopology("0", ("in",), (), (TopicInfo("app-store-changelog"),), ("app-rep",), (), ()),
                        Subtopology("1", (), (), (), (), (TopicInfo("app-rep"),), ())))
ALL = {("0", p) for p in range(4)} | {("1", p) for p in range(4)}


class FakeManager:
    def __init__(self):
        self.groups: dict = {}
        self.written: list = []

    def write_records(self, group_id, records):
        self.written.extend(records)
        return E.NONE


class Harness:
    def __init__(self, topics=("in", "app-store-changelog", "app-rep"), **config):
        config.setdefault("group_streams_initial_rebalance_delay_ms", 0)
        config.setdefault("group_streams_assignment_interval_ms", 0)
        self.scheduler = ManualScheduler()
        self.view = StaticTopicView([TopicMetadata(None, name, 4) for name in topics])
        self.manager = FakeManager()
        self.membership = StreamsGroupMembership(GroupCoordinatorConfig(**config), self.manager,
                                                 self.scheduler.clock_ms, lambda group_id: None, self.view)
        self.membership.scheduler = self.scheduler

    @property
    def group(self) -> StreamsGroup:
        return self.manager.groups["g"]

    def heartbeat(self, member_id, epoch, active=None, **fields):
        request = StreamsHeartbeat("g", member_id, epoch, **fields)
        if epoch == 0:
            request.rebalance_timeout_ms = fields.get("rebalance_timeout_ms", 30_000)
            if "topology" not in fields:
                request.topology = TOPOLOGY
            request.process_id = fields.get("process_id", member_id)
            if active is None:
                request.active_tasks, request.standby_tasks, request.warmup_tasks = {}, {}, {}
        if active is not None:
            request.active_tasks, request.standby_tasks, request.warmup_tasks = active, {}, {}
        return self.membership.heartbeat(request)


class Client:
    """A well-behaved Kafka Streams member: revokes at once, reports what it owns."""

    def __init__(self, h: Harness, member_id: str, **fields):
        self.h, self.member_id, self.fields = h, member_id, fields
        self.epoch, self.owned, self.joined = 0, {}, False

    def beat(self):
        if not self.joined:
            result = self.h.heartbeat(self.member_id, 0, **self.fields)
        else:
            result = self.h.heartbeat(self.member_id, self.epoch, {s: sorted(p) for s, p in self.owned.items()})
        if result.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.epoch, self.owned, self.joined = 0, {}, False
            return result
        assert result.error == E.NONE, result
        self.joined, self.epoch = True, result.member_epoch
        if result.tasks is not None:
            self.owned = {s: set(p) for s, p in result.tasks.active.items()}
        return result

    def tasks(self) -> set:
        return {(s, p) for s, parts in self.owned.items() for p in parts}


def settle(clients, rounds=8):
    for _ in range(rounds):
        for c in clients:
            c.beat()


def assert_exclusive(clients):
    seen = {}
    for c in clients:
        for task in c.tasks():
            assert task not in seen, f"{task} held by {seen[task]} and {c.member_id}"
            seen[task] = c.member_id


def test_missing_source_topic_then_created():
    h = Harness(topics=())
    r = h.heartbeat("m1", 0)
    assert r.error == E.NONE and [code for code, _ in r.status] == [1]
    assert h.group.state.value == "NotReady"
    h.view.put(TopicMetadata(None, "in", 4))
    r = h.heartbeat("m1", r.member_epoch, {})
    # the internal topics are missing now: the coordinator asks for them with the decided counts
    assert [code for code, _ in r.status] == [3]
    assert {n: t.partitions for n, t in r.internal_topics_to_create.items()} == {"app-store-changelog": 4,
                                                                                 "app-rep": 4}
    h.view.put(TopicMetadata(None, "app-store-changelog", 4))
    h.view.put(TopicMetadata(None, "app-rep", 4))
    r = h.heartbeat("m1", r.member_epoch, {})
    assert not r.status and r.tasks is not None and r.tasks.count() == (8, 0, 0)
    assert h.group.state.value == "Stable"


def test_incorrectly_partitioned_internal_topic():
    h = Harness(topics=("in", "app-rep"))
    h.view.put(TopicMetadata(None, "app-store-changelog", 3))
    r = h.heartbeat("m1", 0)
    assert [code for code, _ in r.status] == [2]
    assert "app-store-changelog" in r.status[0][1]


def test_tasks_move_only_after_revocation():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    settle([a])
    assert a.tasks() == ALL
    b.beat()
    assert b.tasks() == set()            # everything is still a's
    b.beat()
    assert b.tasks() == set()
    a.beat()                             # a is told to give half back
    assert len(a.tasks()) == 4
    b.beat()
    assert b.tasks() == set()            # a has not said it gave them back yet
    a.beat()                             # it has now
    b.beat()
    assert len(b.tasks()) == 4 and a.tasks() | b.tasks() == ALL
    assert_exclusive([a, b])
    assert a.epoch == b.epoch == h.group.assignment_epoch


def test_bad_heartbeats_leave_the_group_alone():
    h = Harness()
    a = Client(h, "a")
    settle([a])
    written = len(h.manager.written)
    epoch = a.epoch
    assert h.heartbeat("a", epoch + 1, {}).error == E.FENCED_MEMBER_EPOCH
    assert h.heartbeat("a", epoch - 1, {}).error == E.FENCED_MEMBER_EPOCH
    assert h.heartbeat("x", epoch, {}).error == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("a", epoch, {"0": [7]}).error == E.INVALID_REQUEST
    assert h.heartbeat("a", epoch, {"9": [0]}).error == E.INVALID_REQUEST
    other = Topology(0, (Subtopology("0", ("other",)),))
    assert h.heartbeat("b", 0, topology=other).error == E.INVALID_REQUEST
    assert h.heartbeat("a", -3).error == E.INVALID_REQUEST
    regex = Topology(0, (Subtopology("0", (), ("in.*",)),))
    assert h.heartbeat("c", 0, topology=regex).error == E.INVALID_REQUEST
    assert h.heartbeat("a", epoch, topology=TOPOLOGY).error == E.INVALID_REQUEST
    assert len(h.manager.written) == written and set(h.group.members) == {"a"}
    assert a.beat().error == E.NONE and a.tasks() == ALL


def test_stale_topology_epoch_is_reported():
    h = Harness()
    newer = Topology(1, TOPOLOGY.subtopologies)
    r = h.heartbeat("a", 0, topology=newer)
    assert r.error == E.NONE
    r = h.heartbeat("b", 0, topology=TOPOLOGY)
    assert r.error == E.NONE and [code for code, _ in r.status] == [0]


def test_leave_and_session_timeout_free_the_tasks():
    h = Harness(group_streams_session_timeout_ms=10_000)
    a, b, c = Client(h, "a"), Client(h, "b"), Client(h, "c")
    settle([a, b, c])
    assert_exclusive([a, b, c])
    assert a.tasks() | b.tasks() | c.tasks() == ALL
    assert h.heartbeat("c", -1).error == E.NONE
    settle([a, b])
    assert a.tasks() | b.tasks() == ALL
    for _ in range(3):                   # b stops heartbeating
        h.scheduler.advance(4_000)
        a.beat()
    assert set(h.group.members) == {"a"}
    settle([a])
    assert a.tasks() == ALL


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    h = Harness()
    a, b = Client(h, "a", rebalance_timeout_ms=5_000), Client(h, "b")
    settle([a])
    b.beat()
    a.beat()                             # told to revoke, never acknowledges
    assert h.group.members["a"].state is MemberState.UNREVOKED_TASKS
    h.scheduler.advance(5_001)
    assert "a" not in h.group.members
    settle([b])
    assert b.tasks() == ALL


def test_static_member_rejoins_with_its_tasks():
    h = Harness()
    a, b = Client(h, "a", instance_id="i-a"), Client(h, "b", instance_id="i-b")
    settle([a, b])
    held = a.tasks()
    assert h.heartbeat("a", -2, instance_id="i-a").error == E.NONE
    assert "a" in h.group.members        # kept until its session expires
    a2 = Client(h, "a2", instance_id="i-a")
    a2.beat()
    assert "a" not in h.group.members and a2.tasks() == held
    # a second process with the same instance id while a2 is there
    assert h.heartbeat("a3", 0, instance_id="i-a").error == E.UNRELEASED_INSTANCE_ID


def test_random_joins_and_leaves_never_share_an_active_task():
    rng = random.Random(7)
    h = Harness()
    clients = [Client(h, f"m{i}") for i in range(5)]
    active = []
    for _ in range(300):
        c = rng.choice(clients)
        if c in active and rng.random() < 0.1:
            h.heartbeat(c.member_id, -1)
            c.epoch, c.owned, c.joined = 0, {}, False
            active.remove(c)
        else:
            c.beat()
            if c not in active:
                active.append(c)
        assert_exclusive(active)
    settle(active)
    assert set().union(*(c.tasks() for c in active)) == ALL


def test_assignment_interval_delays_the_next_target():
    """Kafka 4.4: a new target at most every streams.assignment.interval.ms; meanwhile the members
    keep theirs and hear ASSIGNMENT_DELAYED; the first heartbeat after the interval computes it."""
    h = Harness(group_streams_assignment_interval_ms=1000)
    a, b = Client(h, "a"), Client(h, "b")
    settle([a])
    assert a.tasks() == ALL
    r = b.beat()
    assert [code for code, _ in r.status] == [5] and b.tasks() == set()
    assert h.group.state.value == "Assigning"
    h.scheduler.advance(1000)
    settle([a, b])
    assert len(a.tasks()) == len(b.tasks()) == 4


def test_assignment_timestamp_round_trip():
    from kafkapy.groupcoord.streams import records as rec

    group = StreamsGroup("g")
    group.group_epoch = group.assignment_epoch = 3
    group.assignment_timestamp = 1_700_000_000_123
    replay = rec.StreamsGroupReplay()
    for key, value in (rec.metadata_record(group), rec.target_epoch_record(group)):
        replay.add(key, value)
    assert rec.restore_streams_group(replay.groups["g"], {}, 0).assignment_timestamp == 1_700_000_000_123


class ReplicaClient(Client):
    """A member that also reports its standby and warm-up tasks."""

    def beat(self):
        if not self.joined:
            return super().beat()
        request = StreamsHeartbeat("g", self.member_id, self.epoch,
                                   active_tasks={s: sorted(p) for s, p in self.owned.items()},
                                   standby_tasks={s: sorted(p) for s, p in self.standby.items()},
                                   warmup_tasks={})
        result = self.h.membership.heartbeat(request)
        if result.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.epoch, self.owned, self.standby, self.joined = 0, {}, {}, False
            return result
        assert result.error == E.NONE, result
        self.epoch = result.member_epoch
        if result.tasks is not None:
            self.owned = {s: set(p) for s, p in result.tasks.active.items()}
            self.standby = {s: set(p) for s, p in result.tasks.standby.items()}
        return result


def test_standbys_never_share_a_process_with_another_members_copy():
    """num.standby.replicas=1, two processes with two members each, members coming and going: an
    active task is held by one member; no two members of one process hold the same task."""
    rng = random.Random(11)
    h = Harness(group_streams_num_standby_replicas=1)
    clients = [ReplicaClient(h, f"m{i}", process_id=f"p{i % 2}") for i in range(4)]
    for c in clients:
        c.standby = {}
    for _ in range(200):
        c = rng.choice(clients)
        if c.joined and rng.random() < 0.05:
            h.heartbeat(c.member_id, -1)
            c.epoch, c.owned, c.standby, c.joined = 0, {}, {}, False
        else:
            c.beat()
        live = [x for x in clients if x.joined]
        assert_exclusive(live)
        for process in ("p0", "p1"):
            seen: dict = {}
            for x in live:
                if x.fields["process_id"] != process:
                    continue
                for task in x.tasks() | {(s, p) for s, parts in x.standby.items() for p in parts}:
                    assert task not in seen or seen[task] == x.member_id, (task, seen[task], x.member_id)
                    seen[task] = x.member_id
    for _ in range(10):
        for c in clients:
            c.beat()
    live = [x for x in clients if x.joined]
    assert set().union(*(c.tasks() for c in live)) == ALL
    # every stateful task (subtopology 0 has the store) has a standby on the other process
    if {x.fields["process_id"] for x in live} == {"p0", "p1"}:
        standbys = {(s, p) for x in live for s, parts in x.standby.items() for p in parts}
        assert {("0", p) for p in range(4)} <= standbys
