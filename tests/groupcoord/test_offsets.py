"""Offset commits, fetches, deletes, expiry, and reloading everything from __consumer_offsets."""
from __future__ import annotations

from kafkapy.groupcoord import GroupState, OffsetAndMetadata
from kafkapy.groupcoord.records import OffsetCommitKey, decode_key
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError

from .harness import Harness, subscription

O = OffsetAndMetadata


def test_commit_and_fetch_round_trip_metadata():
    h = Harness()
    [a] = h.stable_group()
    result = h.coord.commit_offsets("g", a, None, 1, {("t", 0): O(10, 3, "hello"), ("t", 1): O(20)})
    assert result == {("t", 0): 0, ("t", 1): 0}
    error, offsets = h.coord.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
    assert error == 0
    assert offsets[("t", 0)][0].offset == 10 and offsets[("t", 0)][0].metadata == "hello"
    assert offsets[("t", 0)][0].leader_epoch == 3
    assert offsets[("t", 2)] == (None, 0)
    error, everything = h.coord.fetch_offsets("g", None)
    assert set(everything) == {("t", 0), ("t", 1)}


def test_fetch_for_unknown_group_answers_nothing_committed():
    h = Harness()
    assert h.coord.fetch_offsets("nobody", [("t", 0)]) == (0, {("t", 0): (None, 0)})
    assert h.coord.fetch_offsets("nobody", None) == (0, {})


def test_commit_generation_checks():
    h = Harness()
    [a] = h.stable_group()
    tp = {("t", 0): O(1)}
    assert h.coord.commit_offsets("g", a, None, 0, tp) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.coord.commit_offsets("g", "who", None, 1, tp) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # admin-style commit (no member, generation -1) is refused while the group has members
    assert h.coord.commit_offsets("g", "", None, -1, tp) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # a commit with a generation for a group that does not exist
    assert h.coord.commit_offsets("ghost", "m", None, 3, tp) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.coord.manager.get_group("g").state is GroupState.STABLE


def test_simple_consumer_commits_create_an_empty_group():
    h = Harness()
    assert h.coord.commit_offsets("simple", "", None, -1, {("t", 0): O(7)}) == {("t", 0): 0}
    group = h.coord.manager.get_group("simple")
    assert group.state is GroupState.EMPTY and group.protocol_type is None
    assert h.coord.fetch_offsets("simple", [("t", 0)])[1][("t", 0)][0].offset == 7


def test_commit_during_preparing_rebalance_is_allowed():
    h = Harness()
    a, b = h.stable_group(n=2)
    h.join(member_id=a)
    assert h.coord.manager.get_group("g").state is GroupState.PREPARING_REBALANCE
    assert h.coord.commit_offsets("g", b, None, 1, {("t", 1): O(3)}) == {("t", 1): 0}


def test_oversized_metadata_is_rejected_per_partition():
    h = Harness(offset_metadata_max_bytes=5)
    [a] = h.stable_group()
    result = h.coord.commit_offsets("g", a, None, 1, {("t", 0): O(1, metadata="123456"), ("t", 1): O(2, metadata="12345")})
    assert result == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): 0}
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)] == (None, 0)


def test_append_failure_maps_to_coordinator_errors():
    h = Harness()
    [a] = h.stable_group()
    h.logs(h.coord.partition_for("g")).fail_with = KafkaError("gone", E.NOT_LEADER_OR_FOLLOWER)
    assert h.coord.commit_offsets("g", a, None, 1, {("t", 0): O(1)}) == {("t", 0): E.NOT_COORDINATOR}
    h.logs(h.coord.partition_for("g")).fail_with = KafkaError("big", E.MESSAGE_TOO_LARGE)
    assert h.coord.commit_offsets("g", a, None, 1, {("t", 0): O(1)}) == {("t", 0): E.INVALID_COMMIT_OFFSET_SIZE}


def test_everything_reloads_from_the_log():
    h = Harness()
    a, b = h.stable_group(n=2, protocols=[("range", subscription("t"))])
    h.coord.commit_offsets("g", a, None, 1, {("t", 0): O(10, 1, "m0"), ("t", 1): O(11)})
    h.coord.commit_offsets("g", a, None, 1, {("t", 0): O(15, 2, "m1")})
    h.coord.commit_offsets("simple", "", None, -1, {("u", 0): O(99)})
    h.coord.close()

    # a new coordinator over the same logs: what a restarted broker sees
    h2 = Harness(logs=h.logs, scheduler=h.sched)
    group = h2.coord.manager.get_group("g")
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert set(group.members) == {a, b} and group.leader_id == a
    assert group.protocol_name == "range" and group.subscribed_topics == {"t"}
    offsets = h2.coord.fetch_offsets("g", [("t", 0), ("t", 1)])[1]
    assert (offsets[("t", 0)][0].offset, offsets[("t", 0)][0].metadata) == (15, "m1")
    assert offsets[("t", 1)][0].offset == 11
    assert h2.coord.fetch_offsets("simple", [("u", 0)])[1][("u", 0)][0].offset == 99
    # members keep going without rejoining, and their assignment survived
    assert h2.coord.heartbeat("g", b, None, 1) == 0
    assert h2.sync("g", 1, b)[0].assignment == group.members[b].assignment != b""
    # ... and a member that never comes back expires after its session timeout
    h2.sched.advance(6_000)
    assert h2.coord.heartbeat("g", a, None, 1) == 0
    h2.sched.advance(5_000)
    assert h2.coord.manager.get_group("g").state is GroupState.PREPARING_REBALANCE
    assert b not in h2.coord.manager.get_group("g").members


def test_delete_groups():
    h = Harness()
    [a] = h.stable_group()
    h.coord.commit_offsets("g", a, None, 1, {("t", 0): O(5)})
    h.coord.commit_offsets("e", "", None, -1, {("t", 0): O(5)})
    assert h.coord.delete_groups(["g", "e", "none"]) == {
        "g": E.NON_EMPTY_GROUP, "e": 0, "none": E.GROUP_ID_NOT_FOUND}
    assert h.coord.manager.get_group("e") is None
    assert h.coord.fetch_offsets("e", [("t", 0)])[1][("t", 0)] == (None, 0)
    # the deletion is durable: tombstones for the offset and the group
    h2 = Harness(logs=h.logs, scheduler=h.sched)
    assert h2.coord.manager.get_group("e") is None
    assert h2.coord.manager.get_group("g") is not None


def test_offset_delete():
    h = Harness()
    [a] = h.stable_group(protocols=[("range", subscription("t"))])
    h.coord.commit_offsets("g", a, None, 1, {("t", 0): O(5), ("old", 0): O(6)})
    error, result = h.coord.delete_offsets("g", [("t", 0), ("old", 0)])
    assert error == 0 and result == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): 0}
    assert set(h.coord.fetch_offsets("g", None)[1]) == {("t", 0)}
    assert h.coord.delete_offsets("none", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
    h.coord.leave_group("g", [(a, None)])
    assert h.coord.delete_offsets("g", [("t", 0)]) == (0, {("t", 0): 0})
    # an Empty group without offsets is gone
    assert h.coord.manager.get_group("g") is None


def test_offsets_of_empty_group_expire_after_retention():
    h2 = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    [a] = h2.stable_group(session_ms=1_000_000)
    h2.coord.commit_offsets("g", a, None, 1, {("t", 0): O(5)})
    for _ in range(12):
        h2.sched.advance(10_000)
        assert h2.coord.heartbeat("g", a, None, 1) == 0
    assert ("t", 0) in h2.coord.manager.get_group("g").offsets  # subscribed topic: kept
    h2.coord.leave_group("g", [(a, None)])
    h2.sched.advance(50_000)
    assert h2.coord.manager.get_group("g") is not None  # empty for < 1 minute
    h2.sched.advance(20_000)
    assert h2.coord.manager.get_group("g") is None  # expired and group removed
    h3 = Harness(logs=h2.logs, scheduler=h2.sched)
    assert h3.coord.manager.get_group("g") is None


def test_explicit_retention_expires_by_expire_timestamp():
    h = Harness(offsets_retention_check_interval_ms=1_000)
    now = h.sched.now_ms
    h.coord.commit_offsets("s", "", None, -1, {("t", 0): O(1, commit_timestamp=now, expire_timestamp=now + 5_000)})
    h.sched.advance(4_000)
    assert h.coord.manager.get_group("s") is not None
    h.sched.advance(2_000)
    assert h.coord.manager.get_group("s") is None


def test_list_and_describe_groups():
    h = Harness()
    [a] = h.stable_group()
    h.coord.commit_offsets("simple", "", None, -1, {("t", 0): O(1)})
    error, groups = h.coord.list_groups()
    assert error == 0
    assert {(g.group_id, g.protocol_type, g.state) for g in groups} == {
        ("g", "consumer", "Stable"), ("simple", "", "Empty")}
    assert [g.group_id for g in h.coord.list_groups(states=["stable"])[1]] == ["g"]
    assert h.coord.list_groups(types=["consumer"])[1] == []
    assert len(h.coord.list_groups(types=["Classic"])[1]) == 2
    error, summary = h.coord.describe_group("g")
    assert (error, summary.state, summary.protocol_type, summary.protocol) == (0, "Stable", "consumer", "range")
    [member] = summary.members
    assert member.member_id == a and member.metadata == subscription("t") and member.assignment
    assert h.coord.describe_group("nope")[1].state == "Dead"
    h.join(member_id=a)
    summary = h.coord.describe_group("g")[1]
    assert summary.state == "CompletingRebalance" and summary.members[0].metadata == b""


def test_commit_record_keys_land_in_the_group_partition():
    h = Harness()
    h.coord.commit_offsets("simple", "", None, -1, {("t", 0): O(1)})
    plog = h.logs(h.coord.partition_for("simple"))
    assert plog.log_end_offset == 1
    from kafkapy.protocol.records import iter_batch_headers, iter_records
    buf = plog.read(0, 1 << 20).records
    [header] = iter_batch_headers(buf)
    [record] = iter_records(buf, header)
    assert decode_key(record.key) == OffsetCommitKey("simple", "t", 0)
