"""Share group membership, share sessions and group configs (kafkapy/groupcoord/share/coordinator.py)."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

from kafkapy.groupcoord.share import ShareGroupConfig, ShareGroupCoordinator
from kafkapy.groupcoord.share.partition import ACQUIRED, AVAILABLE
from kafkapy.protocol.errors import ErrorCode

TOPIC_ID = uuid.uuid4()
TOPICS = {"t": SimpleNamespace(name="t", topic_id=TOPIC_ID, partition_count=2)}


def _coordinator(**config) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(ShareGroupConfig(**config), TOPICS.get)


def test_members_join_split_the_partitions_and_leave():
    sg = _coordinator()
    a = sg.heartbeat("g", "a", 0, None, ["t"], "c", "/h", 0.0)
    assert a.assignment == {TOPIC_ID: [0, 1]}  # alone: both partitions
    assert a.member_epoch == 2                  # Kafka 4.4: a group starts at epoch 1
    b = sg.heartbeat("g", "b", 0, None, ["t"], "c", "/h", 0.0)
    assert a.error == b.error == ErrorCode.NONE
    assert b.member_epoch == 3
    # a's next heartbeat moves it to the group epoch with its new share: one partition each (the
    # share assignor, as Kafka's simple assignor: two members, two partitions)
    again = sg.heartbeat("g", "a", a.member_epoch, None, None, "c", "/h", 1.0)
    assert again.member_epoch == 3
    assert sorted(again.assignment[TOPIC_ID] + b.assignment[TOPIC_ID]) == [0, 1]
    steady = sg.heartbeat("g", "a", 3, None, None, "c", "/h", 1.0)
    assert steady.assignment is None
    # the previous epoch is accepted (the answer that moved the member may have been lost)
    previous = sg.heartbeat("g", "a", 2, None, None, "c", "/h", 1.0)
    assert (previous.error, previous.member_epoch, previous.assignment) == (ErrorCode.NONE, 3, None)
    # a full request (topics named) gets the assignment; a rejoin with the same topics moves nothing
    full = sg.heartbeat("g", "a", 3, None, ["t"], "c", "/h", 1.0)
    assert full.member_epoch == 3 and full.assignment == again.assignment
    rejoin = sg.heartbeat("g", "a", 0, None, ["t"], "c", "/h", 1.0)
    assert rejoin.member_epoch == 3 and rejoin.assignment == again.assignment
    greater = sg.heartbeat("g", "a", 7, None, None, "c", "/h", 1.0)
    assert greater.error == ErrorCode.FENCED_MEMBER_EPOCH
    assert greater.message == ("The share group member has a greater member epoch (7) than the one known by the "
                               "group coordinator (3). The member must abandon all its partitions and rejoin.")
    smaller = sg.heartbeat("g", "a", 1, None, None, "c", "/h", 1.0)
    assert smaller.error == ErrorCode.FENCED_MEMBER_EPOCH and "smaller member epoch (1)" in smaller.message
    assert sg.heartbeat("g", "zz", 3, None, None, "c", "/h", 1.0).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert sg.heartbeat("g", "x", 0, None, None, "c", "/h", 1.0).error == ErrorCode.INVALID_REQUEST
    assert sg.heartbeat("g", "a", -1, None, None, "c", "/h", 1.0).member_epoch == -1
    assert list(sg.groups["g"].members) == ["b"]
    # leaving twice, or a group never seen (Kafka 4.4's answers)
    assert sg.heartbeat("g", "a", -1, None, None, "c", "/h", 1.0).error == ErrorCode.UNKNOWN_MEMBER_ID
    # (Kafka: GROUP_ID_NOT_FOUND; kafkapy's groups are not stored, so their members must join again)
    unknown = sg.heartbeat("nope", "a", 4, None, None, "c", "/h", 1.0)
    assert (unknown.error, unknown.message) == (ErrorCode.UNKNOWN_MEMBER_ID, "Member a is not a member of group nope.")


def test_members_that_miss_the_session_timeout_leave_the_group_but_not_their_share_sessions():
    # Kafka's share-partition leader does not follow group membership: a share session ends when
    # its member closes it, its connection closes, or it sits idle past the session timeout
    sg = _coordinator(session_timeout_ms=1000)
    sg.heartbeat("g", "a", 0, None, ["t"], "c", "/h", 0.0)
    s = sg.open_session("g", "a", 0.0)
    s.partitions.add(("t", 0, TOPIC_ID))
    sp = sg.share_partition("g", "t", 0, 0, 0)
    assert sp.acquire([(0, 9, True)], "a", 100, 30.0, 0.0) == [(0, 9, 1)]
    sg.heartbeat("g", "b", 0, None, ["t"], "c", "/h", 0.5)
    sg.expire_members(2.0)
    assert "a" not in sg.groups["g"].members
    assert ("g", "a") in sg.sessions
    assert all(r.state == ACQUIRED and r.member == "a" for r in sp.records.values())
    # idle past the timeout: evicted when another session opens, what it held released
    sg.open_session("g", "c", 2.0)
    assert ("g", "a") not in sg.sessions
    assert all(r.state == AVAILABLE for r in sp.records.values())
    assert [s.member_id for s in sg.take_released()] == ["a"]


def test_a_leave_heartbeat_keeps_the_share_session_for_the_closing_acknowledgement():
    sg = _coordinator()
    sg.heartbeat("g", "a", 0, None, ["t"], "c", "/h", 0.0)
    s = sg.open_session("g", "a", 0.0)
    s.partitions.add(("t", 0, TOPIC_ID))
    sp = sg.share_partition("g", "t", 0, 0, 0)
    assert sp.acquire([(0, 9, True)], "a", 100, 30.0, 0.0) == [(0, 9, 1)]
    sg.heartbeat("g", "a", -1, None, None, "c", "/h", 0.1)
    assert sg.session_error("g", "a", -1) == (0, s)
    assert all(r.state == ACQUIRED for r in sp.records.values())


def test_a_new_share_session_keeps_what_the_member_holds():
    sg = _coordinator()
    s = sg.open_session("g", "a", 0.0)
    s.partitions.add(("t", 0, TOPIC_ID))
    sp = sg.share_partition("g", "t", 0, 0, 0)
    assert sp.acquire([(0, 9, True)], "a", 100, 30.0, 0.0) == [(0, 9, 1)]
    sg.open_session("g", "a", 0.1)
    assert all(r.state == ACQUIRED and r.member == "a" for r in sp.records.values())


def test_idle_sessions_are_evicted_when_a_new_one_opens():
    sg = _coordinator(session_timeout_ms=1000)
    s = sg.open_session("g", "dead", 0.0)
    s.partitions.add(("t", 0, TOPIC_ID))
    sp = sg.share_partition("g", "t", 0, 0, 5)
    sp.acquire([(0, 4, True)], "dead", 100, 30.0, 0.0)
    sg.open_session("g", "alive", 0.5)
    assert ("g", "dead") in sg.sessions
    sg.open_session("g", "other", 5.0)
    assert ("g", "dead") not in sg.sessions and ("g", "alive") not in sg.sessions
    assert all(r.state == AVAILABLE for r in sp.records.values())


def test_session_epochs():
    sg = _coordinator()
    assert sg.session_error("g", "m", 1)[0] == ErrorCode.SHARE_SESSION_NOT_FOUND
    session = sg.open_session("g", "m", 0.0)
    assert session.epoch == 1
    assert sg.session_error("g", "m", 2)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert sg.session_error("g", "m", 1) == (ErrorCode.NONE, session)
    assert sg.session_error("g", "m", -1) == (ErrorCode.NONE, session)


def test_a_new_session_releases_what_the_old_one_held():
    sg = _coordinator()
    old = sg.open_session("g", "m", 0.0)
    old.partitions.add(("t", 0, TOPIC_ID))
    sp = sg.share_partition("g", "t", 0, 0, 3)
    sp.acquire([(0, 2, True)], "m", 100, 30.0, 0.0)
    assert all(r.state == ACQUIRED for r in sp.records.values())
    sg.open_session("g", "m", 1.0)
    assert all(r.state == AVAILABLE for r in sp.records.values())


def test_group_configs():
    sg = _coordinator(record_lock_duration_ms=15000)
    assert sg.group_config("g", "share.auto.offset.reset") == "latest"
    assert sg.lock_duration_s("g") == 15.0
    assert sg.alter_group_configs("g", [("share.auto.offset.reset", 0, "EARLIEST")], False) == (ErrorCode.NONE, None)
    assert sg.group_config("g", "share.auto.offset.reset") == "earliest"
    assert sg.alter_group_configs("g", [("share.isolation.level", 0, "serializable")], False)[0] == ErrorCode.INVALID_CONFIG
    assert sg.alter_group_configs("g", [("no.such.config", 0, "1")], False)[0] == ErrorCode.INVALID_CONFIG
    assert sg.alter_group_configs("g", [("share.delivery.count.limit", 0, "1")], False)[0] == ErrorCode.INVALID_CONFIG
    assert sg.alter_group_configs("g", [("share.record.lock.duration.ms", 0, "2000")], True) == (ErrorCode.NONE, None)
    assert sg.lock_duration_s("g") == 15.0  # validate only
    assert sg.alter_group_configs("g", [("share.auto.offset.reset", 1, None)], False) == (ErrorCode.NONE, None)
    assert sg.group_config("g", "share.auto.offset.reset") == "latest"
    # earliest: a share-partition starts at the log start, latest at the high watermark
    sg.alter_group_configs("g2", [("share.auto.offset.reset", 0, "earliest")], False)
    assert sg.share_partition("g2", "t", 0, 3, 10).start_offset == 3
    assert sg.share_partition("g", "t", 0, 3, 10).start_offset == 10


def test_list_groups_filters():
    sg = _coordinator()
    sg.heartbeat("g", "a", 0, None, ["t"], "c", "/h", 0.0)
    sg.heartbeat("e", "a", 0, None, ["t"], "c", "/h", 0.0)
    sg.heartbeat("e", "a", -1, None, None, "c", "/h", 0.0)
    everywhere = lambda group_id: True  # noqa: E731
    assert {(g.group_id, g.state) for g in sg.list_groups(everywhere)} == {("g", "Stable"), ("e", "Empty")}
    assert [g.group_id for g in sg.list_groups(everywhere, ["stable"], ["Share"])] == ["g"]
    assert sg.list_groups(everywhere, None, ["consumer"]) == []
    assert sg.list_groups(lambda group_id: group_id == "e", None, None)[0].group_id == "e"


def test_group_configs_live_in_the_metadata_store(monkeypatch, tmp_path):
    from kafkapy.groupcoord.share import coordinator as module
    from kafkapy.metadata.embedded import EmbeddedMetadataStore

    clock = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    store = EmbeddedMetadataStore(tmp_path / "meta")
    one = ShareGroupCoordinator(ShareGroupConfig(), TOPICS.get, store.get_group_configs, store.set_group_configs)
    other = ShareGroupCoordinator(ShareGroupConfig(), TOPICS.get, store.get_group_configs, store.set_group_configs)
    assert other.group_config("g", "share.isolation.level") == "read_uncommitted"   # read (and cached) now
    assert one.alter_group_configs("g", [("share.isolation.level", 0, "read_committed")], False)[0] == ErrorCode.NONE
    assert one.group_config("g", "share.isolation.level") == "read_committed"
    assert other.group_config("g", "share.isolation.level") == "read_uncommitted"   # until its copy is old
    clock[0] += module.GROUP_CONFIG_TTL_S
    assert other.group_config("g", "share.isolation.level") == "read_committed"
    store.close()
    reopened = EmbeddedMetadataStore(tmp_path / "meta")   # and after a restart
    assert reopened.get_group_configs("g") == {"share.isolation.level": "read_committed"}
    reopened.close()
