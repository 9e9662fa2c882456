"""CreateTopics, DeleteTopics, CreatePartitions: topic lifecycle through the metadata store.

In cluster mode only the active controller serves them (others answer NOT_CONTROLLER, and clients
go to the controller the Metadata response names); the write goes to ZooKeeper and the answer waits,
as Kafka's does, until this broker's metadata cache shows the result (REQUEST_TIMED_OUT after the
request's timeout, though the change itself stands).
"""
from __future__ import annotations

import logging
import uuid

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from ..dispatch import RequestContext, handles
from ..metadata_wait import wait_for_cache

log = logging.getLogger(__name__)
_NULL_UUID = uuid.UUID(int=0)


def _topic_configs_result(broker, meta) -> list:
    """The topic's configs as CreateTopics v5+ answers them: created, or would be (validate_only)."""
    from ..config import describe_topic_configs

    entries = describe_topic_configs(meta.configs if meta is not None else {}, broker.config, None)
    return [CreateTopicsResponse.CreatableTopicConfigs(
        name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
        is_sensitive=e.is_sensitive) for e in entries]


def not_controller(broker) -> bool:
    """This broker is not the active controller, so it answers NOT_CONTROLLER (a cluster of one
    always is the controller; in a ZooKeeper cluster, the broker that won the election is)."""
    return not broker.cluster.is_active_controller()


# KRaft's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: a request that would create more
# partitions than this fails as a whole with POLICY_VIOLATION instead of planning billions of them
MAX_PARTITIONS_PER_REQUEST = 10_000
_TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def _new_partitions_in_create(broker, request: CreateTopicsRequest) -> int:
    total = 0
    for topic in request.topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += broker.config.get("num.partitions")
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _new_partitions_in_grow(broker, request: CreatePartitionsRequest) -> int:
    total = 0
    for topic in request.topics:
        meta = broker.partitions.topic(topic.name)
        total += max(topic.count - (len(meta.partitions) if meta is not None else 0), 0)
    return total


def _has_leaders(broker, name: str, count: int) -> bool:
    meta = broker.partitions.topic(name)
    return meta is not None and len(meta.partitions) >= count and all(p.leader >= 0 for p in meta.partitions)


_NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


@handles(CreateTopicsRequest)
async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.services
    version = ctx.api_version
    results = []
    seen: dict[str, int] = {}
    created = []
    for topic in request.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    # KafkaApis: CREATE on the cluster, or else on each topic
    denied = frozenset() if ctx.authorized_cluster(AclOperation.CREATE, log_if_denied=False) else \
        ctx.unauthorized_names(AclOperation.CREATE, ResourceType.TOPIC, seen)
    too_many = _new_partitions_in_create(broker, request) > MAX_PARTITIONS_PER_REQUEST
    for topic in request.topics:
        result = CreateTopicsResponse.CreatableTopicResult(name=topic.name, topic_id=_NULL_UUID)
        results.append(result)
        if not_controller(broker):
            result.error_code = ErrorCode.NOT_CONTROLLER
            result.error_message = _NOT_CONTROLLER_MESSAGE
            continue
        if seen[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Create topics request from client contains duplicate topic {topic.name}"
            continue
        if denied and topic.name in denied:
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.error_message = "Authorization failed."
            continue
        if too_many:
            result.error_code = ErrorCode.POLICY_VIOLATION
            result.error_message = _TOO_MANY_PARTITIONS
            continue
        assignments = None
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = ("Both numPartitions or replicationFactor and replicasAssignments "
                                        "were set. Both cannot be used at the same time.")
                continue
            assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        configs = {c.name: c.value for c in topic.configs}
        try:
            meta = broker.partitions.create_topic(
                topic.name, topic.num_partitions, topic.replication_factor, assignments=assignments,
                configs=configs, validate_only=request.validate_only)
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = str(exc)
            continue
        result.topic_id = meta.topic_id if not request.validate_only else _NULL_UUID
        result.num_partitions = len(meta.partitions)
        result.replication_factor = len(meta.partitions[0].replicas) if meta.partitions else -1
        if version >= 5 and not ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name,
                                               log_if_denied=False):
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # created; configs not shown
        elif version >= 5:
            # as Kafka, a validate-only creation answers the configs the topic would have
            result.configs = _topic_configs_result(
                broker, meta if request.validate_only else broker.partitions.topic(topic.name))
        if not request.validate_only:
            created.append((result, len(meta.partitions)))
    # the answer waits until the metadata shows the leaders (at once in a cluster of one; in a
    # cluster, once the controller's UpdateMetadata arrived)
    for result, count in created:
        if not await wait_for_cache(lambda: _has_leaders(broker, result.name, count),
                                    request.timeout_ms):
            result.error_code = ErrorCode.REQUEST_TIMED_OUT
            result.error_message = f"Topic {result.name} was created, but its leaders were not elected in time."
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


@handles(DeleteTopicsRequest)
async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.services
    version = ctx.api_version
    wanted: list[tuple[str | None, uuid.UUID]] = []
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, _NULL_UUID) for name in request.topic_names]
    results = []
    deleted = []
    for name, topic_id in wanted:
        result = DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=topic_id)
        results.append(result)
        if not_controller(broker):
            result.error_code = ErrorCode.NOT_CONTROLLER
            result.error_message = _NOT_CONTROLLER_MESSAGE
            continue
        if name is None:
            meta = broker.partitions.topic_by_id(topic_id)
            # KafkaApis: a topic id the principal may not DESCRIBE stays unknown
            if meta is None or not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, meta.name):
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, meta.name):
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            name = result.name = meta.name
        else:
            if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, name):
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            meta = broker.partitions.topic(name)
            if meta is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
        result.topic_id = meta.topic_id
        if not broker.config.get("delete.topic.enable"):
            result.error_code = ErrorCode.TOPIC_DELETION_DISABLED
            continue
        if meta.internal:
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            result.error_message = f"Topic {name} is an internal topic and cannot be deleted"
            continue
        try:
            broker.partitions.delete_topic(name)
            deleted.append(result)
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = str(exc)
    for result in deleted:  # gone from the metadata (at once in a cluster of one)
        if not await wait_for_cache(lambda: broker.partitions.topic(result.name) is None,
                                    request.timeout_ms):
            result.error_code = ErrorCode.REQUEST_TIMED_OUT
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


@handles(CreatePartitionsRequest)
async def handle_create_partitions(ctx: RequestContext,
                                   request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.services
    results = []
    too_many = _new_partitions_in_grow(broker, request) > MAX_PARTITIONS_PER_REQUEST
    for topic in request.topics:
        result = CreatePartitionsResponse.CreatePartitionsTopicResult(name=topic.name, error_code=0)
        results.append(result)
        if not_controller(broker):
            result.error_code = ErrorCode.NOT_CONTROLLER
            result.error_message = _NOT_CONTROLLER_MESSAGE
            continue
        if not ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.error_message = "Authorization failed."
            continue
        if too_many:
            result.error_code = ErrorCode.POLICY_VIOLATION
            result.error_message = _TOO_MANY_PARTITIONS
            continue
        assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments is not None else None
        try:
            broker.partitions.create_partitions(topic.name, topic.count, assignments,
                                                validate_only=request.validate_only)
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = str(exc)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
