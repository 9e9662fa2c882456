"""Online migration between the classic and the consumer protocol: the embedded protocol bytes,
the policy, and the pure group conversions (kafkapy/protocol/consumer_protocol.py, kafkapy/groupcoord/consumer/migration.py)."""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.consumer_protocol import (
    MalformedSubscription,
    decode_assignment,
    encode_assignment,
    parse_subscription,
)
from kafkapy.groupcoord.consumer.group import ConsumerGroup, ConsumerGroupMember, MemberState
from kafkapy.groupcoord.consumer.migration import (
    MigrationError,
    MigrationPolicy,
    all_members_use_classic_protocol_except,
    convert_to_classic_group,
    convert_to_consumer_group,
    downgrade_refusal,
    upgrade_refusal,
)
from kafkapy.protocol.consumer_protocol import encode_subscription
from kafkapy.groupcoord.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
IDS = {"t1": T1, "t2": T2}
NAMES = {v: k for k, v in IDS.items()}


def _s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def subscription_v3(topics, owned, generation, rack, user_data=None) -> bytes:
    """Built field by field from ConsumerProtocolSubscription.json (not with the module's encoder)."""
    out = struct.pack(">h", 3) + struct.pack(">i", len(topics)) + b"".join(_s(t) for t in topics)
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    out += struct.pack(">i", len(owned))
    for topic, parts in owned.items():
        out += _s(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    out += struct.pack(">i", generation) + _s(rack)
    return out


# -- embedded protocol ------------------------------------------------------------------------

def test_parse_subscription_v0_has_no_owned_partitions():
    sub = parse_subscription(encode_subscription(["a", "b"], b"ud"))
    assert (sub.version, sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id, sub.rack_id) == (
        0, ["a", "b"], b"ud", {}, -1, None)


def test_parse_subscription_v3_all_fields():
    sub = parse_subscription(subscription_v3(["t1"], {"t1": [0, 2]}, 7, "rack-a"))
    assert sub.version == 3
    assert sub.topics == ["t1"]
    assert sub.owned_partitions == {"t1": [0, 2]}
    assert sub.generation_id == 7
    assert sub.rack_id == "rack-a"


def test_parse_subscription_newer_version_reads_as_v3():
    raw = bytearray(subscription_v3(["t1"], {}, 1, None))
    raw[0:2] = struct.pack(">h", 9)
    sub = parse_subscription(bytes(raw) + b"future-fields")
    assert sub.version == 9 and sub.topics == ["t1"] and sub.rack_id is None


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\xff\xff", struct.pack(">hi", 0, 5),
                                 struct.pack(">hi", 0, 2**31 - 1), struct.pack(">hih", 0, 1, 10) + b"ab",
                                 struct.pack(">hi", 1, 0) + struct.pack(">i", -1)])
def test_parse_subscription_rejects_malformed(raw):
    with pytest.raises(MalformedSubscription):
        parse_subscription(raw)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_parse_subscription_never_crashes(raw):
    try:
        parse_subscription(raw)
    except MalformedSubscription:
        pass


def test_encode_assignment_layout_and_version():
    raw = encode_assignment({"b": [2, 1], "a": [0]}, version=3)
    expected = (struct.pack(">hi", 3, 2) + _s("a") + struct.pack(">ii", 1, 0)
                + _s("b") + struct.pack(">iii", 2, 1, 2) + struct.pack(">i", -1))
    assert raw == expected
    assert encode_assignment({}, version=7)[:2] == struct.pack(">h", 3)  # clamped to the newest known


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=5), st.sets(st.integers(0, 1000), min_size=1, max_size=5),
                       max_size=4), st.integers(0, 3))
def test_assignment_round_trip(partitions, version):
    decoded = decode_assignment(encode_assignment(partitions, version))
    assert {t: sorted(p) for t, p in decoded.items()} == {t: sorted(p) for t, p in partitions.items()}


# -- policy -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value,up,down", [("bidirectional", True, True), ("UPGRADE", True, False),
                                           ("Downgrade", False, True), ("disabled", False, False),
                                           ("nonsense", False, False), (None, False, False)])
def test_policy_parse(value, up, down):
    policy = MigrationPolicy.parse(value)
    assert (policy.upgrade_enabled, policy.downgrade_enabled) == (up, down)


# -- upgrade ----------------------------------------------------------------------------------

def classic_group(n=2, protocol="range", generation=4, assignments=None, state=GroupState.STABLE):
    group = GroupMetadata("g", GroupState.EMPTY, 0)
    for i in range(n):
        member = MemberMetadata(f"m{i}", f"i{i}" if i == 0 else None, f"client{i}", "/10.0.0.1", 30_000,
                                10_000 + i, "consumer",
                                [(protocol, subscription_v3(["t1", "t2"], {}, generation, f"rack{i}")),
                                 ("roundrobin", encode_subscription(["t1", "t2"]))])
        group.add(member)
    group.generation_id = generation
    group.protocol_name = protocol
    group.state = state
    assignments = assignments if assignments is not None else {
        "m0": encode_assignment({"t1": [0, 1], "t2": [0]}, 3), "m1": encode_assignment({"t1": [2], "gone": [0]})}
    for member_id, raw in assignments.items():
        group.members[member_id].assignment = raw
    group.offsets[("t1", 0)] = OffsetAndMetadata(42)
    return group


def test_upgrade_refusals():
    group = classic_group()
    assert upgrade_refusal(group, MigrationPolicy.BIDIRECTIONAL, 10) is None
    assert upgrade_refusal(group, MigrationPolicy.UPGRADE, 10) is None
    assert "disabled" in upgrade_refusal(group, MigrationPolicy.DOWNGRADE, 10)
    assert "disabled" in upgrade_refusal(group, MigrationPolicy.DISABLED, 10)
    assert "max.size" in upgrade_refusal(group, MigrationPolicy.BIDIRECTIONAL, 1)
    group.protocol_type = "connect"
    assert "embedded protocol" in upgrade_refusal(group, MigrationPolicy.BIDIRECTIONAL, 10)
    fresh = classic_group()
    fresh.protocol_name = None
    assert "protocol" in upgrade_refusal(fresh, MigrationPolicy.BIDIRECTIONAL, 10)


def test_convert_to_consumer_group_keeps_members_assignments_offsets():
    classic = classic_group()
    group = convert_to_consumer_group(classic, IDS.get, now_ms=5)
    assert isinstance(group, ConsumerGroup)
    assert (group.group_epoch, group.assignment_epoch) == (4, 4)
    assert group.state.value == "Stable"
    m0, m1 = group.members["m0"], group.members["m1"]
    assert m0.assigned == {T1: frozenset({0, 1}), T2: frozenset({0})}
    assert m1.assigned == {T1: frozenset({2})}  # the deleted topic "gone" is dropped
    assert group.target == {"m0": m0.assigned, "m1": m1.assigned}
    assert (m0.member_epoch, m0.previous_member_epoch, m0.state) == (4, 4, MemberState.STABLE)
    assert m0.instance_id == "i0" and group.static_members == {"i0": "m0"}
    assert m0.rack_id == "rack0" and m0.subscribed_topic_names == ["t1", "t2"]
    assert m0.uses_classic_protocol and m0.classic_protocols == classic.members["m0"].supported_protocols
    assert (m0.classic_session_timeout_ms, m1.classic_session_timeout_ms) == (10_000, 10_001)
    assert m0.rebalance_timeout_ms == 30_000 and m0.client_id == "client0"
    assert group.owner_of(T1, 2) == "m1" and group.owner_of(T2, 0) == "m0"
    assert group.offsets == classic.offsets and group.offsets is not classic.offsets


def test_convert_to_consumer_group_refuses_double_ownership_and_malformed():
    clash = classic_group(assignments={"m0": encode_assignment({"t1": [0]}), "m1": encode_assignment({"t1": [0]})})
    with pytest.raises(MigrationError):
        convert_to_consumer_group(clash, IDS.get, 0)
    bad = classic_group(assignments={"m0": b"\x00\x00\x00\x00\x00\x09", "m1": b""})
    with pytest.raises(MigrationError):
        convert_to_consumer_group(bad, IDS.get, 0)
    bad_sub = classic_group()
    bad_sub.members["m1"].supported_protocols = [("range", b"\x00")]
    with pytest.raises(MigrationError):
        convert_to_consumer_group(bad_sub, IDS.get, 0)
    assert bad_sub.members["m0"].assignment  # the classic group is left as it was


# -- downgrade --------------------------------------------------------------------------------

def mixed_group():
    group = convert_to_consumer_group(classic_group(), IDS.get, 0)
    group.group_epoch = group.assignment_epoch = 6
    new = ConsumerGroupMember("c1", rebalance_timeout_ms=45_000, subscribed_topic_names=["t1", "t2"],
                              member_epoch=6, previous_member_epoch=5)
    group.add_member(new)
    group.target = {"m0": {T1: frozenset({0})}, "m1": {T1: frozenset({1}), T2: frozenset({0})},
                    "c1": {T1: frozenset({2})}}
    return group


def test_downgrade_refusals():
    group = mixed_group()
    assert all_members_use_classic_protocol_except(group, "c1")
    assert not all_members_use_classic_protocol_except(group, "m0")
    assert downgrade_refusal(group, "c1", MigrationPolicy.BIDIRECTIONAL, 10) is None
    assert downgrade_refusal(group, "c1", MigrationPolicy.DOWNGRADE, 10) is None
    assert "disabled" in downgrade_refusal(group, "c1", MigrationPolicy.UPGRADE, 10)
    assert "max.size" in downgrade_refusal(group, "c1", MigrationPolicy.BIDIRECTIONAL, 1)
    assert downgrade_refusal(group, "m0", MigrationPolicy.BIDIRECTIONAL, 10)
    group.add_member(ConsumerGroupMember("c2", subscribed_topic_names=["t1"]))
    assert downgrade_refusal(group, "c1", MigrationPolicy.BIDIRECTIONAL, 10)
    alone = ConsumerGroup("g")
    alone.add_member(ConsumerGroupMember("c1", subscribed_topic_names=["t1"]))
    assert downgrade_refusal(alone, "c1", MigrationPolicy.BIDIRECTIONAL, 10)


def test_convert_to_classic_group_uses_target_and_subscription_version():
    group = mixed_group()
    classic, assignments = convert_to_classic_group(group, "c1", NAMES.get, now_ms=9)
    assert classic.state is GroupState.STABLE and classic.generation_id == 6
    assert classic.protocol_type == "consumer" and classic.protocol_name == "range"
    assert set(classic.members) == {"m0", "m1"}
    assert classic.static_members == {"i0": "m0"}
    assert classic.members["m0"].session_timeout_ms == 10_000
    assert classic.members["m0"].rebalance_timeout_ms == 30_000
    assert decode_assignment(assignments["m0"]) == {"t1": [0]}
    assert decode_assignment(assignments["m1"]) == {"t1": [1], "t2": [0]}
    assert assignments["m1"][:2] == struct.pack(">h", 3)  # the version the member subscribed with
    assert classic.members["m1"].assignment == assignments["m1"]
    assert classic.subscribed_topics == {"t1", "t2"}
    assert classic.offsets == group.offsets
    assert "c1" in group.members  # the consumer group itself is untouched


def test_convert_to_classic_group_refuses_members_without_common_protocol():
    group = mixed_group()
    group.members["m1"].classic_protocols = [("sticky", encode_subscription(["t1"]))]
    with pytest.raises(MigrationError):
        convert_to_classic_group(group, "c1", NAMES.get, 0)


# -- online migration through the coordinator (manual clock) ----------------------------------

from kafkapy.groupcoord.consumer.group import TopicMetadata  # noqa: E402
from kafkapy.groupcoord.consumer.membership import HeartbeatRequest, StaticTopicView  # noqa: E402
from kafkapy.protocol.consumer_protocol import encode_assignment as encode_v0_assignment  # noqa: E402
from kafkapy.protocol.errors import ErrorCode  # noqa: E402

from ..harness import Harness  # noqa: E402

TOPIC_ID = uuid.UUID(int=77)
PARTS = 4


def harness(**config) -> Harness:
    h = Harness(**config)
    h.coord.consumer.topics = StaticTopicView([TopicMetadata(TOPIC_ID, "t", PARTS)])
    return h


def classic_stable(h: Harness, n: int = 2) -> list:
    """n classic members on "t" (range, subscription v0), partitions dealt round-robin; their JoinResults."""
    boxes = [h.join_new("g", protocols=[("range", encode_subscription(["t"]))]) for _ in range(n)]
    h.sched.advance(1)
    results = [b[0] for b in boxes]
    leader = next(r for r in results if r.member_id == r.leader_id)
    assignments = {r.member_id: encode_v0_assignment({"t": list(range(i, PARTS, n))}) for i, r in enumerate(results)}
    for r in results:
        if r is not leader:
            h.sync("g", r.generation_id, r.member_id)
    box = h.sync("g", leader.generation_id, leader.member_id, assignments)
    assert box and box[0].error == 0
    return results


def consumer_heartbeat(h: Harness, member_id: str, epoch: int = 0, owned=None, **kw):
    request = HeartbeatRequest("g", member_id, epoch, rebalance_timeout_ms=30_000,
                               subscribed_topic_names=["t"] if epoch == 0 else None,
                               topic_partitions=[] if epoch == 0 else owned, api_version=1, **kw)
    return h.coord.consumer_group_heartbeat(request)


def assert_no_double_ownership(group) -> None:
    seen: dict[tuple, str] = {}
    for member in group.members.values():
        for topic_id, parts in member.owned().items():
            for p in parts:
                assert (topic_id, p) not in seen, \
                    f"{topic_id}-{p} owned by {seen[(topic_id, p)]} and {member.member_id}"
                seen[(topic_id, p)] = member.member_id


def rejoin_classic(h: Harness, member_id: str, owned: dict[str, list[int]] | None = None):
    """A classic member's JoinGroup + SyncGroup inside a consumer group: (JoinResult, assignment)."""
    sub = subscription_v3(["t"], owned or {}, 1, None)
    box = h.join("g", member_id=member_id, protocols=[("range", sub)])
    assert box and box[0].error == 0, box
    joined = box[0]
    sync = h.sync("g", joined.generation_id, member_id, protocol_type="consumer", protocol_name="range")
    return joined, sync[0]


def test_upgrade_then_classic_members_reconcile_and_downgrade_back():
    h = harness()
    m1, m2 = classic_stable(h)
    generation = m1.generation_id
    h.coord.commit_offsets("g", m1.member_id, None, generation, {("t", 0): OffsetAndMetadata(5)})

    # a consumer-protocol member joins the non-empty classic group: it becomes a consumer group
    first = consumer_heartbeat(h, "c1")
    assert first.error == 0, first
    group = h.coord.manager.groups["g"]
    assert isinstance(group, ConsumerGroup)
    assert set(group.members) == {m1.member_id, m2.member_id, "c1"}
    assert group.members[m1.member_id].uses_classic_protocol and not group.members["c1"].uses_classic_protocol
    assert group.offsets[("t", 0)].offset == 5
    assert group.group_epoch > generation
    assert first.assignment == {}  # everything is still owned by the classic members
    assert_no_double_ownership(group)

    # the classic members learn of the rebalance through their heartbeats
    assert h.coord.heartbeat("g", m1.member_id, None, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.coord.heartbeat("g", m2.member_id, None, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    # their commits use the member epoch as generation
    assert h.coord.commit_offsets("g", m1.member_id, None, generation, {("t", 0): OffsetAndMetadata(6)}) == {
        ("t", 0): ErrorCode.NONE}
    assert h.coord.commit_offsets("g", m1.member_id, None, generation + 7, {("t", 0): OffsetAndMetadata(6)}) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION}

    # eager members rejoin owning nothing: they keep their target's share of what they had
    for m in (m1, m2):
        joined, synced = rejoin_classic(h, m.member_id)
        assert joined.generation_id == group.members[m.member_id].member_epoch == group.assignment_epoch
        assert joined.protocol_type == "consumer" and joined.protocol_name == "range" and joined.leader_id == ""
        assert synced.error == 0
        got = decode_assignment(synced.assignment)
        assert set(got.get("t", [])) <= set(range(PARTS))
        assert h.coord.heartbeat("g", m.member_id, None, joined.generation_id) == ErrorCode.NONE
        assert_no_double_ownership(group)

    # now the consumer member gets the released partitions
    second = consumer_heartbeat(h, "c1", first.member_epoch, owned=[])
    assert second.error == 0 and second.assignment, second
    assert_no_double_ownership(group)
    owned_total = sum(len(p) for m in group.members.values() for p in m.assigned.values())
    assert owned_total == PARTS
    assert group.state.value == "Stable"

    # the last consumer-protocol member leaves: the group is classic again, and rebalances
    left = h.coord.consumer_group_heartbeat(HeartbeatRequest("g", "c1", -1, api_version=1))
    assert left.error == 0
    classic = h.coord.manager.groups["g"]
    assert isinstance(classic, GroupMetadata)
    assert classic.state is GroupState.PREPARING_REBALANCE
    assert set(classic.members) == {m1.member_id, m2.member_id}
    assert classic.offsets[("t", 0)].offset == 6
    assert group.state.value == "Dead"
    # the classic members rejoin and rebalance the classic way
    boxes = [h.join("g", member_id=m.member_id, protocols=[("range", encode_subscription(["t"]))]) for m in (m1, m2)]
    h.sched.advance(1)
    assert all(b and b[0].error == 0 for b in boxes), boxes
    assert boxes[0][0].generation_id == classic.generation_id


def test_upgrade_refused_by_policy_leaves_the_classic_group_alone():
    h = harness(group_consumer_migration_policy="downgrade")
    m1, m2 = classic_stable(h)
    result = consumer_heartbeat(h, "c1")
    assert result.error == ErrorCode.GROUP_ID_NOT_FOUND
    group = h.coord.manager.groups["g"]
    assert isinstance(group, GroupMetadata) and group.state is GroupState.STABLE
    assert h.coord.heartbeat("g", m1.member_id, None, m1.generation_id) == ErrorCode.NONE


def test_downgrade_refused_by_policy_keeps_the_consumer_group():
    h = harness(group_consumer_migration_policy="upgrade")
    m1, _ = classic_stable(h)
    first = consumer_heartbeat(h, "c1")
    assert first.error == 0
    assert h.coord.consumer_group_heartbeat(HeartbeatRequest("g", "c1", -1, api_version=1)).error == 0
    group = h.coord.manager.groups["g"]
    assert isinstance(group, ConsumerGroup) and "c1" not in group.members and len(group.members) == 2


def test_classic_requests_to_a_consumer_group_are_checked():
    h = harness()
    m1, _ = classic_stable(h)
    consumer_heartbeat(h, "c1")
    group = h.coord.manager.groups["g"]
    epoch_before = group.group_epoch
    # wrong protocol type, unknown protocol, unparseable subscription: refused, group untouched
    assert h.join("g", member_id="x", protocol_type="connect")[0].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", member_id="x", protocols=[("sticky", encode_subscription(["t"]))])[0].error == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", member_id="x", protocols=[("range", b"\x00")])[0].error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert "x" not in group.members and group.group_epoch == epoch_before
    # a consumer-protocol member cannot use the classic APIs, nor can strangers
    assert h.coord.heartbeat("g", "c1", None, group.members["c1"].member_epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("g", "nobody", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("g", m1.member_id, None, 999) == ErrorCode.ILLEGAL_GENERATION
    assert h.sync("g", 999, m1.member_id)[0].error == ErrorCode.ILLEGAL_GENERATION
    assert h.coord.leave_group("g", [("nobody", None), ("", "no-such-instance")]) == (
        ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID])
    # a new classic member joins in two steps (KIP-394) and is served by the consumer group
    first = h.join("g", protocols=[("range", encode_subscription(["t"]))])[0]
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    joined = h.join("g", member_id=first.member_id, protocols=[("range", encode_subscription(["t"]))])[0]
    assert joined.error == 0 and group.members[first.member_id].uses_classic_protocol
    assert group.group_epoch == epoch_before + 1
    # a classic member leaving bumps the epoch once
    assert h.coord.leave_group("g", [(first.member_id, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert first.member_id not in group.members and group.group_epoch == epoch_before + 2
    assert_no_double_ownership(group)


def test_classic_member_session_expires_in_a_consumer_group():
    h = harness()
    m1, m2 = classic_stable(h)
    consumer_heartbeat(h, "c1")
    group = h.coord.manager.groups["g"]
    for _ in range(12):  # c1 and m2 keep heartbeating; m1 goes silent
        h.sched.advance(1000)
        consumer_heartbeat(h, "c1", group.members["c1"].member_epoch, owned=[])
        h.coord.heartbeat("g", m2.member_id, None, group.members[m2.member_id].member_epoch)
    assert m1.member_id not in group.members  # its 10 s session expired
    assert m2.member_id in group.members and isinstance(h.coord.manager.groups["g"], ConsumerGroup)


def test_empty_consumer_group_becomes_classic_on_join_keeping_offsets():
    h = harness()
    assert consumer_heartbeat(h, "c1").error == 0
    h.coord.commit_offsets("g", "c1", None, h.coord.manager.groups["g"].members["c1"].member_epoch,
                           {("t", 1): OffsetAndMetadata(9)}, api_version=9)
    assert h.coord.consumer_group_heartbeat(HeartbeatRequest("g", "c1", -1, api_version=1)).error == 0
    assert isinstance(h.coord.manager.groups["g"], ConsumerGroup)
    results = classic_stable(h, 1)
    group = h.coord.manager.groups["g"]
    assert isinstance(group, GroupMetadata) and group.state is GroupState.STABLE
    assert group.offsets[("t", 1)].offset == 9 and results[0].error == 0


def test_upgraded_group_survives_a_reload():
    h = harness()
    m1, m2 = classic_stable(h)
    consumer_heartbeat(h, "c1")
    before = h.coord.manager.groups["g"]
    h.coord.close()  # the old coordinator's timers must not write behind the new one
    reloaded = Harness(logs=h.logs, scheduler=h.sched)
    reloaded.coord.consumer.topics = h.coord.consumer.topics
    group = reloaded.coord.manager.groups["g"]
    assert isinstance(group, ConsumerGroup)
    assert set(group.members) == set(before.members)
    m = group.members[m1.member_id]
    assert m.uses_classic_protocol and m.classic_session_timeout_ms == 10_000
    assert m.classic_protocols == before.members[m1.member_id].classic_protocols
    assert group.group_epoch == before.group_epoch and group.assignment_epoch == before.assignment_epoch
    assert {k: v.assigned for k, v in group.members.items()} == {k: v.assigned for k, v in before.members.items()}


def test_classic_static_member_replacing_the_last_consumer_member_downgrades():
    h = harness()
    assert consumer_heartbeat(h, "c1", instance_id="s1").error == 0
    group = h.coord.manager.groups["g"]
    box = h.join_new("g", protocols=[("range", encode_subscription(["t"]))])
    assert box and box[0].error == 0, box
    classic_id = box[0].member_id
    assert group.members[classic_id].uses_classic_protocol
    # the static consumer member's instance comes back speaking the classic protocol
    replaced = h.join("g", instance_id="s1", protocols=[("range", encode_subscription(["t"]))])
    assert replaced and replaced[0].error == 0, replaced
    classic = h.coord.manager.groups["g"]
    assert isinstance(classic, GroupMetadata) and classic.state is GroupState.STABLE
    assert classic.static_members == {"s1": replaced[0].member_id}
    assert set(classic.members) == {classic_id, replaced[0].member_id}
    assert "c1" not in classic.members
    assert decode_assignment(classic.members[replaced[0].member_id].assignment) == {
        "t": sorted(group.target_of(replaced[0].member_id).get(TOPIC_ID, ()))}


def test_downgraded_group_survives_a_reload():
    h = harness()
    m1, m2 = classic_stable(h)
    consumer_heartbeat(h, "c1")
    assert h.coord.consumer_group_heartbeat(HeartbeatRequest("g", "c1", -1, api_version=1)).error == 0
    before = h.coord.manager.groups["g"]
    assert isinstance(before, GroupMetadata)
    h.coord.close()  # the old coordinator's timers must not write behind the new one
    reloaded = Harness(logs=h.logs, scheduler=h.sched)
    group = reloaded.coord.manager.groups["g"]
    assert isinstance(group, GroupMetadata)
    assert set(group.members) == {m1.member_id, m2.member_id}
    assert group.generation_id == before.generation_id and group.protocol_name == "range"


@pytest.mark.parametrize("seed", range(6))
def test_random_mix_of_classic_and_consumer_members_never_owns_twice(seed):
    """Classic and consumer-protocol members come, go, heartbeat, rejoin and die in random order;
    the group converts back and forth; no partition is ever owned twice, the ownership index
    matches the members, and the committed offset survives every conversion."""
    import random

    rnd = random.Random(seed)
    h = harness()
    first = classic_stable(h, 2)
    h.coord.commit_offsets("g", first[0].member_id, None, first[0].generation_id, {("t", 3): OffsetAndMetadata(1)})
    consumers: dict[str, int] = {}  # consumer member id -> epoch
    classics: dict[str, int] = {r.member_id: r.generation_id for r in first}  # classic member id -> generation
    kinds = []
    subscription = [("range", encode_subscription(["t"]))]
    for step in range(200):
        group = h.coord.manager.groups["g"]
        if not kinds or kinds[-1] != type(group).__name__:
            kinds.append(type(group).__name__)
        assert group.offsets[("t", 3)].offset == 1
        if isinstance(group, ConsumerGroup):
            assert_no_double_ownership(group)
            owners = {(t, p): m.member_id for m in group.members.values() for t, ps in m.owned().items() for p in ps}
            assert owners == group.owners
        action = rnd.random()
        if action < 0.15 and len(consumers) < 3:  # a consumer-protocol member joins
            result = consumer_heartbeat(h, f"c{step}")
            if result.error == 0:
                consumers[f"c{step}"] = result.member_epoch
        elif action < 0.45 and consumers:  # a consumer-protocol member heartbeats
            member_id = rnd.choice(sorted(consumers))
            member = group.members.get(member_id) if isinstance(group, ConsumerGroup) else None
            owned = [] if member is None else [(t, sorted(p)) for t, p in member.assigned.items()]
            result = consumer_heartbeat(h, member_id, consumers[member_id], owned=owned)
            if result.error == 0:
                consumers[member_id] = result.member_epoch
            else:
                del consumers[member_id]
        elif action < 0.52 and consumers:  # a consumer-protocol member leaves
            member_id = rnd.choice(sorted(consumers))
            h.coord.consumer_group_heartbeat(HeartbeatRequest("g", member_id, -1, api_version=1))
            del consumers[member_id]
        elif action < 0.62 and len(classics) < 3:  # a classic member joins
            box = h.join("g", protocols=subscription)
            if box and box[0].error == ErrorCode.MEMBER_ID_REQUIRED:
                box = h.join("g", member_id=box[0].member_id, protocols=subscription)
            h.sched.advance(1)
            if box and box[0].error == 0:
                classics[box[0].member_id] = box[0].generation_id
        elif action < 0.9 and classics:  # a classic member heartbeats, rejoining when told to
            member_id = rnd.choice(sorted(classics))
            error = h.coord.heartbeat("g", member_id, None, classics[member_id])
            if error in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
                box = h.join("g", member_id=member_id, protocols=subscription)
                h.sched.advance(1)
                if box and box[0].error == 0:
                    joined = box[0]
                    classics[member_id] = joined.generation_id
                    assignments = {m: encode_v0_assignment({}) for m in classics} \
                        if joined.leader_id == member_id else None
                    h.sync("g", joined.generation_id, member_id, assignments)
                elif box and box[0].error == ErrorCode.UNKNOWN_MEMBER_ID:
                    del classics[member_id]
            elif error == ErrorCode.UNKNOWN_MEMBER_ID:
                del classics[member_id]
        elif classics:  # a classic member leaves, or dies silently
            member_id = rnd.choice(sorted(classics))
            if rnd.random() < 0.5:
                h.coord.leave_group("g", [(member_id, None)])
            del classics[member_id]
        h.sched.advance(rnd.choice([10, 100, 1000]))
    print(f"seed {seed}: {' -> '.join(kinds)}")
    # what was written replays to the group in memory
    group = h.coord.manager.groups["g"]
    h.coord.close()  # the old coordinator's timers must not write behind the new one
    reloaded = Harness(logs=h.logs, scheduler=h.sched).coord.manager.groups["g"]
    assert type(reloaded) is type(group)
    assert reloaded.offsets[("t", 3)].offset == 1
    if isinstance(group, ConsumerGroup):
        assert set(reloaded.members) == set(group.members)
        assert (reloaded.group_epoch, reloaded.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
        assert reloaded.target == {k: v for k, v in group.target.items()}
        for member_id, member in group.members.items():
            again = reloaded.members[member_id]
            assert (again.member_epoch, again.state, again.assigned, again.pending_revocation) == (
                member.member_epoch, member.state, member.assigned, member.pending_revocation)
            assert again.classic_protocols == member.classic_protocols
            assert again.classic_session_timeout_ms == member.classic_session_timeout_ms
    elif group.is_in(GroupState.STABLE):  # a classic group's log lags only while it rebalances
        assert set(reloaded.members) == set(group.members)
        assert reloaded.generation_id == group.generation_id


def test_leave_group_removing_the_last_consumer_member_downgrades():
    """Kafka 4.0 (KAFKA-18150): LeaveGroup may remove consumer-protocol members too (here an
    administrative removal by instance id); when only classic members remain the group downgrades."""
    h = harness()
    m1, m2 = classic_stable(h)
    assert consumer_heartbeat(h, "c1", instance_id="s1").error == 0
    assert isinstance(h.coord.manager.groups["g"], ConsumerGroup)
    assert h.coord.leave_group("g", [("", "s1"), ("", "unknown")]) == (
        ErrorCode.NONE, [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID])
    classic = h.coord.manager.groups["g"]
    assert isinstance(classic, GroupMetadata) and classic.state is GroupState.PREPARING_REBALANCE
    assert set(classic.members) == {m1.member_id, m2.member_id}


def test_leave_group_of_a_classic_member_with_consumer_members_left_keeps_the_consumer_group():
    h = harness()
    m1, m2 = classic_stable(h)
    assert consumer_heartbeat(h, "c1").error == 0
    group = h.coord.manager.groups["g"]
    epoch = group.group_epoch
    assert h.coord.leave_group("g", [(m1.member_id, None), (m2.member_id, None)]) == (
        ErrorCode.NONE, [ErrorCode.NONE, ErrorCode.NONE])
    assert h.coord.manager.groups["g"] is group and set(group.members) == {"c1"}
    assert group.group_epoch == epoch + 1 and not group.owners


def test_classic_member_switching_to_the_consumer_protocol_is_not_fenced_by_its_classic_deadlines():
    h = harness()
    m1, m2 = classic_stable(h)
    consumer_heartbeat(h, "c1")
    group = h.coord.manager.groups["g"]
    assert h.coord.heartbeat("g", m1.member_id, None, m1.generation_id) == ErrorCode.REBALANCE_IN_PROGRESS
    switched = consumer_heartbeat(h, m1.member_id)  # same member id, now with ConsumerGroupHeartbeat
    assert switched.error == 0 and not group.members[m1.member_id].uses_classic_protocol
    for _ in range(8):  # past the 30 s join deadline the classic heartbeat started
        h.sched.advance(5000)
        for member_id in ("c1", m1.member_id):
            member = group.members[member_id]
            owned = [(t, sorted(p)) for t, p in member.assigned.items()]  # revoked as told
            assert consumer_heartbeat(h, member_id, member.member_epoch, owned=owned).error == 0
    assert m1.member_id in group.members
    assert m2.member_id not in group.members  # silent: its classic session expired


@pytest.mark.parametrize("seed", range(4))
def test_random_static_members_and_subscriptions_across_conversions(seed):
    """Like the mix above with two topics, differing subscriptions and static members of both
    protocols replacing each other by instance id (the downgrade by static replacement included)."""
    import random

    rnd = random.Random(1000 + seed)
    h = harness()
    h.coord.consumer.topics.put(TopicMetadata(uuid.UUID(int=78), "u", 3))
    topic_sets = [["t"], ["t", "u"], ["u"]]
    instances = ["i1", "i2", "i3"]
    consumers: dict[str, tuple[int, str | None]] = {}  # member id -> (epoch, instance id)
    classics: dict[str, tuple[int, str | None, list[str]]] = {}  # member id -> (generation, instance, topics)
    kinds = []
    for step in range(250):
        group = h.coord.manager.groups.get("g")
        if group is not None and (not kinds or kinds[-1] != type(group).__name__):
            kinds.append(type(group).__name__)
        if isinstance(group, ConsumerGroup):
            assert_no_double_ownership(group)
        action = rnd.random()
        if action < 0.15:  # a consumer-protocol member joins, maybe static
            instance = rnd.choice([None, *instances])
            request = HeartbeatRequest("g", f"c{step}", 0, instance_id=instance, rebalance_timeout_ms=30_000,
                                       subscribed_topic_names=rnd.choice(topic_sets), topic_partitions=[],
                                       api_version=1)
            result = h.coord.consumer_group_heartbeat(request)
            if result.error == 0:
                consumers[f"c{step}"] = (result.member_epoch, instance)
        elif action < 0.4 and consumers:
            member_id = rnd.choice(sorted(consumers))
            epoch, instance = consumers[member_id]
            group = h.coord.manager.groups.get("g")
            member = group.members.get(member_id) if isinstance(group, ConsumerGroup) else None
            if rnd.random() < 0.15:  # leaves (static members may leave temporarily)
                leave_epoch = -2 if instance is not None and rnd.random() < 0.5 else -1
                h.coord.consumer_group_heartbeat(HeartbeatRequest("g", member_id, leave_epoch, instance_id=instance,
                                                                  api_version=1))
                del consumers[member_id]
                continue
            owned = [] if member is None else [(t, sorted(p)) for t, p in member.assigned.items()]
            result = h.coord.consumer_group_heartbeat(HeartbeatRequest(
                "g", member_id, epoch, instance_id=instance, topic_partitions=owned, api_version=1))
            if result.error == 0:
                consumers[member_id] = (result.member_epoch, instance)
            else:
                del consumers[member_id]
        elif action < 0.55:  # a classic member joins (a static one may replace whoever has its instance id)
            instance = rnd.choice([None, *instances])
            topics = rnd.choice(topic_sets)
            protocols = [("range", encode_subscription(topics))]
            box = h.join("g", instance_id=instance, protocols=protocols)
            if box and box[0].error == ErrorCode.MEMBER_ID_REQUIRED:
                box = h.join("g", member_id=box[0].member_id, protocols=protocols)
            h.sched.advance(1)
            if box and box[0].error == 0:
                classics[box[0].member_id] = (box[0].generation_id, instance, topics)
                for other, (_, other_instance, _) in list(classics.items()):
                    if instance is not None and other_instance == instance and other != box[0].member_id:
                        del classics[other]
                for other, (_, other_instance) in list(consumers.items()):
                    if instance is not None and other_instance == instance:
                        del consumers[other]
        elif action < 0.9 and classics:
            member_id = rnd.choice(sorted(classics))
            generation, instance, topics = classics[member_id]
            error = h.coord.heartbeat("g", member_id, instance, generation)
            if error in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
                box = h.join("g", member_id=member_id, instance_id=instance,
                             protocols=[("range", encode_subscription(topics))])
                h.sched.advance(1)
                if box and box[0].error == 0:
                    joined = box[0]
                    classics[member_id] = (joined.generation_id, instance, topics)
                    assignments = {m: encode_v0_assignment({}) for m in classics} \
                        if joined.leader_id == member_id else None
                    h.sync("g", joined.generation_id, member_id, assignments, instance_id=instance)
                elif box and box[0].error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    del classics[member_id]
            elif error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                del classics[member_id]
        elif classics:
            member_id = rnd.choice(sorted(classics))
            _, instance, _ = classics.pop(member_id)
            if rnd.random() < 0.5:
                h.coord.leave_group("g", [(member_id, instance)])
        h.sched.advance(rnd.choice([10, 100, 1000, 3000]))
    print(f"seed {seed}: {' -> '.join(kinds)}")
    group = h.coord.manager.groups.get("g")
    if isinstance(group, ConsumerGroup):
        assert_no_double_ownership(group)
        h.coord.close()  # the old coordinator's timers must not write behind the new one
        reloaded = Harness(logs=h.logs, scheduler=h.sched).coord.manager.groups["g"]
        assert isinstance(reloaded, ConsumerGroup) and set(reloaded.members) == set(group.members)
        for member_id, member in group.members.items():
            again = reloaded.members[member_id]
            assert (again.member_epoch, again.assigned, again.instance_id, again.classic_protocols) == (
                member.member_epoch, member.assigned, member.instance_id, member.classic_protocols)


def test_classic_member_fenced_when_it_does_not_rejoin_or_sync_in_time():
    h = harness()
    m1, m2 = classic_stable(h)
    consumer_heartbeat(h, "c1")
    group = h.coord.manager.groups["g"]
    # m1 keeps heartbeating but never rejoins: fenced after its rebalance timeout (30 s)
    for _ in range(29):
        assert h.coord.heartbeat("g", m1.member_id, None, m1.generation_id) == ErrorCode.REBALANCE_IN_PROGRESS
        h.sched.advance(1000)
    assert m1.member_id in group.members
    h.sched.advance(1500)
    assert m1.member_id not in group.members
    # a new classic member that never sends SyncGroup is fenced after its rebalance timeout too
    first = h.join("g", protocols=[("range", encode_subscription(["t"]))])[0]
    box = h.join("g", member_id=first.member_id, protocols=[("range", encode_subscription(["t"]))],
                 rebalance_ms=5_000)
    assert box[0].error == 0 and first.member_id in group.members
    for _ in range(6):
        h.sched.advance(1000)
        h.coord.heartbeat("g", first.member_id, None, box[0].generation_id)
    assert first.member_id not in group.members


def test_classic_members_keep_working_after_a_coordinator_reload():
    h = harness()
    m1, m2 = classic_stable(h)
    consumer_heartbeat(h, "c1")
    joined, synced = rejoin_classic(h, m1.member_id)
    assert synced.error == 0
    h.coord.close()  # the old coordinator's timers must not write behind the new one
    reloaded = Harness(logs=h.logs, scheduler=h.sched)
    reloaded.coord.consumer.topics = h.coord.consumer.topics
    group = reloaded.coord.manager.groups["g"]
    assert group.members[m1.member_id].session_timer is not None  # sessions restart after the load
    assert reloaded.coord.heartbeat("g", m1.member_id, None, joined.generation_id) in (
        ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
    assert reloaded.coord.heartbeat("g", m1.member_id, None, joined.generation_id + 5) == ErrorCode.ILLEGAL_GENERATION
    for _ in range(12):  # m1 heartbeats; m2 stays silent and expires after its 10 s session
        h.sched.advance(1000)
        reloaded.coord.heartbeat("g", m1.member_id, None, group.members[m1.member_id].member_epoch)
    assert m1.member_id in group.members and m2.member_id not in group.members
