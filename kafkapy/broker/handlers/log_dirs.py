"""AlterReplicaLogDirs, DescribeLogDirs: which of a broker's log.dirs holds each replica.

AlterReplicaLogDirs starts moving a replica's log to another log dir in the background, while it is
written (kafkapy.log.dir_move); until the move is done DescribeLogDirs reports the copy in the
destination as Kafka's future replica (is_future_key, offset_lag = how far the copy is behind).
"""
from __future__ import annotations

import logging
import os
import shutil

from ...metadata.acls import AclOperation
from ...log.manager import OfflinePartitionLog
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)

# Kafka names a partition's future log dir "<topic>-<partition>.<32 hex digits>-future"; it refuses
# to move a partition whose future dir name would exceed the file-name limit (KAFKA-4893).
_FUTURE_DIR_SUFFIX_LENGTH = len(".") + 32 + len("-future")
_MAX_DIR_NAME_LENGTH = 255


# -- AlterReplicaLogDirs --------------------------------------------------------------------------

@handles(AlterReplicaLogDirsRequest)
async def handle_alter_replica_log_dirs(ctx: RequestContext,
                                        request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    services = ctx.services
    # Kafka keys the request by partition, so a partition named twice takes its last destination.
    destinations: dict[tuple[str, int], str] = {}
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for partition in topic.partitions:
                destinations[(topic.name, partition)] = log_dir.path
    by_topic: dict[str, list] = {}
    allowed = ctx.authorized_cluster(AclOperation.ALTER)  # ALTER on the cluster (KafkaApis)
    for (topic, partition), path in destinations.items():
        code = _alter_log_dir(services, topic, partition, path) if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        by_topic.setdefault(topic, []).append(AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
            partition_index=partition, error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=topic, partitions=partitions)
        for topic, partitions in by_topic.items()])


def _alter_log_dir(services, topic: str, partition: int, path: str) -> int:
    """One partition's outcome, checked in ReplicaManager.alterReplicaLogDirs's order."""
    if len(f"{topic}-{partition}") + _FUTURE_DIR_SUFFIX_LENGTH > _MAX_DIR_NAME_LENGTH:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    configured = {os.path.abspath(d) for d in services.log_dirs}
    if os.path.abspath(path) not in configured:  # the absolute paths of log.dirs, as Kafka compares
        return ErrorCode.LOG_DIR_NOT_FOUND
    plog = services.logs.get(topic, partition)
    if isinstance(plog, OfflinePartitionLog):
        return ErrorCode.KAFKA_STORAGE_ERROR
    if plog is None or services.metadata.get_topic(topic) is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    try:
        services.logs.move(topic, partition, path)
    except KafkaError as exc:
        log.warning("AlterReplicaLogDirs: cannot move %s-%d to %s: %s", topic, partition, path, exc)
        return exc.code
    return ErrorCode.NONE


# -- DescribeLogDirs ------------------------------------------------------------------------------

@handles(DescribeLogDirsRequest)
async def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    services = ctx.services
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):  # DESCRIBE on the cluster (KafkaApis): nothing shown
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    Partition = DescribeLogDirsResponse.DescribeLogDirsPartition
    by_dir: dict[str, dict[str, list]] = {str(d): {} for d in services.logs.log_dirs}
    for (topic, partition), plog in services.logs.all_logs().items():
        if wanted is not None and (topic, partition) not in wanted:
            continue
        by_dir.setdefault(str(plog.dir.parent), {}).setdefault(topic, []).append(Partition(
            partition_index=partition, partition_size=plog.size_in_bytes(), offset_lag=0, is_future_key=False))
    for move in services.logs.moves():
        topic, partition = move.key
        if wanted is not None and (topic, partition) not in wanted:
            continue
        by_dir.setdefault(str(move.log_dir), {}).setdefault(topic, []).append(Partition(
            partition_index=partition, partition_size=move.size, offset_lag=move.offset_lag, is_future_key=True))
    results = []
    for log_dir, topics in by_dir.items():
        state = services.logs.dir_state(log_dir)
        if state is not None and not state.online:
            # as Kafka answers for a failed log dir: the error, no replicas, no sizes (a full dir
            # is offline to clients until it takes writes again)
            results.append(DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir, total_bytes=-1, usable_bytes=-1,
                topics=[]))
            continue
        usage = shutil.disk_usage(log_dir)
        results.append(DescribeLogDirsResponse.DescribeLogDirsResult(
            error_code=0, log_dir=log_dir, total_bytes=usage.total, usable_bytes=usage.free,
            topics=[DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=parts)
                    for name, parts in sorted(topics.items())]))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)

