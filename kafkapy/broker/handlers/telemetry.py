"""GetTelemetrySubscriptions (71), PushTelemetry (72), ListClientMetricsResources (74; Kafka 4.1's
ListConfigResources at v1, KIP-1142): KIP-714 client telemetry. The bookkeeping is
kafkapy/metrics/client_telemetry.py; the subscriptions are CLIENT_METRICS config resources in the
metadata store (handlers/configs.py alters them).
"""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    ListClientMetricsResourcesRequest,
    ListClientMetricsResourcesResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from ..dispatch import RequestContext, handles
from ..telemetry_subscriptions import subscriptions

log = logging.getLogger(__name__)

def client_telemetry(broker):
    """The broker's ClientTelemetry (Broker.__init__ makes it)."""
    return broker.client_telemetry


def _attributes(ctx: RequestContext) -> dict[str, str | None]:
    """What a subscription's `match` selects on (ClientMetricsInstanceMetadata)."""
    connection = ctx.connection
    software = getattr(connection, "client_software", (None, None)) if connection is not None else (None, None)
    peer = ctx.peer
    address, _, port = peer.rpartition(":") if ":" in peer else (peer, "", "")
    return {"client_id": ctx.client_id or "", "client_software_name": software[0],
            "client_software_version": software[1], "client_source_address": address.strip("[]") or None,
            "client_source_port": port or None}


@handles(GetTelemetrySubscriptionsRequest)
async def handle_get_telemetry_subscriptions(
        ctx: RequestContext, request: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    from ...metrics.client_telemetry import ACCEPTED_COMPRESSION_TYPES, TelemetryError

    broker = ctx.services
    try:
        instance = client_telemetry(broker).get_subscriptions(
            request.client_instance_id, _attributes(ctx), subscriptions(client_telemetry(broker), broker.metadata))
    except TelemetryError as exc:
        log.debug("GetTelemetrySubscriptions from %s: %s", ctx.client_id, exc)
        return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=exc.code,
                                                 client_instance_id=request.client_instance_id)
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=0, client_instance_id=instance.instance_id,
        subscription_id=instance.subscription_id, accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES),
        push_interval_ms=instance.interval_ms, telemetry_max_bytes=broker.config.get("telemetry.max.bytes"),
        delta_temporality=True, requested_metrics=list(instance.metrics))


@handles(PushTelemetryRequest)
async def handle_push_telemetry(ctx: RequestContext, request: PushTelemetryRequest) -> PushTelemetryResponse:
    from ...metrics.client_telemetry import TelemetryError

    broker = ctx.services
    try:
        client_telemetry(broker).push(
            request.client_instance_id, request.subscription_id, request.terminating, request.compression_type,
            request.metrics or b"", _attributes(ctx), subscriptions(client_telemetry(broker), broker.metadata),
            broker.config.get("telemetry.max.bytes"))
    except TelemetryError as exc:
        log.debug("PushTelemetry from %s: %s", ctx.client_id, exc)
        return PushTelemetryResponse(throttle_time_ms=0, error_code=exc.code)
    return PushTelemetryResponse(throttle_time_ms=0, error_code=0)


# config resource types: TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


@handles(ListClientMetricsResourcesRequest)
async def handle_list_client_metrics_resources(
        ctx: RequestContext, request: ListClientMetricsResourcesRequest) -> ListClientMetricsResourcesResponse:
    """v0 lists the CLIENT_METRICS resources; v1 (ListConfigResources) the config resources of the
    types asked for (none: every type v1 knows)."""
    Response = ListClientMetricsResourcesResponse
    if not ctx.authorized_cluster(AclOperation.DESCRIBE_CONFIGS):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    supported = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP) if ctx.api_version >= 1 else (CLIENT_METRICS,)
    wanted = set(request.resource_types or supported) if ctx.api_version >= 1 else {CLIENT_METRICS}
    if not wanted <= set(supported):
        return Response(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION)
    broker = ctx.services
    found: list[tuple[int, str]] = []
    if CLIENT_METRICS in wanted:
        found += [(CLIENT_METRICS, name) for name in sorted(broker.metadata.client_metrics_configs())]
    if TOPIC in wanted:
        found += [(TOPIC, name) for name in sorted(broker.metadata.topic_names())
                  if ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name, log_if_denied=False)]
    brokers = sorted(b.node_id for b in broker.metadata.list_brokers()) if wanted & {BROKER, BROKER_LOGGER} else []
    for resource_type in (BROKER, BROKER_LOGGER):
        if resource_type in wanted:
            found += [(resource_type, str(node_id)) for node_id in brokers]
    # GROUP: kafkapy keeps no group config resources, so there are none to list
    return Response(throttle_time_ms=0, error_code=0, client_metrics_resources=[
        Response.ClientMetricsResource(name=name, resource_type=resource_type) for resource_type, name in found])
