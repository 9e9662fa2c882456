"""Metadata: brokers, controller, topics and partition leadership; auto-creates topics."""
from __future__ import annotations

import uuid

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import MetadataRequest, MetadataResponse
from ..dispatch import RequestContext, handles

_NULL_UUID = uuid.UUID(int=0)


def topic_response(services, meta, version: int) -> MetadataResponse.MetadataResponseTopic:
    """One topic's metadata entry; a partition whose leader is not live (or not yet elected)
    carries LEADER_NOT_AVAILABLE, as Kafka's metadata cache answers."""
    store = services.metadata
    partitions = []
    for index, p in enumerate(meta.partitions):
        offline = list(store.offline_replicas(meta.name, index))
        error = ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 or not store.is_live(p.leader) else 0
        partitions.append(MetadataResponse.MetadataResponsePartition(
            error_code=error, partition_index=index, leader_id=p.leader if not error else -1,
            leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            offline_replicas=offline))
    return MetadataResponse.MetadataResponseTopic(
        error_code=0, name=meta.name, topic_id=meta.topic_id, is_internal=meta.internal,
        partitions=partitions)


def broker_entries(services, listener_name: str | None = None) -> list:
    return [MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in services.brokers_for(listener_name)]


def _invalid_request_response(request: MetadataRequest) -> MetadataResponse:
    """KafkaApis refuses a null topic name or a topic id before v12 with InvalidRequestException, which
    MetadataRequest.getErrorResponse answers: INVALID_REQUEST per topic, a null name sent as "" (the
    response cannot carry null before v12), no brokers."""
    return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[
        MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.INVALID_REQUEST, name=t.name if t.name is not None else "",
            topic_id=t.topic_id, is_internal=False, partitions=[])
        for t in request.topics])


@handles(MetadataRequest)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    services = ctx.services
    version = ctx.api_version
    partitions = services.partitions
    all_topics = request.topics is None or (version == 0 and not request.topics)
    if not all_topics and version < 12 and any(t.name is None or t.topic_id != _NULL_UUID for t in request.topics):
        return _invalid_request_response(request)
    allow_auto_create = request.allow_auto_topic_creation if version >= 4 else True
    topics = []
    # Authorization as KafkaApis.getTopicMetadata: topics the principal may not DESCRIBE are left out of
    # an all-topics answer and answer TOPIC_AUTHORIZATION_FAILED when named; auto-creating one needs
    # CREATE on the cluster or on the topic
    if all_topics:
        metas = partitions.topics()
        if ctx.authorizing:
            allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (m.name for m in metas),
                                           log_if_denied=False)
            metas = [m for m in metas if m.name in allowed]
        for meta in metas:
            topics.append(topic_response(services, meta, version))
    else:
        for wanted in request.topics:
            name = wanted.name
            if name is None:
                meta = partitions.topic_by_id(wanted.topic_id)
                if meta is None:
                    topics.append(MetadataResponse.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=wanted.topic_id))
                    continue
                if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, meta.name):
                    topics.append(MetadataResponse.MetadataResponseTopic(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None, topic_id=wanted.topic_id))
                    continue
            else:
                if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    topics.append(MetadataResponse.MetadataResponseTopic(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=_NULL_UUID))
                    continue
                meta = partitions.topic(name)
                if meta is None and allow_auto_create and services.config.get("auto.create.topics.enable") \
                        and not ctx.authorized_cluster(AclOperation.CREATE, log_if_denied=False) \
                        and not ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name):
                    topics.append(MetadataResponse.MetadataResponseTopic(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=_NULL_UUID))
                    continue
                if meta is None and allow_auto_create:
                    try:
                        meta = partitions.auto_create(name)
                    except KafkaError as exc:
                        topics.append(MetadataResponse.MetadataResponseTopic(
                            error_code=exc.code, name=name, topic_id=_NULL_UUID))
                        continue
                    if meta is not None:
                        # ZooKeeper-mode Kafka (KafkaApis.createTopic) answers the request that
                        # creates a topic, or loses the race to create it, with the name, no
                        # partitions and LEADER_NOT_AVAILABLE; the topic shows on a later request.
                        # A cluster of one answers the same, though it leads the topic at once:
                        # clients' delete-then-describe logic counts on it (kafka-go's tests do)
                        topics.append(MetadataResponse.MetadataResponseTopic(
                            error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, topic_id=_NULL_UUID,
                            partitions=[]))
                        continue
                if meta is None:
                    topics.append(MetadataResponse.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=_NULL_UUID))
                    continue
            topics.append(topic_response(services, meta, version))
    if request.include_topic_authorized_operations:
        for topic in topics:
            if topic.error_code == 0:
                topic.topic_authorized_operations = ctx.authorized_operations(ResourceType.TOPIC, topic.name)
    response = MetadataResponse(
        throttle_time_ms=0, brokers=broker_entries(services, ctx.listener_name), cluster_id=services.cluster_id,
        controller_id=services.metadata.controller_id(), topics=topics)
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")
    return response
