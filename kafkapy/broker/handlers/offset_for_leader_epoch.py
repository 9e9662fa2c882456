"""OffsetForLeaderEpoch: the end offset of a leader epoch, for consumers' and followers' truncation checks."""
from __future__ import annotations

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from ..dispatch import RequestContext, handles

EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


@handles(OffsetForLeaderEpochRequest)
async def handle_offset_for_leader_epoch(
        ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    replicas = ctx.replicas
    topics = []
    # KafkaApis: CLUSTER_ACTION (a follower) covers every topic, otherwise DESCRIBE on each
    denied = frozenset() if ctx.authorized_cluster(AclOperation.CLUSTER_ACTION, log_if_denied=False) else \
        ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in request.topics))
    for topic in request.topics:
        results = []
        if denied and topic.topic in denied:
            topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic, partitions=[
                EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition)
                for p in topic.partitions]))
            continue
        for p in topic.partitions:
            # only the leader answers (Kafka fetches only from the leader here)
            code = replicas.leader_error(topic.topic, p.partition, p.current_leader_epoch)
            if code:
                results.append(EpochEndOffset(error_code=code, partition=p.partition))
                continue
            plog = replicas.partition(topic.topic, p.partition).log
            epoch, end_offset = plog.end_offset_for_epoch(p.leader_epoch)
            results.append(EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=epoch,
                                          end_offset=end_offset))
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic,
                                                                             partitions=results))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
