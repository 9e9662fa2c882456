"""ConsumerGroupHeartbeat processing on a manual clock: joining, revocation before reassignment,
errors that leave the group alone, leaving, static members, fencing by timers, topic changes,
regex subscriptions, the takeover of an empty classic group, and a randomized run that checks
that no partition is ever owned by two members."""
from __future__ import annotations

import random
import uuid

import pytest

from kafkapy.groupcoord.config import GroupCoordinatorConfig
from kafkapy.groupcoord.consumer.group import ConsumerGroup, ConsumerGroupState, MemberState, TopicMetadata
from kafkapy.groupcoord.consumer.membership import (
    ConsumerGroupMembership,
    HeartbeatRequest,
    StaticTopicView,
)
from kafkapy.groupcoord.group import GroupMetadata, GroupState, OffsetAndMetadata
from kafkapy.protocol.errors import ErrorCode as E
from tests.groupcoord.fakes import ManualScheduler

T = uuid.UUID(int=0xA1)
U = uuid.UUID(int=0xB2)
REBALANCE_TIMEOUT = 30_000


class FakeManager:
    """The parts of GroupMetadataManager the consumer membership uses."""

    def __init__(self):
        self.groups: dict = {}
        self.written: list = []

    def write_records(self, group_id, records):
        self.written.extend(records)
        return E.NONE


class Harness:
    def __init__(self, topics=(TopicMetadata(T, "t", 6),), **config):
        self.scheduler = ManualScheduler()
        self.view = StaticTopicView(topics)
        self.manager = FakeManager()
        self.membership = ConsumerGroupMembership(GroupCoordinatorConfig(**config), self.manager,
                                                  self.scheduler.clock_ms, lambda group_id: None, self.view)
        self.membership.scheduler = self.scheduler

    @property
    def group(self) -> ConsumerGroup:
        return self.manager.groups["g"]

    def heartbeat(self, member_id, epoch, owned=None, **fields):
        request = HeartbeatRequest("g", member_id, epoch, **fields)
        if epoch == 0:
            if request.rebalance_timeout_ms == -1 and "rebalance_timeout_ms" not in fields:
                request.rebalance_timeout_ms = REBALANCE_TIMEOUT
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None \
                    and "subscribed_topic_names" not in fields:
                request.subscribed_topic_names = ["t"]
            if owned is None and "topic_partitions" not in fields:
                owned = []
        if "topic_partitions" not in fields:
            request.topic_partitions = owned
        return self.membership.heartbeat(request)


class Client:
    """A well-behaved consumer: gives back revoked partitions at once, reports what it owns."""

    def __init__(self, harness: Harness, member_id: str, **join_fields):
        self.h, self.member_id, self.join_fields = harness, member_id, join_fields
        self.epoch = 0
        self.owned: dict[uuid.UUID, set[int]] = {}
        self.joined = False

    def owned_list(self):
        return [(t, sorted(p)) for t, p in sorted(self.owned.items(), key=lambda i: str(i[0])) if p]

    def beat(self):
        fields = self.join_fields if not self.joined else {}
        result = self.h.heartbeat(self.member_id, self.epoch, self.owned_list() if self.joined else [], **fields)
        if result.error == E.FENCED_MEMBER_EPOCH or result.error == E.UNKNOWN_MEMBER_ID:
            self.owned, self.epoch, self.joined = {}, 0, False
            return result
        assert result.error == E.NONE, result
        self.joined = True
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = {t: set(p) for t, p in result.assignment.items()}
        return result

    def leave(self):
        result = self.h.heartbeat(self.member_id, -1)
        self.owned, self.joined = {}, False
        return result


def assert_exclusive(clients) -> None:
    seen: dict[tuple, str] = {}
    for c in clients:
        for t, ps in c.owned.items():
            for p in ps:
                assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {c.member_id}"
                seen[(t, p)] = c.member_id


def settle(clients, rounds=10) -> None:
    for _ in range(rounds):
        for c in clients:
            c.beat()
            assert_exclusive(clients)


def partitions(client) -> set[int]:
    return set().union(*client.owned.values()) if client.owned else set()


# -- joining ------------------------------------------------------------------------------
def test_first_member_gets_every_partition_and_a_quiet_heartbeat_writes_nothing():
    h = Harness()
    result = h.heartbeat("a", 0)
    assert result.error == E.NONE and result.member_epoch == 1 and result.heartbeat_interval_ms == 5000
    assert result.assignment == {T: frozenset(range(6))}
    assert h.group.state is ConsumerGroupState.STABLE and h.group.group_epoch == 1
    written = len(h.manager.written)
    again = h.heartbeat("a", 1, [(T, list(range(6)))])
    assert again.error == E.NONE and again.assignment is None and again.member_epoch == 1
    assert len(h.manager.written) == written  # nothing changed, nothing written


def test_v0_member_id_is_generated_by_the_coordinator():
    h = Harness()
    result = h.heartbeat("", 0, api_version=0)
    assert result.error == E.NONE and len(result.member_id) == 22
    assert result.member_id in h.group.members


def test_second_member_waits_for_revocation():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    a.beat()
    assert partitions(a) == set(range(6))
    b.beat()
    assert partitions(b) == set()  # nothing is free yet
    assert h.group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    a.beat()  # told to give three back, epoch unchanged
    assert len(partitions(a)) == 3 and a.epoch == 1
    assert h.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert h.group.state is ConsumerGroupState.RECONCILING
    b.beat()  # a still reports them: b must wait
    assert partitions(b) == set()
    a.beat()  # a's heartbeat no longer lists them: released
    assert a.epoch == 2
    b.beat()
    assert len(partitions(b)) == 3 and partitions(a).isdisjoint(partitions(b))
    assert h.group.state is ConsumerGroupState.STABLE


def test_range_assignor_when_the_member_asks_for_it():
    h = Harness(topics=(TopicMetadata(T, "t", 4),))
    a, b = Client(h, "a", server_assignor="range"), Client(h, "b", server_assignor="range")
    settle([a, b])
    assert sorted([sorted(partitions(a)), sorted(partitions(b))]) == [[0, 1], [2, 3]]


def test_rack_aware_assignment_gets_member_and_replica_racks():
    racks = {p: frozenset({"r1" if p < 3 else "r2"}) for p in range(6)}
    h = Harness(topics=(TopicMetadata(T, "t", 6, racks),))
    a, b = Client(h, "a", rack_id="r1"), Client(h, "b", rack_id="r2")
    settle([a, b])
    assert partitions(a) == {0, 1, 2} and partitions(b) == {3, 4, 5}


# -- bad requests -------------------------------------------------------------------------
@pytest.mark.parametrize("fields, epoch, member_id, code", [
    (dict(group_id=""), 0, "x", E.INVALID_REQUEST),
    (dict(api_version=1), 0, "", E.INVALID_REQUEST),
    (dict(rebalance_timeout_ms=-1), 0, "x", E.INVALID_REQUEST),
    (dict(subscribed_topic_names=[]), 0, "x", E.INVALID_REQUEST),
    (dict(topic_partitions=[(T, [0])]), 0, "x", E.INVALID_REQUEST),
    (dict(topic_partitions=None), 0, "x", E.INVALID_REQUEST),
    (dict(), -3, "x", E.INVALID_REQUEST),
    (dict(instance_id=""), 0, "x", E.INVALID_REQUEST),
    (dict(rack_id=""), 0, "x", E.INVALID_REQUEST),
    (dict(), -2, "x", E.INVALID_REQUEST),
    (dict(server_assignor="sticky"), 0, "x", E.UNSUPPORTED_ASSIGNOR),
    (dict(subscribed_topic_regex="a(b"), 0, "x", E.INVALID_REGULAR_EXPRESSION),
    (dict(), 7, "a", E.FENCED_MEMBER_EPOCH),
    (dict(), 1, "nobody", E.UNKNOWN_MEMBER_ID),
])
def test_bad_heartbeats_get_kafkas_errors_and_leave_the_group_alone(fields, epoch, member_id, code):
    h = Harness()
    a = Client(h, "a")
    a.beat()
    a.beat()
    before = (h.group.group_epoch, h.group.assignment_epoch, dict(h.group.owners), len(h.manager.written))
    group_id = fields.pop("group_id", "g")
    request = HeartbeatRequest(group_id, member_id, epoch, rebalance_timeout_ms=REBALANCE_TIMEOUT,
                               subscribed_topic_names=["t"], topic_partitions=[])
    for name, value in fields.items():
        setattr(request, name, value)
    result = h.membership.heartbeat(request)
    assert result.error == code and result.message
    assert (h.group.group_epoch, h.group.assignment_epoch, dict(h.group.owners), len(h.manager.written)) == before
    assert a.beat().error == E.NONE and partitions(a) == set(range(6))


def test_heartbeat_or_leave_for_a_group_that_does_not_exist():
    h = Harness()
    assert h.heartbeat("a", 3, []).error == E.GROUP_ID_NOT_FOUND
    assert h.heartbeat("a", -1).error == E.GROUP_ID_NOT_FOUND
    assert "g" not in h.manager.groups


def test_group_max_size():
    h = Harness(group_consumer_max_size=1)
    assert h.heartbeat("a", 0).error == E.NONE
    assert h.heartbeat("b", 0).error == E.GROUP_MAX_SIZE_REACHED
    assert set(h.group.members) == {"a"}


def test_previous_epoch_is_accepted_when_the_response_was_lost():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    a.beat()
    b.beat()
    a.beat()
    a.beat()  # a moves to epoch 2
    assert a.epoch == 2
    owned = a.owned_list()
    # the response with epoch 2 was lost: a heartbeats with epoch 1 and a subset of its assignment
    assert h.heartbeat("a", 1, owned).error == E.NONE
    # but not with partitions it no longer has
    assert h.heartbeat("a", 1, [(T, [0, 1, 2, 3, 4, 5])]).error == E.FENCED_MEMBER_EPOCH


# -- leaving and fencing ------------------------------------------------------------------
def test_leaving_member_frees_its_partitions():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    settle([a, b])
    epoch = h.group.group_epoch
    result = b.leave()
    assert result.error == E.NONE and result.member_epoch == -1
    assert "b" not in h.group.members and h.group.group_epoch == epoch + 1
    settle([a])
    assert partitions(a) == set(range(6))


def test_session_timeout_fences_a_silent_member():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    settle([a, b])
    for _ in range(10):  # a keeps heartbeating, b goes silent
        h.scheduler.advance(5000)
        a.beat()
    assert "b" not in h.group.members
    assert partitions(a) == set(range(6))
    assert b.beat().error == E.UNKNOWN_MEMBER_ID


def test_member_that_does_not_revoke_in_time_is_fenced():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    a.beat()
    b.beat()
    h.heartbeat("a", 1, a.owned_list())  # a is told to revoke... and never acknowledges
    assert h.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.scheduler.advance(REBALANCE_TIMEOUT + 1)
    assert "a" not in h.group.members
    settle([b])
    assert partitions(b) == set(range(6))


def test_fenced_member_rejoins_with_epoch_zero():
    h = Harness()
    a = Client(h, "a")
    a.beat()
    assert h.heartbeat("a", 5, a.owned_list()).error == E.FENCED_MEMBER_EPOCH
    result = h.heartbeat("a", 0, [])  # same member id, epoch 0: starts over
    assert result.error == E.NONE and result.assignment == {T: frozenset(range(6))}


# -- static membership --------------------------------------------------------------------
def test_static_member_leaves_temporarily_and_is_replaced():
    h = Harness()
    a, b = Client(h, "a", instance_id="i-a"), Client(h, "b")
    settle([a, b])
    mine = partitions(a)
    epoch = h.group.group_epoch
    result = h.heartbeat("a", -2, instance_id="i-a")
    assert result.error == E.NONE and result.member_epoch == -2
    assert h.group.members["a"].member_epoch == -2 and h.group.group_epoch == epoch  # kept, no rebalance
    a2 = Client(h, "a2", instance_id="i-a")
    a2.beat()
    assert partitions(a2) == mine and "a" not in h.group.members and h.group.group_epoch == epoch
    settle([a2, b])
    assert partitions(a2) == mine


def test_static_member_coming_back_under_its_own_id_keeps_its_partitions():
    h = Harness()
    a, b = Client(h, "a", instance_id="i-a"), Client(h, "b")
    settle([a, b])
    mine = partitions(a)
    h.heartbeat("a", -2, instance_id="i-a")
    again = Client(h, "a", instance_id="i-a")
    again.beat()
    assert partitions(again) == mine and h.group.members["a"].member_epoch == h.group.group_epoch


def test_instance_id_in_use_is_unreleased():
    h = Harness()
    Client(h, "a", instance_id="i").beat()
    assert h.heartbeat("x", 0, instance_id="i").error == E.UNRELEASED_INSTANCE_ID
    assert h.heartbeat("x", 1, instance_id="i").error == E.FENCED_INSTANCE_ID
    assert h.heartbeat("x", 1, instance_id="nope").error == E.UNKNOWN_MEMBER_ID


def test_static_member_that_left_expires_with_its_session():
    h = Harness()
    a, b = Client(h, "a", instance_id="i-a"), Client(h, "b")
    settle([a, b])
    h.heartbeat("a", -2, instance_id="i-a")
    for _ in range(10):
        h.scheduler.advance(5000)
        b.beat()
    assert "a" not in h.group.members and partitions(b) == set(range(6))


# -- topics -------------------------------------------------------------------------------
def test_new_partitions_and_new_topics_start_a_new_epoch():
    h = Harness()
    a = Client(h, "a", subscribed_topic_names=["t", "u"])
    a.beat()
    assert partitions(a) == set(range(6))
    h.view.put(TopicMetadata(T, "t", 8))
    h.view.put(TopicMetadata(U, "u", 2))
    a.beat()
    a.beat()
    assert a.owned == {T: set(range(8)), U: {0, 1}} and h.group.group_epoch == 2
    h.view.delete("u")
    a.beat()
    assert a.owned == {T: set(range(8))}


def test_topic_recreated_under_a_new_id_moves_the_assignment():
    h = Harness()
    a, b = Client(h, "a"), Client(h, "b")
    settle([a, b])
    new_id = uuid.UUID(int=0xC3)
    h.view.delete("t")
    h.view.put(TopicMetadata(new_id, "t", 4))
    settle([a, b])
    assert set(a.owned) | set(b.owned) == {new_id}
    assert partitions(a) | partitions(b) == {0, 1, 2, 3} and not partitions(a) & partitions(b)
    assert all(t == new_id for t, _ in h.group.owners)


def test_regex_subscription_follows_topic_creation():
    h = Harness(topics=(TopicMetadata(T, "orders-eu", 2),))
    a = Client(h, "a", subscribed_topic_regex="orders-.*")
    a.beat()
    assert a.owned == {T: {0, 1}}
    h.view.put(TopicMetadata(U, "orders-us", 1))
    a.beat()
    assert a.owned == {T: {0, 1}, U: {0}}
    assert h.group.resolved_regexes == {"orders-.*": frozenset({"orders-eu", "orders-us"})}


def test_unknown_topic_subscription_is_stable_with_nothing():
    h = Harness()
    result = h.heartbeat("a", 0, subscribed_topic_names=["missing"])
    assert result.error == E.NONE and result.assignment == {}
    assert h.group.state is ConsumerGroupState.STABLE


# -- classic groups -----------------------------------------------------------------------
def test_empty_classic_group_is_taken_over_keeping_its_offsets():
    h = Harness()
    classic = GroupMetadata("g", GroupState.EMPTY, 0)
    classic.offsets[("t", 0)] = OffsetAndMetadata(42)
    h.manager.groups["g"] = classic
    result = h.heartbeat("a", 0)
    assert result.error == E.NONE
    assert isinstance(h.group, ConsumerGroup) and h.group.offsets[("t", 0)].offset == 42
    assert h.manager.written[0][1] is None  # the classic group's tombstone comes first


def test_classic_group_with_members_is_not_a_consumer_group():
    h = Harness()
    h.membership.upgrade_classic_group = None
    classic = GroupMetadata("g", GroupState.STABLE, 0)
    classic.members["m"] = object()
    h.manager.groups["g"] = classic
    assert h.heartbeat("a", 0).error == E.GROUP_ID_NOT_FOUND
    assert h.manager.groups["g"] is classic


# -- a randomized run ---------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_random_joins_leaves_and_silences_never_share_a_partition(seed):
    rng = random.Random(seed)
    h = Harness(topics=(TopicMetadata(T, "t", 12), TopicMetadata(U, "u", 5)))
    clients = [Client(h, f"m{i}", subscribed_topic_names=rng.choice([["t"], ["t", "u"], ["u"]]),
                      server_assignor=rng.choice([None, "uniform", "range"]) if seed % 2 else None)
               for i in range(6)]
    active: set[int] = set()
    for _ in range(300):
        i = rng.randrange(len(clients))
        c = clients[i]
        roll = rng.random()
        if roll < 0.08 and c.joined:
            c.leave()
            active.discard(i)
        elif roll < 0.12:
            h.scheduler.advance(rng.choice([1000, 5000, 20000]))
            for j in list(active):
                if j not in h.group.members.keys() and clients[j].member_id not in h.group.members:
                    clients[j].owned, clients[j].joined, clients[j].epoch = {}, False, 0
                    active.discard(j)
        else:
            c.beat()
            if c.joined:
                active.add(i)
        assert_exclusive(clients)
        group = h.manager.groups.get("g")
        if group is not None:
            for (t, p), owner in group.owners.items():
                m = group.members[owner]
                assert p in m.assigned.get(t, ()) or p in m.pending_revocation.get(t, ())
    live = [c for c in clients if c.joined]
    settle(live, rounds=6)
    group = h.group
    assert group.state is ConsumerGroupState.STABLE
    wanted = set()
    for c in live:
        member = group.members[c.member_id]
        for name in member.subscribed_topic_names:
            wanted |= {({"t": T, "u": U}[name], p) for p in range({"t": 12, "u": 5}[name])}
    owned = {(t, p) for c in live for t, ps in c.owned.items() for p in ps}
    assert owned == wanted


# -- through the coordinator: unload, reload ------------------------------------------------
def test_coordinator_move_keeps_the_group_and_restarts_its_sessions():
    from tests.groupcoord.harness import Harness as CoordinatorHarness

    h = CoordinatorHarness()
    h.coord.consumer.topics = StaticTopicView([TopicMetadata(T, "t", 4)])
    joined = h.coord.consumer_group_heartbeat(HeartbeatRequest(
        "g", "a", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["t"], topic_partitions=[]))
    assert joined.error == E.NONE and joined.assignment == {T: frozenset(range(4))}
    partition = h.coord.partition_for("g")
    session = h.coord.manager.groups["g"].members["a"].session_timer
    h.coord.on_resigned(partition)  # another broker leads the partition now: timers stop
    assert "g" not in h.coord.manager.groups and session.cancelled
    assert h.coord.consumer_group_heartbeat(HeartbeatRequest("g", "a", 1, topic_partitions=[])).error \
        == E.NOT_COORDINATOR
    h.coord.on_elected(partition)  # and back: the group is read from __consumer_offsets
    group = h.coord.manager.groups["g"]
    assert isinstance(group, ConsumerGroup) and group.members["a"].member_epoch == 1
    assert group.members["a"].session_timer is not None
    again = h.coord.consumer_group_heartbeat(HeartbeatRequest("g", "a", 1, topic_partitions=[(T, [0, 1, 2, 3])]))
    assert (again.error, again.member_epoch) == (E.NONE, 1)
    h.sched.advance(45_001)  # silent from now on: the restarted session expires
    assert not group.members and group.group_epoch == 2
