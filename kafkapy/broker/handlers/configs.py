"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics, the broker and (share) groups."""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from ..config import (
    alter_broker_configs,
    alter_topic_configs,
    describe_broker_configs,
    describe_topic_configs,
)
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32
GROUP_CONFIG_SOURCE = 8  # Kafka's ConfigSource.GROUP_CONFIG


def _authorization_error(ctx: RequestContext, resource, operation: AclOperation) -> int:
    """KafkaApis: a topic needs `operation` on the topic, the broker (and its loggers) on the cluster."""
    if resource.resource_type == TOPIC:
        if not ctx.authorized(operation, ResourceType.TOPIC, resource.resource_name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource.resource_type in (BROKER, BROKER_LOGGER):
        if not ctx.authorized_cluster(operation):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif resource.resource_type == GROUP:
        if not ctx.authorized(operation, ResourceType.GROUP, resource.resource_name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.NONE


def _describe_group(broker, resource) -> list:
    """The share group configs of a group (kafkapy/groupcoord/share; KIP-932's share.* keys)."""
    from ..config import ConfigEntry, ConfigSource

    keys = resource.configuration_keys
    return [ConfigEntry(name=name, value=value, read_only=False, is_sensitive=False,
                        source=ConfigSource.DEFAULT_CONFIG if is_default else GROUP_CONFIG_SOURCE)
            for name, value, is_default in broker.share_groups.describe_group_configs(resource.resource_name)
            if keys is None or name in keys]


def _describe(broker, resource, version: int, include_synonyms: bool, include_docs: bool) -> list:
    keys = resource.configuration_keys
    if resource.resource_type == TOPIC:
        meta = broker.partitions.topic(resource.resource_name)
        if meta is None:
            raise KafkaError(f"Topic {resource.resource_name} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return describe_topic_configs(meta.configs, broker.config, keys, include_synonyms=include_synonyms,
                                      include_documentation=include_docs)
    if resource.resource_type == BROKER:
        name = resource.resource_name
        if name != "" and name != str(broker.node_id):
            raise KafkaError(f"Unexpected broker id, expected {broker.node_id}, but received {name}",
                             ErrorCode.INVALID_REQUEST)
        return describe_broker_configs(broker.config, keys, per_broker=name != "",
                                       include_synonyms=include_synonyms, include_documentation=include_docs)
    if resource.resource_type == BROKER_LOGGER:
        return []
    if resource.resource_type == GROUP:
        return _describe_group(broker, resource)
    raise KafkaError(f"Unsupported resource type {resource.resource_type}", ErrorCode.INVALID_REQUEST)


@handles(DescribeConfigsRequest)
async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    version = ctx.api_version
    synonyms = version >= 1 and request.include_synonyms
    docs = version >= 3 and request.include_documentation
    results = []
    for resource in request.resources:
        result = DescribeConfigsResponse.DescribeConfigsResult(
            error_code=0, resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[])
        results.append(result)
        result.error_code = _authorization_error(ctx, resource, AclOperation.DESCRIBE_CONFIGS)
        if result.error_code:
            continue
        try:
            entries = _describe(ctx.broker, resource, version, synonyms, docs)
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = str(exc)
            continue
        result.configs = [
            DescribeConfigsResponse.DescribeConfigsResourceResult(
                name=e.name, value=e.value, read_only=e.read_only, is_default=e.is_default,
                config_source=int(e.source), is_sensitive=e.is_sensitive,
                synonyms=[DescribeConfigsResponse.DescribeConfigsSynonym(name=s.name, value=s.value,
                                                                          source=int(s.source))
                          for s in e.synonyms],
                config_type=int(e.config_type), documentation=e.documentation)
            for e in entries]
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _alter(broker, resource, validate_only: bool, *, ops=None, replace=None) -> None:
    if resource.resource_type == TOPIC:
        alter_topic_configs(broker.metadata, broker.config, resource.resource_name, ops=ops, replace=replace,
                            validate_only=validate_only)
        if not validate_only:
            broker.partitions.apply_topic_config(resource.resource_name)
    elif resource.resource_type == BROKER:
        alter_broker_configs(broker.config, broker.metadata, resource.resource_name, ops=ops, replace=replace,
                             validate_only=validate_only)
        if not validate_only:
            broker.readvertise()
            for meta in broker.partitions.topics():
                broker.partitions.apply_topic_config(meta.name)
    elif resource.resource_type == GROUP and ops is not None:
        code, message = broker.share_groups.alter_group_configs(resource.resource_name, ops, validate_only)
        if code:
            raise KafkaError(message, code)
    else:
        raise KafkaError(f"Unsupported resource type {resource.resource_type}", ErrorCode.INVALID_REQUEST)


@handles(AlterConfigsRequest)
async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for resource in request.resources:
        result = AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=0, resource_type=resource.resource_type, resource_name=resource.resource_name)
        responses.append(result)
        result.error_code = _authorization_error(ctx, resource, AclOperation.ALTER_CONFIGS)
        if result.error_code:
            continue
        try:
            _alter(ctx.broker, resource, request.validate_only,
                   replace={c.name: c.value for c in resource.configs})
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = str(exc)
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


@handles(IncrementalAlterConfigsRequest)
async def handle_incremental_alter_configs(
        ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = []
    for resource in request.resources:
        result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=0, resource_type=resource.resource_type, resource_name=resource.resource_name)
        responses.append(result)
        result.error_code = _authorization_error(ctx, resource, AclOperation.ALTER_CONFIGS)
        if result.error_code:
            continue
        try:
            _alter(ctx.broker, resource, request.validate_only,
                   ops=[(c.name, c.config_operation, c.value) for c in resource.configs])
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = str(exc)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
