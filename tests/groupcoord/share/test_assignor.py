"""The share assignor (kafkapy/groupcoord/share/assignor.py) against KIP-932's rules, as Kafka 4.x's
SimpleAssignor applies them: balance first (partition counts per member differ by at most one, each
partition shared by ceil(members / partitions) members), stickiness second."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.share.assignor import assign


def _sizes(target):
    return sorted(sum(len(p) for p in a.values()) for a in target.values())


def _sharing(target, topic, count):
    return [sum(1 for a in target.values() if p in a.get(topic, ())) for p in range(count)]


def test_more_members_than_partitions_share_each_partition():
    members = ["a", "b", "c", "d"]
    target = assign(members, {m: {"t"} for m in members}, {"t": 2}, {})
    assert _sizes(target) == [1, 1, 1, 1]  # Kafka 4.4: partitions_per_member [1, 1, 1, 1]
    assert _sharing(target, "t", 2) == [2, 2]


def test_fewer_members_than_partitions_split_them():
    members = ["a", "b", "c"]
    target = assign(members, {m: {"t"} for m in members}, {"t": 8}, {})
    assert _sizes(target) == [2, 3, 3] and _sharing(target, "t", 8) == [1] * 8


def test_one_partition_goes_to_every_member():
    members = ["a", "b", "c"]
    target = assign(members, {m: {"t"} for m in members}, {"t": 1}, {})
    assert all(a == {"t": {0}} for a in target.values())


def test_a_new_member_takes_only_what_balance_needs():
    before = assign(["a", "b"], {"a": {"t"}, "b": {"t"}}, {"t": 6}, {})
    after = assign(["a", "b", "c"], {"a": {"t"}, "b": {"t"}, "c": {"t"}}, {"t": 6}, before)
    assert _sizes(after) == [2, 2, 2]
    assert after["a"]["t"] <= before["a"]["t"] and after["b"]["t"] <= before["b"]["t"]
    assert sum(len(before[m]["t"] - after[m]["t"]) for m in ("a", "b")) == 2


def test_a_member_leaving_gives_its_partitions_to_the_others():
    before = assign(["a", "b", "c"], {m: {"t"} for m in "abc"}, {"t": 6}, {})
    after = assign(["a", "b"], {m: {"t"} for m in "ab"}, {"t": 6}, before)
    assert _sizes(after) == [3, 3] and _sharing(after, "t", 6) == [1] * 6
    assert before["a"]["t"] <= after["a"]["t"] and before["b"]["t"] <= after["b"]["t"]


def test_different_subscriptions_balance_each_topic_on_its_own():
    # Kafka's heterogeneous builder: M3 takes half of T1 and half of T2
    subscriptions = {"m1": {"t1"}, "m2": {"t2"}, "m3": {"t1", "t2"}}
    target = assign(["m1", "m2", "m3"], subscriptions, {"t1": 4, "t2": 4}, {})
    assert len(target["m1"]["t1"]) == 2 and len(target["m2"]["t2"]) == 2
    assert len(target["m3"]["t1"]) == 2 and len(target["m3"]["t2"]) == 2
    assert _sharing(target, "t1", 4) == [1] * 4 and _sharing(target, "t2", 4) == [1] * 4


def test_topics_that_do_not_exist_are_left_out():
    target = assign(["a"], {"a": {"t", "gone"}}, {"t": 2}, {"a": {"gone": [0], "t": [5]}})
    assert target == {"a": {"t": {0, 1}}}


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.integers(1, 12), st.data())
def test_balanced_from_any_starting_point(n_members, n_partitions, data):
    members = [f"m{i}" for i in range(n_members)]
    current = {m: {"t": data.draw(st.lists(st.integers(0, n_partitions + 2), max_size=n_partitions))}
               for m in members}
    target = assign(members, {m: {"t"} for m in members}, {"t": n_partitions}, current)
    sharing = -(-n_members // n_partitions)
    sizes = _sizes(target)
    counts = _sharing(target, "t", n_partitions)
    assert max(counts) <= sharing and min(counts) >= 1
    assert sizes[-1] - sizes[0] <= 1 or sum(counts) < sharing * n_partitions  # Kafka's tolerated corner
    fresh = assign(members, {m: {"t"} for m in members}, {"t": n_partitions}, {})
    assert _sharing(fresh, "t", n_partitions) == [sharing] * n_partitions
    assert _sizes(fresh)[-1] - _sizes(fresh)[0] <= 1
    # stickiness: what a member keeps is a subset of what it had (or it only gains)
    assert assign(members, {m: {"t"} for m in members}, {"t": n_partitions}, fresh) == fresh
