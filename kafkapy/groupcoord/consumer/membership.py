"""ConsumerGroupHeartbeat processing for KIP-848 consumer groups (Kafka 4's GroupMetadataManager.consumerGroupHeartbeat).

One heartbeat: validate, find or create the group and the member (joining, rejoining, static
replacement, fencing checks), update the member's subscription (group epoch bump when it or the
subscribed topics' metadata changed), recompute the target assignment with a server-side assignor
when the group epoch moved past it, reconcile the member towards its target (revocation first,
see reconciliation.py), restart its session timer, and answer with its epoch and, when it
changed, its assignment. Every change is written to __consumer_offsets as Kafka 4's records.

No asyncio: timers go through `scheduler.call_later(delay_s, fn, *args)` (the event loop, or a
manual clock in tests). Topic metadata comes from a TopicView the broker supplies.
"""
from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...protocol.errors import ErrorCode, KafkaError
from ..config import GroupCoordinatorConfig
from . import persistence as rec
from .group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicMetadata,
)
from .heartbeat import (  # noqa: F401  (HeartbeatRequest/Result and new_member_id are imported from here too)
    HeartbeatRequest,
    HeartbeatResult,
    OwnedPartitions,
    _error,
    new_member_id,
    validate_heartbeat_request,
)
from .reconciliation import reconcile
from .topic_view import StaticTopicView, TopicView

log = logging.getLogger(__name__)

__all__ = ["ConsumerGroupMembership", "HeartbeatRequest", "HeartbeatResult", "TopicView", "StaticTopicView",
           "new_member_id"]


@dataclass(slots=True)
class _Changes:
    """The records one operation writes, in order."""

    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)

    def add(self, *records: tuple[bytes, bytes | None]) -> None:
        self.records.extend(records)


class ConsumerGroupMembership:
    """KIP-848 consumer groups of this coordinator: heartbeats, timers and their records."""

    def __init__(self, config: GroupCoordinatorConfig, manager: Any, clock_ms: Callable[[], int],
                 validate_group_status: Callable[..., int | None], topics: TopicView | None = None):
        from .assignors import ASSIGNORS, assignor_name

        self.config = config
        self.manager = manager
        self.clock_ms = clock_ms
        self._validate_group_status = validate_group_status
        self.topics: TopicView = topics if topics is not None else StaticTopicView()
        self.scheduler: Any = None
        names = []
        for value in config.group_consumer_assignors:
            try:
                name = assignor_name(value)
            except ValueError:
                log.warning("group.consumer.assignors: unknown assignor %s ignored", value)
                continue
            if name not in names:
                names.append(name)
        self.assignor_names: list[str] = names or ["uniform"]
        self.assignors = {name: ASSIGNORS[name] for name in self.assignor_names}
        # the classic-group conversion hook (migration.py); None: an empty classic group is replaced,
        # a classic group with members is not a consumer group
        self.upgrade_classic_group: Callable[[Any, HeartbeatRequest, _Changes], ConsumerGroup | None] | None = None
        # the downgrade hook (classic_members.py): True when the leaving member's departure turned
        # the group into a classic group (it was the last member speaking the consumer protocol)
        self.downgrade_consumer_group: Callable[[ConsumerGroup, ConsumerGroupMember], bool] | None = None

    @property
    def enabled(self) -> bool:
        return "consumer" in self.config.group_coordinator_rebalance_protocols

    # -- the heartbeat --------------------------------------------------------------------
    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """Handle one ConsumerGroupHeartbeat; errors come back as the result's error code."""
        if self.scheduler is None:
            return HeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            validate_heartbeat_request(request, self.assignor_names)
            error = self._validate_group_status(request.group_id)
            if error is not None:
                return HeartbeatResult(error)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except KafkaError as exc:
            if exc.code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID,
                            ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID):
                log.info("group %s: heartbeat of member %s (epoch %d) refused: %s", request.group_id,
                         request.member_id, request.member_epoch, exc)
            return HeartbeatResult(exc.code, str(exc))

    # -- group lookup ---------------------------------------------------------------------
    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.manager.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def _get_or_create_group(self, request: HeartbeatRequest, changes: _Changes) -> ConsumerGroup:
        group_id = request.group_id
        create = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self.manager.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead:
            return group  # the common case, without deriving the state (it looks at every member)
        if group is None or group.state.value == "Dead":
            if not create:
                raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id, self.clock_ms())
        # a classic group
        if create and group.state.value == "Empty" and not group.members:
            return self._take_over_empty_classic_group(group, changes)
        if create and self.upgrade_classic_group is not None:
            upgraded = self.upgrade_classic_group(group, request, changes)
            if upgraded is not None:
                return upgraded
        raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _take_over_empty_classic_group(self, classic: Any, changes: _Changes) -> ConsumerGroup:
        """An empty classic group (offsets only) becomes a consumer group keeping its offsets;
        the classic GroupMetadata gets a tombstone, as Kafka's maybeDeleteEmptyClassicGroup."""
        from ..records import group_metadata_key

        group = ConsumerGroup(classic.group_id, self.clock_ms())
        group.offsets = classic.offsets
        changes.records.append((group_metadata_key(classic.group_id), None))
        log.info("group %s: empty classic group converted to a consumer group (%d offsets kept)",
                 classic.group_id, len(group.offsets))
        return group

    # -- join / heartbeat -----------------------------------------------------------------
    def _heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        changes = _Changes()
        group = self._get_or_create_group(request, changes)
        member_id = request.member_id
        if (len(group.members) >= self.config.group_consumer_max_size
                and (not member_id or member_id not in group.members)):
            raise _error(ErrorCode.GROUP_MAX_SIZE_REACHED,
                         f"The consumer group has reached its maximum capacity of "
                         f"{self.config.group_consumer_max_size} members.")
        if not member_id:
            member_id = new_member_id()
        owned = request.topic_partitions
        replaced: ConsumerGroupMember | None = None
        if request.instance_id is None:
            member, is_new = self._dynamic_member(group, member_id, request.member_epoch, owned)
        else:
            member, is_new, replaced = self._static_member(group, member_id, request, owned)

        # -- everything below changes the group: validation is over ------------------------
        if self.manager.groups.get(group.group_id) is not group:
            self.manager.groups[group.group_id] = group
        if replaced is not None:
            self._replace_static(group, replaced, member, changes)
        elif is_new:
            group.add_member(member)
        elif request.member_epoch == JOIN_GROUP_MEMBER_EPOCH and member.member_epoch != 0:
            # a known member rejoining (it owns nothing now): start over from its target
            log.info("group %s: member %s rejoins (was at epoch %d)", group.group_id, member_id,
                     member.member_epoch)
            group.set_member_assignment(member, {}, {})
            self._cancel_rebalance_timeout(member)
            member.member_epoch, member.previous_member_epoch = 0, 0
            member.state = MemberState.STABLE
            member.last_sent_assignment = None
            changes.add(rec.current_assignment_record(group.group_id, member))

        bump = self._update_member(group, member, request, is_new, changes)
        if bump or group.metadata_version != self.topics.version:
            bump = self._refresh_subscription_metadata(group, changes) or bump
        if bump:
            group.group_epoch += 1
            changes.add(rec.group_epoch_record(group.group_id, group.group_epoch))
            log.info("group %s: group epoch bumped to %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, changes)
        self._reconcile(group, member, owned, changes)
        self._schedule_session_timeout(group, member)
        error = self._write(group, changes)
        if error is not None:
            return HeartbeatResult(error)
        if is_new or replaced is not None:
            log.info("group %s: member %s%s joined (epoch %d, group epoch %d)", group.group_id, member_id,
                     f" (instance {member.instance_id})" if member.instance_id else "", member.member_epoch,
                     group.group_epoch)
        result = HeartbeatResult(member_id=member_id, member_epoch=member.member_epoch,
                                 heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms)
        full = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            request.rebalance_timeout_ms != -1 and owned is not None
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None))
        if full or member.assigned != member.last_sent_assignment:
            result.assignment = member.assigned
            member.last_sent_assignment = member.assigned
        return result

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, epoch: int,
                        owned: OwnedPartitions | None) -> tuple[ConsumerGroupMember, bool]:
        member = group.members.get(member_id)
        if member is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {group.group_id}.")
            return ConsumerGroupMember(member_id), True
        # a static member may leave its instance id out once joined ("null if it didn't change")
        if epoch != JOIN_GROUP_MEMBER_EPOCH:
            self._check_epoch(member, epoch, owned)
        return member, False

    def _static_member(self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest,
                       owned: OwnedPartitions | None
                       ) -> tuple[ConsumerGroupMember, bool, ConsumerGroupMember | None]:
        instance_id = request.instance_id
        existing_id = group.static_member_id(instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if existing is None:
                if member_id in group.members:
                    raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
                member = ConsumerGroupMember(member_id, instance_id=instance_id)
                log.info("group %s: static member %s with instance id %s joins", group.group_id, member_id,
                         instance_id)
                return member, True, None
            if existing.member_id == member_id and not existing.has_left_static:
                # the same static member rejoining without having left: like a dynamic rejoin
                return existing, False, None
            if not existing.uses_classic_protocol and not existing.has_left_static:
                log.info("group %s: static member %s with instance id %s cannot join: the instance id is"
                         " owned by member %s", group.group_id, member_id, instance_id, existing.member_id)
                raise _error(ErrorCode.UNRELEASED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} cannot join the group"
                             f" because the instance id is owned by {existing.member_id} member.")
            if member_id in group.members and member_id != existing.member_id:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {group.group_id}.")
            member = ConsumerGroupMember(
                member_id, instance_id=instance_id, rack_id=existing.rack_id, client_id=existing.client_id,
                client_host=existing.client_host, rebalance_timeout_ms=existing.rebalance_timeout_ms,
                subscribed_topic_names=list(existing.subscribed_topic_names),
                subscribed_topic_regex=existing.subscribed_topic_regex, server_assignor=existing.server_assignor,
                member_epoch=0, previous_member_epoch=0, state=existing.state,
                assigned=dict(existing.assigned), pending_revocation={})
            return member, False, existing
        if existing is None:
            raise _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            log.info("group %s: static member %s with instance id %s is fenced by existing member %s",
                     group.group_id, member_id, instance_id, existing.member_id)
            raise _error(ErrorCode.FENCED_INSTANCE_ID,
                         f"Static member {member_id} with instance id {instance_id} was fenced by member"
                         f" {existing.member_id}.")
        self._check_epoch(existing, request.member_epoch, owned)
        return existing, False, None

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: OwnedPartitions | None) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
        if epoch > member.member_epoch:
            raise _error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({epoch}) than the one known by"
                         f" the group coordinator ({member.member_epoch}). The member must abandon all its"
                         f" partitions and rejoin.")
        if epoch < member.member_epoch:
            # the previous epoch is fine when the response bumping it was lost
            if epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned):
                raise _error(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({epoch}) than the one known"
                             f" by the group coordinator ({member.member_epoch}). The member must abandon all"
                             f" its partitions and rejoin.")

    def _replace_static(self, group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember,
                        changes: _Changes) -> None:
        """A static member comes back under a new member id: it takes over the old one's target
        and assignment (Kafka's replaceMember)."""
        target = group.target_of(old.member_id)
        old.cancel_timers()
        group.remove_member(old.member_id)
        self._member_tombstones(group.group_id, old.member_id, changes)
        group.add_member(new)
        group.target[new.member_id] = dict(target)
        changes.add(rec.member_subscription_record(group.group_id, new),
                    rec.target_member_record(group.group_id, new.member_id, target),
                    rec.current_assignment_record(group.group_id, new))
        log.info("group %s: static member with instance id %s rejoins as %s, replacing %s", group.group_id,
                 new.instance_id, new.member_id, old.member_id)

    def _update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, request: HeartbeatRequest,
                       is_new: bool, changes: _Changes) -> bool:
        """Apply the request's member fields; True when the subscription changed (group epoch bump)."""
        changed = is_new
        subscription_changed = is_new
        if request.instance_id is not None and member.instance_id != request.instance_id:
            member.instance_id = request.instance_id
            changed = True
        if request.rack_id is not None and member.rack_id != request.rack_id:
            member.rack_id = request.rack_id
            changed = True
        if request.rebalance_timeout_ms != -1 and member.rebalance_timeout_ms != request.rebalance_timeout_ms:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            changed = True
        if request.server_assignor is not None and member.server_assignor != request.server_assignor:
            member.server_assignor = request.server_assignor
            changed = True
        names = request.subscribed_topic_names
        if names is not None and sorted(names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = list(names)
            changed = subscription_changed = True
        regex = request.subscribed_topic_regex
        if regex is not None:
            regex = regex or None  # "" clears the regex
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                changed = subscription_changed = True
                if regex is not None and regex not in group.resolved_regexes:
                    self._resolve_regex(group, regex, changes)
        if member.client_id != request.client_id or member.client_host != request.client_host:
            member.client_id, member.client_host = request.client_id, request.client_host
            changed = True
        if member.classic_protocols is not None:
            member.classic_protocols = None
            changed = True
        if changed:
            changes.add(rec.member_subscription_record(group.group_id, member))
        if subscription_changed:
            self._drop_unused_regexes(group, changes)
        return subscription_changed

    # -- subscriptions and topic metadata -------------------------------------------------
    def _resolve_regex(self, group: ConsumerGroup, regex: str, changes: _Changes) -> bool:
        """Resolve one regex against the current topics; True if its topics changed."""
        from .topic_regex import matching_topics

        topics = frozenset(matching_topics(regex, self.topics.names()))
        if group.resolved_regexes.get(regex) == topics:
            return False
        group.resolved_regexes[regex] = topics
        changes.add(rec.regex_record(group.group_id, regex, topics, self.topics.version, self.clock_ms()))
        return True

    def _drop_unused_regexes(self, group: ConsumerGroup, changes: _Changes) -> None:
        used = group.regexes()
        for regex in [r for r in group.resolved_regexes if r not in used]:
            del group.resolved_regexes[regex]
            changes.add(rec.regex_tombstone(group.group_id, regex))

    def _refresh_subscription_metadata(self, group: ConsumerGroup, changes: _Changes) -> bool:
        """Re-resolve regexes and re-read the subscribed topics; True if anything changed."""
        view = self.topics
        changed = False
        for regex in sorted(group.regexes()):
            changed = self._resolve_regex(group, regex, changes) or changed
        metadata: dict[str, TopicMetadata] = {}
        for name in group.subscribed_topic_names():
            topic = view.describe(name)
            if topic is not None and topic.num_partitions > 0:
                metadata[name] = topic
        group.metadata_version = view.version
        if _without_racks(metadata) != _without_racks(group.subscribed_topic_metadata):
            changes.add(rec.subscription_metadata_record(group.group_id, metadata))
            changed = True
        # racks are not stored (as Kafka 4.0) and not a reason for a new epoch, but the assignors use them
        group.subscribed_topic_metadata = metadata
        return changed

    # -- target assignment ----------------------------------------------------------------
    def preferred_assignor(self, group: ConsumerGroup) -> str:
        """The server assignor most members ask for (Kafka's computePreferredServerAssignor),
        else the first of group.consumer.assignors."""
        counts = Counter(m.server_assignor for m in group.members.values() if m.server_assignor in self.assignors)
        if not counts:
            return self.assignor_names[0]
        best = max(counts.values())
        return next(name for name in self.assignor_names if counts.get(name) == best)

    def _update_target_assignment(self, group: ConsumerGroup, changes: _Changes) -> None:
        from .assignors import AssignorError, MemberSpec, TopicSpec

        topics_by_name = group.subscribed_topic_metadata
        specs = {}
        for member in group.members.values():
            ids = frozenset(topics_by_name[name].topic_id for name in group.member_topic_names(member)
                            if name in topics_by_name)
            specs[member.member_id] = MemberSpec(member.member_id, member.instance_id, member.rack_id, ids,
                                                 group.target.get(member.member_id, {}))
        topic_specs = {t.topic_id: TopicSpec(t.topic_id, t.name, t.num_partitions, t.partition_racks)
                       for t in topics_by_name.values()}
        name = self.preferred_assignor(group)
        start = self.clock_ms()
        try:
            result = self.assignors[name].assign(specs, topic_specs)
        except AssignorError as exc:
            log.error("group %s: computing the target assignment for epoch %d failed: %s", group.group_id,
                      group.group_epoch, exc)
            raise _error(ErrorCode.UNKNOWN_SERVER_ERROR,
                         f"Failed to compute a new target assignment for epoch {group.group_epoch}: {exc}") from None
        for member_id in specs:
            new = {t: frozenset(p) for t, p in result.get(member_id, {}).items() if p}
            if new != group.target.get(member_id):
                group.target[member_id] = new
                changes.add(rec.target_member_record(group.group_id, member_id, new))
        group.assignment_epoch = group.group_epoch
        changes.add(rec.target_epoch_record(group.group_id, group.assignment_epoch))
        log.info("group %s: new target assignment for epoch %d with the %s assignor (%d members, %d ms)",
                 group.group_id, group.assignment_epoch, name, len(specs), self.clock_ms() - start)

    # -- reconciliation -------------------------------------------------------------------
    def _reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, owned: OwnedPartitions | None,
                   changes: _Changes) -> None:
        target_epoch = group.assignment_epoch
        if member.is_reconciled_to(target_epoch) or member.has_left_static:
            return
        owners = group.owners
        # a partition anyone holds (this member too, while revoking it) is not free
        step = reconcile(member, target_epoch, group.target.get(member.member_id, {}),
                         lambda t, p: (t, p) in owners, owned)
        if step is None:
            return
        group.set_member_assignment(member, step.assigned, step.pending_revocation)
        member.member_epoch = step.member_epoch
        member.previous_member_epoch = step.previous_member_epoch
        member.state = step.state
        changes.add(rec.current_assignment_record(group.group_id, member))
        log.debug("group %s: member %s now epoch %d (%s), %d partitions, %d pending revocation", group.group_id,
                  member.member_id, member.member_epoch, member.state.label,
                  sum(len(p) for p in member.assigned.values()),
                  sum(len(p) for p in member.pending_revocation.values()))
        if member.uses_classic_protocol:
            pass  # classic members have join and sync deadlines instead (classic_members.py)
        elif step.state is MemberState.UNREVOKED_PARTITIONS:
            self._schedule_rebalance_timeout(group, member)
        else:
            self._cancel_rebalance_timeout(member)

    # -- leaving and fencing --------------------------------------------------------------
    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        group = self.consumer_group(request.group_id)
        if group is None:
            raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {request.group_id} not found.")
        member_id, instance_id = request.member_id, request.instance_id
        result = HeartbeatResult(member_id=member_id, member_epoch=request.member_epoch)
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {group.group_id}.")
            log.info("group %s: member %s left the consumer group", group.group_id, member_id)
            error = self.fence_member(group, member)
        else:
            existing_id = group.static_member_id(instance_id)
            member = group.members.get(existing_id) if existing_id is not None else None
            if member is None:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise _error(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member"
                             f" {member.member_id}.")
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info("group %s: static member %s with instance id %s temporarily left the consumer group",
                         group.group_id, member_id, instance_id)
                error = self._static_leave(group, member)
            else:
                log.info("group %s: static member %s with instance id %s left the consumer group",
                         group.group_id, member_id, instance_id)
                error = self.fence_member(group, member)
        if error is not None:
            return HeartbeatResult(error)
        return result

    def _static_leave(self, group: ConsumerGroup, member: ConsumerGroupMember) -> int | None:
        """Epoch -2: the member keeps its assignment until its session expires or a new member with
        its instance id replaces it; what it was revoking is free now."""
        changes = _Changes()
        group.set_member_assignment(member, member.assigned, {})
        member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
        self._cancel_rebalance_timeout(member)
        changes.add(rec.current_assignment_record(group.group_id, member))
        return self._write(group, changes)

    def fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> int | None:
        """Remove a member (left, session expired, revocation too slow): its partitions are free,
        the group epoch moves so that the others get a new target on their next heartbeat."""
        if self.downgrade_consumer_group is not None and self.downgrade_consumer_group(group, member):
            return None
        changes = _Changes()
        member.cancel_timers()
        group.remove_member(member.member_id)
        self._member_tombstones(group.group_id, member.member_id, changes)
        self._drop_unused_regexes(group, changes)
        # the subscribed topics without this member's (one epoch bump covers both changes)
        self._refresh_subscription_metadata(group, changes)
        group.group_epoch += 1
        changes.add(rec.group_epoch_record(group.group_id, group.group_epoch))
        return self._write(group, changes)

    def _member_tombstones(self, group_id: str, member_id: str, changes: _Changes) -> None:
        changes.add(*rec.member_tombstones(group_id, member_id))

    # -- timers ---------------------------------------------------------------------------
    def _schedule_session_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = self.scheduler.call_later(
            self.config.group_consumer_session_timeout_ms / 1000, self._on_session_timeout, group.group_id,
            member.member_id, member)

    def schedule_member_timers(self, group: ConsumerGroup) -> None:
        """After loading a group: every member gets a full session (and its revocation deadline)."""
        for member in list(group.members.values()):
            if member.uses_classic_protocol:
                continue
            self._schedule_session_timeout(group, member)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group, member)

    def _on_session_timeout(self, group_id: str, member_id: str, member: ConsumerGroupMember) -> None:
        group = self.consumer_group(group_id)
        if group is None or group.members.get(member_id) is not member:
            return
        member.session_timer = None
        log.info("group %s: member %s fenced because its session expired", group_id, member_id)
        self.fence_member(group, member)

    def _schedule_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self._cancel_rebalance_timeout(member)
        timeout_ms = max(member.rebalance_timeout_ms, 0)
        member.rebalance_timer_epoch = member.member_epoch
        member.rebalance_timer = self.scheduler.call_later(
            timeout_ms / 1000, self._on_rebalance_timeout, group.group_id, member.member_id, member,
            member.member_epoch, timeout_ms)

    @staticmethod
    def _cancel_rebalance_timeout(member: ConsumerGroupMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        member.rebalance_timer_epoch = -1

    def _on_rebalance_timeout(self, group_id: str, member_id: str, member: ConsumerGroupMember, epoch: int,
                              timeout_ms: int) -> None:
        group = self.consumer_group(group_id)
        if group is None or group.members.get(member_id) is not member:
            return
        member.rebalance_timer = None
        if member.member_epoch != epoch:
            return
        log.info("group %s: member %s fenced because it failed to transition from epoch %d within %d ms",
                 group_id, member_id, epoch, timeout_ms)
        self.fence_member(group, member)

    def unload_group(self, group: ConsumerGroup) -> None:
        """The group's partition is no longer led here: stop its timers."""
        for member in group.members.values():
            member.cancel_timers()

    def close(self) -> None:
        for group in list(self.manager.groups.values()):
            if isinstance(group, ConsumerGroup):
                self.unload_group(group)

    # -- records --------------------------------------------------------------------------
    def _write(self, group: ConsumerGroup, changes: _Changes) -> int | None:
        """Append the records to the group's __consumer_offsets partition; the error code if that failed."""
        if not changes.records:
            return None
        write = getattr(self.manager, "write_records", None)
        try:
            if write is not None:
                error = write(group.group_id, changes.records)
                if error:
                    return error
            else:
                self.manager.store.append(self.manager.partition_for(group.group_id), changes.records,
                                          self.clock_ms())
        except KafkaError as exc:
            log.warning("group %s: writing %d records failed: %s", group.group_id, len(changes.records), exc)
            if exc.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                return ErrorCode.NOT_COORDINATOR
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return None


def _without_racks(topics: Mapping[str, TopicMetadata]) -> dict[str, tuple[uuid.UUID, int]]:
    return {name: (t.topic_id, t.num_partitions) for name, t in topics.items()}


def _is_subset(owned: OwnedPartitions | None, assigned: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned:
        have = assigned.get(topic_id)
        if partitions and (have is None or not have.issuperset(partitions)):
            return False
        if not partitions and have is None:
            return False
    return True
