"""DescribeTopicPartitions (KIP-966): topic partition details with a cursor for paging."""
from __future__ import annotations

import uuid

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from ..dispatch import RequestContext, handles

Response = DescribeTopicPartitionsResponse
_NULL_UUID = uuid.UUID(int=0)


@handles(DescribeTopicPartitionsRequest)
async def handle_describe_topic_partitions(
        ctx: RequestContext, request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    partitions = ctx.partitions
    # DESCRIBE on each topic: a named topic answers TOPIC_AUTHORIZATION_FAILED, a listing leaves it out
    denied: frozenset[str] = frozenset()
    if request.topics:
        names = sorted({t.name for t in request.topics})
        denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    else:
        names = sorted(meta.name for meta in partitions.topics())
        if ctx.authorizing:
            allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_if_denied=False)
            names = [n for n in names if n in allowed]
    cursor = request.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(request.response_partition_limit, 1)
    topics = []
    next_cursor = None
    for name in names:
        if denied and name in denied:
            topics.append(Response.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=_NULL_UUID))
            continue
        meta = partitions.topic(name)
        if meta is None:
            # Kafka fills the operations of every topic it was allowed to describe, an unknown one too
            topics.append(Response.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=_NULL_UUID,
                topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts = []
        for index in range(start, len(meta.partitions)):
            if budget == 0:
                next_cursor = Response.Cursor(topic_name=name, partition_index=index)
                break
            p = meta.partitions[index]
            parts.append(Response.DescribeTopicPartitionsResponsePartition(
                error_code=0, partition_index=index, leader_id=p.leader, leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas), isr_nodes=list(p.isr), eligible_leader_replicas=[],
                last_known_elr=[], offline_replicas=[]))
            budget -= 1
        topics.append(Response.DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=meta.topic_id, is_internal=meta.internal, partitions=parts,
            topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name)))
        if next_cursor is not None:
            break
    return Response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
