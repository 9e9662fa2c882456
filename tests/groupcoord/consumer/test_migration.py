"""Online migration between the classic and the consumer protocol: the embedded protocol bytes,
the policy, and the pure group conversions (kafkapy/groupcoord/consumer/{embedded_protocol,migration}.py)."""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.consumer.embedded_protocol import (
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
from kafkapy.groupcoord.consumer_protocol import encode_subscription
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
    raw = encode_assignment({"b": [2, 1], "a": [0], "empty": []}, version=3)
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
