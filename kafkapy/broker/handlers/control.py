"""The ZooKeeper-mode inter-broker APIs, advertised by cluster members only (see _member).

Broker side, from the controller: LeaderAndIsr and StopReplica (applied by the replica manager,
kafkapy.replication) and UpdateMetadata (the metadata cache). Each is first screened as Kafka
screens control requests: a broker epoch older than ours is STALE_BROKER_EPOCH (77) for the whole
request (-1 skips the check), a controller epoch older than the newest seen is
STALE_CONTROLLER_EPOCH (11).

Controller side, from brokers: ControlledShutdown, AlterPartition and AllocateProducerIds, handed to
this broker's controller object, which answers NOT_CONTROLLER unless it is the active one.
"""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)


def _member(ctx: RequestContext):
    """The ZooKeeper membership (cluster_member.ClusterMember). Only it advertises these APIs
    (CLUSTER_VERSIONS, added when the broker joins a ZooKeeper cluster), and dispatch closes the
    connection of a peer that sends an API the broker does not advertise, so a cluster of one never
    gets here."""
    return ctx.cluster


def _cluster_action(ctx: RequestContext) -> int:
    """Every inter-broker API needs CLUSTER_ACTION on the cluster (KafkaApis' authorizeClusterOperation):
    with an authorizer, the brokers' principal must be a super user or be granted it."""
    return ErrorCode.NONE if ctx.authorized_cluster(AclOperation.CLUSTER_ACTION) else \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _screen(ctx: RequestContext, request) -> int:
    """Kafka's epoch checks of a control request; NONE when it may be applied."""
    member = _member(ctx)
    if _cluster_action(ctx):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    broker_epoch = getattr(request, "broker_epoch", -1)
    if broker_epoch != -1 and broker_epoch < ctx.services.broker_epoch:
        log.info("ignoring %s from controller %d: broker epoch %d is older than ours (%d)",
                 type(request).__name__, request.controller_id, broker_epoch, ctx.services.broker_epoch)
        return ErrorCode.STALE_BROKER_EPOCH
    if request.controller_epoch < member.controller_epoch_seen:
        log.info("ignoring %s from controller %d: controller epoch %d is older than %d",
                 type(request).__name__, request.controller_id, request.controller_epoch,
                 member.controller_epoch_seen)
        return ErrorCode.STALE_CONTROLLER_EPOCH
    member.controller_epoch_seen = request.controller_epoch
    return ErrorCode.NONE


@handles(LeaderAndIsrRequest)
async def handle_leader_and_isr(ctx: RequestContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    error = _screen(ctx, request)
    if error:
        return LeaderAndIsrResponse(error_code=error)
    return await ctx.replicas.apply_leader_and_isr(request, ctx.api_version)


@handles(StopReplicaRequest)
async def handle_stop_replica(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    error = _screen(ctx, request)
    if error:
        return StopReplicaResponse(error_code=error)
    return await ctx.replicas.apply_stop_replica(request, ctx.api_version)


@handles(UpdateMetadataRequest)
async def handle_update_metadata(ctx: RequestContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    error = _screen(ctx, request)
    if error:
        return UpdateMetadataResponse(error_code=error)
    _member(ctx).apply_update_metadata(request)
    return UpdateMetadataResponse(error_code=0)


@handles(ControlledShutdownRequest)
async def handle_controlled_shutdown(ctx: RequestContext,
                                     request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    member = _member(ctx)
    if _cluster_action(ctx):
        return ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=[])
    error, remaining = await member.controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    return ControlledShutdownResponse(error_code=error, remaining_partitions=[
        ControlledShutdownResponse.RemainingPartition(topic_name=topic, partition_index=partition)
        for topic, partition in remaining])


@handles(AlterPartitionRequest)
async def handle_alter_partition(ctx: RequestContext, request: AlterPartitionRequest) -> AlterPartitionResponse:
    member = _member(ctx)
    if _cluster_action(ctx):
        return AlterPartitionResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[])
    return await member.controller.alter_partition(request, ctx.api_version)


@handles(AllocateProducerIdsRequest)
async def handle_allocate_producer_ids(ctx: RequestContext,
                                       request: AllocateProducerIdsRequest) -> AllocateProducerIdsResponse:
    member = _member(ctx)
    if _cluster_action(ctx):
        return AllocateProducerIdsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await member.controller.allocate_producer_ids(request.broker_id, request.broker_epoch)
