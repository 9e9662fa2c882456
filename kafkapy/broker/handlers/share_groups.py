"""Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge.

The handlers translate between the wire and the share coordination (broker/share_coordination.py,
Broker.share_coordination: kafkapy.groupcoord.share wired to this broker):
membership requests go to the group's coordinator (the leader of its __consumer_offsets
partition, as for every group); fetches and acknowledgements go to each partition's leader,
which is the share-partition leader and reads records with broker.replicas.read_for_consumer,
the path every consumer fetch takes on one node and in a cluster. Record batches are sent as
read; only their headers are looked at, to know which offsets were acquired. The share state
APIs (Read/WriteShareGroupState, Describe/Alter/DeleteShareGroupOffsets) are in share_state.py.
"""
from __future__ import annotations

import logging
import time

from ...groupcoord.group import GroupState
from ...groupcoord.share.batches import LazyBatchRanges
from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from ..dispatch import RequestContext, handles
from ..share_coordination import coordinator_error

log = logging.getLogger(__name__)


def _share_version_finalized(broker) -> bool:
    """share.version >= 1 (the KIP-584 feature of share groups; metadata/features.py)."""
    from ...metadata.features import finalized_level

    return finalized_level(broker.metadata, "share.version") >= 1


# -- ShareGroupHeartbeat ---------------------------------------------------------------------
@handles(ShareGroupHeartbeatRequest)
async def handle_share_group_heartbeat(ctx: RequestContext,
                                       request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    R = ShareGroupHeartbeatResponse
    broker = ctx.services
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
    error = coordinator_error(broker.group_coordinator.manager, request.group_id)
    if error:
        return R(error_code=error)
    coordination = broker.share_coordination
    result = coordination.groups.heartbeat(
        request.group_id, request.member_id, request.member_epoch, request.rack_id, names,
        ctx.client_id or "", "/" + ctx.client_host, time.monotonic())
    if result.error:
        return R(error_code=result.error, error_message=result.message)
    coordination.wake_released()
    assignment = None
    if result.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=topic_id, partitions=sorted(parts))
            for topic_id, parts in sorted(result.assignment.items(), key=lambda item: str(item[0]))])
    return R(error_code=ErrorCode.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
             heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


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
    broker = ctx.services
    groups = []
    for group_id in request.group_ids:
        described = R.DescribedGroup(group_id=group_id, error_code=ErrorCode.NONE, members=[])
        groups.append(described)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = coordinator_error(broker.group_coordinator.manager, group_id)
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


class _PartitionAnswer:
    __slots__ = ("topic", "topic_id", "partition", "error", "ack_error", "ack_message", "records", "acquired")

    def __init__(self, topic, topic_id, partition) -> None:
        self.topic, self.topic_id, self.partition = topic, topic_id, partition
        self.error = ErrorCode.NONE
        self.ack_error = ErrorCode.NONE
        self.ack_message = None
        self.records = None
        self.acquired: list = []


# -- ShareFetch --------------------------------------------------------------------------------
class _ShareRead:
    """What one share-partition's log read returned, before anything is acquired from it."""

    __slots__ = ("key", "sp", "records", "ranges")

    def __init__(self, key, sp, records, ranges) -> None:
        self.key, self.sp, self.records, self.ranges = key, sp, records, ranges


def _read_share_partition(coordination, group_id: str, key, max_bytes: int, min_one: bool,
                          now: float, stored=None):
    """Read from the share-partition's fetch offset (Kafka's DelayedShareFetch.readFromLog):
    (error, _ShareRead or None). Nothing is read when nothing is deliverable, or when the window
    is full and the fetch offset is past it (SharePartition.canAcquireRecords)."""
    topic, partition, _ = key
    error = coordination.leader_error(topic, partition)
    if error:
        return error, None
    share = coordination.groups
    plog = coordination.partitions.get_log(topic, partition)
    read_committed = share.group_config(group_id, "share.isolation.level") == "read_committed"
    limit = plog.last_stable_offset if read_committed else plog.high_watermark
    sp = share.share_partition(group_id, topic, partition, plog.log_start_offset, limit, stored)
    sp.expire_locks(now)
    offset = sp.fetch_offset()
    if offset >= limit:
        return ErrorCode.NONE, None
    if offset >= sp.end_offset and sp.end_offset - sp.start_offset >= sp.max_in_flight:
        return ErrorCode.NONE, None  # group.share.partition.max.record.locks reached
    data = coordination.replicas.read_for_consumer(topic, partition, offset, -1, max_bytes, min_one, read_committed)
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
    broker = ctx.services
    coordination = broker.share_coordination
    share = coordination.groups
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
    error, session = coordination.session_for(group_id, member_id, epoch, has_acks, True, ctx.connection)
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
        name = coordination.topic_name(forgotten.topic_id)
        for p in forgotten.partitions:
            session.partitions.discard((name, p, forgotten.topic_id))
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC,
                                    {n for n in (coordination.topic_name(t.topic_id) for t in request.topics) if n})
    for t in request.topics:
        name = coordination.topic_name(t.topic_id)
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
                a.ack_error, a.ack_message = coordination.acknowledge(
                    group_id, member_id, name, t.topic_id, p.partition_index,
                    p.acknowledgement_batches, renew, now, dirty)
    if epoch == -1:
        coordination.close_session(group_id, session)
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
            await coordination.drop_replaced_states(group_id, targets)
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
                if not coordination.current_share_partition(group_id, name, partition):
                    ok, stored = await coordination.stored_state(group_id, topic_id, partition)
                    if not ok or coordination.current_share_partition(group_id, name, partition):
                        continue  # the share coordinator is not reachable now: nothing this time
                # KIP-74: only the first non-empty read may go past its limits, by one batch
                limit = min(part_max, max(fetch_max - total, 0))
                error, read = _read_share_partition(coordination, group_id, key, limit, total == 0, now,
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
    error = await coordination.persist(group_id, dirty)
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
    broker = ctx.services
    coordination = broker.share_coordination
    share = coordination.groups
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return R(error_code=ErrorCode.INVALID_REQUEST)   # without a message, as Kafka 4.4
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        return R(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    epoch = request.share_session_epoch
    error, session = coordination.session_for(group_id, member_id, epoch, True, False)
    if error:
        return R(error_code=error)
    now = time.monotonic()
    topics = []
    dirty: set = set()
    names = {n for n in (coordination.topic_name(t.topic_id) for t in request.topics) if n}
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, names)
    for t in request.topics:
        name = coordination.topic_name(t.topic_id)
        out = R.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=[])
        topics.append(out)
        for p in t.partitions:
            message = None
            if name is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID
            elif name in denied:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                code, message = coordination.acknowledge(group_id, member_id, name, t.topic_id,
                                             p.partition_index, p.acknowledgement_batches, renew, now, dirty)
            leader = R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
            if name is not None and code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                leader_id, leader_epoch = broker.replicas.leader_hint(name, p.partition_index)
                leader = R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
            out.partitions.append(R.PartitionData(partition_index=p.partition_index, error_code=code,
                                                  error_message=message, current_leader=leader))
    if epoch == -1:
        coordination.close_session(group_id, session)
    error = await coordination.persist(group_id, dirty)
    if error:
        return R(error_code=error)
    return R(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=int(share.lock_duration_s(group_id) * 1000),
             responses=topics, node_endpoints=[])
