"""A streams group's (KIP-1071) in-memory state: topology, members, epochs, tasks, offsets.

Modelled on Kafka 4's StreamsGroup/StreamsGroupMember. A task is (subtopology id, partition);
a member holds active, standby and warm-up tasks. An active task has one owner at a time; a
standby or warm-up task may not go to a process that still holds the same task in another role.
The state is derived from the members and epochs as Kafka's maybeUpdateGroupState does (NotReady
while the topology is not validated against the cluster's topics). The group lives in the
GroupMetadataManager's `groups` dict next to classic and consumer groups, with the few methods
the manager calls on any group (`is_in`, `transition_to`, `has_offsets`, `expired_offsets`).
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...protocol.errors import ErrorCode
from ..group import OffsetAndMetadata
from .topology import ConfiguredTopology, Topology

__all__ = ["MemberState", "StreamsGroup", "StreamsGroupMember", "StreamsGroupState", "Tasks", "STREAMS_GROUP_TYPE"]

STREAMS_GROUP_TYPE = "streams"
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# subtopology id -> partitions (task ids)
TaskMap = dict[str, frozenset[int]]


def clean(tasks: Mapping[str, Iterable[int]] | None) -> TaskMap:
    return {s: frozenset(p) for s, p in (tasks or {}).items() if p}


def union(a: Mapping[str, frozenset[int]], b: Mapping[str, frozenset[int]]) -> TaskMap:
    out = dict(a)
    for s, p in b.items():
        out[s] = out.get(s, frozenset()) | p
    return clean(out)


def contains_any(owned: Mapping[str, Iterable[int]], tasks: Mapping[str, frozenset[int]]) -> bool:
    return any(tasks.get(s, frozenset()) & set(p) for s, p in owned.items())


@dataclass(frozen=True, slots=True)
class Tasks:
    """Kafka's TasksTuple: active, standby and warm-up tasks."""

    active: TaskMap = field(default_factory=dict)
    standby: TaskMap = field(default_factory=dict)
    warmup: TaskMap = field(default_factory=dict)

    @classmethod
    def of(cls, active=None, standby=None, warmup=None) -> Tasks:
        return cls(clean(active), clean(standby), clean(warmup))

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def merge(self, other: Tasks) -> Tasks:
        return Tasks(union(self.active, other.active), union(self.standby, other.standby),
                     union(self.warmup, other.warmup))

    def count(self) -> tuple[int, int, int]:
        return tuple(sum(len(p) for p in m.values()) for m in (self.active, self.standby, self.warmup))


EMPTY_TASKS = Tasks()


class StreamsGroupState(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    """Kafka's streams MemberState; the value is its stored byte."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(eq=False, slots=True)
class StreamsGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Tasks = EMPTY_TASKS
    pending_revocation: Tasks = EMPTY_TASKS
    # (subtopology, partition) -> the member epoch its active task was assigned at (commit fencing)
    active_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    task_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    task_end_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    last_sent: Tasks | None = None
    session_timer: Any = None
    rebalance_timer: Any = None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    @property
    def has_left_static(self) -> bool:
        return self.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH

    def owned(self) -> Tasks:
        return self.assigned.merge(self.pending_revocation)

    def cancel_timers(self) -> None:
        for name in ("session_timer", "rebalance_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

    def metadata_equals(self, other: StreamsGroupMember) -> bool:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, self.client_tags) == (
            other.instance_id, other.rack_id, other.client_id, other.client_host, other.rebalance_timeout_ms,
            other.topology_epoch, other.process_id, other.user_endpoint, other.client_tags)


class StreamsGroup:
    """A KIP-1071 streams group."""

    group_type = STREAMS_GROUP_TYPE
    protocol_type = "streams"

    def __init__(self, group_id: str, now_ms: int = 0):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0  # when the target was last computed (ms; 0: never)
        self.members: dict[str, StreamsGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Tasks] = {}
        self.topology: Topology | None = None
        self.configured: ConfiguredTopology | None = None
        self.configured_version = -1  # the topic view version `configured` was computed at
        self.validated_topology_epoch = -1
        self.metadata_hash = 0
        self.last_assignment_configs: dict[str, str] = {}
        self.endpoint_information_epoch = 0
        self.shutdown_request_member_id: str | None = None
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.current_state_timestamp: int | None = now_ms
        self._dead = False
        self.timers: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (f"StreamsGroup({self.group_id!r}, {self.state.value}, epoch={self.group_epoch},"
                f" assignment_epoch={self.assignment_epoch}, members={len(self.members)})")

    # -- state ----------------------------------------------------------------------------
    @property
    def state(self) -> StreamsGroupState:
        if self._dead:
            return StreamsGroupState.DEAD
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        for member in self.members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    @property
    def is_dead(self) -> bool:
        return self._dead

    def is_in(self, *states: Any) -> bool:
        current = self.state.value
        return any(s.value == current for s in states)

    def transition_to(self, target: Any, now_ms: int) -> None:
        if target.value != StreamsGroupState.DEAD.value:
            raise RuntimeError(f"streams group {self.group_id} cannot be moved to {target.value}")
        self._dead = True
        self.current_state_timestamp = now_ms

    # -- members --------------------------------------------------------------------------
    def add_member(self, member: StreamsGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None and old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> StreamsGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        if self.shutdown_request_member_id == member_id:
            pass  # Kafka keeps the request until the group is empty
        if not self.members:
            self.shutdown_request_member_id = None
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    # who holds a task right now (Kafka's currentActiveTaskProcessId and friends)
    # -- topology -------------------------------------------------------------------------
    def is_subscribed_to(self, topic: str) -> bool:
        if not self.members or self.topology is None:
            return False
        return topic in self.topology.required_topics()

    # -- offsets --------------------------------------------------------------------------
    def has_offsets(self) -> bool:
        return bool(self.offsets)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        if self._dead or self.members:
            return []
        expired = []
        for tp, committed in self.offsets.items():
            if committed.expire_timestamp >= 0:
                if now_ms >= committed.expire_timestamp:
                    expired.append(tp)
            elif now_ms - committed.commit_timestamp >= retention_ms:
                expired.append(tp)
        return expired

    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               is_transactional: bool = False, api_version: int = 9,
                               topics: Iterable[str] = ()) -> int | None:
        """Kafka's StreamsGroup.validateOffsetCommit: the error, or None."""
        if member_epoch < 0 and not self.members:
            return None
        if is_transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not is_transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return self._older_epoch_commit_error(member, member_epoch, topics)

    def _older_epoch_commit_error(self, member: StreamsGroupMember, epoch: int, topics: Iterable[str]) -> int | None:
        # an older epoch may still commit for tasks it held since then (Kafka's assignment epoch validator)
        if self.topology is None:
            return ErrorCode.STALE_MEMBER_EPOCH
        topic_to_subtopologies: dict[str, list[str]] = {}
        for s in self.topology.subtopologies:
            for topic in self.topology.source_topics_of(s.subtopology_id):
                topic_to_subtopologies.setdefault(topic, []).append(s.subtopology_id)
        for topic, partition in topics:
            ok = False
            for subtopology in topic_to_subtopologies.get(topic, ()):
                assigned_at = member.active_epochs.get((subtopology, partition))
                if assigned_at is not None and assigned_at <= epoch:
                    ok = True
            if not ok:
                return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id) if member_id is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None
