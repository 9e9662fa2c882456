"""StreamsGroupHeartbeat processing (Kafka 4's GroupMetadataManager.streamsGroupHeartbeat).

One heartbeat: validate the request, find or create the group and the member (joining, static
replacement, fencing checks on epochs), initialize the group's topology from the first member's
(a different topology at the same or a newer epoch is refused: Kafka 4.4 has no topology
updates), configure the topology against the cluster's topics (statuses, internal topics to
create), bump the group epoch when the member's metadata, the topology's validation or the topics
changed, recompute the target assignment, reconcile the member (a task moves only once its
previous owner gave it up) and answer with the member's epoch, its tasks when they changed and
the statuses. Every change is written to __consumer_offsets as Kafka's records.

The request and its result are in heartbeat.py, the target assignment and the reconciliation in
reconciliation.py, the members' session and rebalance timers in member_timers.py.
"""
from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from ...protocol.errors import ErrorCode, KafkaError
from . import records as rec
from .group import (JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    EMPTY_TASKS, MemberState, StreamsGroup, StreamsGroupMember, clean)
from .configs import StreamsGroupConfigs
from .heartbeat import OwnedTasks, StreamsHeartbeat, StreamsHeartbeatResult, _error
from .member_timers import StreamsMemberTimers
from .reconciliation import StreamsReconciliation
from .topology import ConfiguredTopology, Status, Topology, configure

log = logging.getLogger(__name__)

__all__ = ["StreamsGroupMembership", "StreamsHeartbeat", "StreamsHeartbeatResult"]


def _owned(request_tasks: OwnedTasks | None) -> dict[str, frozenset[int]] | None:
    return None if request_tasks is None else clean(request_tasks)


class StreamsGroupMembership(StreamsReconciliation, StreamsMemberTimers):
    """Streams groups of this coordinator: heartbeats, timers and their records."""

    def __init__(self, config: Any, manager: Any, clock_ms: Callable[[], int],
                 validate_group_status: Callable[..., int | None], topics: Any = None):
        self.config = config
        self.manager = manager
        self.clock_ms = clock_ms
        self._validate_group_status = validate_group_status
        self.topics = topics
        self.scheduler: Any = None
        # per-group overrides (streams.*); the broker gives it the metadata store to keep them in
        self.group_configs = StreamsGroupConfigs(config)

    @property
    def enabled(self) -> bool:
        return "streams" in self.config.group_coordinator_rebalance_protocols

    # -- config ---------------------------------------------------------------------------
    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_configs.get(group_id, "streams.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_configs.get(group_id, "streams.heartbeat.interval.ms")

    def assignment_configs(self, group_id: str) -> dict[str, str]:
        return {"num.standby.replicas": str(self.group_configs.get(group_id, "streams.num.standby.replicas"))}

    def _partitions_of(self, topic: str) -> int | None:
        if self.topics is None:
            return None
        meta = self.topics.describe(topic)
        return None if meta is None else meta.num_partitions

    def _topics_version(self) -> int:
        return getattr(self.topics, "version", 0) if self.topics is not None else 0

    def ensure_configured(self, group: StreamsGroup) -> ConfiguredTopology | None:
        """The group's topology configured against the current topics (after a load, before any heartbeat)."""
        if group.topology is not None and (group.configured is None
                                           or group.configured_version != self._topics_version()):
            try:
                group.configured = configure(group.topology, self._partitions_of)
                group.configured_version = self._topics_version()
            except KafkaError as exc:
                log.warning("streams group %s: topology cannot be configured: %s", group.group_id, exc)
        return group.configured

    def streams_group(self, group_id: str) -> StreamsGroup | None:
        group = self.manager.groups.get(group_id)
        return group if isinstance(group, StreamsGroup) else None

    # -- the heartbeat --------------------------------------------------------------------
    def heartbeat(self, request: StreamsHeartbeat) -> StreamsHeartbeatResult:
        if self.scheduler is None:
            return StreamsHeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            self._validate(request)
            error = self._validate_group_status(request.group_id)
            if error is not None:
                return StreamsHeartbeatResult(error)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except KafkaError as exc:
            log.info("streams group %s: heartbeat of member %s (epoch %d) refused: %s", request.group_id,
                     request.member_id, request.member_epoch, exc)
            return StreamsHeartbeatResult(exc.code, str(exc))

    @staticmethod
    def _validate(r: StreamsHeartbeat) -> None:
        """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid."""
        def invalid(message: str) -> KafkaError:
            return _error(ErrorCode.INVALID_REQUEST, message)

        for value, name in ((r.member_id, "MemberId"), (r.group_id, "GroupId"), (r.instance_id, "InstanceId"),
                            (r.rack_id, "RackId")):
            if value is not None and not value.strip():
                raise invalid(f"{name} can't be empty.")
        if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if r.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            for tasks, name in ((r.active_tasks, "ActiveTasks"), (r.standby_tasks, "StandbyTasks"),
                                (r.warmup_tasks, "WarmupTasks")):
                if tasks is None or tasks:  # Kafka: an empty list, not null
                    raise invalid(f"{name} must be empty when (re-)joining.")
            if r.topology is None:
                raise invalid("Topology must be non-null when (re-)joining.")
            for s in r.topology.subtopologies:
                if s.source_topic_regex:
                    # Kafka 4.4 (GroupCoordinatorService): not yet a feature of streams groups
                    raise invalid("Regular expressions for source topics are not supported yet.")
            for s in r.topology.subtopologies:
                for t in s.state_changelog_topics:
                    if t.partitions != 0:
                        raise _error(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                     f"Changelog topic {t.name} must have an undefined partition count, but it is"
                                     f" set to {t.partitions}.")
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if r.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid(f"MemberEpoch is {r.member_epoch}, but must be greater than or equal to -2.")
        present = [t is not None for t in (r.active_tasks, r.standby_tasks, r.warmup_tasks)]
        if any(present) and not all(present):
            raise invalid("If one task-type is non-null, all must be non-null.")
        if r.member_epoch != JOIN_GROUP_MEMBER_EPOCH and r.topology is not None:
            raise invalid("Topology can only be provided when (re-)joining.")

    def _get_or_create_group(self, request: StreamsHeartbeat) -> StreamsGroup:
        group = self.manager.groups.get(request.group_id)
        if isinstance(group, StreamsGroup) and not group.is_dead:
            return group
        if group is None or group.state.value == "Dead":
            if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {request.group_id} not found.")
            return StreamsGroup(request.group_id, self.clock_ms())
        if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH and group.state.value == "Empty" \
                and not getattr(group, "members", None) and getattr(group, "group_type", "classic") == "classic":
            # an empty classic group (offsets only) becomes a streams group keeping its offsets
            streams = StreamsGroup(group.group_id, self.clock_ms())
            streams.offsets = group.offsets
            return streams
        raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a streams group.")

    def _heartbeat(self, request: StreamsHeartbeat) -> StreamsHeartbeatResult:
        records: list[rec.Record] = []
        status: list[tuple[int, str]] = []
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._get_or_create_group(request)
        member_id = request.member_id
        if joining and member_id not in group.members and len(group.members) >= self.config.group_streams_max_size:
            raise _error(ErrorCode.GROUP_MAX_SIZE_REACHED,
                         f"The streams group has reached its maximum capacity of "
                         f"{self.config.group_streams_max_size} members.")
        owned_active = _owned(request.active_tasks)
        replaced: StreamsGroupMember | None = None
        if request.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
                member = StreamsGroupMember(member_id)
            elif not joining:
                self._check_epoch(member, request)
        else:
            member, replaced = self._static_member(group, request)
        # a topology that contradicts the group's is refused before anything changes
        topology = group.topology
        new_topology = False
        if request.topology is not None:
            if topology is None:
                topology, new_topology = request.topology, True
            elif topology.epoch > request.topology.epoch:
                pass  # a member with a stale topology: STALE_TOPOLOGY below
            elif topology != request.topology:
                raise _error(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
        elif topology is None:
            raise _error(ErrorCode.INVALID_REQUEST, "The topology is null and the group topology is also null.")
        # configure before anything changes: an unconfigurable topology is STREAMS_INVALID_TOPOLOGY
        configured = group.configured
        reconfigure = new_topology or configured is None or group.configured_version != self._topics_version()
        if reconfigure:
            configured = configure(topology, self._partitions_of)
        # -- validation is over: everything below changes the group --------------------------
        previous_group = self.manager.groups.get(group.group_id)
        if previous_group is not group:
            self.manager.groups[group.group_id] = group
        updated = StreamsGroupMember(
            member_id=member_id,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id, client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            topology_epoch=request.topology.epoch if request.topology is not None else member.topology_epoch,
            process_id=request.process_id if request.process_id is not None else member.process_id,
            user_endpoint=request.user_endpoint if request.user_endpoint is not None else member.user_endpoint,
            client_tags=dict(request.client_tags) if request.client_tags is not None else dict(member.client_tags))
        bump = False
        was_empty = not group.members
        is_new = member_id not in group.members
        if replaced is not None or is_new or not member.metadata_equals(updated):
            bump = True
            records.append(rec.member_metadata_record(group.group_id, updated))
        for name in ("instance_id", "rack_id", "client_id", "client_host", "rebalance_timeout_ms",
                     "topology_epoch", "process_id", "user_endpoint", "client_tags"):
            setattr(member, name, getattr(updated, name))
        if request.task_offsets is not None:
            member.task_offsets = list(request.task_offsets)
        if request.task_end_offsets is not None:
            member.task_end_offsets = list(request.task_end_offsets)
        if replaced is not None:
            self._replace_static(group, replaced, member, records)
        elif is_new:
            group.add_member(member)
        elif joining and member.member_epoch != 0:
            # a known member rejoining owns nothing now
            member.assigned = member.pending_revocation = EMPTY_TASKS
            member.active_epochs = {}
            member.member_epoch, member.previous_member_epoch, member.state = 0, 0, MemberState.STABLE
            self._cancel_rebalance_timeout(member)
            records.append(rec.current_assignment_record(group.group_id, member))
        if new_topology:
            group.topology = topology
            records.append(rec.topology_record(group.group_id, topology))
            log.info("streams group %s: member %s initialized the topology with epoch %d", group.group_id,
                     member_id, topology.epoch)
        if group.topology is not None and member.topology_epoch < group.topology.epoch:
            status.append((Status.STALE_TOPOLOGY,
                           f"The member's topology epoch {member.topology_epoch} is behind the group's topology"
                           f" epoch {group.topology.epoch}."))
        # configure the topology against the topics
        metadata_hash = group.metadata_hash
        if reconfigure:
            metadata_hash = self._metadata_hash(group.topology, self._partitions_of)
            if metadata_hash != group.metadata_hash:
                bump = True
            group.configured = configured
            group.configured_version = self._topics_version()
        validated = -1
        if configured.ready:
            validated = group.topology.epoch
            for tasks in (request.active_tasks, request.standby_tasks, request.warmup_tasks):
                self._check_tasks(configured, tasks)
        if validated != group.validated_topology_epoch:
            bump = True
        configs = self.assignment_configs(group.group_id)
        if not bump and configs != group.last_assignment_configs:
            bump = True
        if bump:
            group.group_epoch = 2 if group.group_epoch == 0 else group.group_epoch + 1
            group.metadata_hash = metadata_hash
            group.validated_topology_epoch = validated
            group.last_assignment_configs = configs
            records.append(rec.metadata_record(group))
            log.info("streams group %s: group epoch bumped to %d (validated topology epoch %d)", group.group_id,
                     group.group_epoch, validated)
        delay_ms = self.group_configs.get(group.group_id, "streams.initial.rebalance.delay.ms")
        if was_empty and delay_ms > 0 and "initial-rebalance" not in group.timers:
            # coalesce the first joins of a new (or emptied) group, as Kafka 4.4 does
            group.timers["initial-rebalance"] = self.scheduler.call_later(
                delay_ms / 1000, self._on_initial_rebalance_delay, group.group_id, group)
        target_epoch, target = group.assignment_epoch, None
        if group.group_epoch > group.assignment_epoch:
            if "initial-rebalance" in group.timers:
                target_epoch, target = max(1, group.assignment_epoch), EMPTY_TASKS
                status.append((Status.ASSIGNMENT_DELAYED,
                               "Assignment delayed due to the configured initial rebalance delay."))
            elif self._can_compute_target(group):
                self._update_target_assignment(group, configured, records)
                target_epoch = group.assignment_epoch
            else:
                status.append((Status.ASSIGNMENT_DELAYED,
                               "Assignment delayed due to the configured assignment interval."))
        self._reconcile(group, member, request, records, target_epoch, target)
        self._schedule_session_timeout(group, member)
        if request.shutdown_application:
            group.shutdown_request_member_id = member_id
        error = self._write(group, records)
        if error is not None:
            self._undo_join(group, previous_group, member, is_new and replaced is None, new_topology)
            return StreamsHeartbeatResult(error)
        if is_new or replaced is not None:
            log.info("streams group %s: member %s%s joined (epoch %d, group epoch %d)", group.group_id, member_id,
                     f" (instance {member.instance_id})" if member.instance_id else "", member.member_epoch,
                     group.group_epoch)
        result = StreamsHeartbeatResult(member_id=member_id, member_epoch=member.member_epoch,
                                        heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
                                        task_offset_interval_ms=self.group_configs.get(
                                            group.group_id, "streams.task.offset.interval.ms"),
                                        acceptable_recovery_lag=self.group_configs.get(
                                            group.group_id, "streams.acceptable.recovery.lag"))
        if joining or member.assigned != member.last_sent:
            result.tasks = member.assigned
            member.last_sent = member.assigned
            if member.user_endpoint is not None:
                group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != request.endpoint_information_epoch:
            result.partitions_by_endpoint = self._endpoints(group)
        if previous_group is group:
            result.endpoint_information_epoch = group.endpoint_information_epoch
        else:
            # Kafka 4.4: the bump on a group created by this heartbeat is not kept, and the epoch
            # answered is 0 (the group object is only materialized when its records are replayed)
            group.endpoint_information_epoch = 0
        if configured.status is not None:
            status.append(configured.status)
            result.internal_topics_to_create = dict(configured.to_create)
        if group.shutdown_request_member_id is not None:
            status.append((Status.SHUTDOWN_APPLICATION,
                           f"Streams group member {group.shutdown_request_member_id} encountered a fatal error and"
                           f" requested a shutdown for the entire application."))
        result.status = status
        return result

    def _undo_join(self, group: StreamsGroup, previous_group: Any, member: StreamsGroupMember, new_member: bool,
                   new_topology: bool) -> None:
        """A heartbeat whose records could not be written (e.g. a topology too large for one batch
        of __consumer_offsets) leaves no new group, member or topology behind, as Kafka's
        coordinator, which applies records only once written. Changes to existing members stay
        in memory until their next heartbeat rewrites them."""
        if previous_group is not group:
            member.cancel_timers()
            for timer in group.timers.values():
                timer.cancel()
            if previous_group is None:
                self.manager.groups.pop(group.group_id, None)
            else:
                self.manager.groups[group.group_id] = previous_group
            return
        if new_member:
            member.cancel_timers()
            group.remove_member(member.member_id)
        if new_topology:
            group.topology, group.configured = None, None

    @staticmethod
    def _metadata_hash(topology: Topology | None, partitions_of) -> int:
        """A stand-in for Kafka's metadata hash: the topology's topics that exist, with their
        partition counts (0 when none exists), so that creating, deleting or growing one of them
        bumps the group epoch as in Kafka. Not Kafka's value (which hashes topic ids and racks too)."""
        if topology is None:
            return 0
        existing = []
        for name in sorted(topology.required_topics()):
            n = partitions_of(name)
            if n is not None:
                existing.append(f"{name}:{n}")
        if not existing:
            return 0
        digest = hashlib.sha256(",".join(existing).encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    @staticmethod
    def _check_tasks(configured: ConfiguredTopology, tasks: OwnedTasks | None) -> None:
        for subtopology, partitions in (tasks or {}).items():
            n = configured.tasks.get(subtopology)
            if n is None:
                raise _error(ErrorCode.INVALID_REQUEST, f"Subtopology {subtopology} does not exist in the topology.")
            for p in partitions:
                if p < 0 or p >= n:
                    raise _error(ErrorCode.INVALID_REQUEST,
                                 f"Task {p} for subtopology {subtopology} is invalid. Number of tasks for this"
                                 f" subtopology: {n}")

    @staticmethod
    def _check_epoch(member: StreamsGroupMember, request: StreamsHeartbeat) -> None:
        epoch = request.member_epoch
        if epoch > member.member_epoch:
            raise _error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The streams group member has a greater member epoch ({epoch}) than the one known by the"
                         f" group coordinator ({member.member_epoch}). The member must abandon all its partitions"
                         f" and rejoin.")
        if epoch < member.member_epoch:
            def within(owned: OwnedTasks | None, assigned: dict[str, frozenset[int]]) -> bool:
                return owned is not None and all(set(p) <= assigned.get(s, frozenset()) for s, p in owned.items())

            if (epoch != member.previous_member_epoch
                    or not within(request.active_tasks, member.assigned.active)
                    or not within(request.standby_tasks, member.assigned.standby)
                    or not within(request.warmup_tasks, member.assigned.warmup)):
                raise _error(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The streams group member has a smaller member epoch ({epoch}) than the one known by"
                             f" the group coordinator ({member.member_epoch}). The member must abandon all its"
                             f" partitions and rejoin.")

    def _static_member(self, group: StreamsGroup, request: StreamsHeartbeat
                       ) -> tuple[StreamsGroupMember, StreamsGroupMember | None]:
        existing_id = group.static_member_id(request.instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if existing is None:
                member = group.members.get(request.member_id) or StreamsGroupMember(request.member_id)
                return member, None
            if existing.member_id == request.member_id:
                return existing, None
            if not existing.has_left_static:
                raise _error(ErrorCode.UNRELEASED_INSTANCE_ID,
                             f"Static member {existing.member_id} with instance id {request.instance_id} is not"
                             f" released yet.")
            # the new member takes over the old one's assignment and epoch
            member = StreamsGroupMember(request.member_id, instance_id=request.instance_id)
            return member, existing
        if existing is None or existing.member_id != request.member_id:
            if existing is None:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {request.member_id} is not a member of group {group.group_id}.")
            raise _error(ErrorCode.FENCED_INSTANCE_ID,
                         f"Static member {request.member_id} with instance id {request.instance_id} was fenced by"
                         f" member {existing.member_id}.")
        self._check_epoch(existing, request)
        return existing, None

    def _replace_static(self, group: StreamsGroup, old: StreamsGroupMember, new: StreamsGroupMember,
                        records: list) -> None:
        old.cancel_timers()
        new.member_epoch = old.previous_member_epoch if old.previous_member_epoch > 0 else 0
        new.previous_member_epoch = old.previous_member_epoch
        new.state, new.assigned, new.active_epochs = MemberState.STABLE, old.assigned, dict(old.active_epochs)
        target = group.target.get(old.member_id)
        group.remove_member(old.member_id)
        records.extend(rec.member_tombstones(group.group_id, old.member_id))
        group.add_member(new)
        if target is not None:
            group.target[new.member_id] = target
            records.append(rec.target_member_record(group.group_id, new.member_id, target))
        records.append(rec.current_assignment_record(group.group_id, new))
        log.info("streams group %s: static member %s (instance %s) replaced by %s", group.group_id, old.member_id,
                 new.instance_id, new.member_id)

    # -- leaving and fencing --------------------------------------------------------------
    def _leave(self, request: StreamsHeartbeat) -> StreamsHeartbeatResult:
        group = self.streams_group(request.group_id)
        if group is None:
            raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {request.group_id} not found.")
        result = StreamsHeartbeatResult(member_id=request.member_id, member_epoch=request.member_epoch)
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {request.member_id} is not a member of group {group.group_id}.")
            log.info("streams group %s: member %s left", group.group_id, member.member_id)
            error = self.fence_member(group, member)
        else:
            existing_id = group.static_member_id(request.instance_id)
            member = group.members.get(existing_id) if existing_id is not None else None
            if member is None:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
            if member.member_id != request.member_id:
                raise _error(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {request.member_id} with instance id {request.instance_id} was fenced"
                             f" by member {member.member_id}.")
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info("streams group %s: static member %s (instance %s) temporarily left", group.group_id,
                         member.member_id, request.instance_id)
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
                member.pending_revocation = EMPTY_TASKS
                self._cancel_rebalance_timeout(member)
                error = self._write(group, [rec.current_assignment_record(group.group_id, member)])
            else:
                error = self.fence_member(group, member)
        if error is not None:
            return StreamsHeartbeatResult(error)
        return result

    def fence_member(self, group: StreamsGroup, member: StreamsGroupMember) -> int | None:
        """Remove a member: its tasks are free, the group epoch moves so the others get a new target."""
        member.cancel_timers()
        group.remove_member(member.member_id)
        records = rec.member_tombstones(group.group_id, member.member_id)
        group.group_epoch += 1
        records.append(rec.metadata_record(group))
        return self._write(group, records)

    # -- records --------------------------------------------------------------------------
    def _write(self, group: StreamsGroup, records: list) -> int | None:
        if not records:
            return None
        write = getattr(self.manager, "write_records", None)
        try:
            if write is not None:
                error = write(group.group_id, records)
                if error:
                    return error
            else:
                self.manager.store.append(self.manager.partition_for(group.group_id), records, self.clock_ms())
        except KafkaError as exc:
            log.warning("streams group %s: writing %d records failed: %s", group.group_id, len(records), exc)
            if exc.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                return ErrorCode.NOT_COORDINATOR
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return None


def new_member_id() -> str:
    return str(uuid.uuid4())
