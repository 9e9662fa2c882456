"""A classic consumer group's in-memory state: members, generation, protocol and committed offsets.

Modelled on Kafka's GroupMetadata/MemberMetadata: the data and the small invariants that go
with it (who leads, which protocols every member supports, legal state transitions). The
rebalance logic that drives it lives in coordinator.py.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.errors import ErrorCode
from ..protocol.consumer_protocol import subscribed_topics

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


class GroupState(enum.Enum):
    """Kafka's classic group states; the value is the name Kafka reports."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# target state -> states it may be entered from (Kafka's GroupState.validPreviousStates)
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup request is answered with."""

    member_id: str
    error: int = ErrorCode.NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = UNKNOWN_MEMBER_ID
    skip_assignment: bool = False
    # (member id, group instance id, protocol metadata): only the leader gets these
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    """What a SyncGroup request is answered with."""

    error: int = ErrorCode.NONE
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(slots=True)
class OffsetAndMetadata:
    """One committed offset as Kafka keeps it (expire_timestamp only for explicit retention)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(slots=True)
class MemberSummary:
    """A member as DescribeGroups shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupSummary:
    """A group as DescribeGroups shows it."""

    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]
    # why there is no classic group to describe (DescribeGroups v6's error message), else None
    missing: str | None = None


@dataclass(eq=False, slots=True)
class MemberMetadata:
    """One member of a group: identity, timeouts, supported protocols, assignment, pending calls."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    is_new: bool = False
    heartbeat_timer: Any = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """True if `protocols` are exactly this member's (names, metadata and order)."""
        return self.supported_protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among `candidates`."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def cancel_heartbeat(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None


class GroupMetadata:
    """A group's members, generation, chosen protocol, leader and committed offsets."""

    def __init__(self, group_id: str, state: GroupState, now_ms: int):
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.new_member_added = False
        self.supported_protocols: dict[str, int] = {}  # protocol name -> members supporting it
        self.subscribed_topics: set[str] | None = None  # None: unknown (not a consumer group)
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # Timers owned by the coordinator; cancelled when the group changes phase or unloads.
        self.join_timer: Any = None
        self.join_is_initial = False
        self.initial_remaining_ms = 0
        self.sync_timer: Any = None

    def __repr__(self) -> str:
        return (f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id},"
                f" members={len(self.members)})")

    # -- state ----------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(f"group {self.group_id} cannot move from {self.state.value} to {target.value}")
        self.state = target
        self.current_state_timestamp = now_ms

    # -- members --------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.awaiting_join = callback
        if callback is not None:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      callback: JoinCallback | None) -> None:
        self._count_protocols(member, -1)
        member.supported_protocols = protocols
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = callback

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> MemberMetadata:
        """Give a static member a new member id, fencing whoever waits under the old one."""
        member = self.members.pop(old_member_id)
        self.invoke_join_callback(member, JoinResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.invoke_sync_callback(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    def invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> bool:
        callback = member.awaiting_join
        if callback is None:
            return False
        member.awaiting_join = None
        self.num_members_awaiting_join -= 1
        callback(result)
        return True

    def invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(result)
        return True

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                log.info("group %s: leader %s did not rejoin, %s leads now", self.group_id,
                         self.leader_id, member_id)
                self.leader_id = member_id
                return True
        return False

    # -- protocols ------------------------------------------------------------------------
    def _count_protocols(self, member: MemberMetadata, delta: int) -> None:
        # each name once per member, as Kafka's MemberMetadata.protocols (a set): a JoinGroup naming a
        # protocol twice left no protocol every member supports (ValueError in the join timer)
        for name in {name for name, _ in member.supported_protocols}:
            count = self.supported_protocols.get(name, 0) + delta
            if count:
                self.supported_protocols[name] = count
            else:
                self.supported_protocols.pop(name, None)

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        size = len(self.members)
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols.get(name, 0) == size for name, _ in protocols))

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        if not self.members:
            raise RuntimeError(f"cannot select a protocol for empty group {self.group_id}")
        size = len(self.members)
        candidates = {name for name, count in self.supported_protocols.items() if count == size}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # ties go to the protocol voted for first (deterministic, unlike Kafka's hash order)
        return max(votes, key=lambda name: votes[name])

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        protocol = self.protocol_name
        return [(m.member_id, m.group_instance_id, m.metadata(protocol)) for m in self.members.values()]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, if this is a consumer group whose metadata parses."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # -- views ----------------------------------------------------------------------------
    def summary(self) -> GroupSummary:
        if self.state is GroupState.STABLE:
            protocol = self.protocol_name or ""
            members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.metadata(protocol), m.assignment) for m in self.members.values()]
        else:
            protocol = ""
            members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                       for m in self.members.values()]
        return GroupSummary(self.state.value, self.protocol_type or "", protocol, members)

    # -- offsets --------------------------------------------------------------------------
    def has_offsets(self) -> bool:
        return bool(self.offsets)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets past retention, by Kafka's rules (KIP-211): see removeExpiredOffsets."""
        if self.protocol_type is not None and self.state is GroupState.EMPTY:
            base = self.current_state_timestamp
            excluded: set[str] = set()
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
              and self.state is GroupState.STABLE):
            base = None
            excluded = self.subscribed_topics
        elif self.protocol_type is None:
            base = None
            excluded = set()
        else:
            return []
        expired = []
        for tp, committed in self.offsets.items():
            if tp[0] in excluded:
                continue
            if committed.expire_timestamp >= 0:
                if now_ms >= committed.expire_timestamp:
                    expired.append(tp)
            elif now_ms - (base if base is not None else committed.commit_timestamp) >= retention_ms:
                expired.append(tp)
        return expired
