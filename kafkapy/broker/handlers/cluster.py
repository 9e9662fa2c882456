"""DescribeCluster, DescribeLogDirs: what the cluster and its disks hold."""
from __future__ import annotations

import shutil

from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from ..dispatch import RequestContext, handles

# Cluster operations allowed without an authorizer: ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
# ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE, DESCRIBE_TOKENS... (Kafka's bit positions are the AclOperation codes).
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
BROKER_ENDPOINT = 1


@handles(DescribeClusterRequest)
async def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    if ctx.api_version >= 1 and request.endpoint_type != BROKER_ENDPOINT:
        return DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                       error_message="kafkapy brokers only expose broker endpoints",
                                       endpoint_type=request.endpoint_type, cluster_id=broker.cluster_id)
    brokers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port,
                                                             rack=b.rack)
               for b in broker.metadata.list_brokers()]
    response = DescribeClusterResponse(throttle_time_ms=0, error_code=0, cluster_id=broker.cluster_id,
                                       controller_id=broker.metadata.controller_id(), brokers=brokers,
                                       endpoint_type=request.endpoint_type if ctx.api_version >= 1 else 1)
    if request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = ALL_CLUSTER_OPERATIONS
    return response


@handles(DescribeLogDirsRequest)
async def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    broker = ctx.broker
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list]] = {d: {} for d in broker.log_dirs}
    for (topic, partition), plog in broker.logs.all_logs().items():
        if wanted is not None and (topic, partition) not in wanted:
            continue
        log_dir = str(plog.dir.parent)
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(
            DescribeLogDirsResponse.DescribeLogDirsPartition(
                partition_index=partition, partition_size=plog.size_in_bytes(), offset_lag=0,
                is_future_key=False))
    results = []
    for log_dir, topics in by_dir.items():
        usage = shutil.disk_usage(log_dir)
        results.append(DescribeLogDirsResponse.DescribeLogDirsResult(
            error_code=0, log_dir=log_dir, total_bytes=usage.total, usable_bytes=usage.free,
            topics=[DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=parts)
                    for name, parts in sorted(topics.items())]))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)

