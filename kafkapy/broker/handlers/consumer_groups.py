"""ConsumerGroupHeartbeat (KIP-848): the consumer rebalance protocol's one membership API.

The handler only translates: authorization as Kafka's KafkaApis does it (READ on the group,
DESCRIBE on every subscribed topic name), the request into a HeartbeatRequest for the group
coordinator (kafkapy.groupcoord.consumer.membership), the result into the response. Topic
metadata reaches the coordinator through BrokerTopicView (broker/topic_view.py).
"""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation, ResourceType
from ...groupcoord import OFFSETS_TOPIC
from ...groupcoord.consumer.membership import HeartbeatRequest
from ...protocol.errors import ErrorCode
from ...protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from ..dispatch import RequestContext, handles
from ..coordinator_writes import coordinator_write_durable

log = logging.getLogger(__name__)

_Response = ConsumerGroupHeartbeatResponse


def _assignment(assignment) -> _Response.Assignment:
    return _Response.Assignment(topic_partitions=[
        _Response.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0]))])


def _group_version_finalized(broker) -> bool:
    """group.version >= 1 (KIP-584 feature of the consumer protocol; metadata/features.py)."""
    from ...metadata.features import finalized_level

    return finalized_level(broker.metadata, "group.version") >= 1


@handles(ConsumerGroupHeartbeatRequest)
async def handle_consumer_group_heartbeat(ctx: RequestContext,
                                          request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    broker = ctx.services
    coordinator = broker.group_coordinator
    if not coordinator.consumer.enabled or not _group_version_finalized(broker):
        # group.coordinator.rebalance.protocols without "consumer", or group.version finalized below 1
        # (Kafka 4.0 answers the same to both)
        return _Response(error_code=ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = request.subscribed_topic_names
    if names:
        denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if denied:
            return _Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                             error_message=f"The client is not authorized to describe topics: {', '.join(sorted(denied))}.")
    owned = request.topic_partitions
    heartbeat = HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms, subscribed_topic_names=names,
        subscribed_topic_regex=request.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=request.server_assignor,
        topic_partitions=None if owned is None else [(tp.topic_id, tp.partitions) for tp in owned],
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host, api_version=ctx.api_version)
    partition = coordinator.partition_for(request.group_id) if request.group_id else -1
    plog = broker.partitions.get_log(OFFSETS_TOPIC, partition) if partition >= 0 else None
    end_before = plog.log_end_offset if plog is not None else -1
    result = coordinator.consumer_group_heartbeat(heartbeat)
    if result.error == ErrorCode.NONE and plog is not None and plog.log_end_offset != end_before:
        # the group changed: answer once the records are as durable as an offset commit
        error = await coordinator_write_durable(broker, partition)
        if error != ErrorCode.NONE:
            return _Response(error_code=error)
    if result.error != ErrorCode.NONE:
        return _Response(error_code=result.error, error_message=result.message)
    return _Response(
        error_code=ErrorCode.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=None if result.assignment is None else _assignment(result.assignment))
