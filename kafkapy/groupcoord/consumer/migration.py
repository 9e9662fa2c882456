"""Moving a group between the classic and the consumer protocol (Kafka 4.0's online migration, KIP-848).

Upgrade: a consumer-protocol member heartbeats into a non-empty classic group that uses the
embedded consumer protocol; if `group.consumer.migration.policy` allows it and the group fits
`group.consumer.max.size`, the classic group becomes a ConsumerGroup whose members keep their
last assignment and speak the classic protocol until they are replaced (classic_members.py
serves them). Downgrade: when the last consumer-protocol member leaves a group whose other
members all speak the classic protocol, the group becomes a classic group again (generation =
group epoch, each member's assignment = its target) and rebalances.

The conversions here are pure: they build the new group from the old one and report what
prevents a conversion; the caller (the membership code) answers waiters, moves timers and
writes the records. A conversion that cannot be done leaves the old group untouched.
"""
from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Collection, Mapping

from ..group import CONSUMER_PROTOCOL_TYPE, GroupMetadata, GroupState, MemberMetadata
from ...protocol.consumer_protocol import (
    MalformedSubscription,
    decode_assignment,
    encode_assignment,
    parse_subscription,
)
from .group import Assignment, ConsumerGroup, ConsumerGroupMember, MemberState, OwnershipError

log = logging.getLogger(__name__)

MIGRATION_POLICY_CONFIG = "group.consumer.migration.policy"


class MigrationPolicy(enum.Enum):
    """group.consumer.migration.policy (Kafka's ConsumerGroupMigrationPolicy): value, upgrade, downgrade."""

    BIDIRECTIONAL = ("bidirectional", True, True)
    UPGRADE = ("upgrade", True, False)
    DOWNGRADE = ("downgrade", False, True)
    DISABLED = ("disabled", False, False)

    @property
    def config_value(self) -> str:
        return self.value[0]

    @property
    def upgrade_enabled(self) -> bool:
        return self.value[1]

    @property
    def downgrade_enabled(self) -> bool:
        return self.value[2]

    @classmethod
    def parse(cls, value: str | None) -> MigrationPolicy:
        """Case-insensitive, as Kafka; an unknown value (or None) is DISABLED."""
        if value is None:
            return cls.DISABLED
        wanted = str(value).strip().lower()
        for policy in cls:
            if policy.config_value == wanted:
                return policy
        return cls.DISABLED


DEFAULT_MIGRATION_POLICY = MigrationPolicy.BIDIRECTIONAL


class MigrationError(ValueError):
    """A group cannot be converted (its embedded protocol does not parse, or its state is inconsistent)."""


TopicIdOf = Callable[[str], "uuid.UUID | None"]
TopicNameOf = Callable[[uuid.UUID], "str | None"]


# -- upgrade: classic -> consumer -------------------------------------------------------------

def upgrade_refusal(group: GroupMetadata, policy: MigrationPolicy, consumer_max_size: int) -> str | None:
    """Why a non-empty classic group cannot be upgraded now (Kafka's validateOnlineUpgrade), or None."""
    if not policy.upgrade_enabled:
        return f"the online upgrade is disabled ({MIGRATION_POLICY_CONFIG}={policy.config_value})"
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return f"the group does not use the consumer embedded protocol (protocol type {group.protocol_type!r})"
    if len(group.members) > consumer_max_size:
        return (f"the group has {len(group.members)} members, more than group.consumer.max.size"
                f" ({consumer_max_size})")
    if group.is_in(GroupState.DEAD):
        return "the group is dead"
    if group.protocol_name is None:
        # Kafka reads every member's metadata for the chosen protocol: a group that never
        # completed a join phase has none to read
        return "the group has not chosen a protocol yet"
    return None


def _assignment_ids(partitions: Mapping[str, list[int]], topic_id_of: TopicIdOf) -> Assignment:
    result: dict[uuid.UUID, frozenset[int]] = {}
    for topic, parts in partitions.items():
        topic_id = topic_id_of(topic)
        if topic_id is None or not parts:
            continue  # a deleted topic: Kafka drops it from the converted assignment
        result[topic_id] = result.get(topic_id, frozenset()) | frozenset(p for p in parts if p >= 0)
    return {t: p for t, p in result.items() if p}


def convert_to_consumer_group(classic: GroupMetadata, topic_id_of: TopicIdOf, now_ms: int) -> ConsumerGroup:
    """A ConsumerGroup with the classic group's members, offsets and epochs (Kafka's fromClassicGroup).

    Group epoch and assignment epoch are the classic generation; each member is Stable at that
    epoch, owns what its last classic assignment gave it (also its target) and speaks the classic
    protocol. MigrationError if a member's metadata or assignment does not parse, or two members
    claim the same partition; `classic` is never modified.
    """
    if classic.protocol_name is None:
        raise MigrationError(f"group {classic.group_id} has no protocol")
    group = ConsumerGroup(classic.group_id, now_ms)
    group.group_epoch = classic.generation_id
    group.assignment_epoch = classic.generation_id
    for member in classic.members.values():
        try:
            subscription = parse_subscription(member.metadata(classic.protocol_name))
            assigned = _assignment_ids(decode_assignment(member.assignment), topic_id_of)
        except (KeyError, MalformedSubscription) as exc:
            raise MigrationError(f"group {classic.group_id}: member {member.member_id}'s embedded consumer"
                                 f" protocol is malformed: {exc}") from None
        new = ConsumerGroupMember(
            member_id=member.member_id,
            instance_id=member.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            subscribed_topic_names=list(subscription.topics),
            member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id,
            state=MemberState.STABLE,
            assigned=assigned,
            classic_protocols=list(member.supported_protocols),
            classic_session_timeout_ms=member.session_timeout_ms,
        )
        try:
            group.add_member(new)
        except OwnershipError as exc:
            raise MigrationError(f"group {classic.group_id}: the members' classic assignments overlap:"
                                 f" {exc}") from None
        group.target[new.member_id] = dict(assigned)
    group.offsets = dict(classic.offsets)
    return group


# -- downgrade: consumer -> classic -----------------------------------------------------------

def _ids(leaving: str | Collection[str]) -> frozenset[str]:
    return frozenset((leaving,)) if isinstance(leaving, str) else frozenset(leaving)


def all_members_use_classic_protocol_except(group: ConsumerGroup, leaving: str | Collection[str]) -> bool:
    """True if every member but those `leaving` speaks the classic protocol (Kafka's
    ConsumerGroup.allMembersUseClassicProtocolExcept)."""
    gone = _ids(leaving)
    return all(m.uses_classic_protocol for m in group.members.values() if m.member_id not in gone)


def downgrade_refusal(group: ConsumerGroup, leaving: str | Collection[str], policy: MigrationPolicy,
                      classic_max_size: int) -> str | None:
    """Why the group must stay a consumer group when the members `leaving` (fenced or leaving) go,
    or None when it becomes a classic group of the others (Kafka's
    validateOnlineDowngradeWithFencedMembers). Reasons that are not worth a log line: other
    consumer-protocol members remain, or nobody does."""
    gone = _ids(leaving)
    if not all_members_use_classic_protocol_except(group, gone):
        return "other members use the consumer protocol"
    remaining = sum(1 for m in group.members if m not in gone)
    if remaining <= 0:
        return "the group would be empty"
    if not policy.downgrade_enabled:
        return f"the online downgrade is disabled ({MIGRATION_POLICY_CONFIG}={policy.config_value})"
    if remaining > classic_max_size:
        return f"the group would have {remaining} members, more than group.max.size ({classic_max_size})"
    return None


def _assignment_names(assignment: Mapping[uuid.UUID, frozenset[int]],
                      topic_name_of: TopicNameOf) -> dict[str, list[int]]:
    result: dict[str, list[int]] = {}
    for topic_id, parts in assignment.items():
        name = topic_name_of(topic_id)
        if name is not None and parts:
            result[name] = sorted(parts)
    return result


def convert_to_classic_group(group: ConsumerGroup, leaving: str | Collection[str], topic_name_of: TopicNameOf,
                             now_ms: int) -> tuple[GroupMetadata, dict[str, bytes]]:
    """A Stable classic group of the remaining (classic-protocol) members (Kafka's fromConsumerGroup):
    generation = group epoch, protocol = the members' vote, each member's assignment = its target,
    in the ConsumerProtocolAssignment version of its subscription. Returns the group and the
    member id -> assignment map to store with it; MigrationError if a member's protocols do not
    allow a classic group (the caller keeps the consumer group); `group` is never modified."""
    classic = GroupMetadata(group.group_id, GroupState.STABLE, now_ms)
    classic.generation_id = group.group_epoch
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    gone = _ids(leaving)
    for member in group.members.values():
        if member.member_id in gone:
            continue
        if not member.classic_protocols:
            raise MigrationError(f"group {group.group_id}: member {member.member_id} has no classic protocols")
        classic.add(MemberMetadata(
            member.member_id, member.instance_id, member.client_id, member.client_host,
            member.rebalance_timeout_ms,
            member.classic_session_timeout_ms if member.classic_session_timeout_ms is not None else 45_000,
            CONSUMER_PROTOCOL_TYPE, list(member.classic_protocols)))
    if not classic.members:
        raise MigrationError(f"group {group.group_id} would be empty")
    try:
        classic.protocol_name = classic.select_protocol()
    except ValueError as exc:
        raise MigrationError(f"group {group.group_id}: its members share no classic protocol: {exc}") from None
    classic.subscribed_topics = classic.compute_subscribed_topics()
    assignments: dict[str, bytes] = {}
    for member in classic.members.values():
        metadata = member.metadata(classic.protocol_name)
        try:
            version = parse_subscription(metadata).version
        except MalformedSubscription as exc:
            raise MigrationError(f"group {group.group_id}: member {member.member_id}'s subscription is"
                                 f" malformed: {exc}") from None
        member.assignment = encode_assignment(
            _assignment_names(group.target_of(member.member_id), topic_name_of), version)
        assignments[member.member_id] = member.assignment
    classic.offsets = dict(group.offsets)
    return classic, assignments
