"""Streams group records (types 17-23) written and replayed back into the same group."""
from kafkapy.groupcoord.streams import records as rec
from kafkapy.groupcoord.streams.group import MemberState, StreamsGroup, StreamsGroupMember, Tasks
from kafkapy.groupcoord.streams.topology import CopartitionGroup, Subtopology, TopicInfo, Topology


def test_round_trip():
    group = StreamsGroup("app")
    group.group_epoch, group.assignment_epoch, group.validated_topology_epoch = 4, 4, 0
    group.last_assignment_configs = {"num.standby.replicas": "1"}
    group.topology = Topology(0, (Subtopology("0", ("in",), (), (TopicInfo("app-s-changelog", 0, 0, (("a", "b"),)),),
                                              ("app-rep",), (), (CopartitionGroup((0,), (), ()),)),
                                  Subtopology("1", (), (), (), (), (TopicInfo("app-rep", 0, 3),), ())))
    m = StreamsGroupMember("m1", instance_id="i1", rack_id="r", client_id="c", client_host="/h",
                           rebalance_timeout_ms=300, topology_epoch=0, process_id="p1", user_endpoint=("h", 8080),
                           client_tags={"zone": "a"}, member_epoch=4, previous_member_epoch=3,
                           state=MemberState.UNREVOKED_TASKS, assigned=Tasks.of({"0": [0, 2]}, {"1": [1]}),
                           pending_revocation=Tasks.of({"0": [1]}), active_epochs={("0", 0): 2, ("0", 2): 4,
                                                                                   ("0", 1): 1})
    group.add_member(m)
    group.target["m1"] = Tasks.of({"0": [0, 2]}, {"1": [1]})
    records = [rec.metadata_record(group), rec.topology_record("app", group.topology),
               rec.member_metadata_record("app", m), rec.target_member_record("app", "m1", group.target["m1"]),
               rec.target_epoch_record(group), rec.current_assignment_record("app", m)]
    replay = rec.StreamsGroupReplay()
    for key, value in records:
        assert replay.add(key, value)
    restored = rec.restore_streams_group(replay.groups["app"], {}, 0)
    assert restored.topology == group.topology
    assert (restored.group_epoch, restored.assignment_epoch, restored.validated_topology_epoch) == (4, 4, 0)
    assert restored.last_assignment_configs == {"num.standby.replicas": "1"}
    r = restored.members["m1"]
    assert r.metadata_equals(m)
    assert (r.member_epoch, r.previous_member_epoch, r.state) == (4, 3, MemberState.UNREVOKED_TASKS)
    assert r.assigned == m.assigned and r.pending_revocation == m.pending_revocation
    assert r.active_epochs == m.active_epochs
    assert restored.target == group.target
    assert restored.static_members == {"i1": "m1"}
    # tombstones remove the member, then the group
    for key, value in rec.member_tombstones("app", "m1"):
        replay.add(key, value)
    assert "m1" not in rec.restore_streams_group(replay.groups["app"], {}, 0).members
    for key, value in rec.group_tombstones(restored):
        replay.add(key, value)
    assert "app" not in replay.groups


def test_other_keys_are_not_streams_records():
    assert rec.decode_streams_key(b"\x00\x03\x00\x01a") is None
    assert not rec.StreamsGroupReplay().add(b"\x00\x02\x00\x01a", None)
