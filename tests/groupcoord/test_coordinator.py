"""Rebalance rules of the classic group coordinator, driven with a manual clock."""
from __future__ import annotations

from kafkapy.groupcoord import GroupState
from kafkapy.protocol.consumer_protocol import decode_assignment, encode_assignment
from kafkapy.protocol.errors import ErrorCode as E

from .harness import Harness, subscription


def state(h: Harness, group="g") -> GroupState:
    return h.coord.manager.get_group(group).state


def test_member_id_required_then_join_and_sync():
    h = Harness()
    first = h.join()
    assert first[0].error == E.MEMBER_ID_REQUIRED
    assert first[0].member_id.startswith("client-")
    assert state(h) is GroupState.EMPTY
    box = h.join(member_id=first[0].member_id)
    assert box == []  # parked until the (zero) initial delay passes
    assert state(h) is GroupState.PREPARING_REBALANCE
    h.sched.advance(0)
    result = box[0]
    assert result.error == 0 and result.generation_id == 1
    assert result.leader_id == result.member_id == first[0].member_id
    assert result.protocol_name == "range" and result.protocol_type == "consumer"
    assert [m[0] for m in result.members] == [result.member_id]
    assert state(h) is GroupState.COMPLETING_REBALANCE
    assignment = encode_assignment({"t": [0, 1]})
    sync = h.sync("g", 1, result.member_id, {result.member_id: assignment})
    assert sync[0].error == 0 and sync[0].assignment == assignment
    assert state(h) is GroupState.STABLE
    assert h.coord.heartbeat("g", result.member_id, None, 1) == 0


def test_old_clients_join_without_member_id_round_trip():
    h = Harness()
    box = h.join(require_known=False)
    h.sched.advance(0)
    assert box[0].error == 0 and box[0].generation_id == 1


def test_second_member_triggers_rebalance_and_both_get_new_generation():
    h = Harness()
    [a] = h.stable_group()
    box_b = h.join_new()
    assert state(h) is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", a, None, 1) == E.REBALANCE_IN_PROGRESS
    assert box_b == []
    box_a = h.join(member_id=a)
    # every member rejoined: the join phase completes at once, no timer needed
    assert box_a and box_b
    assert box_a[0].generation_id == box_b[0].generation_id == 2
    assert box_a[0].leader_id == a
    assert len(box_a[0].members) == 2 and box_b[0].members == []
    b = box_b[0].member_id
    sync_b = h.sync("g", 2, b)
    assert sync_b == []
    h.sync("g", 2, a, {a: encode_assignment({"t": [0]}), b: encode_assignment({"t": [1]})})
    assert decode_assignment(sync_b[0].assignment) == {"t": [1]}
    assert state(h) is GroupState.STABLE


def test_member_that_does_not_rejoin_is_removed_after_rebalance_timeout():
    h = Harness()
    a, b = h.stable_group(n=2, rebalance_ms=5_000, session_ms=60_000)
    box_c = h.join_new(rebalance_ms=5_000)
    box_a = h.join(member_id=a, rebalance_ms=5_000)
    assert box_a == [] and box_c == []
    h.sched.advance(5_000)
    assert box_a[0].error == 0 and box_c[0].error == 0
    group = h.coord.manager.get_group("g")
    assert b not in group.members and len(group.members) == 2
    assert h.coord.heartbeat("g", b, None, 2) == E.UNKNOWN_MEMBER_ID


def test_session_timeout_expires_member_and_rebalances():
    h = Harness()
    a, b = h.stable_group(n=2, session_ms=1_000)
    h.sched.advance(500)
    assert h.coord.heartbeat("g", a, None, 1) == 0
    h.sched.advance(500)
    assert state(h) is GroupState.PREPARING_REBALANCE  # b expired; a must rejoin
    assert h.coord.heartbeat("g", a, None, 1) == E.REBALANCE_IN_PROGRESS
    box = h.join(member_id=a)
    assert box[0].generation_id == 2 and [m[0] for m in box[0].members] == [a]


def test_last_member_leaving_empties_group():
    h = Harness()
    [a] = h.stable_group()
    top, errors = h.coord.leave_group("g", [(a, None)])
    assert (top, errors) == (0, [0])
    # nobody left to wait for: the join phase completes at once
    assert state(h) is GroupState.EMPTY
    assert h.coord.manager.get_group("g").generation_id == 2


def test_leave_group_batch_and_unknown_members():
    h = Harness()
    a, b = h.stable_group(n=2)
    top, errors = h.coord.leave_group("g", [(a, None), ("nobody", None), (b, None)])
    assert top == 0 and errors == [0, E.UNKNOWN_MEMBER_ID, 0]
    assert h.coord.leave_group("missing", [("x", None)]) == (0, [E.UNKNOWN_MEMBER_ID])
    assert h.coord.leave_group("", [("x", None)]) == (E.INVALID_GROUP_ID, [])


def test_inconsistent_protocol_type_leaves_group_intact():
    h = Harness()
    [a] = h.stable_group()
    box = h.join(protocol_type="connect", protocols=[("default", b"x")])
    assert box[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    box = h.join(protocols=[("roundrobin", b"x")])  # no protocol in common
    assert box[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert state(h) is GroupState.STABLE
    assert h.coord.heartbeat("g", a, None, 1) == 0
    assert h.join(protocols=[])[0].error == E.INCONSISTENT_GROUP_PROTOCOL


def test_empty_group_needs_a_protocol():
    h = Harness()
    assert h.join(group="new", protocols=[])[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(group="new2", protocol_type="")[0].error == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_errors():
    h = Harness()
    [a] = h.stable_group()
    assert h.sync("g", 0, a)[0].error == E.ILLEGAL_GENERATION
    assert h.sync("g", 1, "stranger")[0].error == E.UNKNOWN_MEMBER_ID
    assert h.sync("nogroup", 1, a)[0].error == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", 1, a, protocol_type="connect")[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync("g", 1, a, protocol_name="sticky")[0].error == E.INCONSISTENT_GROUP_PROTOCOL
    ok = h.sync("g", 1, a, protocol_type="consumer", protocol_name="range")[0]
    assert ok.error == 0 and ok.protocol_name == "range"
    assert state(h) is GroupState.STABLE


def test_sync_during_rebalance_and_heartbeat_errors():
    h = Harness()
    a, b = h.stable_group(n=2)
    h.join(member_id=a)  # leader rejoin forces a rebalance
    assert state(h) is GroupState.PREPARING_REBALANCE
    assert h.sync("g", 1, b)[0].error == E.REBALANCE_IN_PROGRESS
    assert h.coord.heartbeat("g", "ghost", None, 1) == E.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("g", b, None, 0) == E.ILLEGAL_GENERATION
    assert h.coord.heartbeat("nogroup", b, None, 1) == E.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("", b, None, 1) == E.INVALID_GROUP_ID


def test_completing_rebalance_interrupted_by_new_member():
    h = Harness()
    a, b = h.stable_group(n=2)
    box_a = h.join(member_id=a)
    box_b = h.join(member_id=b)
    assert box_a[0].generation_id == 2
    sync_b = h.sync("g", 2, b)  # waits for the leader
    box_c = h.join_new()
    assert sync_b[0].error == E.REBALANCE_IN_PROGRESS
    assert state(h) is GroupState.PREPARING_REBALANCE
    h.join(member_id=a)
    h.join(member_id=b)
    assert box_c[0].generation_id == 3


def test_commit_during_completing_rebalance_is_rejected():
    h = Harness()
    a, b = h.stable_group(n=2)
    h.join(member_id=a)
    h.join(member_id=b)
    from kafkapy.groupcoord import OffsetAndMetadata
    result = h.coord.commit_offsets("g", a, None, 2, {("t", 0): OffsetAndMetadata(5)})
    assert result == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_static_member_rejoin_causes_no_rebalance():
    h = Harness()
    box = h.join(instance_id="i1", skip=True)  # static members skip MEMBER_ID_REQUIRED
    h.sched.advance(0)
    old = box[0].member_id
    assert old.startswith("i1-")
    h.sync("g", 1, old, {old: encode_assignment({"t": [0, 1, 2]})}, instance_id="i1")
    assert state(h) is GroupState.STABLE
    # the consumer restarts: same instance id, no member id
    box = h.join(instance_id="i1", skip=True)
    result = box[0]
    assert result.error == 0 and result.member_id != old
    assert result.generation_id == 1 and state(h) is GroupState.STABLE
    assert result.skip_assignment and result.leader_id == result.member_id  # KIP-814
    sync = h.sync("g", 1, result.member_id, instance_id="i1")
    assert decode_assignment(sync[0].assignment) == {"t": [0, 1, 2]}
    # the old incarnation is fenced
    assert h.coord.heartbeat("g", old, "i1", 1) == E.FENCED_INSTANCE_ID
    assert h.coord.heartbeat("g", result.member_id, "i1", 1) == 0


def test_static_leader_rejoin_before_v9_gets_old_leader_id():
    h = Harness()
    box = h.join(instance_id="i1")
    h.sched.advance(0)
    old = box[0].member_id
    h.sync("g", 1, old, {old: b"x"}, instance_id="i1")
    result = h.join(instance_id="i1")[0]
    assert result.leader_id == old and result.members == [] and not result.skip_assignment


def test_static_member_survives_session_only_if_back_in_time():
    h = Harness()
    box = h.join(instance_id="i1", session_ms=1_000)
    h.sched.advance(0)
    h.sync("g", 1, box[0].member_id, {}, instance_id="i1")
    h.sched.advance(1_001)  # no heartbeat: removed, group empties after the join phase
    assert h.coord.manager.get_group("g").static_members == {}


def test_leave_by_instance_id():
    h = Harness()
    box = h.join(instance_id="i1")
    h.sched.advance(0)
    top, errors = h.coord.leave_group("g", [("", "i1"), ("", "i2")])
    assert errors == [0, E.UNKNOWN_MEMBER_ID]
    assert box[0].member_id not in h.coord.manager.get_group("g").members


def test_initial_delay_waits_for_more_members():
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    box1 = h.join_new(rebalance_ms=60_000)
    h.sched.advance(2_000)
    box2 = h.join_new(rebalance_ms=60_000)
    h.sched.advance(1_000)  # first window ends, a member arrived during it: wait another window
    assert box1 == [] and box2 == []
    h.sched.advance(3_000)
    assert box1[0].generation_id == box2[0].generation_id == 1
    assert len([b for b in (box1, box2) if b[0].members]) == 1


def test_protocol_selection_by_vote():
    h = Harness()
    b1 = h.join(require_known=False, protocols=[("cooperative-sticky", b"a"), ("range", b"a")])
    b2 = h.join(require_known=False, protocols=[("range", b"b"), ("cooperative-sticky", b"b")])
    b3 = h.join(require_known=False, protocols=[("cooperative-sticky", b"c")])
    h.sched.advance(0)
    assert b1[0].protocol_name == b2[0].protocol_name == b3[0].protocol_name == "cooperative-sticky"
    assert b1[0].error == b2[0].error == b3[0].error == 0


def test_pending_member_expires_and_unblocks_join():
    h = Harness()
    [a] = h.stable_group()
    pending = h.join(session_ms=2_000)[0].member_id  # got its id, never comes back
    assert pending in h.coord.manager.get_group("g").pending_members
    box = h.join(member_id=a)  # leader rejoins; the pending member holds the phase
    assert box == []
    h.sched.advance(2_000)
    assert box[0].error == 0 and box[0].generation_id == 2


def test_group_max_size():
    h = Harness(group_max_size=1)
    h.stable_group()
    box = h.join(require_known=False)
    assert box[0].error == E.GROUP_MAX_SIZE_REACHED


def test_session_timeout_bounds():
    h = Harness(group_min_session_timeout_ms=6_000, group_max_session_timeout_ms=10_000)
    assert h.join(session_ms=5_999)[0].error == E.INVALID_SESSION_TIMEOUT
    assert h.join(session_ms=10_001)[0].error == E.INVALID_SESSION_TIMEOUT


def test_not_coordinator_for_unowned_partition():
    h = Harness()
    h.coord.on_resigned(h.coord.partition_for("g"))
    assert h.join()[0].error == E.NOT_COORDINATOR
    assert h.coord.heartbeat("g", "m", None, 1) == E.NOT_COORDINATOR


def test_close_answers_waiters_and_cancels_every_timer():
    h = Harness()
    a, b = h.stable_group(n=2)
    box = h.join(member_id=a)
    h.join_new(group="other")
    h.coord.close()
    assert box[0].error == E.NOT_COORDINATOR
    assert h.sched.pending() == 0
    assert h.join()[0].error == E.COORDINATOR_NOT_AVAILABLE


def test_cooperative_member_rejoins_with_new_metadata_in_stable():
    h = Harness()
    protos = [("cooperative-sticky", subscription("t"))]
    a, b = h.stable_group(n=2, protocols=protos)
    box = h.join(member_id=b, protocols=[("cooperative-sticky", subscription("t", "u"))])
    assert state(h) is GroupState.PREPARING_REBALANCE and box == []
    h.join(member_id=a, protocols=protos)
    assert box[0].generation_id == 2
    assert h.coord.manager.get_group("g").subscribed_topics == {"t", "u"}


def test_retried_join_in_completing_rebalance_gets_same_answer():
    h = Harness()
    a, b = h.stable_group(n=2)
    first = h.join(member_id=a)
    h.join(member_id=b)
    again = h.join(member_id=a)
    assert again[0].generation_id == first[0].generation_id and len(again[0].members) == 2
    assert state(h) is GroupState.COMPLETING_REBALANCE


def test_pending_sync_expiry_removes_silent_members():
    h = Harness()
    a, b = h.stable_group(n=2, rebalance_ms=4_000)
    h.join(member_id=a, rebalance_ms=4_000)
    h.join(member_id=b, rebalance_ms=4_000)
    h.sync("g", 2, a, {a: b"", b: b""})  # b never syncs
    assert state(h) is GroupState.STABLE
    h.sched.advance(4_000)
    group = h.coord.manager.get_group("g")
    assert b not in group.members
    assert state(h) is GroupState.PREPARING_REBALANCE


def test_coordination_follows_partition_leadership():
    h = Harness()
    [a] = h.stable_group()
    from kafkapy.groupcoord import OffsetAndMetadata
    h.coord.commit_offsets("g", a, None, 1, {("t", 0): OffsetAndMetadata(42)})
    p = h.coord.partition_for("g")
    others = [1 if i == p else 2 for i in range(3)]
    h.coord.sync_leadership(others, node_id=2)  # another broker leads g's partition now
    assert h.coord.manager.get_group("g") is None
    assert h.coord.heartbeat("g", a, None, 1) == E.NOT_COORDINATOR
    assert h.coord.fetch_offsets("g", [("t", 0)])[0] == E.NOT_COORDINATOR
    h.coord.sync_leadership([2, 2, 2], node_id=2)  # leadership comes back: state reloads from the log
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)][0].offset == 42
    assert h.coord.heartbeat("g", a, None, 1) == 0


def test_topic_partition_count_decides_placement():
    h = Harness()
    h.coord.sync_leadership([1] * 7, node_id=1)
    from kafkapy.groupcoord import partition_for
    assert h.coord.partition_for("some-group") == partition_for("some-group", 7)
    assert h.coord.manager.owned_partitions == set(range(7))


def test_resigning_answers_parked_joins():
    h = Harness()
    a, b = h.stable_group(n=2)
    box = h.join(member_id=a)
    h.coord.sync_leadership(None, node_id=1)  # topic gone / nothing led here
    assert box[0].error == E.NOT_COORDINATOR
    assert h.sched.pending() == 1  # only the periodic offset-expiry timer remains
