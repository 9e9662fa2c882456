"""ListOffsets: earliest, latest, by timestamp and max-timestamp offsets of partitions.

v0 is Kafka's legacy form: up to max_num_offsets offsets per partition, newest first, taken
from the segments' base offsets and the log end offset (KafkaApis.handleListOffsetRequestV0).
"""
from __future__ import annotations

import os
import time

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from ..dispatch import RequestContext, handles

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
# Kafka 4.2 (KIP-1023, ListOffsets v11): the first offset not yet in remote storage; -1 without
# tiered storage, as UnifiedLog answers when remote storage is off. Older versions get
# UNSUPPORTED_VERSION for it (ReplicaManager's timestampMinSupportedVersion).
EARLIEST_PENDING_UPLOAD = -6
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2

PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def _lookup(services, topic: str, p, version: int, isolation_level: int, replica_id: int = -1) -> PartitionResponse:
    index = p.partition_index
    replicas = services.replicas
    # only the leader answers, consumers and followers alike
    code = replicas.leader_error(topic, index, p.current_leader_epoch)
    if code:
        return PartitionResponse(partition_index=index, error_code=code)
    replicas.refresh_high_watermark(topic, index)
    part = replicas.partition(topic, index)
    plog = part.log
    epoch = part.leader_epoch
    ts = p.timestamp
    if ts == LATEST:
        if replica_id >= 0:
            offset = plog.log_end_offset  # a follower resolving an out-of-range fetch wants our log end
        else:
            # read_committed consumers start at the last stable offset
            offset = plog.last_stable_offset if isolation_level == 1 else plog.high_watermark
        found_ts = -1
    elif ts in (EARLIEST, EARLIEST_LOCAL):
        offset, found_ts = plog.log_start_offset, -1
    elif ts == LATEST_TIERED:
        offset, found_ts = -1, -1
    elif ts == EARLIEST_PENDING_UPLOAD:
        if version < 11:
            return PartitionResponse(partition_index=index, error_code=ErrorCode.UNSUPPORTED_VERSION)
        offset, found_ts = -1, -1
    elif ts == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
        offset, found_ts = found if found is not None else (-1, -1)
    elif ts < 0:
        return PartitionResponse(partition_index=index, error_code=ErrorCode.INVALID_REQUEST)
    else:
        found = plog.offset_for_timestamp(ts)
        offset, found_ts = found if found is not None else (-1, -1)
    if replica_id < 0 and ts not in (LATEST, EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        # a consumer is never pointed at an offset it cannot fetch yet
        visible = plog.last_stable_offset if isolation_level == 1 else plog.high_watermark
        if offset >= visible:
            offset, found_ts = -1, -1
    return PartitionResponse(partition_index=index, error_code=0, timestamp=found_ts, offset=offset,
                             leader_epoch=epoch if offset >= 0 else -1)


def _segment_mtime_ms(segment, now_ms: int) -> int:
    try:
        return int(os.stat(segment.path(".log")).st_mtime * 1000)
    except OSError:  # memory storage, or a segment deleted meanwhile
        return now_ms


def legacy_offsets_before(plog, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """Kafka's UnifiedLog.legacyFetchOffsetsBefore: candidate offsets are each segment's base
    offset (at least the log start offset), dated by the segment file's modification time, plus
    the log end offset dated now when the last segment holds data. LATEST starts from the newest
    candidate, EARLIEST from the oldest, a timestamp from the newest dated at or before it; up to
    `max_num_offsets` candidates from there towards older ones, in descending order."""
    segments = plog.segments
    start = plog.log_start_offset
    candidates = [(max(s.base_offset, start), _segment_mtime_ms(s, now_ms)) for s in segments]
    if segments and segments[-1].size > 0:
        candidates.append((plog.log_end_offset, now_ms))
    if timestamp == LATEST:
        index = len(candidates) - 1
    elif timestamp == EARLIEST:
        index = 0 if candidates else -1
    else:
        index = len(candidates) - 1
        while index >= 0 and candidates[index][1] > timestamp:
            index -= 1
    count = min(max_num_offsets, index + 1)
    offsets = [candidates[index - j][0] for j in range(max(count, 0))]
    return sorted(offsets, reverse=True)


def _lookup_v0(services, topic: str, p, replica_id: int) -> PartitionResponse:
    """One partition of a v0 request (KafkaApis.handleListOffsetRequestV0)."""
    index = p.partition_index
    if p.timestamp < EARLIEST:
        # v0 knows only LATEST and EARLIEST among the negative timestamps
        return PartitionResponse(partition_index=index, error_code=ErrorCode.UNSUPPORTED_VERSION)
    if p.max_num_offsets < 0:
        # Kafka fails allocating a negative-sized array and answers with the generic error
        return PartitionResponse(partition_index=index, error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
    replicas = services.replicas
    if replica_id != DEBUGGING_REPLICA_ID:
        # only the leader answers, except to the debugging replica id
        code = replicas.leader_error(topic, index, -1)
        if code:
            return PartitionResponse(partition_index=index, error_code=code)
        replicas.refresh_high_watermark(topic, index)
    plog = services.partitions.get_log(topic, index)
    if plog is None:
        return PartitionResponse(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    offsets = legacy_offsets_before(plog, p.timestamp, p.max_num_offsets, int(time.time() * 1000))
    if replica_id == CONSUMER_REPLICA_ID:
        # a consumer is never given an offset past the high watermark: the high watermark replaces them
        hw = plog.high_watermark
        if any(o > hw for o in offsets):
            offsets = [hw] + [o for o in offsets if o <= hw]
    return PartitionResponse(partition_index=index, error_code=0, old_style_offsets=offsets)


@handles(ListOffsetsRequest)
async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    services = ctx.services
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
            partitions = [_lookup_v0(services, topic.name, p, request.replica_id) if version == 0 else
                          _lookup(services, topic.name, p, version, isolation, request.replica_id)
                          for p in topic.partitions]
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
