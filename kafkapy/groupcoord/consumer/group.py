"""A KIP-848 consumer group's in-memory state: members, epochs, target and current assignments, offsets.

Modelled on Kafka 4's ConsumerGroup/ConsumerGroupMember: the data and the invariants that go with
it (the group state derived from the epochs, who owns which partition right now, which topics the
group subscribes to, offset commit/fetch checks). The heartbeat logic that drives it lives in
membership.py, the per-member reconciliation in reconciliation.py.

A ConsumerGroup lives in the same `GroupMetadataManager.groups` dict as the classic
GroupMetadata; the few methods the manager calls on any group (`is_in`, `transition_to`,
`has_offsets`, `expired_offsets`, `offsets`) accept the classic GroupState too, matched by the
state's name ("Empty", "Stable", "Dead"), so offset storage and expiry work for both kinds.
"""
from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...protocol.errors import ErrorCode
from ..group import OffsetAndMetadata

log = logging.getLogger(__name__)

__all__ = [
    "Assignment",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "MemberState",
    "TopicMetadata",
    "CONSUMER_GROUP_TYPE",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "OwnershipError",
    "OffsetAndMetadata",
    "assignment_equal",
]

CONSUMER_GROUP_TYPE = "consumer"
# member epochs with a special meaning in ConsumerGroupHeartbeat (Kafka's ConsumerGroupHeartbeatRequest)
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]


class ConsumerGroupState(enum.Enum):
    """Kafka's consumer group states; the value is the name Kafka reports."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    """Where a member is in reconciling towards its target; the value is Kafka's stored byte."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN

    @property
    def label(self) -> str:
        # Kafka's MemberState.toString(), used in logs
        return self.name.lower()


class OwnershipError(RuntimeError):
    """A partition would be owned by two members at once (a coordinator bug, never client input)."""


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic as the group last saw it (Kafka's TopicMetadata / PartitionMetadata)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    # partition -> racks of its replicas (empty when no broker has a rack)
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


def assignment_equal(a: Mapping[uuid.UUID, frozenset[int]], b: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    """Equal as assignments: topics with no partitions count as absent."""
    return {t: p for t, p in a.items() if p} == {t: p for t, p in b.items() if p}


def _clean(assignment: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    return {t: frozenset(p) for t, p in assignment.items() if p}


@dataclass(eq=False, slots=True)
class ConsumerGroupMember:
    """One member of a consumer group: identity, subscription, epochs, assignment and timers."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    # partitions the member may own now, and those it must give back before getting new ones
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # set when the member speaks the classic protocol inside a consumer group: (name, metadata)
    classic_protocols: list[tuple[str, bytes]] | None = None
    # the session timeout a classic-protocol member joined with (ClassicMemberMetadata; H7)
    classic_session_timeout_ms: int | None = None
    # the assignment the member was last told in a response (None: never told, send it)
    last_sent_assignment: Assignment | None = None
    # timers owned by membership.py: session expiry and revocation (rebalance) deadline
    session_timer: Any = None
    rebalance_timer: Any = None
    # the epoch the rebalance timer was started for (the member is fenced if still there)
    rebalance_timer_epoch: int = -1

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_protocols is not None

    @property
    def has_left_static(self) -> bool:
        """A static member that sent epoch -2: kept until its session expires or it is replaced."""
        return self.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def owned(self) -> Assignment:
        """Partitions this member may still hold: assigned plus those pending revocation."""
        owned = dict(self.assigned)
        for topic_id, partitions in self.pending_revocation.items():
            owned[topic_id] = owned.get(topic_id, frozenset()) | partitions
        return owned

    def cancel_timers(self) -> None:
        for name in ("session_timer", "rebalance_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)
        self.rebalance_timer_epoch = -1


class ConsumerGroup:
    """A KIP-848 consumer group: epochs, members, target assignment, current ownership, offsets."""

    group_type = CONSUMER_GROUP_TYPE
    protocol_type = "consumer"

    def __init__(self, group_id: str, now_ms: int = 0):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> target assignment
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # (topic id, partition) -> member id
        # topic name -> metadata, for the topics the group subscribes to (Kafka's subscribedTopicMetadata)
        self.subscribed_topic_metadata: dict[str, TopicMetadata] = {}
        # regex -> topic names it matched when last resolved (Kafka 4.0 resolves regexes per group)
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        # the TopicView version the subscribed topic metadata was read at (-1: read it again)
        self.metadata_version = -1
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.current_state_timestamp: int | None = now_ms
        self._dead = False
        # the coordinator's per-group timers (none today; kept for symmetry with GroupMetadata)
        self.timers: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, {self.state.value}, epoch={self.group_epoch},"
                f" assignment_epoch={self.assignment_epoch}, members={len(self.members)})")

    # -- state ----------------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        """Derived as Kafka's maybeUpdateGroupState: from the members and the epochs."""
        if self._dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        target_epoch = self.assignment_epoch
        for member in self.members.values():
            if not member.is_reconciled_to(target_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_dead(self) -> bool:
        return self._dead

    def is_in(self, *states: Any) -> bool:
        """True if the group is in one of `states` (ConsumerGroupState, or a classic GroupState by name)."""
        current = self.state.value
        return any(s.value == current for s in states)

    def transition_to(self, target: Any, now_ms: int) -> None:
        """Only Dead can be entered from outside (group deletion); other states follow the members."""
        if target.value != ConsumerGroupState.DEAD.value:
            raise RuntimeError(f"consumer group {self.group_id} cannot be moved to {target.value}")
        self._dead = True
        self.current_state_timestamp = now_ms

    # -- members --------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> ConsumerGroupMember:
        return self.members[member_id]

    def static_member_id(self, instance_id: str | None) -> str | None:
        if instance_id is None:
            return None
        return self.static_members.get(instance_id)

    def add_member(self, member: ConsumerGroupMember) -> None:
        """Add (or replace, same id) a member; its ownership follows its assigned/pending partitions."""
        old = self.members.get(member.member_id)
        if old is not None and old is not member:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._claim(member)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        """Remove a member, releasing its partitions; the target entry goes too."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def set_member_assignment(self, member: ConsumerGroupMember, assigned: Mapping[uuid.UUID, Iterable[int]],
                              pending_revocation: Mapping[uuid.UUID, Iterable[int]]) -> None:
        """Change what a member owns, keeping `owners` exact; OwnershipError if a partition would
        be owned twice (the reconciliation never hands out a partition someone else holds)."""
        if self.members.get(member.member_id) is not member:
            raise KeyError(f"{member.member_id} is not a member of {self.group_id}")
        self._release(member)
        previous = member.assigned, member.pending_revocation
        member.assigned = _clean(assigned)
        member.pending_revocation = _clean(pending_revocation)
        try:
            self._claim(member)
        except OwnershipError:
            member.assigned, member.pending_revocation = previous
            self._claim(member)
            raise

    def _claim(self, member: ConsumerGroupMember) -> None:
        owners = self.owners
        claimed: list[tuple[uuid.UUID, int]] = []
        for topic_id, partitions in member.owned().items():
            for partition in partitions:
                key = (topic_id, partition)
                owner = owners.get(key)
                if owner is not None and owner != member.member_id:
                    for undo in claimed:
                        del owners[undo]
                    raise OwnershipError(f"group {self.group_id}: partition {topic_id}-{partition} is owned by"
                                         f" {owner}, cannot be given to {member.member_id}")
                if owner is None:
                    owners[key] = member.member_id
                    claimed.append(key)

    def _release(self, member: ConsumerGroupMember) -> None:
        owners = self.owners
        for topic_id, partitions in member.owned().items():
            for partition in partitions:
                key = (topic_id, partition)
                if owners.get(key) == member.member_id:
                    del owners[key]

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def target_of(self, member_id: str) -> Assignment:
        return self.target.get(member_id, {})

    # -- subscriptions --------------------------------------------------------------------
    def subscribed_topic_names(self) -> set[str]:
        """Topic names the group subscribes to: explicit names plus what the regexes resolved to."""
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                names.update(self.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return names

    def member_topic_names(self, member: ConsumerGroupMember) -> set[str]:
        """Topic names one member subscribes to (its names plus its regex's resolution)."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            names.update(self.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return names

    def regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    def is_subscribed_to(self, topic: str) -> bool:
        for member in self.members.values():
            if topic in member.subscribed_topic_names:
                return True
            regex = member.subscribed_topic_regex
            if regex is not None and topic in self.resolved_regexes.get(regex, ()):
                return True
        return False

    # -- offsets --------------------------------------------------------------------------
    def has_offsets(self) -> bool:
        return bool(self.offsets)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets past retention as Kafka's consumer groups expire them: by commit time (or the
        explicit expire timestamp), never for a topic the group still subscribes to."""
        if self._dead:
            return []
        subscribed = self.subscribed_topic_names()
        expired = []
        for tp, committed in self.offsets.items():
            if tp[0] in subscribed:
                continue
            if committed.expire_timestamp >= 0:
                if now_ms >= committed.expire_timestamp:
                    expired.append(tp)
            elif now_ms - committed.commit_timestamp >= retention_ms:
                expired.append(tp)
        return expired

    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               is_transactional: bool = False, api_version: int = 9) -> int | None:
        """The error an OffsetCommit gets (Kafka's ConsumerGroup.validateOffsetCommit), or None.

        Epoch < 0 from an admin client or a consumer without group management may commit only
        while the group has no members."""
        if member_epoch < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not is_transactional and not member.uses_classic_protocol and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return self._check_epoch(member, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        """The error an OffsetFetch gets (Kafka's ConsumerGroup.validateOffsetFetch), or None."""
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id) if member_id is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return self._check_epoch(member, member_epoch)

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int) -> int | None:
        if epoch == member.member_epoch:
            return None
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH

    # -- loading --------------------------------------------------------------------------
    @classmethod
    def from_stored(cls, stored: Any, offsets: Mapping[tuple[str, int], OffsetAndMetadata],
                    now_ms: int = 0) -> ConsumerGroup:
        """Rebuild a group from its replayed __consumer_offsets records (records.StoredConsumerGroup).

        `stored` provides: group_id, group_epoch, assignment_epoch, members (member id -> an object
        with the ConsumerGroupMemberMetadata fields: instance_id, rack_id, client_id, client_host,
        rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex, server_assignor,
        classic_protocols), target (member id -> Assignment), current (member id -> an object with
        member_epoch, previous_member_epoch, state (MemberState or int), assigned,
        pending_revocation) and topics (name -> TopicMetadata), any of which may be missing.
        """
        group = cls(stored.group_id, now_ms)
        group.group_epoch = getattr(stored, "group_epoch", 0) or 0
        group.assignment_epoch = getattr(stored, "assignment_epoch", 0) or 0
        group.subscribed_topic_metadata = dict(getattr(stored, "topics", None) or {})
        for member_id, assignment in (getattr(stored, "target", None) or {}).items():
            group.target[member_id] = _clean(assignment)
        current = getattr(stored, "current", None) or {}
        for member_id, meta in (getattr(stored, "members", None) or {}).items():
            member = ConsumerGroupMember(
                member_id=member_id,
                instance_id=getattr(meta, "instance_id", None),
                rack_id=getattr(meta, "rack_id", None),
                client_id=getattr(meta, "client_id", "") or "",
                client_host=getattr(meta, "client_host", "") or "",
                rebalance_timeout_ms=getattr(meta, "rebalance_timeout_ms", -1),
                subscribed_topic_names=list(getattr(meta, "subscribed_topic_names", None) or []),
                subscribed_topic_regex=getattr(meta, "subscribed_topic_regex", None) or None,
                server_assignor=getattr(meta, "server_assignor", None) or None,
                classic_protocols=getattr(meta, "classic_protocols", None),
                classic_session_timeout_ms=getattr(meta, "classic_session_timeout_ms", None),
            )
            cur = current.get(member_id)
            if cur is not None:
                member.member_epoch = cur.member_epoch
                member.previous_member_epoch = cur.previous_member_epoch
                state = cur.state
                member.state = state if isinstance(state, MemberState) else MemberState.from_value(int(state))
                member.assigned = _clean(cur.assigned)
                member.pending_revocation = _clean(cur.pending_revocation)
            try:
                group.add_member(member)
            except OwnershipError as exc:
                # a log written by a buggy coordinator: keep the member, without the clashing partitions
                member.assigned, member.pending_revocation = {}, {}
                member.state = MemberState.UNKNOWN
                group.add_member(member)
                log.warning("loading group %s: %s", stored.group_id, exc)
        group.offsets = dict(offsets)
        return group
