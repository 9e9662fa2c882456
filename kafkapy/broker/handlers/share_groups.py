"""Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge.

The handlers translate between the wire and kafkapy.groupcoord.share (Broker.share_groups):
membership requests go to the group's coordinator (the leader of its __consumer_offsets
partition, as for every group); fetches and acknowledgements go to each partition's leader,
which is the share-partition leader and reads records with broker.replicas.read_for_consumer,
the path every consumer fetch takes on one node and in a cluster. Record batches are sent as
read; only their headers are looked at, to know which offsets were acquired.
"""
from __future__ import annotations

import logging
import time
import uuid

from ...groupcoord.group import GroupState
from ...groupcoord.offsets_topic import OffsetsTopicStore, offsets_topic_configs
from ...groupcoord.share import AckBatch, validate_ack_batches
from ...groupcoord.share.batches import LazyBatchRanges
from ...groupcoord.share.partition import ACK_NOT_IN_WINDOW
from ...groupcoord.share.state_records import ShareState
from ...groupcoord.share.state_store import SHARE_STATE_TOPIC, UPDATES_PER_SNAPSHOT, ShareStateStore
from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from ..dispatch import RequestContext, handles
from ...replication.durability import wait_durable
from ..log_throttle import PeerLogThrottle
from .groups import client_host
from .offsets import replicated

log = logging.getLogger(__name__)
_state_log = PeerLogThrottle(log, first=1, interval_s=10.0)

# most acknowledgement offsets one request may carry (more is INVALID_REQUEST, nothing applied)
MAX_ACK_OFFSETS = 1 << 20
_INT32_MAX = 2**31 - 1
_ZERO_UUID = uuid.UUID(int=0)


def _share_version_finalized(broker) -> bool:
    """share.version >= 1 (the KIP-584 feature of share groups; metadata/features.py)."""
    from ...metadata.features import finalized_level

    return finalized_level(broker.metadata, "share.version") >= 1


def _coordinator_error(broker, group_id: str) -> int:
    """The group coordinator checks of the classic and consumer groups, for a share group."""
    manager = broker.group_coordinator.manager
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    if manager.is_loading(group_id):
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if not manager.is_local(group_id):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.NONE


# -- ShareGroupHeartbeat ---------------------------------------------------------------------
@handles(ShareGroupHeartbeatRequest)
async def handle_share_group_heartbeat(ctx: RequestContext,
                                       request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    R = ShareGroupHeartbeatResponse
    broker = ctx.broker
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return R(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not _share_version_finalized(broker):
        # share.version finalized at 0 (kafka-features.sh disable --feature share.version), as Kafka 4.2
        return R(error_code=ErrorCode.UNSUPPORTED_VERSION,
                 error_message="Share groups are not enabled: share.version is not finalized at 1 or above.")
    names = request.subscribed_topic_names
    if names:
        denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if denied:
            return R(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                     error_message=f"The client is not authorized to describe topics: {', '.join(sorted(denied))}.")
    error = _coordinator_error(broker, request.group_id)
    if error:
        return R(error_code=error)
    result = broker.share_groups.heartbeat(
        request.group_id, request.member_id, request.member_epoch, request.rack_id, names,
        ctx.client_id or "", client_host(ctx), time.monotonic())
    if result.error:
        return R(error_code=result.error, error_message=result.message)
    _wake_released(broker)
    assignment = None
    if result.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=topic_id, partitions=sorted(parts))
            for topic_id, parts in sorted(result.assignment.items(), key=lambda item: str(item[0]))])
    return R(error_code=ErrorCode.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
             heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


def _wake_released(broker) -> None:
    """Fetches waiting on share-partitions whose records a closed session gave back."""
    for session in broker.share_groups.take_released():
        for topic, partition, _ in session.partitions:
            broker.purgatory.notify(("share", session.group_id, topic, partition))


# -- ShareGroupDescribe ----------------------------------------------------------------------
def _other_group_type(broker, group_id: str) -> bool:
    """True when `group_id` is a live classic or consumer group (Kafka: "Group X is not a share group.")."""
    coordinator = broker.group_coordinator
    group = coordinator.manager.get_group(group_id) if coordinator is not None else None
    return group is not None and not group.is_in(GroupState.DEAD)


@handles(ShareGroupDescribeRequest)
async def handle_share_group_describe(ctx: RequestContext,
                                      request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    R = ShareGroupDescribeResponse
    broker = ctx.broker
    groups = []
    for group_id in request.group_ids:
        described = R.DescribedGroup(group_id=group_id, error_code=ErrorCode.NONE, members=[])
        groups.append(described)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = _coordinator_error(broker, group_id)
        if error:
            described.error_code = error
            continue
        share = broker.share_groups
        share.expire_members(time.monotonic())
        group = share.describe(group_id)
        if group is None:
            described.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            described.error_message = (f"Group {group_id} is not a share group." if _other_group_type(broker, group_id)
                                       else f"Group {group_id} not found.")
            continue
        described.group_state = group.state
        described.group_epoch = described.assignment_epoch = group.group_epoch
        described.assignor_name = "simple"
        if request.include_authorized_operations:
            described.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, group_id)
        for member in group.members.values():
            topics = []
            for topic_id, parts in sorted(member.assignment.items(), key=lambda item: str(item[0])):
                meta = broker.partitions.topic_by_id(topic_id)
                topics.append(R.TopicPartitions(topic_id=topic_id, topic_name=meta.name if meta else "",
                                                partitions=sorted(parts)))
            described.members.append(R.Member(
                member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
                client_id=member.client_id, client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed),
                assignment=R.Assignment(topic_partitions=topics)))
    return R(throttle_time_ms=0, groups=groups)


# -- share sessions ----------------------------------------------------------------------------
def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= _INT32_MAX else epoch + 1


def _session_for(broker, group_id: str, member_id: str, epoch: int, has_acks: bool, is_fetch: bool,
                 connection=None):
    """(error, session) for a request's share session epoch: 0 opens one (ShareFetch only, and
    without acknowledgements), -1 closes it after its acknowledgements, others must be the next.
    A session ends with the connection that opened it (Kafka's ShareSessionCache disconnect
    listener): what the member held goes back to the group then, not when its locks expire."""
    share = broker.share_groups
    if epoch == 0:
        if not is_fetch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        if has_acks:
            return ErrorCode.INVALID_REQUEST, None
        session = share.open_session(group_id, member_id, time.monotonic())
        if connection is not None:
            _end_with(connection, broker, session)
        _wake_released(broker)
        return ErrorCode.NONE, session
    error, session = share.session_error(group_id, member_id, epoch)
    if error:
        return error, None
    share.touch(session, time.monotonic())
    if epoch != -1:
        session.epoch = _next_epoch(epoch)
    return ErrorCode.NONE, session


def _end_with(connection, broker, session) -> None:
    def closed() -> None:
        if broker.share_groups.connection_closed(session):
            _wake_released(broker)

    if connection.on_close is None:
        connection.on_close = {}
    # one entry per member: a session opened again on this connection replaces the last one
    connection.on_close[("share-session", session.group_id, session.member_id)] = closed


def _leader_error(broker, topic: str, partition: int) -> int:
    hosted = broker.replicas.partition(topic, partition)
    if hosted is None or not hosted.is_leader:
        meta = broker.partitions.topic(topic)
        if meta is None or partition >= meta.partition_count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if hosted.log.is_offline:
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE


def _acknowledge(broker, share, group_id: str, member_id: str, topic: str, topic_id, partition: int,
                 wire_batches, allow_renew: bool, now: float, dirty: set) -> tuple[int, str | None]:
    """(error, message) of one partition's acknowledgements, applied when NONE."""
    batches = [AckBatch(b.first_offset, b.last_offset, b.acknowledge_types) for b in wire_batches]
    error = validate_ack_batches(batches, allow_renew, MAX_ACK_OFFSETS)
    if error:
        return error, None
    error = _leader_error(broker, topic, partition)
    if error:
        return error, None
    if not _current_share_partition(broker, share, group_id, topic, partition):
        return ErrorCode.INVALID_RECORD_STATE, ACK_NOT_IN_WINDOW
    sp = share.partitions[(group_id, topic, partition)]
    sp.expire_locks(now)
    error = sp.acknowledge(member_id, batches, share.lock_duration_s(group_id), now)
    if error:
        return error, sp.refusal
    dirty.add((topic, topic_id, partition))
    broker.purgatory.notify(("share", group_id, topic, partition))
    return ErrorCode.NONE, None


def _current_share_partition(broker, share, group_id: str, topic: str, partition: int) -> bool:
    """Whether the share-partition in memory is this leadership's: one from an earlier time this
    broker led the partition is dropped (another leader has changed the state since). A new leader
    epoch under the same leader keeps it (Kafka's ZooKeeper controller bumps the epoch when it takes
    a dead follower out of the ISR; the records members hold stay theirs): the replica's leadership
    term, not its epoch, tells (replication/partition.py)."""
    key = (group_id, topic, partition)
    sp = share.partitions.get(key)
    if sp is None or share.drop_if_recreated(key):
        return False
    hosted = broker.replicas.partition(topic, partition)
    term = hosted.leader_term if hosted is not None and hosted.is_leader else -1
    if sp.leader_term is None:
        sp.leader_term = term
    elif sp.leader_term != term:
        del share.partitions[key]
        return False
    return True


class _PartitionAnswer:
    __slots__ = ("topic", "topic_id", "partition", "error", "ack_error", "ack_message", "records", "acquired")

    def __init__(self, topic, topic_id, partition) -> None:
        self.topic, self.topic_id, self.partition = topic, topic_id, partition
        self.error = ErrorCode.NONE
        self.ack_error = ErrorCode.NONE
        self.ack_message = None
        self.records = None
        self.acquired: list = []


def _resolve(broker, topic_id):
    meta = broker.partitions.topic_by_id(topic_id)
    return meta.name if meta is not None else None


# -- durable state: __share_group_state -------------------------------------------------------
def _state_store(broker) -> ShareStateStore | None:
    """The store of share-partition state, creating __share_group_state on first use as Kafka's
    share coordinator does; None while it cannot be created (state then stays in memory)."""
    share = broker.share_groups
    if share.state_store is not None:
        return share.state_store
    now = time.monotonic()
    if now < share.state_store_retry_at:
        return None
    get = broker.config.get
    meta = broker.partitions.topic(SHARE_STATE_TOPIC)
    if meta is None:
        try:
            meta = broker.partitions.create_topic(
                SHARE_STATE_TOPIC, get("share.coordinator.state.topic.num.partitions"),
                get("share.coordinator.state.topic.replication.factor"),
                configs=offsets_topic_configs(get("share.coordinator.state.topic.segment.bytes")), internal=True)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                share.state_store_retry_at = now + 10
                log.warning("cannot create %s, share group state is kept in memory for now: %s",
                            SHARE_STATE_TOPIC, exc)
                return None
            meta = broker.partitions.topic(SHARE_STATE_TOPIC)
    store = OffsetsTopicStore(
        log_for=lambda p: broker.partitions.get_log(SHARE_STATE_TOPIC, p),
        leader_epoch_for=lambda p: broker.partitions.leader_epoch(SHARE_STATE_TOPIC, p),
        on_append=lambda p: broker.purgatory.notify((SHARE_STATE_TOPIC, p)), topic=SHARE_STATE_TOPIC)

    def local_epoch(state_partition: int) -> int | None:
        hosted = broker.replicas.partition(SHARE_STATE_TOPIC, state_partition)
        if hosted is None or not hosted.is_leader or broker.partitions.get_log(SHARE_STATE_TOPIC, state_partition) is None:
            return None
        return hosted.leader_epoch

    try:  # Kafka's share.coordinator.snapshot.update.records.per.snapshot, where the config table has it
        per_snapshot = int(get("share.coordinator.snapshot.update.records.per.snapshot"))
    except (KeyError, ValueError, TypeError):
        per_snapshot = UPDATES_PER_SNAPSHOT
    share.state_store = ShareStateStore(store, len(meta.partitions), local_epoch, per_snapshot)
    return share.state_store


async def _drop_replaced_states(broker, share, group_id: str, targets) -> None:
    """When a member opens a share session: drop the share-partitions in memory whose stored state
    has a newer state epoch (the group's offsets were reset or deleted by its coordinator while
    the group was empty, so nothing of them is in flight), so that the fetch loads the new state.
    Only share-partitions with nothing acquired are checked: one with records in flight belongs
    to a group that had members, which AlterShareGroupOffsets refuses (NON_EMPTY_GROUP)."""
    for name, partition, topic_id in targets:
        sp = share.partitions.get((group_id, name, partition))
        if sp is None or sp.counts()["ACQUIRED"]:
            continue
        ok, stored = await _stored_state(broker, group_id, topic_id, partition)
        if ok and stored is not None and stored.state_epoch > sp.state_epoch:
            log.info("share state of %s/%s-%d was replaced (state epoch %d): loading it again",
                     group_id, name, partition, stored.state_epoch)
            share.partitions.pop((group_id, name, partition), None)


async def _stored_state(broker, group_id: str, topic_id, partition: int):
    """(ok, state): the stored state of a share-partition, read here or from the share
    coordinator (ReadShareGroupState); ok is False when it could not be read (try again later)."""
    store = _state_store(broker)
    if store is None:
        return True, None
    state_partition = store.partition_of(group_id, topic_id, partition)
    if store.is_local(state_partition):
        # a start offset of -1: the state was deleted (DeleteShareGroupOffsets, DeleteGroups); it is
        # returned all the same, for its state epoch
        return True, store.read(group_id, topic_id, partition)
    R = ReadShareGroupStateRequest
    response = await _call_coordinator(broker, state_partition, R(group_id=group_id, topics=[R.ReadStateData(
        topic_id=topic_id, partitions=[R.PartitionData(partition=partition, leader_epoch=-1)])]))
    if response is None:
        return False, None
    result = response.results[0].partitions[0]
    if result.error_code:
        log.info("reading the state of %s/%s-%d from the share coordinator: %s", group_id, topic_id, partition,
                 ErrorCode(result.error_code).name)
        return False, None
    if result.start_offset < 0 and result.state_epoch <= 0:
        return True, None  # nothing stored
    return True, ShareState(result.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                                  for b in result.state_batches], state_epoch=result.state_epoch)


async def _call_coordinator(broker, state_partition: int, request):
    """Send a share state request to the leader of the __share_group_state partition; None
    when it cannot be reached."""
    meta = broker.partitions.topic(SHARE_STATE_TOPIC)
    if meta is None or state_partition >= len(meta.partitions):
        return None
    leader = meta.partitions[state_partition].leader
    if leader < 0:
        return None
    try:  # net/peers.py: the connection to that broker, made or retargeted as needed
        return await broker.share_groups.peers.send(leader, request, 0)
    except Exception as exc:  # no endpoint, a connection failure, a timeout: the caller retries later
        # one line per broker and 10 s, then a count: clients retry at once, so an unreachable share
        # coordinator would otherwise write a line per fetch (tens of thousands in a few seconds)
        _state_log.log(logging.INFO, f"broker {leader}", "share state request to broker %d failed: %s", leader, exc)
        return None


# Kafka 4.4's persister (PersisterStateManager): a share coordinator that cannot be reached, or
# answers a retriable error, is asked again after 1 s, doubling (20 % jitter), 5 attempts in all;
# the ShareFetch / ShareAcknowledge waits meanwhile instead of answering an error the client
# would retry at once (a storm of requests while the coordinator is down)
STATE_WRITE_ATTEMPTS = 5
STATE_WRITE_BACKOFF_S = 1.0
_RETRIABLE_STATE_ERRORS = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


async def _write_state(broker, store, group_id: str, topic_id, partition: int, state: ShareState) -> int:
    """Write a share-partition's state where it is kept and wait until it is durable: `state`
    holds the batches that changed, laid over the stored state (a state epoch newer than the
    stored one replaces it). A share coordinator on another broker that cannot be reached is
    tried again with Kafka's persister backoff before the error is answered."""
    import asyncio
    import random

    state_partition = store.partition_of(group_id, topic_id, partition)
    error = ErrorCode.NONE
    for attempt in range(STATE_WRITE_ATTEMPTS):
        if attempt:
            delay = STATE_WRITE_BACKOFF_S * (2 ** (attempt - 1))
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
        if store.is_local(state_partition):   # the coordinator may have moved here meanwhile
            return (await _write_local(broker, store, [(group_id, topic_id, partition, state)]))[0]
        W = WriteShareGroupStateRequest
        response = await _call_coordinator(broker, state_partition, W(group_id=group_id, topics=[W.WriteStateData(
            topic_id=topic_id, partitions=[W.PartitionData(
                partition=partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
                start_offset=state.start_offset, state_batches=[
                    W.StateBatch(first_offset=f, last_offset=l, delivery_state=st, delivery_count=c)
                    for f, l, st, c in state.batches])])]))
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE if response is None else \
            response.results[0].partitions[0].error_code
        if error not in _RETRIABLE_STATE_ERRORS:
            return error
    return error


def _fenced(store, group_id: str, topic_id, partition: int, state: ShareState) -> bool:
    """The state was replaced (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups) since
    the writer loaded it: its copy is stale (Kafka's share coordinator: FENCED_STATE_EPOCH)."""
    stored = store.read(group_id, topic_id, partition)
    return stored is not None and state.state_epoch < stored.state_epoch


async def _write_local(broker, store, writes) -> list[int]:
    """Writes (group id, topic id, partition, state) to state partitions led here: one append per
    state partition for all of them, then one wait until each is durable; an error per write."""
    errors = [ErrorCode.NONE] * len(writes)
    accepted = []
    for i, (group_id, topic_id, partition, state) in enumerate(writes):
        if _fenced(store, group_id, topic_id, partition, state):
            errors[i] = ErrorCode.FENCED_STATE_EPOCH
        else:
            accepted.append(i)
    if not accepted:
        return errors
    try:
        written = store.write_many([(*writes[i], False) for i in accepted])
    except KafkaError as exc:
        log.warning("writing the share state of %s failed: %s",
                    ", ".join(f"{g}/{t}-{p}" for g, t, p, _ in (writes[i] for i in accepted)), exc)
        for i in accepted:
            errors[i] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return errors
    outcome: dict[int, int] = {}
    for state_partition in written:
        plog = broker.partitions.get_log(SHARE_STATE_TOPIC, state_partition)
        if plog is not None and plog.config.fsync_on_ack:
            await wait_durable(plog.sync_until(plog.log_end_offset - 1))
        outcome[state_partition] = await replicated(broker, SHARE_STATE_TOPIC, state_partition,
                                                    broker.config.get("offsets.commit.timeout.ms"))
    for i in accepted:
        group_id, topic_id, partition, _ = writes[i]
        state_partition = store.partition_of(group_id, topic_id, partition)
        errors[i] = outcome.get(state_partition, ErrorCode.NOT_COORDINATOR)
    return errors


class _CoalescedWrites:
    """Share state writes to state partitions led here, from requests handled in the same turn of
    the event loop, stored together: one append per state partition and one wait for all of them
    (Kafka's coordinator runtime batches appends the same way, share.coordinator.append.linger.ms).
    The writes are stored in the order they were asked for, so deltas of one share-partition from
    two requests are laid over each other in order."""

    def __init__(self, broker) -> None:
        self._broker = broker
        self._pending: list = []   # (store, writes, future)

    async def write(self, store, writes) -> list[int]:
        import asyncio

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((store, writes, future))
        if len(self._pending) == 1:
            loop.call_soon(lambda: loop.create_task(self._flush()))
        return await future

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        store = batch[0][0]
        writes = [write for _, ws, _ in batch for write in ws]
        try:
            errors = await _write_local(self._broker, store, writes)
        except Exception as exc:  # noqa: BLE001  every waiter gets an answer
            log.warning("writing share state failed: %s", exc)
            errors = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(writes)
        at = 0
        for _, ws, future in batch:
            if not future.done():
                future.set_result(errors[at:at + len(ws)])
            at += len(ws)


def _coalesced_writes(broker, share) -> _CoalescedWrites:
    writer = getattr(share, "state_writes", None)
    if writer is None:
        writer = share.state_writes = _CoalescedWrites(broker)
    return writer


async def _persist(broker, share, group_id: str, dirty) -> int:
    """Write what changed in the share-partitions in `dirty` ((topic, topic id, partition)) as
    deltas (SharePartition.take_delta) and wait until they are as durable as a coordinator's
    write: those kept here in one append per state partition (with those of the other requests
    of this turn of the event loop, _CoalescedWrites), the others with a
    WriteShareGroupState to their share coordinator. The error for the response, else NONE."""
    store = _state_store(broker) if dirty else None
    if store is None:
        return ErrorCode.NONE
    local, remote = [], []
    for topic, topic_id, partition in dirty:
        sp = share.partitions.get((group_id, topic, partition))
        if sp is None:
            continue
        delta = sp.take_delta()
        if delta is None:
            continue   # nothing durable changed (a renewal, a release below the delivery limit)
        start, batches = delta
        state = ShareState(start, batches, state_epoch=sp.state_epoch,
                           leader_epoch=broker.partitions.leader_epoch(topic, partition))
        local_write = store.is_local(store.partition_of(group_id, topic_id, partition))
        (local if local_write else remote).append(((topic, partition, sp), (group_id, topic_id, partition, state)))
    results = []
    if local:
        errors = await _coalesced_writes(broker, share).write(store, [write for _, write in local])
        results += [(who, error) for (who, _), error in zip(local, errors)]
    for who, (_, topic_id, partition, state) in remote:
        results.append((who, await _write_state(broker, store, group_id, topic_id, partition, state)))
    first_error = ErrorCode.NONE
    for (topic, partition, sp), error in results:
        if error == ErrorCode.FENCED_STATE_EPOCH:
            # the group's offsets were reset or deleted meanwhile: the next fetch loads the new state
            log.info("share state of %s/%s-%d replaced by its group coordinator: loading it again",
                     group_id, topic, partition)
            if share.partitions.get((group_id, topic, partition)) is sp:
                share.partitions.pop((group_id, topic, partition), None)
        elif error:
            sp.write_failed()   # the delta is lost: the next write is the whole window
        first_error = first_error or error
    return first_error


# -- the share coordinator's side (cluster: another broker's share-partition leader asks) -------
def _coordinator_check(ctx, store, group_id: str, topic_id, partition: int) -> int:
    if not ctx.authorized_cluster(AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if store is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if not store.is_local(store.partition_of(group_id, topic_id, partition)):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.NONE


@handles(ReadShareGroupStateRequest)
async def handle_read_share_group_state(ctx: RequestContext,
                                        request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    R = ReadShareGroupStateResponse
    store = _state_store(ctx.broker)
    results = []
    for t in request.topics:
        out = R.ReadStateResult(topic_id=t.topic_id, partitions=[])
        results.append(out)
        for p in t.partitions:
            error = _coordinator_check(ctx, store, request.group_id, t.topic_id, p.partition)
            result = R.PartitionResult(partition=p.partition, error_code=error, start_offset=-1)
            out.partitions.append(result)
            if error:
                continue
            state = store.read(request.group_id, t.topic_id, p.partition)
            if state is not None:
                result.state_epoch, result.start_offset = state.state_epoch, state.start_offset
                result.state_batches = [R.StateBatch(first_offset=f, last_offset=l, delivery_state=st,
                                                     delivery_count=c) for f, l, st, c in state.batches]
    return R(results=results)


@handles(WriteShareGroupStateRequest)
async def handle_write_share_group_state(ctx: RequestContext,
                                         request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    R = WriteShareGroupStateResponse
    broker = ctx.broker
    store = _state_store(broker)
    results = []
    for t in request.topics:
        out = R.WriteStateResult(topic_id=t.topic_id, partitions=[])
        results.append(out)
        for p in t.partitions:
            error = _coordinator_check(ctx, store, request.group_id, t.topic_id, p.partition)
            if not error:
                error = await _write_state(broker, store, request.group_id, t.topic_id, p.partition, ShareState(
                    p.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                     for b in p.state_batches],
                    state_epoch=p.state_epoch, leader_epoch=p.leader_epoch))
            out.partitions.append(R.PartitionResult(partition=p.partition, error_code=error))
    return R(results=results)


# -- ShareFetch --------------------------------------------------------------------------------
class _ShareRead:
    """What one share-partition's log read returned, before anything is acquired from it."""

    __slots__ = ("key", "sp", "records", "ranges")

    def __init__(self, key, sp, records, ranges) -> None:
        self.key, self.sp, self.records, self.ranges = key, sp, records, ranges


def _read_share_partition(broker, share, group_id: str, key, max_bytes: int, min_one: bool,
                          now: float, stored=None):
    """Read from the share-partition's fetch offset (Kafka's DelayedShareFetch.readFromLog):
    (error, _ShareRead or None). Nothing is read when nothing is deliverable, or when the window
    is full and the fetch offset is past it (SharePartition.canAcquireRecords)."""
    topic, partition, _ = key
    error = _leader_error(broker, topic, partition)
    if error:
        return error, None
    plog = broker.partitions.get_log(topic, partition)
    read_committed = share.group_config(group_id, "share.isolation.level") == "read_committed"
    limit = plog.last_stable_offset if read_committed else plog.high_watermark
    sp = share.share_partition(group_id, topic, partition, plog.log_start_offset, limit, stored)
    sp.expire_locks(now)
    offset = sp.fetch_offset()
    if offset >= limit:
        return ErrorCode.NONE, None
    if offset >= sp.end_offset and sp.end_offset - sp.start_offset >= sp.max_in_flight:
        return ErrorCode.NONE, None  # group.share.partition.max.record.locks reached
    data = broker.replicas.read_for_consumer(topic, partition, offset, -1, max_bytes, min_one, read_committed)
    if data.error_code:
        return data.error_code, None
    records = data.records
    if not records:
        return ErrorCode.NONE, None
    aborted = [(a.producer_id, a.first_offset) for a in (data.aborted_transactions or [])]
    ranges = LazyBatchRanges(records, aborted)
    if ranges.first() is None:
        return ErrorCode.NONE, None
    return ErrorCode.NONE, _ShareRead(key, sp, records, ranges)


def _acquire_read(share, group_id: str, member_id: str, read: _ShareRead, max_records: int, strict: bool,
                  batch_size: int, now: float):
    """Acquire for the member what a read holds (Kafka's SharePartition.acquire): (records bytes
    or None, acquired runs). The batches sent are the read's, from the first to the last one
    holding an acquired offset."""
    if max_records <= 0:
        return None, []
    wanted = ((r.first, r.last, r.deliverable) for r in read.ranges)   # headers read as acquire asks
    acquired = read.sp.acquire(wanted, member_id, max_records, share.lock_duration_s(group_id), now,
                               strict=strict, batch_size=batch_size)
    if not acquired:
        return None, []
    first_off, last_off = acquired[0][0], acquired[-1][1]
    used = [r for r in read.ranges.seen if r.last >= first_off and r.first <= last_off]
    return read.ranges.payload(used[0].start, used[-1].end), acquired


def _partition_max_bytes(max_bytes: int, count: int) -> list[int]:
    """MaxBytes shared between a request's share-partitions (Kafka's PartitionMaxBytesStrategy
    UNIFORM: evenly, the remainder to one partition, Kafka's pick being random and kafkapy's the
    first; fewer bytes than partitions: one byte each to the first MaxBytes of them)."""
    if count <= 0:
        return []
    if max_bytes >= count:
        share, rest = divmod(max_bytes, count)
        return [share + rest] + [share] * (count - 1)
    return [1 if i < max_bytes else 0 for i in range(count)]


def _rotated(targets: list, epoch: int) -> list:
    """The session's partitions in the order a fetch serves them: rotated left by the share session
    epoch (Kafka's PartitionRotateStrategy ROUND_ROBIN), so MaxRecords and MaxBytes reach every
    partition in turn rather than always the first."""
    if len(targets) < 2 or epoch < 1:
        return targets
    at = epoch % len(targets)
    return targets[at:] + targets[:at]


@handles(ShareFetchRequest)
async def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    R = ShareFetchResponse
    broker = ctx.broker
    share = broker.share_groups
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return R(error_code=ErrorCode.INVALID_REQUEST)   # without a message, as Kafka 4.4
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        return R(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    if renew:
        # KIP-1222: a renewing request fetches nothing, and says so (KafkaApis.handleShareFetchRequest)
        wrong = [f"{label} must be set to 0, " for label, value in (
            ("maxBytes", request.max_bytes), ("minBytes", request.min_bytes),
            ("maxRecords", request.max_records), ("maxWaitMs", request.max_wait_ms)) if value != 0]
        if wrong:
            return R(error_code=ErrorCode.INVALID_REQUEST,
                     error_message="".join(wrong) + "if isRenewAck is true.")
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    epoch = request.share_session_epoch
    error, session = _session_for(broker, group_id, member_id, epoch, has_acks, True, ctx.connection)
    if error:
        return R(error_code=error)
    now = time.monotonic()
    lock_ms = int(share.lock_duration_s(group_id) * 1000)
    answers: dict[tuple[str, int], _PartitionAnswer] = {}
    order: list[_PartitionAnswer] = []

    def answer_for(topic, topic_id, partition):
        key = (topic, partition)
        a = answers.get(key)
        if a is None:
            a = answers[key] = _PartitionAnswer(topic, topic_id, partition)
            order.append(a)
        return a

    unknown_ids = []
    dirty: set = set()   # share-partitions whose state changed: written to __share_group_state
    for forgotten in request.forgotten_topics_data:
        name = _resolve(broker, forgotten.topic_id)
        for p in forgotten.partitions:
            session.partitions.discard((name, p, forgotten.topic_id))
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC,
                                    {n for n in (_resolve(broker, t.topic_id) for t in request.topics) if n})
    for t in request.topics:
        name = _resolve(broker, t.topic_id)
        for p in t.partitions:
            if name is None:
                unknown_ids.append((t.topic_id, p.partition_index))
                continue
            if name in denied:
                answer_for(name, t.topic_id, p.partition_index).error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if epoch != -1:
                session.partitions.add((name, p.partition_index, t.topic_id))
            if p.acknowledgement_batches:
                a = answer_for(name, t.topic_id, p.partition_index)
                a.ack_error, a.ack_message = _acknowledge(
                    broker, share, group_id, member_id, name, t.topic_id, p.partition_index,
                    p.acknowledgement_batches, renew, now, dirty)
    if epoch == -1:
        if share.close_session(session):
            for name, partition, _ in session.partitions:
                broker.purgatory.notify(("share", group_id, name, partition))
    elif not renew and request.max_records > 0:
        # fetch (KafkaApis.handleFetchFromShareFetchRequest, DelayedShareFetch): MaxBytes capped by
        # the broker's fetch.max.bytes and shared between the session's partitions; the request
        # completes once MinBytes (capped by that) are readable, else when MaxWait passes; then
        # at most MaxRecords are acquired over all partitions in turn (a share-partition whose
        # turn comes with none left acquires nothing). MaxRecords 0 is an acknowledgement-only
        # request, as librdkafka and the Java client send them.
        max_records = request.max_records
        strict = ctx.api_version >= 2 and request.share_acquire_mode == 1
        batch_size = request.batch_size
        fetch_max = max(min(request.max_bytes, int(broker.config.get("fetch.max.bytes"))), 0)
        min_bytes = min(request.min_bytes, fetch_max)
        deadline = now + max(request.max_wait_ms, 0) / 1000.0
        targets = sorted(share.live_session_partitions(session), key=lambda k: (k[0], k[1]))
        if request.share_session_epoch == 0:
            await _drop_replaced_states(broker, share, group_id, targets)
        targets = _rotated(targets, epoch)
        while True:
            now = time.monotonic()
            reads: list[_ShareRead] = []
            total = 0
            read_error = False
            for key, part_max in zip(targets, _partition_max_bytes(fetch_max, len(targets))):
                name, partition, topic_id = key
                existing = answers.get((name, partition))
                if existing is not None and existing.error:
                    continue
                stored = None
                if not _current_share_partition(broker, share, group_id, name, partition):
                    ok, stored = await _stored_state(broker, group_id, topic_id, partition)
                    if not ok or _current_share_partition(broker, share, group_id, name, partition):
                        continue  # the share coordinator is not reachable now: nothing this time
                # KIP-74: only the first non-empty read may go past its limits, by one batch
                limit = min(part_max, max(fetch_max - total, 0))
                error, read = _read_share_partition(broker, share, group_id, key, limit, total == 0, now,
                                                    stored)
                if error:
                    answer_for(name, topic_id, partition).error = error
                    read_error = True
                    continue
                if read is not None:
                    reads.append(read)
                    total += len(read.records)
            got = 0
            # at MaxWait the request completes with what there is (DelayedShareFetch.onComplete)
            if read_error or (reads and (total >= min_bytes or now >= deadline)):
                for read in reads:
                    name, partition, topic_id = read.key
                    records, acquired = _acquire_read(share, group_id, member_id, read, max_records - got,
                                                      strict, batch_size, now)
                    if not acquired:
                        continue
                    dirty.add((name, topic_id, partition))
                    a = answer_for(name, topic_id, partition)
                    a.records, a.acquired = records, acquired
                    got += sum(last - first + 1 for first, last, _ in acquired)
            if got or read_error or any(a.error for a in order) or min_bytes <= 0 or now >= deadline \
                    or not targets:
                break
            next_lock = min((sp.next_deadline() for (g, _, _), sp in share.partitions.items()
                             if g == group_id), default=float("inf"))
            keys = [(n, p) for n, p, _ in targets] + [("share", group_id, n, p) for n, p, _ in targets]
            await broker.purgatory.wait_any(keys, max(min(deadline, next_lock) - now, 0.001))
            if session is not share.sessions.get((group_id, member_id)):
                break  # replaced or closed while waiting
    error = await _persist(broker, share, group_id, dirty)
    if error:
        # not durable: acknowledged records could come back after a restart, so say so as Kafka
        # does when the share coordinator write fails; what this request acquired is given back
        for a in order:
            if a.acquired:
                sp = share.partitions.get((group_id, a.topic, a.partition))
                if sp is not None:
                    sp.undo_acquire(member_id, a.acquired)
        return R(error_code=error)
    return R(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms,
             responses=_fetch_topics(broker, order, unknown_ids), node_endpoints=_endpoints(broker, order, R))


def _leader_hint(broker, a, R):
    leader_id, leader_epoch = -1, -1
    if a.error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
        leader_id, leader_epoch = broker.replicas.leader_hint(a.topic, a.partition)
    return R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)


def _endpoints(broker, order, R) -> list:
    out = {}
    for a in order:
        if a.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            leader_id, _ = broker.replicas.leader_hint(a.topic, a.partition)
            endpoint = broker.replicas.node_endpoint(leader_id)
            if endpoint is not None:
                out[leader_id] = R.NodeEndpoint(node_id=leader_id, host=endpoint[0], port=endpoint[1])
    return list(out.values())


def _fetch_topics(broker, order, unknown_ids) -> list:
    R = ShareFetchResponse
    by_topic: dict = {}
    for a in order:
        topic = by_topic.get(a.topic_id)
        if topic is None:
            topic = by_topic[a.topic_id] = R.ShareFetchableTopicResponse(topic_id=a.topic_id, partitions=[])
        topic.partitions.append(R.PartitionData(
            partition_index=a.partition, error_code=a.error, acknowledge_error_code=a.ack_error,
            acknowledge_error_message=a.ack_message,
            # never null: librdkafka's share consumer reads Records as a length that may not be -1
            # (it drops the whole response then, acknowledgement results included); Kafka sends empty
            current_leader=_leader_hint(broker, a, R), records=a.records if a.records is not None else b"",
            acquired_records=[R.AcquiredRecords(first_offset=f, last_offset=l, delivery_count=c)
                              for f, l, c in a.acquired]))
    for topic_id, partition in unknown_ids:
        topic = by_topic.get(topic_id)
        if topic is None:
            topic = by_topic[topic_id] = R.ShareFetchableTopicResponse(topic_id=topic_id, partitions=[])
        topic.partitions.append(R.PartitionData(
            partition_index=partition, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
            acknowledge_error_code=ErrorCode.UNKNOWN_TOPIC_ID,
            current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=b""))
    return list(by_topic.values())


# -- ShareAcknowledge --------------------------------------------------------------------------
@handles(ShareAcknowledgeRequest)
async def handle_share_acknowledge(ctx: RequestContext,
                                   request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    R = ShareAcknowledgeResponse
    broker = ctx.broker
    share = broker.share_groups
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return R(error_code=ErrorCode.INVALID_REQUEST)   # without a message, as Kafka 4.4
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        return R(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    epoch = request.share_session_epoch
    error, session = _session_for(broker, group_id, member_id, epoch, True, False)
    if error:
        return R(error_code=error)
    now = time.monotonic()
    topics = []
    dirty: set = set()
    names = {n for n in (_resolve(broker, t.topic_id) for t in request.topics) if n}
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, names)
    for t in request.topics:
        name = _resolve(broker, t.topic_id)
        out = R.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=[])
        topics.append(out)
        for p in t.partitions:
            message = None
            if name is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID
            elif name in denied:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                code, message = _acknowledge(broker, share, group_id, member_id, name, t.topic_id,
                                             p.partition_index, p.acknowledgement_batches, renew, now, dirty)
            leader = R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
            if name is not None and code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                leader_id, leader_epoch = broker.replicas.leader_hint(name, p.partition_index)
                leader = R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
            out.partitions.append(R.PartitionData(partition_index=p.partition_index, error_code=code,
                                                  error_message=message, current_leader=leader))
    if epoch == -1 and share.close_session(session):
        for name, partition, _ in session.partitions:
            broker.purgatory.notify(("share", group_id, name, partition))
    error = await _persist(broker, share, group_id, dirty)
    if error:
        return R(error_code=error)
    return R(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=int(share.lock_duration_s(group_id) * 1000),
             responses=topics, node_endpoints=[])


# -- DescribeShareGroupOffsets -------------------------------------------------------------------
async def _read_state_anywhere(broker, group_id: str, topic_id, partition: int):
    ok, state = await _stored_state(broker, group_id, topic_id, partition)
    return state if ok else None


@handles(DescribeShareGroupOffsetsRequest)
async def handle_describe_share_group_offsets(
        ctx: RequestContext, request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    """Each partition's share-partition start offset (-1 when it was never fetched) and, v1+,
    its lag: the records from the start offset to the high watermark not yet acknowledged or
    archived (-1 when the partition is not led here, whose high watermark this broker does not
    know). From the state in __share_group_state, as Kafka's group coordinator reads it."""
    R = DescribeShareGroupOffsetsResponse
    broker = ctx.broker
    groups = []
    for wanted in request.groups:
        group_id = wanted.group_id
        out = R.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=[])
        groups.append(out)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            out.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = _coordinator_error(broker, group_id)
        if error:
            out.error_code = error
            continue
        share = broker.share_groups
        group = share.describe(group_id)
        if wanted.topics is None:
            # as Kafka 4.4: the share-partitions the group initialized (assigned to a member, or
            # given offsets by AlterShareGroupOffsets), members or not; a group never seen has
            # none (NONE, no topics). Also those whose state this broker knows of (in memory or in
            # the state it keeps: a restarted kafkapy forgets groups, not their state).
            wanted_parts: dict[str, set[int]] = {}
            for topic_id, parts in share.initialized_partitions(group_id).items():
                name = _resolve(broker, topic_id)
                if name is not None:
                    wanted_parts.setdefault(name, set()).update(parts)
            for g, topic, partition in share.partitions:
                if g == group_id:
                    wanted_parts.setdefault(topic, set()).add(partition)
            store = _state_store(broker) if share.state_store is not None else None
            if store is not None:
                for g, topic_id, partition in store.local_keys():
                    name = _resolve(broker, topic_id) if g == group_id else None
                    if name is not None:
                        wanted_parts.setdefault(name, set()).add(partition)
            topics = [(name, sorted(parts)) for name, parts in sorted(wanted_parts.items())
                      if broker.partitions.topic(name) is not None]
        else:
            topics = [(t.topic_name, list(t.partitions)) for t in wanted.topics]
        denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, [name for name, _ in topics])
        for name, partitions in topics:
            meta = broker.partitions.topic(name)
            topic_out = R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=meta.topic_id if meta is not None else _ZERO_UUID, partitions=[])
            out.topics.append(topic_out)
            for partition in partitions:
                result = R.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=partition, start_offset=-1, leader_epoch=-1, lag=-1)
                topic_out.partitions.append(result)
                if name in denied:
                    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                if meta is None or not 0 <= partition < meta.partition_count:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                sp = share.partitions.get((group_id, name, partition))
                hosted = broker.replicas.partition(name, partition)
                if sp is not None and hosted is not None and hosted.is_leader:
                    start, batches = sp.to_state()   # this broker leads it: the state in memory is current
                    leader_epoch = hosted.leader_epoch
                else:
                    state = await _read_state_anywhere(broker, group_id, meta.topic_id, partition)
                    if state is None or state.start_offset < 0:
                        continue
                    start, batches, leader_epoch = state.start_offset, state.batches, state.leader_epoch
                result.start_offset, result.leader_epoch = start, leader_epoch
                plog = broker.partitions.get_log(name, partition)
                if hosted is not None and hosted.is_leader and plog is not None:
                    done = sum(max(0, min(last, plog.high_watermark - 1) - max(first, start) + 1)
                               for first, last, st, _ in batches if st != 0)
                    result.lag = max(plog.high_watermark - start - done, 0)
    return R(throttle_time_ms=0, groups=groups)


# -- AlterShareGroupOffsets / DeleteShareGroupOffsets / DeleteGroups ---------------------------
def _empty_group_error(share, group_id: str, create: bool = False) -> tuple[int, str | None]:
    """Kafka's checks before the offsets of a share group change (ShareGroupCoordinator.
    empty_group_for_offsets): no members; AlterShareGroupOffsets (`create`) makes a group that
    does not exist yet."""
    return share.empty_group_for_offsets(group_id, create)


async def _replace_state(broker, share, group_id: str, topic: str, topic_id, partition: int, start: int) -> int:
    """Give a share-partition a fresh state starting at `start` (-1: no state, as if never
    fetched), with the next state epoch, as Kafka's InitializeShareGroupState: a share-partition
    leader still holding the old state is refused its next write (FENCED_STATE_EPOCH) and loads
    the new one. The copy in memory here is dropped, so the next fetch starts from what is stored."""
    sp = share.partitions.pop((group_id, topic, partition), None)
    store = _state_store(broker)
    if store is None:
        return ErrorCode.NONE
    ok, stored = await _stored_state(broker, group_id, topic_id, partition)
    if not ok:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    epoch = max(stored.state_epoch if stored is not None else 0, sp.state_epoch if sp is not None else 0) + 1
    return await _write_state(broker, store, group_id, topic_id, partition, ShareState(
        start, [], state_epoch=epoch, leader_epoch=broker.partitions.leader_epoch(topic, partition)))


@handles(AlterShareGroupOffsetsRequest)
async def handle_alter_share_group_offsets(
        ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    """Set the start offset of share-partitions of an empty share group (kafka-share-groups.sh
    --reset-offsets): everything before it is done with, nothing after it is in flight."""
    R = AlterShareGroupOffsetsResponse
    broker = ctx.broker
    group_id = request.group_id
    topics = [R.AlterShareGroupOffsetsResponseTopic(
        topic_name=t.topic_name, topic_id=_ZERO_UUID, partitions=[
            R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index) for p in t.partitions])
        for t in request.topics]

    def failed(code: int, message: str | None = None) -> AlterShareGroupOffsetsResponse:
        for t in topics:
            for p in t.partitions:
                p.error_code, p.error_message = code, message
        return R(throttle_time_ms=0, error_code=code, error_message=message, responses=topics)

    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = _coordinator_error(broker, group_id)
    if error:
        return failed(error)
    share = broker.share_groups
    error, message = _empty_group_error(share, group_id, create=True)
    if error:
        # Kafka 4.4 answers a group with members with the error alone, no per-partition results
        return R(throttle_time_ms=0, error_code=error, error_message=message, responses=[])
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, [t.topic_name for t in request.topics])
    for wanted, out in zip(request.topics, topics):
        meta = broker.partitions.topic(wanted.topic_name)
        if meta is not None:
            out.topic_id = meta.topic_id
        for p, result in zip(wanted.partitions, out.partitions):
            if wanted.topic_name in denied:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition_index < meta.partition_count:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "The start offset is negative."
            else:
                result.error_code = await _replace_state(broker, share, group_id, wanted.topic_name, meta.topic_id,
                                                         p.partition_index, p.start_offset)
                if result.error_code == ErrorCode.NONE:
                    share.mark_initialized(group_id, meta.topic_id, p.partition_index)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=topics)


def _has_share_state(broker, share, group_id: str, name: str, topic_id) -> bool:
    if topic_id in share.initialized_partitions(group_id):
        return True
    if any(g == group_id and topic == name for g, topic, _ in share.partitions):
        return True
    store = _state_store(broker) if share.state_store is not None else None
    return store is not None and any(g == group_id and t == topic_id for g, t, _ in store.local_keys())


@handles(DeleteShareGroupOffsetsRequest)
async def handle_delete_share_group_offsets(
        ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    """Forget the share state of whole topics for an empty share group: the next fetch starts
    where share.auto.offset.reset says, as for a share-partition never fetched."""
    R = DeleteShareGroupOffsetsResponse
    broker = ctx.broker
    group_id = request.group_id
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return R(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, responses=[])
    error = _coordinator_error(broker, group_id)
    if error:
        return R(throttle_time_ms=0, error_code=error, responses=[])
    share = broker.share_groups
    error, message = _empty_group_error(share, group_id)
    if error:
        return R(throttle_time_ms=0, error_code=error, error_message=message, responses=[])
    names = [t.topic_name for t in request.topics]
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, names)
    topics = []
    for name in names:
        meta = broker.partitions.topic(name)
        out = R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=name, topic_id=meta.topic_id if meta is not None else _ZERO_UUID)
        topics.append(out)
        if name in denied:
            out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        if meta is None:
            out.error_code, out.error_message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} not found."
            continue
        if not _has_share_state(broker, share, group_id, name, meta.topic_id):
            # Kafka 4.4: a topic the group has no share state for (never assigned, never altered,
            # or deleted already)
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            out.error_message = "There is no offset information to delete."
            continue
        for partition in range(meta.partition_count):
            error = await _replace_state(broker, share, group_id, name, meta.topic_id, partition, -1)
            if error:
                out.error_code = error
                break
        else:
            share.forget_initialized(group_id, meta.topic_id)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=topics)


async def delete_share_groups(broker, group_ids: list[str]) -> dict[str, int]:
    """DeleteGroups for share groups coordinated here: an empty one goes with its share state
    (the share-partitions this broker knows of: in memory or in the __share_group_state
    partitions it leads); one with members is NON_EMPTY_GROUP. Groups that are not share
    groups are left out of the answer."""
    share = broker._share_groups
    results: dict[str, int] = {}
    if share is None:
        return results
    for group_id in group_ids:
        if share.describe(group_id) is None or _coordinator_error(broker, group_id):
            continue
        error, _ = _empty_group_error(share, group_id)
        if error:
            results[group_id] = error
            continue
        known = {(topic, partition) for g, topic, partition in share.partitions if g == group_id}
        store = _state_store(broker)
        if store is not None:
            known |= {(_resolve(broker, topic_id), partition)
                      for g, topic_id, partition in store.local_keys() if g == group_id}
        for topic, partition in sorted(k for k in known if k[0] is not None):
            meta = broker.partitions.topic(topic)
            if meta is not None:
                error = await _replace_state(broker, share, group_id, topic, meta.topic_id, partition, -1) or error
        if error == ErrorCode.NONE:
            share.delete_group(group_id)
        results[group_id] = error
    return results
