"""Consumer groups written to __consumer_offsets and loaded back: the replayed group equals the model."""
from __future__ import annotations

import logging
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicMetadata,
)
from kafkapy.groupcoord.consumer.persistence import (
    current_assignment_record,
    group_epoch_record,
    group_records,
    group_tombstones,
    member_subscription_record,
    member_tombstones,
    regex_record,
    subscription_metadata_record,
    target_assignment_records,
)
from kafkapy.groupcoord.consumer.records import ConsumerGroupMetadataKey, encode_key
from kafkapy.groupcoord.group import GroupMetadata, GroupState, OffsetAndMetadata
from kafkapy.groupcoord.metadata_manager import GroupMetadataManager
from kafkapy.groupcoord.offsets_topic import OffsetsTopicStore
from kafkapy.groupcoord.records import group_metadata_key

from ..fakes import ManualScheduler, MemoryLogs

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {"t1": TopicMetadata(T1, "t1", 4), "t2": TopicMetadata(T2, "t2", 2)}


def manager(logs: MemoryLogs | None = None) -> GroupMetadataManager:
    sched = ManualScheduler()
    return GroupMetadataManager(OffsetsTopicStore(logs or MemoryLogs()), 1, sched.clock_ms)


def member_view(m: ConsumerGroupMember) -> tuple:
    return (m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            sorted(m.subscribed_topic_names), m.subscribed_topic_regex, m.server_assignor, m.member_epoch,
            m.previous_member_epoch, m.state, m.assigned, m.pending_revocation, m.classic_protocols,
            m.classic_session_timeout_ms)


def group_view(g: ConsumerGroup) -> dict:
    return {
        "epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch, "state": g.state,
        "members": {mid: member_view(m) for mid, m in g.members.items()},
        "static": dict(g.static_members), "owners": dict(g.owners),
        "target": {mid: {t: p for t, p in a.items() if p} for mid, a in g.target.items()},
        "topics": dict(g.subscribed_topic_metadata), "regexes": dict(g.resolved_regexes),
        "offsets": dict(g.offsets),
    }


def loaded_group(logs: MemoryLogs, group_id: str = "g"):
    mgr = manager(logs)
    mgr.load_partition(0)
    return mgr.groups.get(group_id)


def test_sequence_of_changes_replays_to_the_model():
    logs = MemoryLogs()
    mgr = manager(logs)
    group = ConsumerGroup("g")
    write = lambda records: mgr.write_records("g", records)  # noqa: E731

    # A joins and gets everything
    a = ConsumerGroupMember("A", client_id="ca", client_host="/10.0.0.1", rebalance_timeout_ms=30000,
                            subscribed_topic_names=["t1"], server_assignor="uniform")
    group.add_member(a)
    group.group_epoch = 1
    group.subscribed_topic_metadata = {"t1": TOPICS["t1"]}
    write([member_subscription_record("g", a), subscription_metadata_record("g", group.subscribed_topic_metadata),
           group_epoch_record("g", 1)])
    group.target = {"A": {T1: frozenset(range(4))}}
    group.assignment_epoch = 1
    a.member_epoch, a.previous_member_epoch = 1, 0
    group.set_member_assignment(a, {T1: range(4)}, {})
    write(target_assignment_records("g", group.target, 1) + [current_assignment_record("g", a)])

    # static B (rack r1, classic protocol metadata) joins with t1 and t2: A must revoke 2,3
    b = ConsumerGroupMember("B", instance_id="i-b", rack_id="r1", client_id="cb", client_host="/10.0.0.2",
                            rebalance_timeout_ms=45000, subscribed_topic_names=["t2", "t1"],
                            classic_protocols=[("range", b"\x00\x01")], classic_session_timeout_ms=10000)
    group.add_member(b)
    group.group_epoch = 2
    group.subscribed_topic_metadata = dict(TOPICS)
    write([member_subscription_record("g", b), subscription_metadata_record("g", TOPICS), group_epoch_record("g", 2)])
    group.target = {"A": {T1: frozenset({0, 1})}, "B": {T1: frozenset({2, 3}), T2: frozenset({0, 1})}}
    group.assignment_epoch = 2
    write(target_assignment_records("g", group.target, 2))
    a.member_epoch, a.previous_member_epoch, a.state = 1, 0, MemberState.UNREVOKED_PARTITIONS
    group.set_member_assignment(a, {T1: {0, 1}}, {T1: {2, 3}})
    b.member_epoch, b.previous_member_epoch, b.state = 2, 0, MemberState.UNRELEASED_PARTITIONS
    group.set_member_assignment(b, {T2: {0, 1}}, {})
    write([current_assignment_record("g", a), current_assignment_record("g", b)])
    assert group_view(loaded_group(logs)) == group_view(group)  # mid-reconciliation

    # A revokes, B gets the released partitions
    a.member_epoch, a.previous_member_epoch, a.state = 2, 1, MemberState.STABLE
    group.set_member_assignment(a, {T1: {0, 1}}, {})
    b.state = MemberState.STABLE
    group.set_member_assignment(b, {T1: {2, 3}, T2: {0, 1}}, {})
    write([current_assignment_record("g", a), current_assignment_record("g", b)])

    # offsets, then C joins with a regex and leaves again
    committed = OffsetAndMetadata(42, 2, "m", 1_700_000_000_000, -1)
    assert mgr.store_offsets(group, {("t1", 0): committed}) == {("t1", 0): 0}
    c = ConsumerGroupMember("C", subscribed_topic_regex="t.*", client_id="cc", client_host="/h")
    group.add_member(c)
    group.resolved_regexes = {"t.*": frozenset({"t1", "t2"})}
    group.group_epoch = 3
    write([member_subscription_record("g", c), regex_record("g", "t.*", ["t2", "t1"], 7, 1),
           group_epoch_record("g", 3)])
    group.remove_member("C")
    group.group_epoch = 4
    write(member_tombstones("g", "C") + [group_epoch_record("g", 4)])

    restored = loaded_group(logs)
    assert isinstance(restored, ConsumerGroup)
    assert group_view(restored) == group_view(group)
    assert restored.members["B"].is_static and restored.static_member_id("i-b") == "B"
    assert restored.owner_of(T1, 3) == "B" and restored.owner_of(T1, 0) == "A"


def test_group_records_snapshot_replays_to_the_model():
    logs = MemoryLogs()
    mgr = manager(logs)
    group = ConsumerGroup("g")
    m = ConsumerGroupMember("M", subscribed_topic_names=["t1"], member_epoch=5, previous_member_epoch=4)
    group.add_member(m)
    group.set_member_assignment(m, {T1: {0, 1, 2, 3}}, {})
    group.group_epoch = group.assignment_epoch = 5
    group.target = {"M": {T1: frozenset(range(4))}}
    group.subscribed_topic_metadata = {"t1": TOPICS["t1"]}
    mgr.write_records("g", group_records(group))
    assert group_view(loaded_group(logs)) == group_view(group)


def test_deleted_group_is_gone_and_offsets_only_group_stays_classic():
    logs = MemoryLogs()
    mgr = manager(logs)
    for gid in ("gone", "kept"):
        group = ConsumerGroup(gid)
        m = ConsumerGroupMember("M", subscribed_topic_names=["t1"], member_epoch=1)
        group.add_member(m)
        group.group_epoch = group.assignment_epoch = 1
        group.target = {"M": {T1: frozenset({0})}}
        group.resolved_regexes = {"x.*": frozenset()}
        mgr.write_records(gid, group_records(group))
        if gid == "kept":
            mgr.store_offsets(group, {("t1", 0): OffsetAndMetadata(7, -1, "", 1, -1)})
        mgr.write_records(gid, group_tombstones(group))
    fresh = manager(logs)
    fresh.load_partition(0)
    assert "gone" not in fresh.groups
    kept = fresh.groups["kept"]
    # as Kafka: offsets without a group make an empty (simple) classic group
    assert isinstance(kept, GroupMetadata) and kept.is_in(GroupState.EMPTY)
    assert kept.offsets[("t1", 0)].offset == 7


def test_cleanup_of_a_dead_consumer_group_writes_its_tombstones():
    logs = MemoryLogs()
    mgr = manager(logs)
    group = ConsumerGroup("g")
    group.group_epoch = group.assignment_epoch = 3
    mgr.write_records("g", group_records(group))
    mgr.groups["g"] = group
    removed = mgr.cleanup_group_metadata([group], lambda g: [])
    assert removed == 0 and "g" not in mgr.groups
    fresh = manager(logs)
    fresh.load_partition(0)
    assert "g" not in fresh.groups


def test_classic_to_consumer_and_back():
    logs = MemoryLogs()
    mgr = manager(logs)
    classic = GroupMetadata("g", GroupState.EMPTY, 0)
    classic.protocol_type = "consumer"
    mgr.store_group(classic, {})
    # upgrade: the classic group's tombstone, then the consumer group
    group = ConsumerGroup("g")
    m = ConsumerGroupMember("M", subscribed_topic_names=["t1"], member_epoch=1)
    group.add_member(m)
    group.group_epoch = group.assignment_epoch = 1
    mgr.write_records("g", [(group_metadata_key("g"), None)] + group_records(group))
    assert isinstance(loaded_group(logs), ConsumerGroup)
    # downgrade: the consumer group's tombstones, then a classic group
    mgr.write_records("g", group_tombstones(group))
    classic = GroupMetadata("g", GroupState.EMPTY, 0)
    classic.protocol_type = "consumer"
    classic.generation_id = 2
    mgr.store_group(classic, {})
    restored = loaded_group(logs)
    assert isinstance(restored, GroupMetadata) and restored.generation_id == 2


def test_member_removal_cut_short_leaves_a_member_with_epoch_minus_one():
    logs = MemoryLogs()
    mgr = manager(logs)
    group = ConsumerGroup("g")
    m = ConsumerGroupMember("M", subscribed_topic_names=["t1"], member_epoch=3)
    group.add_member(m)
    group.set_member_assignment(m, {T1: {0}}, {})
    mgr.write_records("g", group_records(group))
    mgr.write_records("g", member_tombstones("g", "M")[:2])  # metadata tombstone never written
    member = loaded_group(logs).members["M"]
    assert (member.member_epoch, member.previous_member_epoch, member.assigned) == (-1, -1, {})


def test_other_record_types_and_corrupt_values_do_not_stop_the_load(caplog):
    logs = MemoryLogs()
    mgr = manager(logs)
    share_key = b"\x00\x0b" + b"\x00\x02sg"  # a share group record: not ours
    bad = (encode_key(ConsumerGroupMetadataKey("bad")), b"\x00\x00\x01")  # truncated epoch
    group = ConsumerGroup("g")
    group.group_epoch = 2
    mgr.write_records("g", [(share_key, b"\x00\x00anything"), bad] + group_records(group))
    mgr.store_offsets(GroupMetadata("simple", GroupState.EMPTY, 0),
                      {("t", 0): OffsetAndMetadata(1, -1, "", 1, -1)})
    fresh = manager(logs)
    with caplog.at_level(logging.DEBUG, logger="kafkapy.groupcoord.consumer.persistence"):
        fresh.load_partition(0)
    assert fresh.groups["g"].group_epoch == 2 and fresh.groups["simple"].offsets[("t", 0)].offset == 1
    assert "bad" not in fresh.groups
    messages = [r.getMessage() for r in caplog.records]
    assert sum("do not decode" in msg for msg in messages) == 1
    assert sum("does not serve" in msg and "{11: 1}" in msg for msg in messages) == 1


# -- random sequences ------------------------------------------------------------------------
MEMBERS = ["m0", "m1", "m2", "m3"]


def compacted(records: list, drop_tombstones: bool) -> list:
    """What the log cleaner leaves of `records`: the last record of each key, in log order
    (and, once delete.retention.ms has passed, no tombstones)."""
    last = {key: i for i, (key, _) in enumerate(records)}
    return [(k, v) for i, (k, v) in enumerate(records)
            if last[k] == i and not (drop_tombstones and v is None)]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_change_sequences_replay_to_the_model(data):
    """Any sequence of changes, written as the coordinator writes them, loads back as the model,
    also after the log cleaner compacted the partition (with or without its tombstones)."""
    logs = MemoryLogs()
    mgr = manager(logs)
    group = ConsumerGroup("g")
    written: list = []
    partitions = [(T1, p) for p in range(4)] + [(T2, p) for p in range(2)]
    for _ in range(data.draw(st.integers(1, 25))):
        op = data.draw(st.sampled_from(["join", "target", "reconcile", "leave", "meta", "join", "delete"]))
        records = []
        if op == "join":
            mid = data.draw(st.sampled_from(MEMBERS))
            member = ConsumerGroupMember(
                mid, instance_id=data.draw(st.none() | st.just(f"i-{mid}")),
                rack_id=data.draw(st.none() | st.sampled_from(["r1", "r2"])),
                subscribed_topic_names=data.draw(st.lists(st.sampled_from(["t1", "t2"]), unique=True)),
                subscribed_topic_regex=data.draw(st.none() | st.just("t.*")),
                rebalance_timeout_ms=data.draw(st.integers(1, 10**6)))
            old = group.members.get(mid)
            if old is not None:
                member.member_epoch, member.previous_member_epoch = old.member_epoch, old.previous_member_epoch
                member.state, member.assigned = old.state, old.assigned
                member.pending_revocation = old.pending_revocation
            group.add_member(member)
            group.group_epoch += 1
            records += [member_subscription_record("g", member), group_epoch_record("g", group.group_epoch)]
        elif op == "target" and group.members:
            owners = {mid: [] for mid in group.members}
            for tp in partitions:
                owners[data.draw(st.sampled_from(sorted(owners)))].append(tp)
            group.target = {}
            for mid, tps in owners.items():
                a: dict = {}
                for t, p in tps:
                    a.setdefault(t, set()).add(p)
                group.target[mid] = {t: frozenset(ps) for t, ps in a.items()}
            group.assignment_epoch = group.group_epoch
            records += target_assignment_records("g", group.target, group.assignment_epoch)
        elif op == "reconcile" and group.members:
            mid = data.draw(st.sampled_from(sorted(group.members)))
            member = group.members[mid]
            free = [tp for tp in partitions if group.owners.get(tp) in (None, mid)]
            chosen = data.draw(st.lists(st.sampled_from(free), unique=True)) if free else []
            split = data.draw(st.integers(0, len(chosen)))
            assigned: dict = {}
            pending: dict = {}
            for i, (t, p) in enumerate(chosen):
                (assigned if i < split else pending).setdefault(t, set()).add(p)
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
            member.state = data.draw(st.sampled_from(list(MemberState)))
            group.set_member_assignment(member, assigned, pending)
            records.append(current_assignment_record("g", member))
        elif op == "leave" and group.members:
            mid = data.draw(st.sampled_from(sorted(group.members)))
            group.remove_member(mid)
            group.group_epoch += 1
            records += member_tombstones("g", mid) + [group_epoch_record("g", group.group_epoch)]
        elif op == "meta":
            names = data.draw(st.lists(st.sampled_from(["t1", "t2"]), unique=True))
            group.subscribed_topic_metadata = {n: TOPICS[n] for n in names}
            records.append(subscription_metadata_record("g", group.subscribed_topic_metadata))
            if data.draw(st.booleans()):
                group.resolved_regexes = {"t.*": frozenset(names)}
                records.append(regex_record("g", "t.*", names, 1, 2))
        elif op == "delete":
            records += group_tombstones(group)
            group = ConsumerGroup("g")  # a later change creates the group anew
        if records:
            assert mgr.write_records("g", records) == 0
            written += records
    if not written:
        return
    # the group exists if anything but tombstones was written since it was last deleted
    group_key = encode_key(ConsumerGroupMetadataKey("g"))
    deleted_at = max((i for i, (k, v) in enumerate(written) if k == group_key and v is None), default=-1)
    exists = any(v is not None for _, v in written[deleted_at + 1:])
    for label, records in (("as written", written), ("compacted", compacted(written, False)),
                           ("compacted, tombstones dropped", compacted(written, True))):
        replayed = MemoryLogs()
        if records:
            assert manager(replayed).write_records("g", records) == 0
        restored = loaded_group(replayed)
        if exists:
            assert restored is not None and group_view(restored) == group_view(group), label
        else:
            assert restored is None, label
