"""The session and rebalance timers of streams group members, for StreamsGroupMembership.

StreamsMemberTimers is a part of StreamsGroupMembership (membership.py), which supplies
`scheduler`, `session_timeout_ms`, `streams_group`, `fence_member`, `_update_target_assignment`
and `_write`, and `manager` (its groups).
"""
from __future__ import annotations

import logging

from .group import MemberState, StreamsGroup, StreamsGroupMember

log = logging.getLogger(__name__)


class StreamsMemberTimers:
    """Member timers of StreamsGroupMembership (see the module docstring)."""

    # -- timers ---------------------------------------------------------------------------
    def _schedule_session_timeout(self, group: StreamsGroup, member: StreamsGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = self.scheduler.call_later(
            self.session_timeout_ms(group.group_id) / 1000, self._on_session_timeout, group.group_id, member.member_id, member)

    def schedule_member_timers(self, group: StreamsGroup) -> None:
        for member in list(group.members.values()):
            self._schedule_session_timeout(group, member)
            if member.state is MemberState.UNREVOKED_TASKS:
                self._schedule_rebalance_timeout(group, member)

    def _on_session_timeout(self, group_id: str, member_id: str, member: StreamsGroupMember) -> None:
        group = self.streams_group(group_id)
        if group is None or group.members.get(member_id) is not member:
            return
        member.session_timer = None
        log.info("streams group %s: member %s fenced because its session expired", group_id, member_id)
        self.fence_member(group, member)

    def _on_initial_rebalance_delay(self, group_id: str, group: StreamsGroup) -> None:
        """The initial rebalance delay is over: compute the target the first members wait for."""
        group.timers.pop("initial-rebalance", None)
        if self.streams_group(group_id) is not group or not group.members:
            return
        if group.group_epoch <= group.assignment_epoch or group.configured is None:
            return
        records: list = []
        self._update_target_assignment(group, group.configured, records)
        self._write(group, records)

    def _schedule_rebalance_timeout(self, group: StreamsGroup, member: StreamsGroupMember) -> None:
        self._cancel_rebalance_timeout(member)
        timeout_ms = max(member.rebalance_timeout_ms, 0)
        member.rebalance_timer = self.scheduler.call_later(
            timeout_ms / 1000, self._on_rebalance_timeout, group.group_id, member.member_id, member,
            member.member_epoch, timeout_ms)

    @staticmethod
    def _cancel_rebalance_timeout(member: StreamsGroupMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None

    def _on_rebalance_timeout(self, group_id: str, member_id: str, member: StreamsGroupMember, epoch: int,
                              timeout_ms: int) -> None:
        group = self.streams_group(group_id)
        if group is None or group.members.get(member_id) is not member:
            return
        member.rebalance_timer = None
        if member.member_epoch != epoch or member.state is not MemberState.UNREVOKED_TASKS:
            return
        log.info("streams group %s: member %s fenced because it did not revoke its tasks within %d ms",
                 group_id, member_id, timeout_ms)
        self.fence_member(group, member)

    def unload_group(self, group: StreamsGroup) -> None:
        for member in group.members.values():
            member.cancel_timers()
        for timer in group.timers.values():
            timer.cancel()
        group.timers.clear()

    def close(self) -> None:
        for group in list(self.manager.groups.values()):
            if isinstance(group, StreamsGroup):
                self.unload_group(group)
