"""The target assignment and the reconciliation of a streams group member (Kafka 4's
TargetAssignmentBuilder and streams CurrentAssignmentBuilder), for StreamsGroupMembership.

StreamsReconciliation is a part of StreamsGroupMembership (membership.py), which supplies
`group_configs`, `clock_ms`, `assignment_configs` and the rebalance timers (member_timers.py).
"""
from __future__ import annotations

import logging

from ...protocol.errors import ErrorCode
from . import records as rec
from .group import EMPTY_TASKS, MemberState, StreamsGroup, StreamsGroupMember, Tasks, clean, contains_any
from .heartbeat import StreamsHeartbeat, _error
from .topology import ConfiguredTopology

log = logging.getLogger(__name__)


def _round_robin(group: StreamsGroup, tasks: dict[str, int], num_standby: int) -> dict[str, Tasks]:
    """A fallback when the sticky assignor fails: active tasks round-robin over the members in id
    order, sticky to their current owner."""
    members = sorted(group.members)
    if not members:
        return {}
    active: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    loads = {m: 0 for m in members}
    all_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    quota = -(-len(all_tasks) // len(members))
    unplaced = []
    for s, p in all_tasks:
        owner = next((m for m in members if p in group.members[m].assigned.active.get(s, ())), None)
        if owner is not None and loads[owner] < quota:
            active[owner].setdefault(s, set()).add(p)
            loads[owner] += 1
        else:
            unplaced.append((s, p))
    for s, p in unplaced:
        m = min(members, key=lambda x: (loads[x], x))
        active[m].setdefault(s, set()).add(p)
        loads[m] += 1
    return {m: Tasks.of(active[m]) for m in members}


def compute_assignment(group: StreamsGroup, tasks: dict[str, int], configs: dict[str, str]) -> dict[str, Tasks]:
    """The target assignment (member id -> tasks) by the sticky task assignor (assignor.py); each
    member's previous target is what it "holds", as Kafka's TargetAssignmentBuilder passes it."""
    from . import assignor

    stateful = frozenset(s.subtopology_id for s in (group.topology.subtopologies if group.topology else ())
                         if s.state_changelog_topics)
    members = {}
    for m in group.members.values():
        previous = group.target.get(m.member_id, EMPTY_TASKS)
        offsets: dict[str, dict[int, int]] = {}
        for s, p, o in m.task_offsets:
            offsets.setdefault(s, {})[p] = o
        end_offsets: dict[str, dict[int, int]] = {}
        for s, p, o in m.task_end_offsets:
            end_offsets.setdefault(s, {})[p] = o
        members[m.member_id] = assignor.MemberSpec(
            member_id=m.member_id, process_id=m.process_id, instance_id=m.instance_id, rack_id=m.rack_id,
            client_tags=dict(m.client_tags), active=dict(previous.active), standby=dict(previous.standby),
            warmup=dict(previous.warmup), task_offsets=offsets, task_end_offsets=end_offsets)
    try:
        result = assignor.assign(assignor.GroupSpec(members, dict(configs)),
                                 assignor.TopologyDescription(dict(tasks), stateful))
    except assignor.TaskAssignorError as exc:
        log.error("streams group %s: task assignment failed (%s); round-robin instead", group.group_id, exc)
        return _round_robin(group, tasks, 0)
    return {member_id: Tasks.of(a.active, a.standby, a.warmup) for member_id, a in result.items()}


class StreamsReconciliation:
    """Target assignments and member reconciliation of StreamsGroupMembership (see the module docstring)."""

    # -- assignment -----------------------------------------------------------------------
    def _can_compute_target(self, group: StreamsGroup) -> bool:
        """Kafka 4.4's assignment interval: a new target at most every streams.assignment.interval.ms;
        meanwhile members keep the current one (the next heartbeat after the interval computes it)."""
        interval = self.group_configs.get(group.group_id, "streams.assignment.interval.ms")
        last = group.assignment_timestamp
        return last == 0 or interval == 0 or self.clock_ms() >= last + interval

    def _update_target_assignment(self, group: StreamsGroup, configured: ConfiguredTopology, records: list) -> None:
        tasks = configured.tasks if configured.ready else {}
        assignment = compute_assignment(group, tasks or {},
                                        group.last_assignment_configs or self.assignment_configs(group.group_id))
        for member_id in group.members:
            new = assignment.get(member_id, EMPTY_TASKS)
            if group.target.get(member_id) != new:
                group.target[member_id] = new
                records.append(rec.target_member_record(group.group_id, member_id, new))
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = self.clock_ms()
        records.append(rec.target_epoch_record(group))
        log.info("streams group %s: new target assignment for epoch %d (%d members, %d subtopologies)",
                 group.group_id, group.assignment_epoch, len(group.members), len(tasks or {}))

    def _reconcile(self, group: StreamsGroup, member: StreamsGroupMember, request: StreamsHeartbeat,
                   records: list, target_epoch: int, target: Tasks | None = None) -> None:
        """Kafka's streams CurrentAssignmentBuilder: revoke first, then hand out free tasks."""
        if member.has_left_static:
            return
        owned = None
        if request.active_tasks is not None:
            owned = {role: clean(getattr(request, f"{role}_tasks")) for role in ("active", "standby", "warmup")}
        state = member.state
        if state is MemberState.STABLE and member.member_epoch == target_epoch:
            return
        if state is MemberState.UNREVOKED_TASKS:
            pending = member.pending_revocation
            if owned is None or any(contains_any(owned[r], getattr(pending, r)) for r in ("active", "standby", "warmup")):
                return
            next_epoch = member.member_epoch + 1
        elif state is MemberState.UNKNOWN:
            if owned is None or any(owned.values()):
                raise _error(ErrorCode.FENCED_MEMBER_EPOCH, "The streams group member is in a unknown state. The"
                             " member must abandon all its tasks and rejoin.")
            next_epoch = target_epoch
        else:
            next_epoch = member.member_epoch
        if target is None:
            target = group.target.get(member.member_id, EMPTY_TASKS)
        before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
        self._next_assignment(group, member, target, target_epoch, next_epoch, owned)
        if before != (member.member_epoch, member.state, member.assigned, member.pending_revocation):
            records.append(rec.current_assignment_record(group.group_id, member))
            if member.state is MemberState.UNREVOKED_TASKS:
                self._schedule_rebalance_timeout(group, member)
            else:
                self._cancel_rebalance_timeout(member)

    def _next_assignment(self, group: StreamsGroup, member: StreamsGroupMember, target: Tasks, target_epoch: int,
                         epoch: int, owned) -> None:
        """One step of Kafka 4.4's streams CurrentAssignmentBuilder.computeNextAssignment.

        Per role: tasks in both the current and the target assignment are kept, current ones not in
        the target are to be revoked, target ones not held yet are to be assigned unless still held
        elsewhere ("unreleased": an active task held actively by anyone, or in another role by
        another member of this process; a standby or warm-up whose active or another replica is on
        this process). Then the role changes that need no revocation: an active task of this member
        that becomes its standby is granted at once (demotion), a standby that becomes a warm-up (and
        back) too; a standby or warm-up that becomes active is not revoked and stays until the active
        task is granted (promotion). Revocation first: with tasks to give back the member keeps its
        epoch and waits (UNREVOKED_TASKS); otherwise it moves to the target epoch with what it may have."""
        pid, me = member.process_id, member.member_id
        active_proc: dict[tuple[str, int], str] = {}
        replica_procs: dict[str, dict[tuple[str, int], set[str]]] = {"standby": {}, "warmup": {}}
        for m in group.members.values():
            held = m.owned()
            for s, parts in held.active.items():
                for p in parts:
                    active_proc[(s, p)] = m.process_id
            for role in ("standby", "warmup"):
                for s, parts in getattr(held, role).items():
                    for p in parts:
                        replica_procs[role].setdefault((s, p), set()).add(m.process_id)
        current = member.assigned

        def held_by_other_on_process(role: str, s: str, p: int) -> bool:
            return pid in replica_procs[role].get((s, p), ()) and p not in getattr(current, role).get(s, ())

        def unreleased(role: str, s: str, p: int) -> bool:
            if role == "active":
                return ((s, p) in active_proc or held_by_other_on_process("standby", s, p)
                        or held_by_other_on_process("warmup", s, p))
            if role == "standby":
                return ((active_proc.get((s, p)) == pid and p not in current.active.get(s, ()))
                        or pid in replica_procs["standby"].get((s, p), ())
                        or held_by_other_on_process("warmup", s, p))
            return (active_proc.get((s, p)) == pid or held_by_other_on_process("standby", s, p)
                    or pid in replica_procs["warmup"].get((s, p), ()))

        kept: dict[str, dict[str, set[int]]] = {}
        revoke: dict[str, dict[str, set[int]]] = {}
        assign: dict[str, dict[str, set[int]]] = {}
        any_unreleased = False
        for role in ("active", "standby", "warmup"):
            have, want = getattr(current, role), getattr(target, role)
            kept[role], revoke[role], assign[role] = {}, {}, {}
            for s in set(have) | set(want):
                h, w = have.get(s, frozenset()), want.get(s, frozenset())
                if h & w:
                    kept[role][s] = set(h & w)
                if h - w:
                    revoke[role][s] = set(h - w)
                for p in w - h:
                    if unreleased(role, s, p):
                        any_unreleased = True
                    else:
                        assign[role].setdefault(s, set()).add(p)

        def grant(role: str, s: str, p: int) -> None:
            assign[role][s].discard(p)
            if not assign[role][s]:
                del assign[role][s]
            kept[role].setdefault(s, set()).add(p)

        def unrevoke(role: str, s: str, p: int) -> None:
            parts = revoke[role].get(s)
            if parts is not None:
                parts.discard(p)
                if not parts:
                    del revoke[role][s]

        # demotion: active -> standby on this member at once
        for s, parts in current.active.items():
            for p in parts:
                if p in assign["standby"].get(s, ()):
                    grant("standby", s, p)
        # standby <-> warm-up on this member at once
        for src, dst in (("standby", "warmup"), ("warmup", "standby")):
            for s, parts in getattr(current, src).items():
                for p in parts:
                    if p in assign[dst].get(s, ()):
                        grant(dst, s, p)
                        unrevoke(src, s, p)
        # promotion: a standby or warm-up becoming active is not revoked
        for role in ("standby", "warmup"):
            for s, parts in getattr(current, role).items():
                for p in parts & target.active.get(s, frozenset()):
                    unrevoke(role, s, p)
        pending = Tasks.of(revoke["active"], revoke["standby"], revoke["warmup"])
        must_wait = not pending.is_empty() and (
            owned is None or any(contains_any(owned[r], getattr(pending, r)) for r in ("active", "standby", "warmup")))
        # ... and stays a replica until the active task is granted
        for role in ("standby", "warmup"):
            for s, parts in getattr(current, role).items():
                for p in parts & target.active.get(s, frozenset()):
                    if must_wait or p not in assign["active"].get(s, ()):
                        kept[role].setdefault(s, set()).add(p)
        keep = Tasks.of(kept["active"], kept["standby"], kept["warmup"])
        to_add = Tasks.of(assign["active"], assign["standby"], assign["warmup"])
        if must_wait:
            member.state = MemberState.UNREVOKED_TASKS
            self._set_epoch(member, epoch)
            member.assigned, member.pending_revocation = keep, pending
        else:
            self._set_epoch(member, target_epoch)
            member.assigned = keep.merge(to_add)
            member.pending_revocation = EMPTY_TASKS
            member.state = MemberState.UNRELEASED_TASKS if any_unreleased else MemberState.STABLE
            for s, parts in to_add.active.items():
                for p in parts:
                    member.active_epochs[(s, p)] = target_epoch
        held = member.owned().active
        member.active_epochs = {k: v for k, v in member.active_epochs.items() if k[1] in held.get(k[0], ())}

    @staticmethod
    def _set_epoch(member: StreamsGroupMember, epoch: int) -> None:
        if member.member_epoch != epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = epoch

    def _endpoints(self, group: StreamsGroup) -> list:
        """(host, port, active [(topic, partitions)], standby [(topic, partitions)]) per member with an endpoint."""
        out = []
        topology = group.topology
        if topology is None:
            return out
        for m in sorted(group.members.values(), key=lambda x: x.member_id):
            if m.user_endpoint is None:
                continue

            def partitions(tasks: dict[str, frozenset[int]]) -> list[tuple[str, list[int]]]:
                by_topic: dict[str, set[int]] = {}
                for s, parts in tasks.items():
                    for topic in topology.source_topics_of(s):
                        by_topic.setdefault(topic, set()).update(parts)
                return [(t, sorted(p)) for t, p in sorted(by_topic.items())]

            standby = dict(m.assigned.standby)
            for s, p in m.assigned.warmup.items():
                standby[s] = standby.get(s, frozenset()) | p
            out.append((m.user_endpoint[0], m.user_endpoint[1], partitions(m.assigned.active), partitions(standby)))
        return out
