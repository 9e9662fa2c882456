"""The classic rebalance protocol: members joining, syncing, heartbeating and leaving a group.

Kafka's GroupCoordinator join/sync logic, rule for rule. It never blocks and never touches
asyncio: JoinGroup and SyncGroup answer through callbacks (completed when the rebalance gets
there), Heartbeat and LeaveGroup return their result. Timers (session and rebalance
timeouts, the initial rebalance delay, pending-member and pending-sync expiry) go through a
`scheduler` with `call_later(delay_s, fn, *args) -> handle.cancel()` -- an asyncio loop, or a
manual clock in tests. Every timer belongs to one member or group and is cancelled when it
stops mattering or the group unloads, so their number is bounded by the members present. The
timers themselves are RebalanceTimers (rebalance_timers.py).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..protocol.errors import ErrorCode
from .config import GroupCoordinatorConfig
from .group import (UNKNOWN_MEMBER_ID, GroupMetadata, GroupState, JoinCallback, JoinResult, MemberMetadata,
                    SyncCallback, SyncResult)
from .metadata_manager import GroupMetadataManager
from .rebalance_timers import RebalanceTimers

log = logging.getLogger(__name__)

# New members can't heartbeat until their JoinGroup is answered; Kafka bounds their wait so
# that clients which gave up on a long rebalance don't linger as defunct members.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


@dataclass(slots=True)
class JoinRequest:
    """One JoinGroup, as the coordinator needs it (versions already resolved by the handler)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = True
    support_skipping_assignment: bool = False
    reason: str | None = None


def validate_current_member(group: GroupMetadata, member_id: str,
                             group_instance_id: str | None) -> int | None:
    """The error for a request naming this member (Kafka's validateCurrentMember), or None."""
    if group_instance_id is not None:
        current = group.static_member_id(group_instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if current != member_id:
            log.info("member %s of group %s with instance id %s is fenced by %s", member_id,
                     group.group_id, group_instance_id, current)
            return ErrorCode.FENCED_INSTANCE_ID
        return None
    if not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    return None


class GroupMembership(RebalanceTimers):
    """Join/sync/heartbeat/leave for the groups in `manager`; `status(group_id)` is the coordinator's
    pre-check (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) or None."""

    def __init__(self, config: GroupCoordinatorConfig, manager: GroupMetadataManager,
                 clock_ms: Callable[[], int], status: Callable[[str | None], int | None]):
        self.config = config
        self.manager = manager
        self.clock_ms = clock_ms
        self._status = status
        self.scheduler: Any = None
        self._pending_member_timers: dict[tuple[str, str], Any] = {}
        # serves classic members of KIP-848 consumer groups (consumer/classic_members.py): its
        # join/sync/heartbeat/leave answer for a group that is a consumer group, else decline
        self.consumer_groups: Any = None

    def cancel_pending_members(self, group_id: str) -> None:
        for key in [k for k in self._pending_member_timers if k[0] == group_id]:
            self._pending_member_timers.pop(key).cancel()

    def close(self) -> None:
        for handle in self._pending_member_timers.values():
            handle.cancel()
        self._pending_member_timers.clear()
        self.scheduler = None

    def unload_group(self, group: GroupMetadata) -> None:
        """The group is no longer coordinated here: answer its waiters, stop its timers."""
        log.info("unloading group %s (generation %d)", group.group_id, group.generation_id)
        previous = group.state
        group.transition_to(DEAD, self.clock_ms())
        self._cancel_join_timer(group)
        self._cancel_sync_timer(group)
        for member in group.members.values():
            member.cancel_heartbeat()
            if previous is PREPARING:
                group.invoke_join_callback(member, JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
            group.invoke_sync_callback(member, SyncResult(ErrorCode.NOT_COORDINATOR))
        self.cancel_pending_members(group.group_id)

    # -- JoinGroup ------------------------------------------------------------------------
    def join_group(self, request: JoinRequest, callback: JoinCallback) -> None:
        """Handle a JoinGroup; `callback` gets the JoinResult, possibly after a rebalance."""
        error = self._status(request.group_id)
        if error is not None:
            callback(JoinResult(request.member_id, error))
            return
        if not (self.config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            callback(JoinResult(request.member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return
        if self.consumer_groups is not None and self.consumer_groups.join(request, callback):
            return
        is_unknown = request.member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_or_create_group(request.group_id, create=is_unknown)
        if group is None:
            callback(JoinResult(request.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if not self._accept_joining_member(group, request.member_id):
            member = group.remove(request.member_id)
            if member is not None:
                member.cancel_heartbeat()
            log.info("group %s is full (group.max.size %d), rejecting member %s", group.group_id,
                     self.config.group_max_size, request.member_id or "(new)")
            callback(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
            return
        if is_unknown:
            self._do_new_member_join(group, request, callback)
        else:
            self._do_current_member_join(group, request, callback)
        if group.is_in(PREPARING):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.is_in(EMPTY, DEAD):
            return True
        if group.is_in(PREPARING):
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_members_awaiting_join < max_size)
        return group.has(member_id) or len(group.members) < max_size

    def _do_new_member_join(self, group: GroupMetadata, request: JoinRequest, callback: JoinCallback) -> None:
        if group.is_in(DEAD):
            callback(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(request.protocol_type, request.protocols):
            callback(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        prefix = request.group_instance_id if request.group_instance_id is not None else request.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            old_member_id = group.static_member_id(request.group_instance_id)
            if old_member_id is None:
                self._add_member_and_rebalance(group, new_member_id, request, callback)
            else:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, request, callback)
        elif request.require_known_member_id:
            # KIP-394: hand out the id first, so a client that retries after a timeout
            # does not leave an unknown member behind in the rebalance.
            group.pending_members.add(new_member_id)
            self._schedule_pending_member(group, new_member_id, request.session_timeout_ms)
            callback(JoinResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_member_id, request, callback)

    def _do_current_member_join(self, group: GroupMetadata, request: JoinRequest,
                                callback: JoinCallback) -> None:
        member_id = request.member_id
        if group.is_in(DEAD):
            callback(JoinResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(request.protocol_type, request.protocols):
            callback(JoinResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending(member_id):
            if request.group_instance_id is not None:
                callback(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            self._cancel_pending_member(group, member_id)
            self._add_member_and_rebalance(group, member_id, request, callback)
            return
        error = validate_current_member(group, member_id, request.group_instance_id)
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        member = group.get(member_id)
        if group.is_in(PREPARING):
            self._update_member_and_rebalance(group, member, request, callback)
        elif group.is_in(COMPLETING):
            if member.matches(request.protocols):
                # a retry of a JoinGroup whose answer was lost: answer it again
                callback(self._join_result(group, member, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, request, callback)
        elif group.is_in(STABLE):
            # the leader rejoining forces a rebalance (it may have seen metadata change)
            if group.is_leader(member_id) or not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, callback)
            else:
                callback(self._join_result(group, member, include_members=False))
        else:
            callback(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _join_result(group: GroupMetadata, member: MemberMetadata, include_members: bool,
                     leader_id: str | None = None, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            member_id=member.member_id, error=ErrorCode.NONE, generation_id=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
            leader_id=(leader_id if leader_id is not None else group.leader_id) or UNKNOWN_MEMBER_ID,
            skip_assignment=skip_assignment,
            members=group.current_member_metadata() if include_members else [])

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, request: JoinRequest,
                                  callback: JoinCallback) -> None:
        member = MemberMetadata(
            member_id=member_id, group_instance_id=request.group_instance_id, client_id=request.client_id,
            client_host=request.client_host, rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms, protocol_type=request.protocol_type,
            supported_protocols=list(request.protocols), is_new=True)
        if group.is_in(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        self.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}"
                                      + (f" ({request.reason})" if request.reason else ""))

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     request: JoinRequest, callback: JoinCallback) -> None:
        if member.awaiting_join is not None:
            # a JoinGroup of this member is already parked (its client gave up on it): free it
            group.invoke_join_callback(member, JoinResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined"
                                      + (f" ({request.reason})" if request.reason else ""))

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str,
                                            new_member_id: str, request: JoinRequest,
                                            callback: JoinCallback) -> None:
        """A static member rejoined with a new member id: no rebalance if nothing else changes."""
        current_leader = group.leader_id
        member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
        self.schedule_heartbeat(group, member)
        old_protocols = member.supported_protocols
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, callback)
        reason = f"static member {request.group_instance_id} rejoined with a new member id"
        if group.is_in(STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, reason)
                return
            log.info("static member %s of group %s rejoined as %s; stable, no rebalance",
                     request.group_instance_id, group.group_id, new_member_id)
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            error = self.manager.store_group(group, assignment)
            if error != ErrorCode.NONE:
                group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout, None)
                restored = group.replace_static_member(request.group_instance_id, new_member_id, old_member_id)
                self.schedule_heartbeat(group, restored)
                callback(JoinResult(UNKNOWN_MEMBER_ID, error, group.generation_id, group.protocol_type,
                                    group.protocol_name, current_leader or UNKNOWN_MEMBER_ID))
            elif request.support_skipping_assignment:
                # KIP-814: a rejoining static leader learns it leads but skips the assignor
                is_leader = group.is_leader(new_member_id)
                group.invoke_join_callback(member, self._join_result(
                    group, member, include_members=is_leader, skip_assignment=is_leader))
            else:
                # older clients: answer with the old leader id so that the member does not
                # believe it leads and compute an assignment a stable group would ignore
                group.invoke_join_callback(member, self._join_result(
                    group, member, include_members=False, leader_id=current_leader or UNKNOWN_MEMBER_ID))
        elif group.is_in(COMPLETING):
            self._prepare_rebalance(group, reason)
        elif group.is_in(PREPARING):
            pass  # the join phase answers it
        else:
            log.error("static member %s rejoined group %s in unexpected state %s", request.group_instance_id,
                      group.group_id, group.state.value)
            group.invoke_join_callback(member, JoinResult(new_member_id, ErrorCode.UNKNOWN_SERVER_ERROR))

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(COMPLETING):
            # members waiting for an assignment must rejoin instead
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel_sync_timer(group)
        was_empty = group.is_in(EMPTY)
        group.transition_to(PREPARING, self.clock_ms())
        log.info("preparing to rebalance group %s with old generation %d (reason: %s)", group.group_id,
                 group.generation_id, reason)
        if was_empty:
            delay = self.config.group_initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay, max(group.rebalance_timeout_ms() - delay, 0))
        else:
            self._schedule_join(group, group.rebalance_timeout_ms())
            self._try_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        """The join phase ended: drop members that did not rejoin, start the next generation."""
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                log.info("group %s: removing member %s, which did not rejoin in time", group.group_id,
                         member.member_id)
                group.remove(member.member_id)
                member.cancel_heartbeat()
                group.invoke_sync_callback(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_in(DEAD):
            log.info("group %s is dead, skipping rebalance", group.group_id)
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self._schedule_join(group, group.rebalance_timeout_ms())
            self._try_complete_join(group)
            return
        group.init_next_generation(self.clock_ms())
        if group.is_in(EMPTY):
            log.info("group %s with generation %d is now empty (partition %d)", group.group_id,
                     group.generation_id, self.manager.partition_for(group.group_id))
            error = self.manager.store_group(group, {})
            if error != ErrorCode.NONE:
                log.warning("failed to write empty metadata of group %s: %s", group.group_id,
                            ErrorCode(error).name)
            return
        log.info("stabilized group %s generation %d (partition %d) with %d members, protocol %s",
                 group.group_id, group.generation_id, self.manager.partition_for(group.group_id),
                 len(group.members), group.protocol_name)
        for member in list(group.members.values()):
            result = self._join_result(group, member, include_members=group.is_leader(member.member_id))
            group.invoke_join_callback(member, result)
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    # -- SyncGroup ------------------------------------------------------------------------
    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes], callback: SyncCallback) -> None:
        """Handle a SyncGroup; `callback` gets the member's assignment once the leader sent it."""
        error = self._status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance state was lost with the old coordinator: the member must rejoin
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncResult(error))
            return
        if self.consumer_groups is not None and self.consumer_groups.sync(
                group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name, callback):
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if group.is_in(DEAD):
            callback(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        error = validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is None and protocol_type is not None and protocol_type != group.protocol_type:
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is None and protocol_name is not None and protocol_name != group.protocol_name:
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            callback(SyncResult(error))
        elif group.is_in(EMPTY):
            callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_in(PREPARING):
            callback(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_in(COMPLETING):
            member = group.get(member_id)
            if member.awaiting_sync is not None:
                group.invoke_sync_callback(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._complete_sync(group, member_id, generation_id, assignments)
        else:  # STABLE: the assignment is already known
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self.schedule_heartbeat(group, member)

    def _complete_sync(self, group: GroupMetadata, leader_id: str, generation_id: int,
                       assignments: dict[str, bytes]) -> None:
        log.info("assignment received from leader %s for group %s generation %d (%d members, %d static)",
                 leader_id, group.group_id, generation_id, len(group.members), len(group.static_members))
        assignment = {member_id: assignments.get(member_id, b"") for member_id in group.members}
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning("group %s: leader sent no assignment for members %s; they get an empty one",
                        group.group_id, missing)
        error = self.manager.store_group(group, assignment)
        if not (group.is_in(COMPLETING) and generation_id == group.generation_id):
            return
        if error != ErrorCode.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, "error storing the group assignment")
            return
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(STABLE, self.clock_ms())

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncResult(error, member.assignment, group.protocol_type if ok else None,
                                group.protocol_name if ok else None)
            if group.invoke_sync_callback(member, result):
                # a session that expired while the member waited was ignored; restart it now
                self.schedule_heartbeat(group, member)

    # -- Heartbeat / LeaveGroup -----------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> int:
        """Handle a Heartbeat; returns its error code (REBALANCE_IN_PROGRESS tells it to rejoin)."""
        error = self._status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE
        if error is not None:
            return error
        if self.consumer_groups is not None:
            error = self.consumer_groups.heartbeat(group_id, member_id, group_instance_id, generation_id)
            if error is not None:
                return error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.schedule_heartbeat(group, group.get(member_id))
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_in(PREPARING) else ErrorCode.NONE

    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Handle a LeaveGroup of (member id, group instance id) pairs: (top error, member errors).

        With a top-level error the member list is empty, as in Kafka's response.
        """
        error = self._status(group_id)
        if error is not None:
            return error, []
        if self.consumer_groups is not None:
            served = self.consumer_groups.leave(group_id, members)
            if served is not None:
                return served
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_in(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                # administrative removal of a static member by its instance id
                current = group.static_member_id(instance_id)
                if current is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update_group(group, group.get(current),
                                                         f"static member {instance_id} removed")
                    results.append(ErrorCode.NONE)
            elif group.is_pending(member_id):
                self._cancel_pending_member(group, member_id)
                group.remove(member_id)
                if group.is_in(PREPARING):
                    self._try_complete_join(group)
                results.append(ErrorCode.NONE)
            else:
                error = validate_current_member(group, member_id, instance_id)
                if error is None:
                    log.info("member %s is leaving group %s", member_id, group_id)
                    self._remove_member_and_update_group(group, group.get(member_id),
                                                         f"member {member_id} left")
                    error = ErrorCode.NONE
                results.append(error)
        return ErrorCode.NONE, results

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member may still wait in JoinGroup: answer UNKNOWN_MEMBER_ID so that, if it is
        # still alive, it rejoins. A waiting SyncGroup is answered the same way.
        group.invoke_join_callback(member, JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.invoke_sync_callback(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.cancel_heartbeat()
        group.remove(member.member_id)
        if group.is_in(STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_in(PREPARING):
            self._try_complete_join(group)
