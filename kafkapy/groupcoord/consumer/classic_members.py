"""Classic-protocol members inside a KIP-848 consumer group (Kafka 4.0's online migration).

While a group moves between the classic and the consumer protocol, members of both kinds
share one ConsumerGroup: the server assigns everyone, and a member that still speaks the
classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) is served from that state, as
Kafka's GroupMetadataManager.classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup do. Its
generation is its member epoch; a heartbeat answers REBALANCE_IN_PROGRESS when the member must
rejoin to revoke partitions or to collect new ones.

The same object converts groups between the two kinds when a member's arrival or departure
calls for it (the pure conversions are in migration.py) and writes the records of both.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Iterable
from typing import Any

from ...protocol.errors import ErrorCode, KafkaError
from ..config import GroupCoordinatorConfig
from ..group import CONSUMER_PROTOCOL_TYPE, UNKNOWN_MEMBER_ID, GroupMetadata, GroupState, JoinResult, SyncResult
from ..records import group_metadata_key, group_metadata_value
from . import persistence as rec
from ...protocol.consumer_protocol import (
    ClassicSubscription,
    MalformedSubscription,
    encode_assignment,
    parse_subscription,
    subscription_version,
)
from .group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState, MemberState
from .membership import _Changes, new_member_id
from .migration import (
    DEFAULT_MIGRATION_POLICY,
    MigrationError,
    MigrationPolicy,
    all_members_use_classic_protocol_except,
    convert_to_classic_group,
    convert_to_consumer_group,
    downgrade_refusal,
    upgrade_refusal,
)


def protocol_names(protocols: Iterable[tuple[str, bytes]]) -> set[str]:
    return {name for name, _ in protocols}

log = logging.getLogger(__name__)


# -- serving classic members of a consumer group ----------------------------------------------

def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """Whether a classic member with these protocols may join the consumer group (Kafka's
    ConsumerGroup.supportsClassicProtocols): protocol type "consumer" and, if classic members are
    there, one protocol name all of them support."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
        return False
    classic = [m for m in group.members.values() if m.uses_classic_protocol]
    return not classic or any(all(name in protocol_names(m.classic_protocols) for m in classic) for name in names)


def waiting_on_unreleased_partition(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """True while a partition of the member's target is still held by another member."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    for topic_id, partitions in group.target_of(member.member_id).items():
        for partition in partitions - member.assigned.get(topic_id, frozenset()):
            owner = group.owner_of(topic_id, partition)
            if owner is not None and owner != member.member_id:
                return True
    return False


def must_rejoin(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a classic member's heartbeat answers REBALANCE_IN_PROGRESS (Kafka's
    classicGroupHeartbeatToConsumerGroup): the group moved to a newer epoch, the member must
    revoke partitions, or partitions it waited for are free now."""
    return (member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS
                and not waiting_on_unreleased_partition(group, member)))


def protocol_name_of(member: ConsumerGroupMember) -> str:
    """The protocol a classic member is told it uses: the first it listed (Kafka's choice)."""
    return member.classic_protocols[0][0] if member.classic_protocols else ""


def _fail(code: int, message: str) -> KafkaError:
    return KafkaError(message, code)


class ClassicMembers:
    """JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic-protocol members of consumer groups, and
    the conversions between classic and consumer groups (the hooks of both membership classes).

    `consumer` is the ConsumerGroupMembership (target assignment, reconciliation, records),
    `classic` the classic GroupMembership (a downgraded group rebalances there).
    """

    def __init__(self, config: GroupCoordinatorConfig, manager: Any, clock_ms: Callable[[], int],
                 consumer: Any, classic: Any):
        self.config = config
        self.manager = manager
        self.clock_ms = clock_ms
        self.consumer = consumer
        self.classic = classic
        # join and sync deadlines of classic members: (group id, member id, "join"|"sync") ->
        # (handle, the member it is for: a fenced member's deadline must not stand for a newcomer's)
        self._timers: dict[tuple[str, str, str], tuple[Any, ConsumerGroupMember]] = {}

    @property
    def policy(self) -> MigrationPolicy:
        return MigrationPolicy.parse(getattr(self.config, "group_consumer_migration_policy",
                                             DEFAULT_MIGRATION_POLICY.config_value))

    def _consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.manager.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) and not group.is_in(ConsumerGroupState.DEAD) else None

    # -- topics ---------------------------------------------------------------------------
    def _topic_id(self, name: str) -> uuid.UUID | None:
        topic = self.consumer.topics.describe(name)
        return None if topic is None else topic.topic_id

    def _topic_name_of(self, group: ConsumerGroup) -> Callable[[uuid.UUID], str | None]:
        """Topic id -> name: the group's subscribed topics first, all topics (read once) on a miss."""
        names = {t.topic_id: t.name for t in group.subscribed_topic_metadata.values()}
        scanned = False

        def lookup(topic_id: uuid.UUID) -> str | None:
            nonlocal scanned
            if topic_id not in names and not scanned:
                scanned = True
                for candidate in self.consumer.topics.names():
                    topic = self.consumer.topics.describe(candidate)
                    if topic is not None:
                        names.setdefault(topic.topic_id, topic.name)
            return names.get(topic_id)
        return lookup

    def _owned(self, subscription: ClassicSubscription) -> list[tuple[uuid.UUID, list[int]]]:
        owned = []
        for topic, partitions in subscription.owned_partitions.items():
            topic_id = self._topic_id(topic)
            if topic_id is not None:
                owned.append((topic_id, list(partitions)))
        return owned

    def assignment_bytes(self, group: ConsumerGroup, member: ConsumerGroupMember) -> bytes:
        """The member's current assignment as a ConsumerProtocolAssignment of its subscription's version."""
        name_of = self._topic_name_of(group)
        partitions = {}
        for topic_id, parts in member.assigned.items():
            name = name_of(topic_id)
            if name is not None:
                partitions[name] = parts
        try:
            version = subscription_version(member.classic_protocols[0][1])
        except (MalformedSubscription, IndexError, TypeError):
            version = 0
        return encode_assignment(partitions, version)

    # -- timers ---------------------------------------------------------------------------
    def _schedule(self, group: ConsumerGroup, member: ConsumerGroupMember, kind: str, timeout_ms: int,
                  if_absent: bool = False) -> None:
        key = (group.group_id, member.member_id, kind)
        old = self._timers.get(key)
        if old is not None:
            if if_absent and old[1] is member:
                return
            old[0].cancel()
        scheduler = self.consumer.scheduler
        if scheduler is None:
            return
        handle = scheduler.call_later(max(timeout_ms, 0) / 1000, self._on_deadline, group.group_id,
                                      member.member_id, member, kind, timeout_ms)
        self._timers[key] = (handle, member)

    def _cancel(self, group_id: str, member_id: str, kind: str) -> None:
        entry = self._timers.pop((group_id, member_id, kind), None)
        if entry is not None:
            entry[0].cancel()

    def cancel_member_timers(self, group_id: str, member: ConsumerGroupMember) -> None:
        member.cancel_timers()
        self._cancel(group_id, member.member_id, "join")
        self._cancel(group_id, member.member_id, "sync")

    def _on_deadline(self, group_id: str, member_id: str, member: ConsumerGroupMember, kind: str,
                     timeout_ms: int) -> None:
        entry = self._timers.get((group_id, member_id, kind))
        if entry is not None and entry[1] is member:
            del self._timers[(group_id, member_id, kind)]
        group = self._consumer_group(group_id)
        if group is None or group.members.get(member_id) is not member or not member.uses_classic_protocol:
            return  # gone, or it speaks the consumer protocol now (its heartbeats keep it)
        log.info("group %s: classic member %s fenced: it did not %s within %d ms", group_id, member_id,
                 "rejoin" if kind == "join" else "send SyncGroup", timeout_ms)
        self.cancel_member_timers(group_id, member)
        self.consumer.fence_member(group, member)

    def schedule_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """(Re)start a classic member's session with the timeout it joined with."""
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None
        scheduler = self.consumer.scheduler
        if scheduler is None:
            return
        timeout_ms = member.classic_session_timeout_ms
        if timeout_ms is None or timeout_ms <= 0:
            timeout_ms = self.config.group_consumer_session_timeout_ms
        member.session_timer = scheduler.call_later(timeout_ms / 1000, self.consumer._on_session_timeout,
                                                    group.group_id, member.member_id, member)

    def schedule_member_timers(self, group: ConsumerGroup) -> None:
        """After loading a group: every classic member gets a full session."""
        for member in list(group.members.values()):
            if member.uses_classic_protocol:
                self.schedule_session(group, member)

    def unload_group(self, group: ConsumerGroup) -> None:
        """The group is no longer coordinated here: stop its classic members' deadlines."""
        for key in [k for k in self._timers if k[0] == group.group_id]:
            self._timers.pop(key)[0].cancel()

    def close(self) -> None:
        for handle, _ in self._timers.values():
            handle.cancel()
        self._timers.clear()

    # -- the classic requests -------------------------------------------------------------
    def join(self, request: Any, callback: Callable[[JoinResult], None]) -> bool:
        """Serve a JoinGroup if its group is a consumer group; False: not one (the classic path goes on)."""
        group = self.manager.groups.get(request.group_id)
        if not isinstance(group, ConsumerGroup) or group.is_in(ConsumerGroupState.DEAD):
            return False
        if not group.members:
            self._replace_empty_consumer_group(group)
            return False
        try:
            result = self._join(group, request)
        except KafkaError as exc:
            if exc.code not in (ErrorCode.MEMBER_ID_REQUIRED,):
                log.info("group %s: JoinGroup of classic member %s refused: %s", group.group_id,
                         request.member_id or "(new)", exc)
            result = JoinResult(request.member_id, exc.code)
        callback(result)
        return True

    def _join(self, group: ConsumerGroup, request: Any) -> JoinResult:
        consumer = self.consumer
        member_id = request.member_id
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        if is_unknown:
            member_id = new_member_id()
        if member_id not in group.members and len(group.members) >= self.config.group_consumer_max_size:
            raise _fail(ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The consumer group has reached its maximum capacity of "
                        f"{self.config.group_consumer_max_size} members.")
        if not supports_classic_protocols(group, request.protocol_type, protocol_names(request.protocols)):
            raise _fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
        try:
            subscription = parse_subscription(request.protocols[0][1])
        except MalformedSubscription as exc:
            raise _fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                        f"Member {member_id}'s embedded consumer protocol is malformed: {exc}") from None
        instance_id = request.group_instance_id
        if is_unknown and instance_id is None and request.require_known_member_id:
            log.info("group %s: a classic member with no id joins the consumer group; it gets id %s first",
                     group.group_id, member_id)
            return JoinResult(member_id, ErrorCode.MEMBER_ID_REQUIRED)

        changes = _Changes()
        replaced: ConsumerGroupMember | None = None
        if instance_id is None:
            member = group.members.get(member_id)
            is_new = member is None
            if is_new:
                member = ConsumerGroupMember(member_id)
        else:
            existing_id = group.static_member_id(instance_id)
            existing = group.members.get(existing_id) if existing_id is not None else None
            is_new = False
            if is_unknown:
                if existing is None:
                    member, is_new = ConsumerGroupMember(member_id, instance_id=instance_id), True
                else:
                    # the static member is back under a new id: it takes over the old one's partitions
                    member, replaced = ConsumerGroupMember(
                        member_id, instance_id=instance_id, rack_id=existing.rack_id, client_id=existing.client_id,
                        client_host=existing.client_host, rebalance_timeout_ms=existing.rebalance_timeout_ms,
                        subscribed_topic_names=list(existing.subscribed_topic_names),
                        subscribed_topic_regex=existing.subscribed_topic_regex,
                        server_assignor=existing.server_assignor, member_epoch=0, previous_member_epoch=0,
                        state=existing.state, assigned=dict(existing.assigned), pending_revocation={}), existing
            elif existing is None:
                raise _fail(ErrorCode.UNKNOWN_MEMBER_ID,
                            f"Member with instance id {instance_id} is not a member of group {group.group_id}.")
            elif existing.member_id != member_id:
                raise _fail(ErrorCode.FENCED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {instance_id} was fenced by member"
                            f" {existing.member_id}.")
            else:
                member = existing

        # -- everything below changes the group: validation is over ----------------------------
        if replaced is not None:
            self.cancel_member_timers(group.group_id, replaced)
            consumer._replace_static(group, replaced, member, changes)
        elif is_new:
            group.add_member(member)
            log.info("group %s: member %s%s joins the consumer group using the classic protocol",
                     group.group_id, member_id, f" (instance {instance_id})" if instance_id else "")
        bump = self._update_member(group, member, request, subscription, is_new or replaced is not None, changes)
        if bump or group.metadata_version != consumer.topics.version:
            bump = consumer._refresh_subscription_metadata(group, changes) or bump
        if bump:
            group.group_epoch += 1
            changes.add(rec.group_epoch_record(group.group_id, group.group_epoch))
            log.info("group %s: group epoch bumped to %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            consumer._update_target_assignment(group, changes)
        consumer._reconcile(group, member, self._owned(subscription), changes)
        error = consumer._write(group, changes)
        if error is not None:
            return JoinResult(member_id, error)
        result = JoinResult(member_id, ErrorCode.NONE, member.member_epoch, CONSUMER_PROTOCOL_TYPE,
                            protocol_name_of(member), UNKNOWN_MEMBER_ID)
        if replaced is not None and not replaced.uses_classic_protocol and self._downgrade_replaced(group, replaced):
            return result  # a classic group now: its heartbeat timers run
        self._cancel(group.group_id, member_id, "join")
        self.schedule_session(group, member)
        self._schedule(group, member, "sync", request.rebalance_timeout_ms)
        return result

    def _update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, request: Any,
                       subscription: ClassicSubscription, is_new: bool, changes: _Changes) -> bool:
        """Apply a JoinGroup's fields; True when the subscription changed (group epoch bump)."""
        changed = subscription_changed = is_new
        if request.group_instance_id is not None and member.instance_id != request.group_instance_id:
            member.instance_id = request.group_instance_id
            changed = True
        if subscription.rack_id is not None and member.rack_id != subscription.rack_id:
            member.rack_id = subscription.rack_id
            changed = True
        if request.rebalance_timeout_ms != -1 and member.rebalance_timeout_ms != request.rebalance_timeout_ms:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            changed = True
        if sorted(subscription.topics) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = list(subscription.topics)
            changed = subscription_changed = True
        if member.client_id != request.client_id or member.client_host != request.client_host:
            member.client_id, member.client_host = request.client_id, request.client_host
            changed = True
        protocols = [(name, bytes(metadata)) for name, metadata in request.protocols]
        if member.classic_protocols != protocols or member.classic_session_timeout_ms != request.session_timeout_ms:
            member.classic_protocols = protocols
            member.classic_session_timeout_ms = request.session_timeout_ms
            changed = True
        if changed:
            changes.add(rec.member_subscription_record(group.group_id, member))
        if subscription_changed:
            self.consumer._drop_unused_regexes(group, changes)
        return subscription_changed

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember plus throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise _fail(ErrorCode.UNKNOWN_MEMBER_ID,
                            f"Member {member_id} is not a member of group {group.group_id}.")
        else:
            existing_id = group.static_member_id(instance_id)
            member = group.members.get(existing_id) if existing_id is not None else None
            if member is None:
                raise _fail(ErrorCode.UNKNOWN_MEMBER_ID,
                            f"Member with instance id {instance_id} is not a member of group {group.group_id}.")
            if member.member_id != member_id:
                raise _fail(ErrorCode.FENCED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {instance_id} was fenced by member"
                            f" {member.member_id}.")
        if not member.uses_classic_protocol:
            raise _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
        return member

    def sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None, callback: Callable[[SyncResult], None]) -> bool:
        """Serve a SyncGroup if its group is a consumer group; False: not one."""
        group = self._consumer_group(group_id)
        if group is None:
            return False
        try:
            if not group.members:
                raise _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {group_id} is empty.")
            member = self._member(group, member_id, instance_id)
            if generation_id != member.member_epoch:
                raise _fail(ErrorCode.ILLEGAL_GENERATION,
                            f"The request generation id {generation_id} is not equal to the member epoch"
                            f" {member.member_epoch} of member {member_id}.")
            if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise _fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Protocol type {protocol_type} is not consumer.")
            if protocol_name is not None and protocol_name != protocol_name_of(member):
                raise _fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                            f"Protocol name {protocol_name} is not the one of the join response.")
            if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._schedule(group, member, "join", member.rebalance_timeout_ms, if_absent=True)
                raise _fail(ErrorCode.REBALANCE_IN_PROGRESS, f"A new rebalance is triggered in group {group_id}.")
        except KafkaError as exc:
            callback(SyncResult(exc.code))
            return True
        self._cancel(group_id, member.member_id, "sync")
        self.schedule_session(group, member)
        callback(SyncResult(ErrorCode.NONE, self.assignment_bytes(group, member), protocol_type, protocol_name))
        return True

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> int | None:
        """Serve a Heartbeat if its group is a consumer group (its error code); None: not one."""
        group = self._consumer_group(group_id)
        if group is None:
            return None
        try:
            member = self._member(group, member_id, instance_id)
        except KafkaError as exc:
            return exc.code
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.schedule_session(group, member)
        if must_rejoin(group, member):
            self._schedule(group, member, "join", member.rebalance_timeout_ms, if_absent=True)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]] | None:
        """Serve a LeaveGroup if its group is a consumer group: (top error, member errors); None: not one.

        As Kafka 4.0 (KAFKA-18150), any member may be removed this way (administrative removal by
        instance id included), and removing the last consumer-protocol members downgrades the group."""
        group = self._consumer_group(group_id)
        if group is None:
            return None
        results: list[int] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for member_id, instance_id in members:
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    if member is None:
                        raise _fail(ErrorCode.UNKNOWN_MEMBER_ID,
                                    f"Member {member_id} is not a member of group {group_id}.")
                else:
                    existing_id = group.static_member_id(instance_id)
                    member = group.members.get(existing_id) if existing_id is not None else None
                    if member is None:
                        raise _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    # an administrative removal names the instance id only
                    if member_id != UNKNOWN_MEMBER_ID and member.member_id != member_id:
                        raise _fail(ErrorCode.FENCED_INSTANCE_ID,
                                    f"Static member {member_id} with instance id {instance_id} was fenced by"
                                    f" member {member.member_id}.")
            except KafkaError as exc:
                results.append(exc.code)
                continue
            log.info("group %s: member %s%s left the consumer group through LeaveGroup", group_id, member.member_id,
                     f" (instance {instance_id})" if instance_id else "")
            leaving[member.member_id] = member
            results.append(ErrorCode.NONE)
        if not leaving:
            return ErrorCode.NONE, results
        if downgrade_refusal(group, leaving, self.policy, self.config.group_max_size) is None \
                and self._convert_to_classic(group, leaving):
            log.info("group %s: consumer group (epoch %d) downgraded to a classic group after %s left",
                     group_id, group.group_epoch, sorted(leaving))
            self.classic._maybe_prepare_rebalance(self.manager.groups[group_id],
                                                  f"Downgrade group {group_id} from consumer to classic.")
            return ErrorCode.NONE, results
        changes = _Changes()
        for member in leaving.values():
            self.cancel_member_timers(group_id, member)
            group.remove_member(member.member_id)
            self.consumer._member_tombstones(group_id, member.member_id, changes)
        self.consumer._drop_unused_regexes(group, changes)
        # the subscribed topics without the leavers' (one epoch bump covers both changes)
        self.consumer._refresh_subscription_metadata(group, changes)
        group.group_epoch += 1
        changes.add(rec.group_epoch_record(group_id, group.group_epoch))
        error = self.consumer._write(group, changes)
        if error is not None:
            return error, []
        return ErrorCode.NONE, results

    # -- conversions ----------------------------------------------------------------------
    def _replace_empty_consumer_group(self, group: ConsumerGroup) -> None:
        """A classic member joins an empty consumer group: it becomes an (empty) classic group keeping
        the offsets; the consumer group's records get tombstones (Kafka's maybeDeleteEmptyConsumerGroup)."""
        changes = _Changes()
        changes.add(*rec.group_tombstones(group))
        error = self.consumer._write(group, changes)
        if error is not None:
            log.warning("group %s: could not write the tombstones of the empty consumer group: %s", group.group_id,
                        ErrorCode(error).name)
        classic = GroupMetadata(group.group_id, GroupState.EMPTY, self.clock_ms())
        classic.offsets = group.offsets
        group.transition_to(ConsumerGroupState.DEAD, self.clock_ms())
        self.manager.groups[group.group_id] = classic
        log.info("group %s: empty consumer group converted to a classic group (%d offsets kept)", group.group_id,
                 len(classic.offsets))

    def upgrade(self, classic: GroupMetadata, request: Any, changes: _Changes) -> ConsumerGroup | None:
        """A consumer-protocol member joins a non-empty classic group (ConsumerGroupMembership's hook):
        the consumer group that replaces it, or None when the group must stay classic."""
        refusal = upgrade_refusal(classic, self.policy, self.config.group_consumer_max_size)
        if refusal is not None:
            log.info("group %s: cannot upgrade the classic group to a consumer group: %s", classic.group_id, refusal)
            return None
        if request.member_id not in classic.members and len(classic.members) >= self.config.group_consumer_max_size:
            raise _fail(ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The consumer group has reached its maximum capacity of "
                        f"{self.config.group_consumer_max_size} members.")
        try:
            group = convert_to_consumer_group(classic, self._topic_id, self.clock_ms())
        except MigrationError as exc:
            log.warning("group %s: cannot upgrade the classic group to a consumer group: %s", classic.group_id, exc)
            return None
        # written now, not with the joining member's records: a later refusal of that member
        # must not leave the log and the group disagreeing
        records = _Changes()
        records.add((group_metadata_key(classic.group_id), None), *rec.group_records(group))
        error = self.consumer._write(group, records)
        if error is not None:
            raise _fail(error, f"Could not write the upgrade of group {classic.group_id}.")
        self._retire_classic_group(classic)
        self.manager.groups[group.group_id] = group
        for member in group.members.values():
            self.schedule_session(group, member)
        log.info("group %s: classic group (generation %d, %d members) upgraded to a consumer group",
                 group.group_id, classic.generation_id, len(group.members))
        return group

    def _retire_classic_group(self, classic: GroupMetadata) -> None:
        """The classic group is replaced: its waiters rejoin, its timers stop (Kafka completes the
        join and sync futures with REBALANCE_IN_PROGRESS)."""
        for member in list(classic.members.values()):
            classic.invoke_join_callback(member, JoinResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
            classic.invoke_sync_callback(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.cancel_heartbeat()
        for name in ("join_timer", "sync_timer"):
            timer = getattr(classic, name)
            if timer is not None:
                timer.cancel()
                setattr(classic, name, None)
        self.classic.cancel_pending_members(classic.group_id)
        classic.transition_to(GroupState.DEAD, self.clock_ms())

    def downgrade(self, group: ConsumerGroup, leaving: ConsumerGroupMember) -> bool:
        """The member `leaving` goes (left, or fenced by a timeout; ConsumerGroupMembership's hook): True
        if the others all speak the classic protocol and the group became a classic group of them,
        which rebalances."""
        refusal = downgrade_refusal(group, leaving.member_id, self.policy, self.config.group_max_size)
        if refusal is not None:
            if all_members_use_classic_protocol_except(group, leaving.member_id) and len(group.members) > 1:
                log.info("group %s: cannot downgrade the consumer group to a classic group: %s", group.group_id,
                         refusal)
            return False
        if not self._convert_to_classic(group, leaving.member_id):
            return False
        log.info("group %s: consumer group (epoch %d) downgraded to a classic group after %s left",
                 group.group_id, group.group_epoch, leaving.member_id)
        classic = self.manager.groups[group.group_id]
        self.classic._maybe_prepare_rebalance(classic, f"Downgrade group {group.group_id} from consumer to classic.")
        return True

    def _downgrade_replaced(self, group: ConsumerGroup, replaced: ConsumerGroupMember) -> bool:
        """A classic static member took the place of the last consumer-protocol member (Kafka's
        validateOnlineDowngradeWithReplacedMemberId): the group becomes a Stable classic group, the
        newcomer keeping the partitions it took over, with no rebalance."""
        refusal = downgrade_refusal(group, (), self.policy, self.config.group_max_size)
        if refusal is not None:
            if all_members_use_classic_protocol_except(group, ()):
                log.info("group %s: cannot downgrade the consumer group to a classic group: %s", group.group_id,
                         refusal)
            return False
        if not self._convert_to_classic(group, ()):
            return False
        log.info("group %s: consumer group (epoch %d) downgraded to a classic group: static member %s with"
                 " instance id %s was replaced by a classic member", group.group_id, group.group_epoch,
                 replaced.member_id, replaced.instance_id)
        return True

    def _convert_to_classic(self, group: ConsumerGroup, leaving: str | Collection[str]) -> bool:
        """Replace the consumer group by a classic group of its members but those `leaving` (records,
        timers); False if it cannot be."""
        try:
            classic, assignments = convert_to_classic_group(group, leaving, self._topic_name_of(group),
                                                            self.clock_ms())
        except MigrationError as exc:
            log.warning("group %s: cannot downgrade the consumer group: %s", group.group_id, exc)
            return False
        changes = _Changes()
        changes.add(*rec.group_tombstones(group),
                    (group_metadata_key(group.group_id), group_metadata_value(classic, assignments)))
        error = self.consumer._write(group, changes)
        if error is not None:
            log.warning("group %s: could not write the downgrade to a classic group: %s", group.group_id,
                        ErrorCode(error).name)
            return False
        for member in list(group.members.values()):
            self.cancel_member_timers(group.group_id, member)
        group.transition_to(ConsumerGroupState.DEAD, self.clock_ms())
        self.manager.groups[group.group_id] = classic
        for member in classic.members.values():
            self.classic.schedule_heartbeat(classic, member)
        return True

