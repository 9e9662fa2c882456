"""Committed offsets: OffsetCommit, OffsetFetch (one group, or several from v8), OffsetDelete.

Partitions that don't exist are refused here (UNKNOWN_TOPIC_OR_PARTITION, as Kafka's request
layer does); the group coordinator decides everything else.
"""
from __future__ import annotations

import logging
import time

from ...metadata.acls import AclOperation, ResourceType
from ...groupcoord import OFFSETS_TOPIC, OffsetAndMetadata
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from ..durability import wait_durable
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)

INVALID_OFFSET = -1
NO_LEADER_EPOCH = -1
NO_METADATA = ""


async def coordinator_write_durable(broker, partition: int) -> int:
    """Wait until what the group coordinator just appended to __consumer_offsets-`partition` (an
    offset commit, a transactional offset commit, group metadata) may be acknowledged: on disk in
    fsync-on-ack mode (as produce), and in cluster mode on the whole ISR (Kafka appends with
    offsets.commit.required.acks=-1). Returns the error Kafka's coordinator answers when replication
    fails, else NONE."""
    plog = broker.partitions.get_log(OFFSETS_TOPIC, partition)
    if plog is not None and plog.config.fsync_on_ack:
        try:
            await wait_durable(plog.sync_until(plog.log_end_offset - 1))
        except Exception as exc:  # noqa: BLE001 - the fsync failed: its log dir is full or offline now
            log.warning("__consumer_offsets-%d: the write could not be made durable: %s", partition, exc)
            return ErrorCode.NOT_COORDINATOR  # Kafka's coordinator maps KAFKA_STORAGE_ERROR to it
    return await replicated(broker, OFFSETS_TOPIC, partition, broker.config.get("offsets.commit.timeout.ms"))


async def replicated(broker, topic: str, partition: int, timeout_ms: int) -> int:
    """Wait until the partition's high watermark covers its log end (a coordinator's write with
    acks=all; at once for an ISR of one). The error is mapped as Kafka's coordinators map a failed append:
    COORDINATOR_NOT_AVAILABLE for missing replicas or a timeout, NOT_COORDINATOR for lost leadership."""
    plog = broker.partitions.get_log(topic, partition)
    if plog is None:
        return ErrorCode.NOT_COORDINATOR
    error = await broker.replicas.wait_for_replication(topic, partition, plog.log_end_offset, timeout_ms / 1000)
    if error in (ErrorCode.NONE,):
        return ErrorCode.NONE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def partition_exists(broker, topic: str, partition: int) -> bool:
    meta = broker.partitions.topic(topic)
    return meta is not None and 0 <= partition < len(meta.partitions)


@handles(OffsetCommitRequest)
async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    broker = ctx.broker
    version = ctx.api_version
    now = int(time.time() * 1000)
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    expire = now + retention if retention != -1 else -1
    errors: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    # KafkaApis: READ on the group (every partition fails without it), READ on each topic
    group_denied = not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id)
    denied = frozenset() if group_denied else \
        ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if group_denied:
                errors[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            if denied and topic.name in denied:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not partition_exists(broker, *tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset, leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                metadata=p.committed_metadata if p.committed_metadata is not None else NO_METADATA,
                commit_timestamp=commit_ts, expire_timestamp=expire)
    if offsets:
        coordinator = broker.group_coordinator
        results = coordinator.commit_offsets(
            request.group_id, request.member_id, request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch, offsets, api_version=version)
        errors.update(results)
        if any(code == ErrorCode.NONE for code in results.values()):
            error = await coordinator_write_durable(broker, coordinator.partition_for(request.group_id))
            if error:
                errors.update((tp, error) for tp, code in results.items() if code == ErrorCode.NONE)
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        OffsetCommitResponse.OffsetCommitResponseTopic(name=topic.name, partitions=[
            OffsetCommitResponse.OffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])


def _fetch_group(ctx: RequestContext, group_id: str, topics, require_stable: bool,
                 member_id: str | None = None, member_epoch: int = -1):
    """(group error, [(topic, [(partition, offset, epoch, metadata, error)])]) for one group.

    As KafkaApis: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; topics the principal may not
    DESCRIBE answer TOPIC_AUTHORIZATION_FAILED when named and are left out of an all-topics answer."""
    broker = ctx.broker
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    error, found = broker.group_coordinator.fetch_offsets(group_id, wanted, require_stable, member_id, member_epoch)
    by_topic: dict[str, list] = {}
    if error == ErrorCode.NONE:
        listed = wanted if wanted is not None else sorted(found)
        denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in listed))
        for (topic, partition) in listed:
            if denied and topic in denied:
                if wanted is not None:
                    by_topic.setdefault(topic, []).append((partition, INVALID_OFFSET, NO_LEADER_EPOCH, NO_METADATA,
                                                           ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            committed, partition_error = found.get((topic, partition), (None, ErrorCode.NONE))
            if committed is None:
                row = (partition, INVALID_OFFSET, NO_LEADER_EPOCH, NO_METADATA, partition_error)
            else:
                row = (partition, committed.offset, committed.leader_epoch, committed.metadata, partition_error)
            by_topic.setdefault(topic, []).append(row)
    return error, list(by_topic.items())


@handles(OffsetFetchRequest)
async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    version = ctx.api_version
    require_stable = version >= 7 and request.require_stable
    if version >= 8:
        groups = []
        for group in request.groups:
            # v9: a consumer-protocol member names itself and its epoch (KIP-848)
            member_id, member_epoch = (group.member_id, group.member_epoch) if version >= 9 else (None, -1)
            error, topics = _fetch_group(ctx, group.group_id, group.topics, require_stable, member_id, member_epoch)
            groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=group.group_id, error_code=error, topics=[
                    OffsetFetchResponse.OffsetFetchResponseTopics(name=name, partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartitions(
                            partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                            error_code=err) for p, o, e, m, err in rows])
                    for name, rows in topics]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topics_wanted = request.topics if version >= 2 else (request.topics or [])
    error, topics = _fetch_group(ctx, request.group_id, topics_wanted, require_stable)
    if error != ErrorCode.NONE and version < 2:
        # no top-level error field before v2: the group error goes on every partition
        topics = [(t.name, [(p, INVALID_OFFSET, NO_LEADER_EPOCH, NO_METADATA, error)
                            for p in t.partition_indexes]) for t in topics_wanted]
    return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[
        OffsetFetchResponse.OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponse.OffsetFetchResponsePartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=err)
            for p, o, e, m, err in rows])
        for name, rows in topics])


@handles(OffsetDeleteRequest)
async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    broker = ctx.broker
    errors: dict[tuple[str, int], int] = {}
    eligible = []
    # KafkaApis: DELETE on the group, READ on each topic
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if denied and topic.name in denied:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif partition_exists(broker, *tp):
                eligible.append(tp)
            else:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    group_error, deleted = broker.group_coordinator.delete_offsets(request.group_id, eligible)
    if group_error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=group_error, throttle_time_ms=0, topics=[])
    errors.update(deleted)
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        OffsetDeleteResponse.OffsetDeleteResponseTopic(name=topic.name, partitions=[
            OffsetDeleteResponse.OffsetDeleteResponsePartition(
                partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])
