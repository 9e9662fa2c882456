"""Consumer groups (KIP-848) in __consumer_offsets: the records a change writes, and their replay.

Writing mirrors Kafka's GroupCoordinatorRecordHelpers, record for record and in Kafka's order, so
a log written by either replays the same way. A heartbeat that changes a group appends its records
as one batch (GroupMetadataManager.write_records), which is atomic on disk: a crash leaves all or
none of them. What one change writes:

  join / subscription change   ConsumerGroupMemberMetadata, then (if the subscribed topics
                               changed) ConsumerGroupPartitionMetadata and resolved regexes, then
                               ConsumerGroupMetadata (the bumped group epoch)
  new target assignment        ConsumerGroupTargetAssignmentMember per changed member, then
                               ConsumerGroupTargetAssignmentMetadata (the assignment epoch)
  reconciliation step          ConsumerGroupCurrentMemberAssignment of the member
  member leaves / is fenced    tombstones: current assignment, target, member metadata
                               (`member_tombstones`), then the group epoch bump
  group deleted                `group_tombstones`: every member's current assignment, every
                               target, the assignment epoch, every member, the regexes, the
                               partition metadata, the group epoch

Loading replays them in log order into a `StoredConsumerGroup` per group (Kafka's replay()
methods: a tombstone of a group or member that does not exist is ignored; a current-assignment
tombstone leaves the member with epoch -1 until its metadata tombstone removes it), then
`restore_group` builds the ConsumerGroup from it.
"""
from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...protocol.errors import CorruptRecordError
from .group import LEAVE_GROUP_MEMBER_EPOCH, Assignment, ConsumerGroup, ConsumerGroupMember, TopicMetadata
from .records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    Record,
    decode_consumer_value,
    record,
)
from .records import TopicMetadata as StoredTopicMetadata

log = logging.getLogger(__name__)

__all__ = [
    "ConsumerGroupReplay",
    "StoredAssignment",
    "StoredConsumerGroup",
    "StoredMember",
    "current_assignment_record",
    "group_epoch_record",
    "group_records",
    "group_tombstones",
    "member_subscription_record",
    "member_tombstones",
    "regex_record",
    "regex_tombstone",
    "restore_group",
    "subscription_metadata_record",
    "subscription_metadata_tombstone",
    "target_assignment_records",
    "target_epoch_record",
    "target_member_record",
]


# -- writing -------------------------------------------------------------------------------
def member_subscription_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """ConsumerGroupMemberMetadata: the member's identity and subscription (topic names sorted, as Kafka)."""
    classic = None
    if member.classic_protocols is not None:
        timeout = member.classic_session_timeout_ms
        classic = ClassicMemberMetadata(timeout if timeout is not None else -1, list(member.classic_protocols))
    value = ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
        client_host=member.client_host, subscribed_topic_names=sorted(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex, rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor, classic_member_metadata=classic)
    return record(ConsumerGroupMemberMetadataKey(group_id, member.member_id), value)


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member leaving or fenced: current assignment, target and metadata tombstones (Kafka's order)."""
    return [
        record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        record(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def group_epoch_record(group_id: str, epoch: int) -> Record:
    return record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch))


def subscription_metadata_record(group_id: str, topics: Mapping[str, TopicMetadata]) -> Record:
    """ConsumerGroupPartitionMetadata: the subscribed topics' ids and partition counts. Kafka 4.0
    writes no partition racks (the field is deprecated), and neither do we."""
    value = ConsumerGroupPartitionMetadataValue([
        StoredTopicMetadata(t.topic_id, t.name, t.num_partitions) for _, t in sorted(topics.items())])
    return record(ConsumerGroupPartitionMetadataKey(group_id), value)


def subscription_metadata_tombstone(group_id: str) -> Record:
    return record(ConsumerGroupPartitionMetadataKey(group_id), None)


def regex_record(group_id: str, regex: str, topics: Iterable[str], version: int, timestamp_ms: int) -> Record:
    """ConsumerGroupRegularExpression (Kafka 4.0): what a subscribed regex resolved to."""
    return record(ConsumerGroupRegularExpressionKey(group_id, regex),
                  ConsumerGroupRegularExpressionValue(sorted(topics), version, timestamp_ms))


def regex_tombstone(group_id: str, regex: str) -> Record:
    return record(ConsumerGroupRegularExpressionKey(group_id, regex), None)


def target_member_record(group_id: str, member_id: str, assignment: Mapping[uuid.UUID, Iterable[int]]) -> Record:
    value = ConsumerGroupTargetAssignmentMemberValue({t: frozenset(p) for t, p in assignment.items() if p})
    return record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), value)


def target_epoch_record(group_id: str, assignment_epoch: int) -> Record:
    return record(ConsumerGroupTargetAssignmentMetadataKey(group_id),
                  ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch))


def target_assignment_records(group_id: str, changed: Mapping[str, Mapping[uuid.UUID, Iterable[int]]],
                              assignment_epoch: int) -> list[Record]:
    """A new target: the members whose target changed, then the assignment epoch (Kafka's order)."""
    records = [target_member_record(group_id, member_id, assignment) for member_id, assignment in changed.items()]
    records.append(target_epoch_record(group_id, assignment_epoch))
    return records


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """ConsumerGroupCurrentMemberAssignment: the member's epochs, state and owned partitions."""
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member.member_epoch, member.previous_member_epoch, member.state.value,
        member.assigned, member.pending_revocation)
    return record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id), value)


def group_records(group: ConsumerGroup) -> list[Record]:
    """The whole group as records (a group created by conversion from a classic group, or a
    snapshot): members, subscribed topics, regexes, group epoch, target, assignment epoch, current
    assignments."""
    gid = group.group_id
    records = [member_subscription_record(gid, m) for m in group.members.values()]
    records.append(subscription_metadata_record(gid, group.subscribed_topic_metadata))
    records.extend(regex_record(gid, regex, topics, 0, 0) for regex, topics in group.resolved_regexes.items())
    records.append(group_epoch_record(gid, group.group_epoch))
    records.extend(target_member_record(gid, member_id, a) for member_id, a in group.target.items())
    records.append(target_epoch_record(gid, group.assignment_epoch))
    records.extend(current_assignment_record(gid, m) for m in group.members.values())
    return records


def group_tombstones(group: ConsumerGroup) -> list[Record]:
    """Every record of the group deleted, in the order Kafka's createGroupTombstoneRecords writes
    them (so a replay never sees a group tombstone while members remain)."""
    gid = group.group_id
    member_ids = list(group.members)
    targets = list(dict.fromkeys([*member_ids, *group.target]))
    records = [record(ConsumerGroupCurrentMemberAssignmentKey(gid, m), None) for m in member_ids]
    records.extend(record(ConsumerGroupTargetAssignmentMemberKey(gid, m), None) for m in targets)
    records.append(record(ConsumerGroupTargetAssignmentMetadataKey(gid), None))
    records.extend(record(ConsumerGroupMemberMetadataKey(gid, m), None) for m in member_ids)
    records.extend(regex_tombstone(gid, regex) for regex in group.resolved_regexes)
    records.append(subscription_metadata_tombstone(gid))
    records.append(record(ConsumerGroupMetadataKey(gid), None))
    return records


# -- replaying -----------------------------------------------------------------------------
@dataclass(slots=True)
class StoredMember:
    """A member as its ConsumerGroupMemberMetadata record left it (the fields from_stored reads)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    classic_protocols: list[tuple[str, bytes]] | None = None
    classic_session_timeout_ms: int | None = None


@dataclass(slots=True)
class StoredAssignment:
    """A member's ConsumerGroupCurrentMemberAssignment."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = 0
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class StoredConsumerGroup:
    """The replayed latest state of one consumer group, as its records in log order left it."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, StoredMember] = field(default_factory=dict)
    current: dict[str, StoredAssignment] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    regexes: dict[str, ConsumerGroupRegularExpressionValue] = field(default_factory=dict)

    def apply(self, key: ConsumerGroupKey, value) -> None:
        """Fold one record of this group (value None: a tombstone) into the state."""
        kind = type(key)
        if kind is ConsumerGroupMemberMetadataKey:
            if value is None:
                self.members.pop(key.member_id, None)
                self.current.pop(key.member_id, None)
                return
            classic = value.classic_member_metadata
            self.members[key.member_id] = StoredMember(
                key.member_id, value.instance_id, value.rack_id, value.client_id, value.client_host,
                value.rebalance_timeout_ms, list(value.subscribed_topic_names), value.subscribed_topic_regex,
                value.server_assignor,
                None if classic is None else list(classic.supported_protocols),
                None if classic is None or classic.session_timeout_ms < 0 else classic.session_timeout_ms)
        elif kind is ConsumerGroupCurrentMemberAssignmentKey:
            if value is None:
                # as Kafka: the member stays (with epoch -1 and nothing) until its metadata tombstone
                old = self.current.get(key.member_id)
                if key.member_id in self.members:
                    self.current[key.member_id] = StoredAssignment(
                        LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, old.state if old else 0)
                return
            if key.member_id not in self.members:
                self.members[key.member_id] = StoredMember(key.member_id)
            self.current[key.member_id] = StoredAssignment(
                value.member_epoch, value.previous_member_epoch, value.state, dict(value.assigned),
                dict(value.pending_revocation))
        elif kind is ConsumerGroupTargetAssignmentMemberKey:
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                self.target[key.member_id] = dict(value.partitions)
        elif kind is ConsumerGroupTargetAssignmentMetadataKey:
            self.assignment_epoch = -1 if value is None else value.assignment_epoch
        elif kind is ConsumerGroupMetadataKey:
            if value is not None:
                self.group_epoch = value.epoch
        elif kind is ConsumerGroupPartitionMetadataKey:
            self.topics = {} if value is None else {
                t.name: TopicMetadata(t.topic_id, t.name, t.num_partitions,
                                      {p: frozenset(racks) for p, racks in t.partition_racks.items()})
                for t in value.topics}
        elif kind is ConsumerGroupRegularExpressionKey:
            if value is None:
                self.regexes.pop(key.regex, None)
            else:
                self.regexes[key.regex] = value


class ConsumerGroupReplay:
    """Consumer group records of one __consumer_offsets partition, replayed as the load reads them.

    `add` takes what `records.decode_key` returned for a key that is neither an offset commit
    nor classic group metadata: a consumer group key, or None for record types kafkapy does not
    serve (share and streams groups, future types), which are counted and reported in one
    debug line. A value that does not decode is skipped with one warning per load.
    """

    __slots__ = ("groups", "skipped", "corrupt", "first_error")

    def __init__(self) -> None:
        self.groups: dict[str, StoredConsumerGroup] = {}
        self.skipped: Counter[int] = Counter()
        self.corrupt = 0
        self.first_error: str | None = None

    def add(self, parsed: ConsumerGroupKey | None, key: bytes, value: bytes | None) -> None:
        if parsed is None:
            self.skipped[int.from_bytes(key[:2], "big", signed=True) if len(key) >= 2 else -1] += 1
            return
        if value is not None:
            try:
                decoded = decode_consumer_value(parsed, value)
            except CorruptRecordError as exc:
                self.corrupt += 1
                if self.first_error is None:
                    self.first_error = f"{type(parsed).__name__} of group {parsed.group}: {exc}"
                return
        else:
            decoded = None
        group = self.groups.get(parsed.group)
        if group is None:
            if decoded is None:
                return  # a tombstone for a group that does not exist (any more): nothing to do
            group = self.groups[parsed.group] = StoredConsumerGroup(parsed.group)
        if decoded is None and type(parsed) is ConsumerGroupMetadataKey:
            if group.members:
                log.warning("group %s: a group tombstone while %d members remain; the group is deleted",
                            parsed.group, len(group.members))
            del self.groups[parsed.group]
            return
        group.apply(parsed, decoded)

    def drop(self, group_id: str) -> None:
        """A classic group record replaced the group (a downgrade written without tombstones)."""
        self.groups.pop(group_id, None)

    def report(self, where: str) -> None:
        """One line each for skipped record types and undecodable values, if any."""
        if self.skipped:
            log.debug("%s: skipped %d records of types kafkapy's group coordinator does not serve: %s", where,
                      sum(self.skipped.values()), dict(sorted(self.skipped.items())))
        if self.corrupt:
            log.warning("%s: skipped %d consumer group records that do not decode; first: %s", where,
                        self.corrupt, self.first_error)


def restore_group(stored: StoredConsumerGroup, offsets: Mapping, now_ms: int) -> ConsumerGroup:
    """The ConsumerGroup a replayed group stands for, with its committed offsets."""
    group = ConsumerGroup.from_stored(stored, offsets, now_ms)
    group.resolved_regexes = {regex: frozenset(v.topics) for regex, v in stored.regexes.items()}
    return group
