"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics, the broker, (share) groups and
client-metrics subscriptions (CLIENT_METRICS, KIP-714)."""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.error_messages import default_message
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
CLIENT_METRICS = 16
# DescribeConfigs' ConfigSource.CLIENT_METRICS_CONFIG and the ConfigTypes of the three configs
CLIENT_METRICS_SOURCE = 7
_CLIENT_METRICS_TYPES = {"metrics": 7, "interval.ms": 3, "match": 7}  # LIST, INT, LIST


def _authorization_error(ctx: RequestContext, resource, operation: AclOperation) -> int:
    """KafkaApis: a topic needs `operation` on the topic, the broker (and its loggers) on the cluster."""
    if resource.resource_type == TOPIC:
        if not ctx.authorized(operation, ResourceType.TOPIC, resource.resource_name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource.resource_type in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
        if not ctx.authorized_cluster(operation):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif resource.resource_type == GROUP:
        if not ctx.authorized(operation, ResourceType.GROUP, resource.resource_name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.NONE


def _describe_group(broker, resource) -> list:
    """The configs of a group: share.* (kafkapy/groupcoord/share, KIP-932) and streams.*
    (kafkapy/groupcoord/streams/configs.py, KIP-1071)."""
    from ..config import ConfigEntry, ConfigSource

    keys = resource.configuration_keys
    described = list(broker.share_groups.describe_group_configs(resource.resource_name))
    described += broker.group_coordinator.streams.group_configs.describe(resource.resource_name)
    return [ConfigEntry(name=name, value=value, read_only=False, is_sensitive=False,
                        source=ConfigSource.DEFAULT_CONFIG if is_default else GROUP_CONFIG_SOURCE)
            for name, value, is_default in described
            if keys is None or name in keys]


def _describe(broker, resource, version: int, include_synonyms: bool, include_docs: bool) -> list:
    keys = resource.configuration_keys
    if resource.resource_type == TOPIC:
        meta = broker.partitions.topic(resource.resource_name)
        if meta is None:
            # ConfigHelper answers an unknown topic with the code alone (the message is the schema's default, "")
            raise KafkaError(f"Topic {resource.resource_name} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return describe_topic_configs(meta.configs, broker.config, keys, include_synonyms=include_synonyms,
                                      include_documentation=include_docs)
    if resource.resource_type == BROKER:
        name = resource.resource_name
        if name != "" and name != str(broker.node_id):
            raise KafkaError(f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
                             ErrorCode.INVALID_REQUEST)
        return describe_broker_configs(broker.config, keys, per_broker=name != "",
                                       include_synonyms=include_synonyms, include_documentation=include_docs)
    if resource.resource_type == BROKER_LOGGER:
        return []
    if resource.resource_type == GROUP:
        return _describe_group(broker, resource)
    if resource.resource_type == CLIENT_METRICS:
        return _describe_client_metrics(broker, resource)
    raise KafkaError(f"Unsupported resource type {resource.resource_type}", ErrorCode.INVALID_REQUEST)


class _Entry:
    """A described config, in the shape describe_*_configs return."""

    def __init__(self, name: str, value: str):
        self.name, self.value = name, value
        self.read_only, self.is_default, self.is_sensitive = False, False, False
        self.source, self.synonyms, self.documentation = CLIENT_METRICS_SOURCE, [], None
        self.config_type = _CLIENT_METRICS_TYPES.get(name, 0)


def _describe_client_metrics(broker, resource) -> list:
    """As Kafka: the stored configs of the subscription (none for an unknown name)."""
    if not resource.resource_name:
        raise KafkaError("Client metrics subscription name must not be empty", ErrorCode.INVALID_REQUEST)
    configs = broker.metadata.client_metrics_configs().get(resource.resource_name, {})
    keys = resource.configuration_keys
    return [_Entry(name, value) for name, value in sorted(configs.items()) if not keys or name in keys]


def _alter_client_metrics(broker, resource, validate_only: bool, *, ops=None, replace=None) -> None:
    from ...metrics.client_telemetry import TelemetryError, validate_client_metrics_configs
    from ..telemetry_subscriptions import forget_subscriptions

    name = resource.resource_name
    if not name:
        raise KafkaError("Client metrics subscription name must not be empty", ErrorCode.INVALID_REQUEST)
    if replace is not None:
        configs = {k: v for k, v in replace.items() if v is not None}
    else:
        configs = dict(broker.metadata.client_metrics_configs().get(name, {}))
        for key, op, value in ops:
            items = [v.strip() for v in (configs.get(key) or "").split(",") if v.strip()]
            if op == 0:  # SET
                configs[key] = value or ""
            elif op == 1:  # DELETE
                configs.pop(key, None)
            elif op in (2, 3) and key in ("metrics", "match"):  # APPEND, SUBTRACT on the list configs
                new = [v.strip() for v in (value or "").split(",") if v.strip()]
                items = items + [v for v in new if v not in items] if op == 2 else [v for v in items if v not in new]
                configs[key] = ",".join(items)
            else:
                raise KafkaError(f"Operation {op} is not valid for {key}", ErrorCode.INVALID_CONFIG)
    try:
        validate_client_metrics_configs(configs)
    except TelemetryError as exc:
        raise KafkaError(str(exc), exc.code) from None
    if not validate_only:
        broker.metadata.set_client_metrics_configs(name, configs)
        forget_subscriptions(broker.client_telemetry)


@handles(DescribeConfigsRequest)
async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    version = ctx.api_version
    synonyms = version >= 1 and request.include_synonyms
    docs = version >= 3 and request.include_documentation
    results = []
    for resource in request.resources:
        # ConfigHelper: "" on success (the schema's default), Errors.message() when unauthorized
        result = DescribeConfigsResponse.DescribeConfigsResult(
            error_code=0, error_message="", resource_type=resource.resource_type,
            resource_name=resource.resource_name, configs=[])
        results.append(result)
        result.error_code = _authorization_error(ctx, resource, AclOperation.DESCRIBE_CONFIGS)
        if result.error_code:
            result.error_message = default_message(result.error_code)
            continue
        try:
            entries = _describe(ctx.services, resource, version, synonyms, docs)
        except KafkaError as exc:
            result.error_code = exc.code
            if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
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
        ops = list(ops)
        streams_ops = [op for op in ops if op[0].startswith("streams.")]
        share_ops = [op for op in ops if not op[0].startswith("streams.")]
        if streams_ops:
            code, message = broker.group_coordinator.streams.group_configs.alter(
                resource.resource_name, streams_ops, validate_only)
            if code:
                raise KafkaError(message, code)
        if share_ops or not streams_ops:
            code, message = broker.share_groups.alter_group_configs(resource.resource_name, share_ops, validate_only)
            if code:
                raise KafkaError(message, code)
    elif resource.resource_type == CLIENT_METRICS:
        _alter_client_metrics(broker, resource, validate_only, ops=ops, replace=replace)
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
            _alter(ctx.services, resource, request.validate_only,
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
            _alter(ctx.services, resource, request.validate_only,
                   ops=[(c.name, c.config_operation, c.value) for c in resource.configs])
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = str(exc)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
