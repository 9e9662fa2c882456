"""DescribeCluster: which brokers the cluster has (what their disks hold is kafkapy.broker.handlers.log_dirs)."""
from __future__ import annotations

from ...metadata.acls import ResourceType
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from ..dispatch import RequestContext, handles

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
_ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}


@handles(DescribeClusterRequest)
async def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    services = ctx.services
    if ctx.api_version >= 1 and request.endpoint_type != BROKER_ENDPOINT:
        # AuthHelper.computeDescribeClusterResponse: an error answer leaves every other field at its
        # default (endpoint type 1, cluster id "")
        if request.endpoint_type not in _ENDPOINT_NAMES:
            return DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                           error_message=f"Unsupported endpoint type {request.endpoint_type}",
                                           cluster_id="")
        return DescribeClusterResponse(
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE, cluster_id="",
            error_message=f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                          f"{_ENDPOINT_NAMES[request.endpoint_type]}")
    # v2's IncludeFencedBrokers (KIP-1073) adds the fenced ones in KRaft: a ZooKeeper-mode broker is
    # registered or absent, never fenced, so the list is the same either way
    brokers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port,
                                                             rack=b.rack, is_fenced=False)
               for b in services.brokers_for(ctx.listener_name)]
    response = DescribeClusterResponse(throttle_time_ms=0, error_code=0, cluster_id=services.cluster_id,
                                       controller_id=services.metadata.controller_id(), brokers=brokers,
                                       endpoint_type=request.endpoint_type if ctx.api_version >= 1 else 1)
    if request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")
    return response
