"""What ConsumerGroupDescribe, ListGroups and the admin views show of a KIP-848 consumer group.

Kafka's ConsumerGroup.asDescribedGroup / ConsumerGroupMember.asConsumerGroupDescribeMember as
plain records, with no protocol classes: the broker handler turns them into the response, the
console and tests read them directly. Assignments are shown by topic id and name; a topic id
that no longer resolves to a name (the topic was deleted) is left out, as Kafka does.
"""
from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .group import ConsumerGroup, ConsumerGroupMember

__all__ = [
    "ConsumerGroupDescription",
    "MemberDescription",
    "MEMBER_TYPE_CLASSIC",
    "MEMBER_TYPE_CONSUMER",
    "MEMBER_TYPE_UNKNOWN",
    "TopicPartitions",
    "describe_consumer_group",
    "preferred_assignor",
    "topic_resolver",
]

# ConsumerGroupDescribe v1 MemberType (Kafka 4.0)
MEMBER_TYPE_UNKNOWN = -1
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1

TopicName = Callable[[uuid.UUID], "str | None"]


@dataclass(slots=True)
class TopicPartitions:
    """One topic of an assignment as ConsumerGroupDescribe shows it."""

    topic_id: uuid.UUID
    topic_name: str
    partitions: list[int]


@dataclass(slots=True)
class MemberDescription:
    """One member as ConsumerGroupDescribe shows it."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: list[TopicPartitions]
    target_assignment: list[TopicPartitions]
    member_type: int = MEMBER_TYPE_CONSUMER

    def partitions(self, target: bool = False) -> dict[str, list[int]]:
        """The (target) assignment as topic name -> sorted partitions."""
        return {t.topic_name: list(t.partitions) for t in (self.target_assignment if target else self.assignment)}


@dataclass(slots=True)
class ConsumerGroupDescription:
    """A consumer group as ConsumerGroupDescribe shows it."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: list[MemberDescription] = field(default_factory=list)


def topic_resolver(group: ConsumerGroup, lookup: TopicName | None = None) -> TopicName:
    """Topic id -> name: `lookup` (the cluster's topics) first, then the topics the group last saw."""
    known = {meta.topic_id: name for name, meta in group.subscribed_topic_metadata.items()}

    def name_of(topic_id: uuid.UUID) -> str | None:
        if lookup is not None:
            name = lookup(topic_id)
            if name is not None:
                return name
        return known.get(topic_id)

    return name_of


def _topic_partitions(assignment: Mapping[uuid.UUID, Iterable[int]], name_of: TopicName) -> list[TopicPartitions]:
    described = []
    for topic_id, partitions in assignment.items():
        parts = sorted(partitions)
        if not parts:
            continue
        name = name_of(topic_id)
        if name is None:
            continue  # a deleted topic: Kafka's topicPartitionsFromMap skips ids it cannot name
        described.append(TopicPartitions(topic_id, name, parts))
    described.sort(key=lambda t: t.topic_name)
    return described


def preferred_assignor(group: ConsumerGroup, default: str) -> str:
    """The server assignor most members ask for (Kafka's preferredServerAssignor), else `default`.

    Ties go to the name that sorts first (Kafka's pick among equal counts is hash order)."""
    counts = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    if not counts:
        return default
    return min(counts, key=lambda name: (-counts[name], name))


def _member(member: ConsumerGroupMember, target, name_of: TopicName) -> MemberDescription:
    return MemberDescription(
        member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
        member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=_topic_partitions(member.assigned, name_of),
        target_assignment=_topic_partitions(target or {}, name_of),
        member_type=MEMBER_TYPE_CLASSIC if member.uses_classic_protocol else MEMBER_TYPE_CONSUMER)


def describe_consumer_group(group: ConsumerGroup, default_assignor: str,
                            lookup: TopicName | None = None) -> ConsumerGroupDescription:
    """The group as ConsumerGroupDescribe answers it: state, epochs, assignor, members with their
    current assignment (partitions they own now, not those pending revocation, as Kafka) and target."""
    name_of = topic_resolver(group, lookup)
    members = [_member(m, group.target_of(member_id), name_of) for member_id, m in group.members.items()]
    return ConsumerGroupDescription(
        group_id=group.group_id, state=group.state.value, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=preferred_assignor(group, default_assignor),
        members=members)
