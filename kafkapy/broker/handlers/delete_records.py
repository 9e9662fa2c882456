"""DeleteRecords: move a partition's log start offset forward (records below it become unreadable)."""
from __future__ import annotations

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse
from ..dispatch import RequestContext, handles

Result = DeleteRecordsResponse.DeleteRecordsPartitionResult
HIGH_WATERMARK = -1


@handles(DeleteRecordsRequest)
async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    partitions = ctx.partitions
    topics = []
    # DELETE on each topic (KafkaApis.handleDeleteRecordsRequest)
    denied = ctx.unauthorized_names(AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        results = []
        for p in topic.partitions:
            if denied and topic.name in denied:
                results.append(Result(partition_index=p.partition_index, low_watermark=-1,
                                      error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            plog = partitions.get_log(topic.name, p.partition_index)
            if plog is None:
                results.append(Result(partition_index=p.partition_index, low_watermark=-1,
                                      error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            offset = plog.high_watermark if p.offset == HIGH_WATERMARK else p.offset
            if offset < 0 or offset > plog.high_watermark:
                results.append(Result(partition_index=p.partition_index, low_watermark=-1,
                                      error_code=ErrorCode.OFFSET_OUT_OF_RANGE))
                continue
            try:
                low = plog.delete_records_before(offset)
            except KafkaError as exc:
                results.append(Result(partition_index=p.partition_index, low_watermark=-1, error_code=exc.code))
                continue
            results.append(Result(partition_index=p.partition_index, low_watermark=low, error_code=0))
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name, partitions=results))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
