"""Committed offsets: OffsetCommit, OffsetFetch (one group, or several from v8; topics by id from v10),
OffsetDelete.

Partitions that don't exist are refused here (UNKNOWN_TOPIC_OR_PARTITION, as Kafka's request
layer does); the group coordinator decides everything else.
"""
from __future__ import annotations

import logging
import time

from ...metadata.acls import AclOperation, ResourceType
from ...groupcoord import OffsetAndMetadata
from ...protocol.errors import ErrorCode
from ...protocol import primitives
from ...protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from ..coordinator_writes import coordinator_write_durable
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)

INVALID_OFFSET = -1
NO_LEADER_EPOCH = -1
NO_METADATA = ""


def partition_exists(broker, topic: str, partition: int) -> bool:
    meta = broker.partitions.topic(topic)
    return meta is not None and 0 <= partition < len(meta.partitions)


def topic_names_by_id(broker, topics) -> list[str]:
    """v10 requests name topics by id: each one's name, "" for an id no topic has (UNKNOWN_TOPIC_ID)."""
    names = []
    for topic in topics:
        meta = broker.partitions.topic_by_id(topic.topic_id)
        names.append(meta.name if meta is not None else (broker.replicas.topic_name(topic.topic_id) or ""))
    return names


def topic_id_of(broker, name: str):
    meta = broker.partitions.topic(name)
    return meta.topic_id if meta is not None else primitives.ZERO_UUID


@handles(OffsetCommitRequest)
async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    """As KafkaApis: the request layer's errors first (per topic, in request order), then the group
    coordinator's results merged in (a topic already answered gets the partitions appended); v10 names
    topics by id, an unknown id answers UNKNOWN_TOPIC_ID for each of its partitions."""
    broker = ctx.services
    version = ctx.api_version
    use_ids = version >= 10
    now = int(time.time() * 1000)
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    expire = now + retention if retention != -1 else -1
    names = topic_names_by_id(broker, request.topics) if use_ids else [t.name for t in request.topics]
    answered: dict = {}  # topic key (id from v10, else name) -> response topic

    def answer(topic, name: str, index: int, code: int) -> None:
        key = topic.topic_id if use_ids else name
        entry = answered.get(key)
        if entry is None:
            entry = answered[key] = OffsetCommitResponse.OffsetCommitResponseTopic(
                name=name, topic_id=topic.topic_id, partitions=[])
        entry.partitions.append(OffsetCommitResponse.OffsetCommitResponsePartition(
            partition_index=index, error_code=code))

    # KafkaApis: READ on the group (every partition fails without it), READ on each topic
    group_denied = not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id)
    denied = frozenset() if group_denied else \
        ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, (n for n in names if n))
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    valid = []  # (request topic, name, partition index) the coordinator decides, in request order
    for topic, name in zip(request.topics, names):
        for p in topic.partitions:
            if group_denied:
                code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif use_ids and not name:
                code = ErrorCode.UNKNOWN_TOPIC_ID
            elif name in denied:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not partition_exists(broker, name, p.partition_index):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now
                offsets[(name, p.partition_index)] = OffsetAndMetadata(
                    offset=p.committed_offset, leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                    metadata=p.committed_metadata if p.committed_metadata is not None else NO_METADATA,
                    commit_timestamp=commit_ts, expire_timestamp=expire)
                valid.append((topic, name, p.partition_index))
                continue
            answer(topic, name, p.partition_index, code)
    if offsets:
        coordinator = broker.group_coordinator
        results = coordinator.commit_offsets(
            request.group_id, request.member_id, request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch, offsets, api_version=version)
        if any(code == ErrorCode.NONE for code in results.values()):
            error = await coordinator_write_durable(broker, coordinator.partition_for(request.group_id))
            if error:
                results.update((tp, error) for tp, code in results.items() if code == ErrorCode.NONE)
        for topic, name, index in valid:
            answer(topic, name, index, results[(name, index)])
    return OffsetCommitResponse(throttle_time_ms=0, topics=list(answered.values()))


def _error_rows(partitions, error: int) -> list:
    return [(p, INVALID_OFFSET, NO_LEADER_EPOCH, NO_METADATA, error) for p in partitions]


def _committed_row(found: dict, topic: str, partition: int) -> tuple:
    committed, partition_error = found.get((topic, partition), (None, ErrorCode.NONE))
    if committed is None:
        return (partition, INVALID_OFFSET, NO_LEADER_EPOCH, NO_METADATA, partition_error)
    return (partition, committed.offset, committed.leader_epoch, committed.metadata, partition_error)


def _fetch_group(ctx: RequestContext, group_id: str, topics, require_stable: bool,
                 member_id: str | None = None, member_epoch: int = -1, use_ids: bool = False):
    """(group error, [(topic id, topic name, [(partition, offset, epoch, metadata, error)])]) for one group.

    As KafkaApis: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; named topics the principal may
    not DESCRIBE (and, from v10, ids no topic has: UNKNOWN_TOPIC_ID) are answered after the fetched ones;
    an all-topics answer leaves out the topics it may not DESCRIBE and, from v10, those without an id."""
    broker = ctx.services
    coordinator = broker.group_coordinator
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    if topics is None:
        error, found = coordinator.fetch_offsets(group_id, None, require_stable, member_id, member_epoch)
        if error != ErrorCode.NONE:
            return error, []
        listed = sorted(found)
        denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in listed))
        by_topic: dict[str, list] = {}
        for topic, partition in listed:
            if not (denied and topic in denied):
                by_topic.setdefault(topic, []).append(_committed_row(found, topic, partition))
        answered = [(topic_id_of(broker, name), name, rows) for name, rows in by_topic.items()]
        return ErrorCode.NONE, [t for t in answered if t[0] != primitives.ZERO_UUID] if use_ids else answered
    names = topic_names_by_id(broker, topics) if use_ids else [t.name for t in topics]
    denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (n for n in names if n))
    wanted, refused = [], []
    for topic, name in zip(topics, names):
        topic_id = topic.topic_id if use_ids else primitives.ZERO_UUID
        if use_ids and not name:
            refused.append((topic_id, name, _error_rows(topic.partition_indexes, ErrorCode.UNKNOWN_TOPIC_ID)))
        elif denied and name in denied:
            refused.append((topic_id, name, _error_rows(topic.partition_indexes,
                                                        ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
        else:
            wanted.append((topic_id, name, topic.partition_indexes))
    error, found = coordinator.fetch_offsets(
        group_id, [(name, p) for _, name, parts in wanted for p in parts], require_stable, member_id, member_epoch)
    if error != ErrorCode.NONE:
        return error, []
    return ErrorCode.NONE, [(topic_id, name, [_committed_row(found, name, p) for p in parts])
                            for topic_id, name, parts in wanted] + refused


@handles(OffsetFetchRequest)
async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    version = ctx.api_version
    require_stable = version >= 7 and request.require_stable
    if version >= 8:
        groups = []
        for group in request.groups:
            # v9: a consumer-protocol member names itself and its epoch (KIP-848)
            member_id, member_epoch = (group.member_id, group.member_epoch) if version >= 9 else (None, -1)
            error, topics = _fetch_group(ctx, group.group_id, group.topics, require_stable, member_id, member_epoch,
                                         use_ids=version >= 10)
            groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=group.group_id, error_code=error, topics=[
                    OffsetFetchResponse.OffsetFetchResponseTopics(name=name, topic_id=topic_id, partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartitions(
                            partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                            error_code=err) for p, o, e, m, err in rows])
                    for topic_id, name, rows in topics]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topics_wanted = request.topics if version >= 2 else (request.topics or [])
    error, topics = _fetch_group(ctx, request.group_id, topics_wanted, require_stable)
    if error != ErrorCode.NONE and version < 2:
        # no top-level error field before v2: the group error goes on every partition
        topics = [(primitives.ZERO_UUID, t.name, _error_rows(t.partition_indexes, error)) for t in topics_wanted]
    return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[
        OffsetFetchResponse.OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponse.OffsetFetchResponsePartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=err)
            for p, o, e, m, err in rows])
        for _, name, rows in topics])


@handles(OffsetDeleteRequest)
async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    broker = ctx.services
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
