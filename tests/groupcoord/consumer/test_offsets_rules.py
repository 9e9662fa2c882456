"""Offset rules of KIP-848 consumer groups (kafkapy.groupcoord.consumer.offsets), on groups built
from the model directly: who may commit, fetch, delete offsets, delete the group, what expires."""
from __future__ import annotations

import uuid

from kafkapy.groupcoord.consumer.group import ConsumerGroup, ConsumerGroupMember
from kafkapy.groupcoord.consumer.offsets import (
    commit_error,
    delete_group_error,
    expired_offsets,
    fetch_error,
    missing_group_commit_error,
    split_offset_delete,
    txn_commit_error,
)
from kafkapy.groupcoord.group import OffsetAndMetadata
from kafkapy.protocol.errors import ErrorCode as E

T = uuid.UUID(int=7)


def group_with(*members: ConsumerGroupMember, regexes: dict[str, frozenset[str]] | None = None) -> ConsumerGroup:
    group = ConsumerGroup("g")
    group.group_epoch = group.assignment_epoch = 5
    for member in members:
        group.add_member(member)
    group.resolved_regexes = dict(regexes or {})
    return group


def consumer(member_id: str = "m1", epoch: int = 5, topics=("t",), regex: str | None = None) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id, member_epoch=epoch, subscribed_topic_names=list(topics),
                               subscribed_topic_regex=regex)


def classic(member_id: str = "c1", epoch: int = 5) -> ConsumerGroupMember:
    return ConsumerGroupMember(member_id, member_epoch=epoch, subscribed_topic_names=["t"],
                               classic_protocols=[("range", b"")])


def test_admin_commit_only_while_the_group_has_no_members():
    assert commit_error(group_with(), "", None, -1, 9) is None
    assert commit_error(group_with(), "", None, -1, 2) is None  # any version for an admin
    assert commit_error(group_with(consumer()), "", None, -1, 9) == E.UNKNOWN_MEMBER_ID


def test_member_commit_checks_id_version_and_epoch():
    group = group_with(consumer("m1", epoch=5))
    assert commit_error(group, "m1", None, 5, 9) is None
    assert commit_error(group, "ghost", None, 5, 9) == E.UNKNOWN_MEMBER_ID
    assert commit_error(group, "m1", None, 5, 8) == E.UNSUPPORTED_VERSION
    assert commit_error(group, "m1", None, 4, 9) == E.STALE_MEMBER_EPOCH
    assert commit_error(group, "m1", None, 6, 9) == E.STALE_MEMBER_EPOCH  # Kafka 4.0: any other epoch
    assert commit_error(group, "m1", None, 5, None) is None  # broker-internal caller: no version check


def test_classic_protocol_member_gets_illegal_generation_with_any_version():
    group = group_with(classic("c1", epoch=5))
    assert commit_error(group, "c1", None, 5, 2) is None
    assert commit_error(group, "c1", None, 4, 8) == E.ILLEGAL_GENERATION


def test_txn_commit_maps_stale_epoch_to_illegal_generation_and_ignores_version():
    group = group_with(consumer("m1", epoch=5))
    assert txn_commit_error(group, "m1", None, 5) is None
    assert txn_commit_error(group, "m1", None, 3) == E.ILLEGAL_GENERATION
    assert txn_commit_error(group, "x", None, 5) == E.UNKNOWN_MEMBER_ID
    assert txn_commit_error(group, "", None, -1) == E.UNKNOWN_MEMBER_ID
    assert txn_commit_error(group_with(), "", None, -1) is None


def test_commit_to_a_missing_group():
    assert missing_group_commit_error(-1, 9) is None
    assert missing_group_commit_error(3, 9) == E.GROUP_ID_NOT_FOUND
    assert missing_group_commit_error(3, 8) == E.ILLEGAL_GENERATION
    assert missing_group_commit_error(3, None) == E.ILLEGAL_GENERATION


def test_fetch_rules():
    group = group_with(consumer("m1", epoch=5), classic("c1", epoch=5))
    assert fetch_error(group, None, -1) is None  # admin
    assert fetch_error(group, "m1", 5) is None
    assert fetch_error(group, "m1", 4) == E.STALE_MEMBER_EPOCH
    assert fetch_error(group, "c1", 4) == E.ILLEGAL_GENERATION
    assert fetch_error(group, "nobody", 5) == E.UNKNOWN_MEMBER_ID
    assert fetch_error(group, None, 5) == E.UNKNOWN_MEMBER_ID


def test_offset_delete_refuses_subscribed_topics_by_name_and_regex():
    group = group_with(consumer("m1", topics=("t",)), consumer("m2", topics=(), regex="r.*"),
                       regexes={"r.*": frozenset({"r1"})})
    eligible, errors = split_offset_delete(group, [("t", 0), ("r1", 1), ("other", 0)])
    assert eligible == [("other", 0)]
    assert errors == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("r1", 1): E.GROUP_SUBSCRIBED_TO_TOPIC}
    assert split_offset_delete(group_with(), [("t", 0)]) == ([("t", 0)], {})


def test_delete_group_only_when_empty():
    assert delete_group_error(group_with()) is None
    assert delete_group_error(group_with(consumer())) == E.NON_EMPTY_GROUP


def test_expiry_by_commit_time_skips_subscribed_and_pending_transactions():
    group = group_with(consumer("m1", topics=("t",)))
    group.offsets = {("t", 0): OffsetAndMetadata(1, commit_timestamp=0),
                     ("old", 0): OffsetAndMetadata(1, commit_timestamp=0),
                     ("old", 1): OffsetAndMetadata(1, commit_timestamp=0),
                     ("new", 0): OffsetAndMetadata(1, commit_timestamp=900),
                     ("explicit", 0): OffsetAndMetadata(1, commit_timestamp=900, expire_timestamp=950)}
    assert sorted(expired_offsets(group, 1000, 500)) == [("explicit", 0), ("old", 0), ("old", 1)]
    pending = {("g", ("old", 1))}
    assert sorted(expired_offsets(group, 1000, 500, lambda g, tp: (g, tp) in pending)) == [
        ("explicit", 0), ("old", 0)]


# -- through the coordinator (manual clock, in-memory __consumer_offsets) ----------------------
def coordinator_with_consumer_group(members=()):
    from tests.groupcoord.harness import Harness

    h = Harness(offsets_retention_minutes=1)
    group = ConsumerGroup("cg", h.sched.clock_ms())
    group.group_epoch = group.assignment_epoch = 5
    for member in members:
        group.add_member(member)
    h.coord.manager.groups["cg"] = group
    return h, group


def test_coordinator_commit_fetch_list_and_describe_a_consumer_group():
    h, group = coordinator_with_consumer_group([consumer("m1", epoch=5)])
    c = h.coord
    assert c.commit_offsets("cg", "m1", None, 5, {("t", 0): OffsetAndMetadata(3)}, api_version=9) == {("t", 0): 0}
    assert c.commit_offsets("cg", "m1", None, 5, {("t", 0): OffsetAndMetadata(4)}, api_version=8) == {
        ("t", 0): E.UNSUPPORTED_VERSION}
    assert c.fetch_offsets("cg", [("t", 0)], member_id="m1", member_epoch=4) == (E.STALE_MEMBER_EPOCH, {})
    assert c.fetch_offsets("cg", [("t", 0)])[1][("t", 0)][0].offset == 3
    assert c.commit_txn_offsets("cg", 1, 0, "m1", None, 4, {("t", 0): OffsetAndMetadata(5)}) == {
        ("t", 0): E.ILLEGAL_GENERATION}
    error, listed = c.list_groups(types=["consumer"])
    assert error == 0 and [(g.group_id, g.group_type, g.state, g.protocol_type) for g in listed] == [
        ("cg", "consumer", "Stable", "consumer")]
    assert c.list_groups(types=["classic"])[1] == []
    assert [g.group_id for g in c.list_groups(states=["STABLE "])[1]] == ["cg"]
    assert c.describe_group("cg")[1].state == "Dead"
    (result,) = c.describe_consumer_groups(["cg"])
    assert result.error == 0 and result.description.assignor_name == "uniform"
    assert c.delete_groups(["cg"]) == {"cg": E.NON_EMPTY_GROUP}
    assert c.delete_offsets("cg", [("t", 0)]) == (0, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})


def test_coordinator_keeps_subscribed_offsets_past_retention():
    h, group = coordinator_with_consumer_group([consumer("m1", epoch=5, topics=("t",))])
    c = h.coord
    old = OffsetAndMetadata(3, commit_timestamp=h.sched.clock_ms())
    assert c.commit_offsets("cg", "m1", None, 5, {("t", 0): old, ("gone", 0): old}, api_version=9) == {
        ("t", 0): 0, ("gone", 0): 0}
    h.sched.advance(120_000)
    assert set(group.offsets) == {("t", 0)}


def test_coordinator_expires_unsubscribed_offsets_then_deletes_the_empty_group():
    h, group = coordinator_with_consumer_group()
    c = h.coord
    committed = OffsetAndMetadata(3, commit_timestamp=h.sched.clock_ms())
    assert c.commit_offsets("cg", "", None, -1, {("t", 0): committed}, api_version=9) == {("t", 0): 0}
    h.sched.advance(60_000)  # the first check: the offset is exactly 1 minute old (retention)
    assert "cg" not in c.manager.groups
    assert c.fetch_offsets("cg", [("t", 0)]) == (0, {("t", 0): (None, 0)})


def test_coordinator_deletes_an_empty_consumer_group_with_its_offsets():
    h, group = coordinator_with_consumer_group()
    c = h.coord
    c.commit_offsets("cg", "", None, -1, {("t", 0): OffsetAndMetadata(3)})
    assert c.delete_groups(["cg", "cg-missing"]) == {"cg": 0, "cg-missing": E.GROUP_ID_NOT_FOUND}
    assert "cg" not in c.manager.groups
    assert c.describe_consumer_groups(["cg"])[0].error == E.GROUP_ID_NOT_FOUND
