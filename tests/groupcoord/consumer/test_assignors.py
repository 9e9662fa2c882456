"""The server-side assignors: validity, balance, stickiness, determinism, racks, range layout."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.consumer.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    AssignorError,
    MemberSpec,
    RangeAssignor,
    TopicSpec,
    UniformAssignor,
    assignor_name,
)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

uniform = UniformAssignor()
range_ = RangeAssignor()


def tid(n: int) -> uuid.UUID:
    return uuid.UUID(int=n + 1)


def make_topics(counts: list[int], racks: dict[tuple[int, int], frozenset[str]] | None = None) -> dict:
    topics = {}
    for i, n in enumerate(counts):
        pr = {p: r for (t, p), r in (racks or {}).items() if t == i}
        topics[tid(i)] = TopicSpec(tid(i), f"topic-{i}", n, pr)
    return topics


def member(mid: str, subs, current=None, rack=None, instance=None) -> MemberSpec:
    return MemberSpec(mid, instance, rack, frozenset(subs), current or {})


def owners(result: dict) -> dict[tuple[uuid.UUID, int], list[str]]:
    out: dict[tuple[uuid.UUID, int], list[str]] = {}
    for mid, assignment in result.items():
        for t, ps in assignment.items():
            for p in ps:
                out.setdefault((t, p), []).append(mid)
    return out


def sizes(result: dict) -> dict[str, int]:
    return {mid: sum(len(ps) for ps in a.values()) for mid, a in result.items()}


def check_valid(members: dict, topics: dict, result: dict) -> None:
    """Every partition of a subscribed topic exactly once, only to subscribers, all members listed."""
    assert set(result) == set(members)
    own = owners(result)
    for (t, p), mids in own.items():
        assert len(mids) == 1, f"{t}-{p} owned by {mids}"
        assert t in members[mids[0]].subscribed_topic_ids
        assert 0 <= p < topics[t].num_partitions
    subscribed = {t for m in members.values() for t in m.subscribed_topic_ids if t in topics}
    expected = {(t, p) for t in subscribed for p in range(topics[t].num_partitions)}
    assert set(own) == expected
    for a in result.values():
        assert all(isinstance(ps, frozenset) and ps for ps in a.values())


RACKS = ["r0", "r1", "r2"]


@st.composite
def groups(draw, homogeneous: bool | None = None, with_current: bool = True):
    n_topics = draw(st.integers(1, 4))
    counts = draw(st.lists(st.integers(0, 24), min_size=n_topics, max_size=n_topics))
    racks = draw(st.booleans())
    # Bulk choices (replica racks, current owners) come from a seeded generator: drawing each one
    # from hypothesis makes the test several times slower.
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    placement = {}
    if racks:
        # Replica racks for the partitions; members get racks below, so the rack-aware paths run
        # under every property (racks must never change counts or moves).
        for t, n in enumerate(counts):
            for p in range(n):
                placement[(t, p)] = frozenset(rnd.sample(RACKS, rnd.randint(0, 2)))
    topics = make_topics(counts, placement)
    n_members = draw(st.integers(1, 8))
    homo = draw(st.booleans()) if homogeneous is None else homogeneous
    all_topics = sorted(topics)
    if homo:
        subs = draw(st.sets(st.sampled_from(all_topics), min_size=1))
        member_subs = [subs] * n_members
    else:
        member_subs = [draw(st.sets(st.sampled_from(all_topics))) for _ in range(n_members)]
    mids = [f"m{i:02d}-{draw(st.integers(0, 999))}" for i in range(n_members)]
    mids = list(dict.fromkeys(mids))
    current: dict[str, dict[uuid.UUID, set[int]]] = {mid: {} for mid in mids}
    if with_current:
        # A disjoint current assignment, possibly unbalanced, possibly with unsubscribed topics.
        for t in all_topics:
            for p in range(topics[t].num_partitions):
                owner = rnd.choice([None, *mids])
                if owner is not None:
                    current[owner].setdefault(t, set()).add(p)
    members = {mid: member(mid, member_subs[i], {t: frozenset(ps) for t, ps in current[mid].items()},
                           rack=draw(st.sampled_from([None, *RACKS])) if racks else None)
               for i, mid in enumerate(mids)}
    return members, topics


@SETTINGS
@given(groups())
def test_uniform_valid(group):
    members, topics = group
    check_valid(members, topics, uniform.assign(members, topics))


@SETTINGS
@given(groups())
def test_range_valid(group):
    """Valid, and per topic each subscriber gets a contiguous range; range sizes differ by <= 1."""
    members, topics = group
    result = range_.assign(members, topics)
    check_valid(members, topics, result)
    for t in topics:
        subs = [mid for mid, m in members.items() if t in m.subscribed_topic_ids]
        got = [sorted(result[mid].get(t, ())) for mid in subs]
        assert all(ps == list(range(ps[0], ps[-1] + 1)) for ps in got if ps)
        if subs:
            assert max(map(len, got)) - min(map(len, got)) <= 1


@SETTINGS
@given(groups(homogeneous=True))
def test_uniform_homogeneous_balanced(group):
    members, topics = group
    result = uniform.assign(members, topics)
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1


@SETTINGS
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_no_move_improves_balance(group):
    """Kafka's balance for mixed subscriptions: no subscriber of a topic has 2+ fewer partitions
    than a member holding one of that topic's partitions."""
    members, topics = group
    result = uniform.assign(members, topics)
    count = sizes(result)
    for t in topics:
        subs = [mid for mid, m in members.items() if t in m.subscribed_topic_ids]
        holders = [mid for mid in subs if result[mid].get(t)]
        for h in holders:
            for s in subs:
                assert count[h] - count[s] <= 1, (t, h, s, count)


def kept_partitions(members: dict, result: dict) -> int:
    return sum(len(ps & members[mid].current.get(t, frozenset()))
               for mid, a in result.items() for t, ps in a.items())


def optimal_moves(members: dict, topics: dict) -> int:
    """The fewest partitions any balanced homogeneous assignment must (re)assign."""
    subs = next(iter(members.values())).subscribed_topic_ids
    total = sum(topics[t].num_partitions for t in subs)
    current = sorted((sum(len(ps) for t, ps in m.current.items() if t in subs) for m in members.values()),
                     reverse=True)
    q, extra = divmod(total, len(members))
    return total - sum(min(c, q + (1 if i < extra else 0)) for i, c in enumerate(current))


@SETTINGS
@given(groups(homogeneous=True))
def test_uniform_homogeneous_moves_the_minimum(group):
    """Bound tested: partitions (re)assigned == total - max keepable under balanced quotas."""
    members, topics = group
    result = uniform.assign(members, topics)
    total = sum(len(ps) for a in result.values() for ps in a.values())
    assert total - kept_partitions(members, result) == optimal_moves(members, topics)


def with_current(members: dict, result: dict) -> dict:
    return {mid: MemberSpec(m.member_id, m.instance_id, m.rack_id, m.subscribed_topic_ids, result.get(mid, {}))
            for mid, m in members.items()}


@SETTINGS
@given(groups(homogeneous=True, with_current=False), st.data())
def test_uniform_join_and_leave_move_only_what_balance_needs(group, data):
    """After a join only floor(P/(M+1)) partitions move (to the new member); after a leave only
    the leaver's partitions move."""
    members, topics = group
    stable = with_current(members, uniform.assign(members, topics))
    subs = next(iter(members.values())).subscribed_topic_ids
    total = sum(topics[t].num_partitions for t in subs)

    joined = dict(stable)
    joined["zz-new"] = member("zz-new", subs, rack="r1")
    result = uniform.assign(joined, topics)
    assert total - kept_partitions(joined, result) == total // len(joined)
    assert sizes(result)["zz-new"] == total // len(joined)

    if len(members) > 1:
        leaver = data.draw(st.sampled_from(sorted(stable)))
        left = {mid: m for mid, m in stable.items() if mid != leaver}
        result = uniform.assign(left, topics)
        leaver_count = sum(len(ps) for ps in stable[leaver].current.values())
        assert total - kept_partitions(left, result) == leaver_count


@SETTINGS
@given(groups(), st.randoms(use_true_random=False))
def test_deterministic(group, rnd):
    members, topics = group
    items = []
    for mid, m in members.items():
        current = list(m.current.items())
        rnd.shuffle(current)
        items.append((mid, MemberSpec(m.member_id, m.instance_id, m.rack_id, m.subscribed_topic_ids, dict(current))))
    rnd.shuffle(items)
    topic_items = list(topics.items())
    rnd.shuffle(topic_items)
    for assignor in (uniform, range_):
        assert assignor.assign(members, topics) == assignor.assign(dict(items), dict(topic_items))


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 4), st.integers(1, 3), st.randoms(use_true_random=False))
def test_uniform_rack_local_when_it_costs_no_balance(n_racks, per_rack, quota, n_topics, rnd):
    """Each rack holds exactly its members' share of single-replica partitions: all assignments
    are rack-local, and balance is unchanged."""
    racks = [f"rack{r}" for r in range(n_racks)]
    slots = [r for r in racks for _ in range(per_rack * quota)]
    rnd.shuffle(slots)
    # Spread the slots over the topics.
    counts = [0] * n_topics
    placement = {}
    for slot in slots:
        t = rnd.randrange(n_topics)
        placement[(t, counts[t])] = frozenset({slot})
        counts[t] += 1
    topics = make_topics(counts, placement)
    members = {f"m-{r}-{i}": member(f"m-{r}-{i}", topics, rack=r) for r in racks for i in range(per_rack)}
    result = uniform.assign(members, topics)
    check_valid(members, topics, result)
    assert set(sizes(result).values()) <= {quota}
    for mid, a in result.items():
        for t, ps in a.items():
            for p in ps:
                assert members[mid].rack_id in topics[t].partition_racks[p]


def test_uniform_rack_does_not_break_stickiness_or_balance():
    topics = make_topics([6], {(0, p): frozenset({"a"}) for p in range(6)})
    t = tid(0)
    members = {"m1": member("m1", [t], {t: frozenset({0, 1, 2})}, rack="b"),
               "m2": member("m2", [t], {t: frozenset({3, 4, 5})}, rack="a")}
    assert uniform.assign(members, topics) == {"m1": {t: frozenset({0, 1, 2})}, "m2": {t: frozenset({3, 4, 5})}}


def test_uniform_rack_gives_up_remote_partitions_first():
    racks = {(0, p): frozenset({"a" if p < 3 else "b"}) for p in range(6)}
    topics = make_topics([6], racks)
    t = tid(0)
    members = {"m1": member("m1", [t], {t: frozenset(range(6))}, rack="a"),
               "m2": member("m2", [t], {}, rack="b")}
    assert uniform.assign(members, topics) == {"m1": {t: frozenset({0, 1, 2})}, "m2": {t: frozenset({3, 4, 5})}}


def test_uniform_heterogeneous_rack_preference():
    racks = {(0, p): frozenset({"a" if p % 2 else "b"}) for p in range(4)}
    topics = make_topics([4, 2], racks)
    t0, t1 = tid(0), tid(1)
    members = {"m1": member("m1", [t0, t1], rack="a"), "m2": member("m2", [t0], rack="b"),
               "m3": member("m3", [t1], rack="c")}
    result = uniform.assign(members, topics)
    check_valid(members, topics, result)
    assert all(p % 2 == 1 for p in result["m1"].get(t0, ()))
    assert all(p % 2 == 0 for p in result["m2"].get(t0, ()))


def test_uniform_heterogeneous_example():
    topics = make_topics([12, 5])
    t0, t1 = tid(0), tid(1)
    members = {"m0": member("m0", [t0]), "m1": member("m1", [t0, t1]), "m2": member("m2", [t1])}
    result = uniform.assign(members, topics)
    check_valid(members, topics, result)
    assert sorted(sizes(result).values()) == [5, 6, 6]


def test_uniform_drops_unsubscribed_and_unknown_partitions():
    topics = make_topics([2, 2])
    t0, t1 = tid(0), tid(1)
    ghost = uuid.UUID(int=999)
    members = {"m": member("m", [t0], {t0: frozenset({0, 1, 7}), t1: frozenset({0}), ghost: frozenset({0})})}
    assert uniform.assign(members, topics) == {"m": {t0: frozenset({0, 1})}}


def test_subscription_to_missing_topic_is_ignored():
    topics = make_topics([3])
    members = {"m": member("m", [tid(0), uuid.UUID(int=999)])}
    for assignor in (uniform, range_):
        assert assignor.assign(members, topics) == {"m": {tid(0): frozenset({0, 1, 2})}}


def test_no_members_and_empty_subscriptions():
    topics = make_topics([3])
    for assignor in (uniform, range_):
        assert assignor.assign({}, topics) == {}
        assert assignor.assign({"a": member("a", []), "b": member("b", [])}, topics) == {"a": {}, "b": {}}


def test_negative_partition_count_is_an_error():
    topics = {tid(0): TopicSpec(tid(0), "t", -1, {})}
    with pytest.raises(AssignorError):
        uniform.assign({"m": member("m", [tid(0)])}, topics)


def test_range_co_partitioned():
    topics = make_topics([3, 3])
    t0, t1 = tid(0), tid(1)
    members = {"b": member("b", [t0, t1]), "a": member("a", [t0, t1])}
    assert range_.assign(members, topics) == {
        "a": {t0: frozenset({0, 1}), t1: frozenset({0, 1})},
        "b": {t0: frozenset({2}), t1: frozenset({2})},
    }


@SETTINGS
@given(st.integers(1, 6), st.integers(0, 20), st.integers(1, 3))
def test_range_contiguous_and_co_partitioned(n_members, n_partitions, n_topics):
    topics = make_topics([n_partitions] * n_topics)
    members = {f"m{i}": member(f"m{i}", topics) for i in range(n_members)}
    result = range_.assign(members, topics)
    check_valid(members, topics, result)
    for a in result.values():
        layouts = {ps for ps in a.values()}
        assert len(layouts) <= 1
        for ps in layouts:
            assert sorted(ps) == list(range(min(ps), max(ps) + 1))
    counts = [len(a.get(tid(0), ())) for a in result.values()]
    assert max(counts) - min(counts) <= 1


def test_range_static_members_first_by_instance_id():
    topics = make_topics([5])
    t = tid(0)
    members = {"x1": member("x1", [t], instance="i-2"), "a9": member("a9", [t]),
               "z3": member("z3", [t], instance="i-1")}
    assert range_.assign(members, topics) == {
        "z3": {t: frozenset({0, 1})}, "x1": {t: frozenset({2, 3})}, "a9": {t: frozenset({4})}}
    # The static member rejoins under a new member id: it keeps its ranges.
    members = {"new": member("new", [t], instance="i-2"), "a9": member("a9", [t]),
               "z3": member("z3", [t], instance="i-1")}
    assert range_.assign(members, topics)["new"] == {t: frozenset({2, 3})}


def test_range_heterogeneous():
    topics = make_topics([4, 2])
    t0, t1 = tid(0), tid(1)
    members = {"a": member("a", [t0]), "b": member("b", [t0, t1]), "c": member("c", [t1])}
    assert range_.assign(members, topics) == {
        "a": {t0: frozenset({0, 1})},
        "b": {t0: frozenset({2, 3}), t1: frozenset({0})},
        "c": {t1: frozenset({1})},
    }


def test_more_members_than_partitions():
    topics = make_topics([2])
    members = {f"m{i}": member(f"m{i}", [tid(0)]) for i in range(5)}
    for assignor in (uniform, range_):
        result = assignor.assign(members, topics)
        check_valid(members, topics, result)
        assert Counter(sizes(result).values()) == {0: 3, 1: 2}


def test_assignor_names():
    assert DEFAULT_ASSIGNOR == "uniform"
    assert set(ASSIGNORS) == {"uniform", "range"}
    assert all(ASSIGNORS[name].name == name for name in ASSIGNORS)
    assert assignor_name("org.apache.kafka.coordinator.group.assignor.UniformAssignor") == "uniform"
    assert assignor_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == "range"
    assert assignor_name(" range ") == "range"
    with pytest.raises(ValueError, match="unknown consumer group assignor"):
        assignor_name("org.example.MyAssignor")


def test_large_homogeneous_group_is_fast_enough():
    topics = make_topics([1000] * 10)
    members = {f"member-{i}": member(f"member-{i}", topics) for i in range(100)}
    result = uniform.assign(members, topics)
    stable = with_current(members, result)
    del stable["member-7"]
    result = uniform.assign(stable, topics)
    check_valid(stable, topics, result)
    rnd = random.Random(1)
    het = {mid: member(mid, rnd.sample(sorted(topics), 3)) for mid in members}
    check_valid(het, topics, uniform.assign(het, topics))
