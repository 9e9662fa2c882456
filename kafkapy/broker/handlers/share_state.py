"""Share group state (KIP-932): the share coordinator's ReadShareGroupState and
WriteShareGroupState (another broker's share-partition leader asks), and the admin's
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets. The state is kept
by the share coordination (broker/share_coordination.py) in __share_group_state.
"""
from __future__ import annotations

import uuid

from ...groupcoord.share.state_records import ShareState
from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from ..dispatch import RequestContext, handles
from ..share_coordination import coordinator_error

_ZERO_UUID = uuid.UUID(int=0)


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
    store = ctx.services.share_coordination.state_store()
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
    coordination = ctx.services.share_coordination
    store = coordination.state_store()
    results = []
    for t in request.topics:
        out = R.WriteStateResult(topic_id=t.topic_id, partitions=[])
        results.append(out)
        for p in t.partitions:
            error = _coordinator_check(ctx, store, request.group_id, t.topic_id, p.partition)
            if not error:
                error = await coordination.write_state(store, request.group_id, t.topic_id, p.partition, ShareState(
                    p.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                     for b in p.state_batches],
                    state_epoch=p.state_epoch, leader_epoch=p.leader_epoch))
            out.partitions.append(R.PartitionResult(partition=p.partition, error_code=error))
    return R(results=results)


# -- DescribeShareGroupOffsets -------------------------------------------------------------------
async def _read_state_anywhere(coordination, group_id: str, topic_id, partition: int):
    ok, state = await coordination.stored_state(group_id, topic_id, partition)
    return state if ok else None


@handles(DescribeShareGroupOffsetsRequest)
async def handle_describe_share_group_offsets(
        ctx: RequestContext, request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    """Each partition's share-partition start offset (-1 when it was never fetched) and, v1+,
    its lag: the records from the start offset to the high watermark not yet acknowledged or
    archived (-1 when the partition is not led here, whose high watermark this broker does not
    know). From the state in __share_group_state, as Kafka's group coordinator reads it."""
    R = DescribeShareGroupOffsetsResponse
    broker = ctx.services
    groups = []
    for wanted in request.groups:
        group_id = wanted.group_id
        out = R.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=[])
        groups.append(out)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            out.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = coordinator_error(broker.group_coordinator.manager, group_id)
        if error:
            out.error_code = error
            continue
        coordination = broker.share_coordination
        share = coordination.groups
        if wanted.topics is None:
            # as Kafka 4.4: the share-partitions the group initialized (assigned to a member, or
            # given offsets by AlterShareGroupOffsets), members or not; a group never seen has
            # none (NONE, no topics). Also those whose state this broker knows of (in memory or in
            # the state it keeps: a restarted kafkapy forgets groups, not their state).
            wanted_parts: dict[str, set[int]] = {}
            for topic_id, parts in share.initialized_partitions(group_id).items():
                name = coordination.topic_name(topic_id)
                if name is not None:
                    wanted_parts.setdefault(name, set()).update(parts)
            for g, topic, partition in share.partitions:
                if g == group_id:
                    wanted_parts.setdefault(topic, set()).add(partition)
            store = coordination.state_store() if share.state_store is not None else None
            if store is not None:
                for g, topic_id, partition in store.local_keys():
                    name = coordination.topic_name(topic_id) if g == group_id else None
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
                    state = await _read_state_anywhere(coordination, group_id, meta.topic_id, partition)
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
@handles(AlterShareGroupOffsetsRequest)
async def handle_alter_share_group_offsets(
        ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    """Set the start offset of share-partitions of an empty share group (kafka-share-groups.sh
    --reset-offsets): everything before it is done with, nothing after it is in flight."""
    R = AlterShareGroupOffsetsResponse
    broker = ctx.services
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
    error = coordinator_error(broker.group_coordinator.manager, group_id)
    if error:
        return failed(error)
    coordination = broker.share_coordination
    share = coordination.groups
    error, message = share.empty_group_for_offsets(group_id, True)
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
                result.error_code = await coordination.replace_state(group_id, wanted.topic_name, meta.topic_id,
                                                         p.partition_index, p.start_offset)
                if result.error_code == ErrorCode.NONE:
                    share.mark_initialized(group_id, meta.topic_id, p.partition_index)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=topics)


@handles(DeleteShareGroupOffsetsRequest)
async def handle_delete_share_group_offsets(
        ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    """Forget the share state of whole topics for an empty share group: the next fetch starts
    where share.auto.offset.reset says, as for a share-partition never fetched."""
    R = DeleteShareGroupOffsetsResponse
    broker = ctx.services
    group_id = request.group_id
    if not ctx.authorized(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return R(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, responses=[])
    error = coordinator_error(broker.group_coordinator.manager, group_id)
    if error:
        return R(throttle_time_ms=0, error_code=error, responses=[])
    coordination = broker.share_coordination
    share = coordination.groups
    error, message = share.empty_group_for_offsets(group_id, False)
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
        if not coordination.has_share_state(group_id, name, meta.topic_id):
            # Kafka 4.4: a topic the group has no share state for (never assigned, never altered,
            # or deleted already)
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            out.error_message = "There is no offset information to delete."
            continue
        for partition in range(meta.partition_count):
            error = await coordination.replace_state(group_id, name, meta.topic_id, partition, -1)
            if error:
                out.error_code = error
                break
        else:
            share.forget_initialized(group_id, meta.topic_id)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=topics)
