"""The timers of the classic rebalance protocol (GroupMembership, membership.py): members' session
timeouts (heartbeat expiry), pending members' join timeout, the rebalance (join) timeout, the
initial rebalance delay and the pending-sync expiry, as Kafka's GroupCoordinator schedules them.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .group import GroupMetadata, GroupState, MemberMetadata

log = logging.getLogger(__name__)

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


class RebalanceTimers:
    """GroupMembership's timers (a mixin: `config`, `scheduler`, `_pending_member_timers` and the
    rebalance steps they complete are GroupMembership's)."""

    # -- timers ---------------------------------------------------------------------------
    def _schedule(self, delay_ms: int, fn: Callable, *args: Any) -> Any:
        return self.scheduler.call_later(max(delay_ms, 0) / 1000, fn, *args)

    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                           timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        member.cancel_heartbeat()
        if self.scheduler is None:
            return
        member.heartbeat_timer = self._schedule(
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_in(DEAD) or group.members.get(member.member_id) is not member:
            return
        # Members waiting in a rebalance satisfy heartbeats (the rebalance timeout bounds them),
        # except new members, which have never heartbeated.
        if member.is_new or not (member.is_awaiting_join or member.is_awaiting_sync):
            log.info("member %s in group %s has failed (no heartbeat within %d ms), removing it",
                     member.member_id, group.group_id, member.session_timeout_ms)
            self._remove_member_and_update_group(group, member, "heartbeat expired")

    def _schedule_pending_member(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        key = (group.group_id, member_id)
        old = self._pending_member_timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._pending_member_timers[key] = self._schedule(timeout_ms, self._on_pending_member_expired,
                                                          group, member_id)

    def _cancel_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        handle = self._pending_member_timers.pop((group.group_id, member_id), None)
        if handle is not None:
            handle.cancel()

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        self._pending_member_timers.pop((group.group_id, member_id), None)
        if group.is_in(DEAD) or not group.is_pending(member_id):
            return
        log.info("pending member %s in group %s removed after session timeout", member_id, group.group_id)
        group.remove(member_id)
        if group.is_in(PREPARING):
            self._try_complete_join(group)

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    def _cancel_sync_timer(self, group: GroupMetadata) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _schedule_join(self, group: GroupMetadata, timeout_ms: int) -> None:
        self._cancel_join_timer(group)
        group.join_is_initial = False
        group.join_timer = self._schedule(timeout_ms, self._on_join_timer, group)

    def _on_join_timer(self, group: GroupMetadata) -> None:
        group.join_timer = None
        self._on_complete_join(group)

    def _schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        self._cancel_join_timer(group)
        group.join_is_initial = True
        group.initial_remaining_ms = remaining_ms
        group.join_timer = self._schedule(delay_ms, self._on_initial_join_timer, group, delay_ms)

    def _on_initial_join_timer(self, group: GroupMetadata, delay_ms: int) -> None:
        """Kafka's InitialDelayedJoin: keep waiting while new members arrive, up to the timeout."""
        group.join_timer = None
        remaining = group.initial_remaining_ms
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            self._schedule_initial_join(group, next_delay, max(remaining - delay_ms, 0))
        else:
            self._on_complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """Finish the join phase now if every member has rejoined (never during the initial delay)."""
        if group.join_timer is not None and not group.join_is_initial and group.has_all_members_joined():
            self._cancel_join_timer(group)
            self._on_complete_join(group)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._cancel_sync_timer(group)
        group.sync_timer = self._schedule(pending_sync_timeout_ms(group), self._on_pending_sync_expired,
                                          group, group.generation_id)

    def _on_pending_sync_expired(self, group: GroupMetadata, generation_id: int) -> None:
        group.sync_timer = None
        if generation_id != group.generation_id or not group.is_in(COMPLETING, STABLE):
            return
        pending = list(group.pending_sync_members)
        if not pending:
            return
        log.info("group %s: members %s sent no SyncGroup within the rebalance timeout, removing them",
                 group.group_id, pending)
        for member_id in pending:
            member = group.remove(member_id)
            if member is not None:
                member.cancel_heartbeat()
        self._prepare_rebalance(group, f"members {pending} did not sync")

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._cancel_sync_timer(group)


def pending_sync_timeout_ms(group: GroupMetadata) -> int:
    """How long the members of a new generation have to send SyncGroup: the group's rebalance
    timeout, as in Kafka, except that a rebalance timeout of 0 (clients that leave the field unset)
    gives them the longest session timeout instead. Kafka 3.7's DelayedSync(0) expires at once, so
    such a member is removed before its SyncGroup arrives and its commits fail with
    UNKNOWN_MEMBER_ID; issue 15 asks for the commit to be accepted (docs/compatibility.md)."""
    timeout = group.rebalance_timeout_ms()
    if timeout > 0:
        return timeout
    return max((m.session_timeout_ms for m in group.members.values()), default=0)
