"""ListOffsets: earliest, latest, by timestamp and max-timestamp offsets of partitions."""
from __future__ import annotations

from ...controller.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from ..dispatch import RequestContext, handles

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5

PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def _lookup(broker, topic: str, p, version: int, isolation_level: int, replica_id: int = -1) -> PartitionResponse:
    index = p.partition_index
    replicas = broker.replicas
    if replicas is not None:
        # cluster mode: only the leader answers, consumers and followers alike
        code = replicas.leader_error(topic, index, p.current_leader_epoch)
        if code:
            return PartitionResponse(partition_index=index, error_code=code)
        replicas.refresh_high_watermark(topic, index)
    plog = broker.partitions.get_log(topic, index)
    if plog is None:
        return PartitionResponse(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    code = broker.partitions.leader_epoch_error(topic, index, p.current_leader_epoch)
    if code:
        return PartitionResponse(partition_index=index, error_code=code)
    epoch = broker.partitions.leader_epoch(topic, index)
    ts = p.timestamp
    if ts == LATEST:
        if replicas is not None and replica_id >= 0:
            offset = plog.log_end_offset  # a follower resolving an out-of-range fetch wants our log end
        else:
            # read_committed consumers start at the last stable offset
            offset = plog.last_stable_offset if isolation_level == 1 else plog.high_watermark
        found_ts = -1
    elif ts in (EARLIEST, EARLIEST_LOCAL):
        offset, found_ts = plog.log_start_offset, -1
    elif ts == LATEST_TIERED:
        offset, found_ts = -1, -1
    elif ts == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
        offset, found_ts = found if found is not None else (-1, -1)
    elif ts < 0:
        return PartitionResponse(partition_index=index, error_code=ErrorCode.INVALID_REQUEST)
    else:
        found = plog.offset_for_timestamp(ts)
        offset, found_ts = found if found is not None else (-1, -1)
    if replicas is not None and replica_id < 0 and ts not in (LATEST, EARLIEST, EARLIEST_LOCAL, LATEST_TIERED):
        # a consumer is never pointed at an offset it cannot fetch yet
        visible = plog.last_stable_offset if isolation_level == 1 else plog.high_watermark
        if offset >= visible:
            offset, found_ts = -1, -1
    if version == 0:
        offsets = [offset] if offset >= 0 else []
        return PartitionResponse(partition_index=index, error_code=0, old_style_offsets=offsets)
    return PartitionResponse(partition_index=index, error_code=0, timestamp=found_ts, offset=offset,
                             leader_epoch=epoch if offset >= 0 else -1)


@handles(ListOffsetsRequest)
async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    version = ctx.api_version
    isolation = request.isolation_level if version >= 2 else 0
    topics = []
    # DESCRIBE on each topic (KafkaApis.handleListOffsetRequest)
    denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        if denied and topic.name in denied:
            partitions = [PartitionResponse(partition_index=p.partition_index,
                                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions]
        else:
            partitions = [_lookup(broker, topic.name, p, version, isolation, request.replica_id)
                          for p in topic.partitions]
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
