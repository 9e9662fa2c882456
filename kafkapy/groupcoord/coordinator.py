"""The group coordinator: consumer groups and committed offsets for the __consumer_offsets
partitions this broker leads.

Kafka's GroupCoordinator as a facade: it checks that a request is for a group coordinated here,
hands membership (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) to GroupMembership, and serves
offsets and the admin APIs itself, with storage in GroupMetadataManager. No asyncio: timers go
through the `scheduler` given to start() (an asyncio loop, or a manual clock in tests) and are
all cancelled by close().
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..protocol.errors import ErrorCode
from .config import GroupCoordinatorConfig
from .consumer import offsets as consumer_offsets
from .consumer.describe import ConsumerGroupDescription, TopicName, describe_consumer_group
from .consumer.classic_members import ClassicMembers
from .consumer.group import ConsumerGroup
from .consumer.membership import ConsumerGroupMembership, HeartbeatRequest, HeartbeatResult
from .consumer.topic_view import TopicView
from .group import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    GroupState,
    GroupSummary,
    JoinCallback,
    OffsetAndMetadata,
    SyncCallback,
)
from .membership import GroupMembership, JoinRequest, validate_current_member
from .metadata_manager import GroupMetadataManager, TopicPartition
from .offsets_topic import OFFSETS_TOPIC, OffsetsTopicStore
from .streams.group import StreamsGroup
from .streams.membership import StreamsGroupMembership, StreamsHeartbeat, StreamsHeartbeatResult

log = logging.getLogger(__name__)

__all__ = ["ConsumerGroupDescribeResult", "GroupCoordinator", "GroupOverview", "JoinRequest"]

CLASSIC_GROUP_TYPE = "classic"
EMPTY = GroupState.EMPTY
COMPLETING = GroupState.COMPLETING_REBALANCE
DEAD = GroupState.DEAD


@dataclass(slots=True)
class GroupOverview:
    """One ListGroups entry."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


@dataclass(slots=True)
class ConsumerGroupDescribeResult:
    """One group of ConsumerGroupDescribe: an error (and message), or the description."""

    group_id: str
    error: int
    message: str | None = None
    description: ConsumerGroupDescription | None = None


def default_assignor_name(configured: tuple[str, ...] | list[str]) -> str:
    """The name ConsumerGroupDescribe reports for the default (first) of group.consumer.assignors."""
    if not configured:
        return "uniform"
    try:
        from .consumer.assignors import assignor_name
        return assignor_name(configured[0])
    except (ImportError, ValueError, KeyError):
        last = configured[0].rsplit(".", 1)[-1]
        return {"UniformAssignor": "uniform", "RangeAssignor": "range"}.get(last, configured[0])


class GroupCoordinator:
    """Consumer groups and committed offsets for the __consumer_offsets partitions led here."""

    def __init__(self, config: GroupCoordinatorConfig, store: OffsetsTopicStore,
                 clock_ms: Callable[[], int] | None = None, topics: TopicView | None = None):
        self.config = config
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.manager = GroupMetadataManager(store, config.offsets_topic_num_partitions, self.clock_ms,
                                            config.offset_metadata_max_bytes)
        self.membership = GroupMembership(config, self.manager, self.clock_ms, self._validate_group_status)
        # KIP-848 consumer groups (ConsumerGroupHeartbeat); `topics` is the broker's view of its topics
        self.consumer = ConsumerGroupMembership(config, self.manager, self.clock_ms, self._validate_group_status,
                                                topics)
        # classic-protocol members of consumer groups and the classic <-> consumer conversions
        self.classic_members = ClassicMembers(config, self.manager, self.clock_ms, self.consumer, self.membership)
        self.membership.consumer_groups = self.classic_members
        self.consumer.upgrade_classic_group = self.classic_members.upgrade
        self.consumer.downgrade_consumer_group = self.classic_members.downgrade
        # KIP-1071 streams groups (StreamsGroupHeartbeat)
        self.streams = StreamsGroupMembership(config, self.manager, self.clock_ms, self._validate_group_status,
                                              topics)
        self.scheduler: Any = None
        self._expiry_timer: Any = None

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.scheduler is not None

    def start(self, scheduler: Any) -> None:
        """Begin serving; `scheduler.call_later(delay_s, fn, *args)` runs the timers."""
        self.scheduler = scheduler
        self.membership.scheduler = scheduler
        self.consumer.scheduler = scheduler
        self.streams.scheduler = scheduler
        self._schedule_offset_expiry()

    def close(self) -> None:
        """Stop: answer every waiting JoinGroup/SyncGroup with NOT_COORDINATOR, cancel all timers."""
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        for partition in sorted(self.manager.owned_partitions):
            self.on_resigned(partition)
        self.membership.close()
        self.consumer.close()
        self.classic_members.close()
        self.streams.close()
        self.consumer.scheduler = None
        self.streams.scheduler = None
        self.scheduler = None

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def group_status(self, group_id: str | None) -> int | None:
        """The error a request about `group_id` gets before the group is even looked at, or None."""
        return self._validate_group_status(group_id)

    def sync_leadership(self, partition_leaders: list[int] | None, node_id: int) -> None:
        """Load or unload __consumer_offsets partitions to match who leads them.

        `partition_leaders[p]` is the leader of partition p (None: the topic does not exist).
        The topic's real partition count decides group placement, as in Kafka.
        """
        if partition_leaders is None:
            led: set[int] = set()
        else:
            if partition_leaders and len(partition_leaders) != self.manager.num_partitions:
                log.info("%s has %d partitions (offsets.topic.num.partitions is %d); using %d",
                         OFFSETS_TOPIC, len(partition_leaders), self.config.offsets_topic_num_partitions,
                         len(partition_leaders))
                self.manager.num_partitions = len(partition_leaders)
            led = {p for p, leader in enumerate(partition_leaders) if leader == node_id}
        for partition in sorted(self.manager.owned_partitions - led):
            self.on_resigned(partition)
        for partition in sorted(led - self.manager.owned_partitions):
            self.on_elected(partition)

    def on_elected(self, partition: int) -> None:
        """This broker now leads __consumer_offsets-`partition`: load its groups and offsets
        (on an event loop without blocking it; COORDINATOR_LOAD_IN_PROGRESS until loaded)."""
        def loaded(groups) -> None:
            for group in groups:
                if isinstance(group, StreamsGroup):
                    self.streams.schedule_member_timers(group)
                    continue
                if isinstance(group, ConsumerGroup):
                    self.consumer.schedule_member_timers(group)
                    self.classic_members.schedule_member_timers(group)
                    continue
                for member in group.members.values():
                    self.membership.schedule_heartbeat(group, member)

        self.manager.start_loading(partition, self.scheduler, loaded)

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads the partition: drop its groups, answering waiters."""
        for group in self.manager.unload_partition(partition):
            if isinstance(group, StreamsGroup):
                self.streams.unload_group(group)
            elif isinstance(group, ConsumerGroup):
                self.consumer.unload_group(group)
                self.classic_members.unload_group(group)
            else:
                self.membership.unload_group(group)

    # -- offset retention ---------------------------------------------------------------
    def _schedule_offset_expiry(self) -> None:
        self._expiry_timer = self.scheduler.call_later(
            self.config.offsets_retention_check_interval_ms / 1000, self._on_offset_expiry_timer)

    def _on_offset_expiry_timer(self) -> None:
        try:
            self.manager.expire_offsets(self.config.offsets_retention_ms)
        except Exception:
            log.exception("offset expiration failed")
        if self.scheduler is not None:
            self._schedule_offset_expiry()

    # -- validation -----------------------------------------------------------------------
    def _validate_group_status(self, group_id: str | None, allow_empty_id: bool = False) -> int | None:
        if group_id is None or (not group_id and not allow_empty_id):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    # -- membership (see membership.py) --------------------------------------------------
    def join_group(self, request: JoinRequest, callback: JoinCallback) -> None:
        """Handle a JoinGroup; `callback` gets the JoinResult, possibly after a rebalance."""
        self.membership.join_group(request, callback)

    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes], callback: SyncCallback) -> None:
        """Handle a SyncGroup; `callback` gets the member's assignment once the leader sent it."""
        self.membership.sync_group(group_id, generation_id, member_id, group_instance_id, protocol_type,
                                   protocol_name, assignments, callback)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> int:
        """Handle a Heartbeat; returns its error code (REBALANCE_IN_PROGRESS tells it to rejoin)."""
        return self.membership.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """Handle a ConsumerGroupHeartbeat (KIP-848): the member's epoch and, when it changed, its assignment."""
        return self.consumer.heartbeat(request)

    def streams_group_heartbeat(self, request: StreamsHeartbeat) -> StreamsHeartbeatResult:
        """Handle a StreamsGroupHeartbeat (KIP-1071)."""
        return self.streams.heartbeat(request)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Handle a LeaveGroup of (member id, group instance id) pairs: (top error, member errors)."""
        return self.membership.leave_group(group_id, members)

    # -- offsets --------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata],
                       api_version: int | None = None) -> dict[TopicPartition, int]:
        """Handle an OffsetCommit (partitions already checked to exist); error code per partition.
        `generation_id` is the member epoch for a consumer group; `api_version` None (a caller
        inside the broker) skips the checks that depend on it."""
        def all_(code: int) -> dict[TopicPartition, int]:
            return {tp: code for tp in offsets}

        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return all_(error)
        group = self.manager.get_group(group_id)
        if isinstance(group, StreamsGroup):
            if group.is_in(DEAD):
                return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            error = group.validate_offset_commit(member_id, group_instance_id, generation_id, False,
                                                 9 if api_version is None else api_version, offsets)
            if error is not None:
                return all_(error)
            return self.manager.store_offsets(group, offsets)
        if isinstance(group, ConsumerGroup):
            if group.is_in(DEAD):
                return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            error = consumer_offsets.commit_error(group, member_id, group_instance_id, generation_id, api_version)
            if error is not None:
                return all_(error)
            return self.manager.store_offsets(group, offsets)
        if group is None:
            error = consumer_offsets.missing_group_commit_error(generation_id, api_version)
            if error is not None:
                return all_(error)
            # a group that only stores offsets here (no group management)
            group = self.manager.get_or_create_group(group_id, create=True)
        if group.is_in(DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
        elif not group.is_in(EMPTY):
            # admin clients and simple consumers may only commit for groups without members
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not None:
            return all_(error)
        if generation_id < 0 and group.is_in(EMPTY):
            return self.manager.store_offsets(group, offsets)
        if group.is_in(COMPLETING):
            # the member knows the new generation but has no assignment yet
            return all_(ErrorCode.REBALANCE_IN_PROGRESS)
        self.membership.schedule_heartbeat(group, group.get(member_id))
        return self.manager.store_offsets(group, offsets)

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           group_instance_id: str | None, generation_id: int,
                           offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """Handle a TxnOffsetCommit (partitions already checked to exist): the offsets are written
        for the producer's transaction and become committed with it. Error code per partition."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return {tp: error for tp in offsets}
        group = self.manager.get_group(group_id)
        if isinstance(group, StreamsGroup):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE if group.is_in(DEAD) else \
                group.validate_offset_commit(member_id, group_instance_id, generation_id, True, 9, offsets)
            if error == ErrorCode.STALE_MEMBER_EPOCH:
                error = ErrorCode.ILLEGAL_GENERATION  # the error transactional producers know, as for consumer groups
            if error is not None:
                return {tp: error for tp in offsets}
            return self.manager.store_txn_offsets(group, producer_id, producer_epoch, offsets)
        if isinstance(group, ConsumerGroup):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE if group.is_in(DEAD) else \
                consumer_offsets.txn_commit_error(group, member_id, group_instance_id, generation_id)
            if error is not None:
                return {tp: error for tp in offsets}
            return self.manager.store_txn_offsets(group, producer_id, producer_epoch, offsets)
        group = self.manager.get_or_create_group(group_id, create=True)
        if group.is_in(DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            # v3+ clients name their member; older ones (and producers outside a group) do not
            error = validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
        if error is not None:
            return {tp: error for tp in offsets}
        return self.manager.store_txn_offsets(group, producer_id, producer_epoch, offsets)

    def on_transaction_completed(self, producer_id: int, partitions: list[int], commit: bool) -> None:
        """A transaction marker of `producer_id` was written to these __consumer_offsets
        partitions: its transactional offset commits there are applied (commit) or dropped."""
        applied = self.manager.complete_txn(producer_id, partitions, commit)
        if applied:
            log.debug("producer %d's transaction committed %d offsets", producer_id, applied)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[int, dict[TopicPartition, tuple[OffsetAndMetadata | None, int]]]:
        """Handle an OffsetFetch: (group error, {partition: (committed or None, error)}).
        `member_id`/`member_epoch` (v9+) are checked for a consumer group only, as Kafka does."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if isinstance(group, StreamsGroup) and not group.is_in(DEAD):
            error = group.validate_offset_fetch(member_id, member_epoch)
            if error is not None:
                return error, {}
        if isinstance(group, ConsumerGroup) and not group.is_in(DEAD):
            error = consumer_offsets.fetch_error(group, member_id, member_epoch)
            if error is not None:
                return error, {}
        return ErrorCode.NONE, self.manager.get_offsets(group_id, partitions, require_stable)

    def delete_offsets(self, group_id: str,
                       partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        """Handle an OffsetDelete: (group error, error per partition)."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_in(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        errors: dict[TopicPartition, int] = {}
        if isinstance(group, StreamsGroup):
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        elif isinstance(group, ConsumerGroup):
            eligible, errors = consumer_offsets.split_offset_delete(group, partitions)
        elif group.is_in(EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            wanted = set(eligible)
            # Kafka's OffsetDelete leaves an empty streams group in place (DeleteGroups removes it)
            removed = self.manager.cleanup_group_metadata(
                [group], lambda g: [tp for tp in g.offsets if tp in wanted],
                drop_empty=not isinstance(group, StreamsGroup))
            log.info("deleted %d offsets of group %s", removed, group_id)
            errors.update((tp, ErrorCode.NONE) for tp in eligible)
        return ErrorCode.NONE, errors

    # -- admin ----------------------------------------------------------------------------
    def list_groups(self, states: list[str] | None = None,
                    types: list[str] | None = None) -> tuple[int, list[GroupOverview]]:
        """Handle ListGroups: (error, groups) filtered by state and type (case-insensitive)."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        # Kafka: an unknown type or state matches no group
        wanted_types = {t.strip().lower() for t in types} if types else None
        wanted = {s.strip().lower() for s in states} if states else None
        overviews = []
        for g in self.manager.groups.values():
            group_type = getattr(g, "group_type", CLASSIC_GROUP_TYPE)
            if wanted_types is not None and group_type not in wanted_types:
                continue
            if wanted is not None and g.state.value.lower() not in wanted:
                continue
            overviews.append(GroupOverview(g.group_id, g.protocol_type or "", g.state.value, group_type))
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading_partitions else ErrorCode.NONE
        return error, overviews

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        """Handle one group of DescribeGroups; an unknown or non-classic group is described as Dead, no
        error, with `missing` saying why (v6 answers GROUP_ID_NOT_FOUND with it, KIP-1043)."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, GroupSummary("", "", "", [])
        group = self.manager.get_group(group_id)
        if group is None or group.is_in(DEAD):
            return ErrorCode.NONE, GroupSummary(DEAD.value, "", "", [], missing=f"Group {group_id} not found.")
        if isinstance(group, (ConsumerGroup, StreamsGroup)):
            # Kafka 4.0 (DescribeGroups up to v5): a group that is not classic is described as Dead
            return ErrorCode.NONE, GroupSummary(DEAD.value, "", "", [],
                                                missing=f"Group {group_id} is not a classic group.")
        return ErrorCode.NONE, group.summary()

    def describe_consumer_groups(self, group_ids: list[str],
                                 topic_name: TopicName | None = None) -> list[ConsumerGroupDescribeResult]:
        """Handle ConsumerGroupDescribe. A classic or unknown group is GROUP_ID_NOT_FOUND, which
        sends the Java admin client on to DescribeGroups; `topic_name` names the assigned topic ids."""
        default_assignor = default_assignor_name(self.config.group_consumer_assignors)
        results = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id)
            if error is not None:
                results.append(ConsumerGroupDescribeResult(group_id, error))
                continue
            group = self.manager.get_group(group_id)
            if isinstance(group, ConsumerGroup) and not group.is_in(DEAD):
                results.append(ConsumerGroupDescribeResult(
                    group_id, ErrorCode.NONE, None, describe_consumer_group(group, default_assignor, topic_name)))
            elif group is not None and not group.is_in(DEAD):
                results.append(ConsumerGroupDescribeResult(
                    group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."))
            else:
                results.append(ConsumerGroupDescribeResult(
                    group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
        return results

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """Handle DeleteGroups: only Empty groups go; their offsets and metadata get tombstones."""
        results: dict[str, int] = {}
        eligible = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, allow_empty_id=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_in(DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif isinstance(group, StreamsGroup):
                if group.is_in(GroupState.EMPTY):
                    group.transition_to(DEAD, self.clock_ms())
                    eligible.append(group)
                    results[group_id] = ErrorCode.NONE
                else:
                    results[group_id] = ErrorCode.NON_EMPTY_GROUP
            elif isinstance(group, ConsumerGroup):
                error = consumer_offsets.delete_group_error(group)
                if error is None:
                    group.transition_to(DEAD, self.clock_ms())
                    eligible.append(group)
                results[group_id] = ErrorCode.NONE if error is None else error
            elif group.is_in(EMPTY):
                group.transition_to(DEAD, self.clock_ms())
                self.membership.cancel_pending_members(group_id)
                eligible.append(group)
                results[group_id] = ErrorCode.NONE
            else:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
        if eligible:
            removed = self.manager.cleanup_group_metadata(eligible, lambda g: list(g.offsets))
            log.info("deleted groups %s (%d offsets)", [g.group_id for g in eligible], removed)
        return results
