"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: which brokers hold replicas.

Each handler authorizes, hands the decision to the broker's membership (broker.cluster) and shapes
the answer. The membership decides as its mode does: a cluster of one (cluster_of_one.py) with
the embedded store and the KRaft controller's rules (kafkapy.metadata.partition_changes); a
ZooKeeper cluster member (cluster_member.py) through its controller object (kafkapy.controller
.kafka_controller and .reassignment), which answers NOT_CONTROLLER unless it is the active one.
Where a replica lives on a broker's disks (AlterReplicaLogDirs, DescribeLogDirs) is
kafkapy.broker.handlers.log_dirs.
"""
from __future__ import annotations

from ...metadata.acls import AclOperation
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from ..dispatch import RequestContext, handles

PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1
_NOT_CONTROLLER = "This is not the correct controller for this cluster."


def _target(partition) -> list[int] | None:
    """A partition's target replicas; None (the field is nullable) cancels its reassignment."""
    target = partition.replicas
    return None if target is None else list(target)


# -- ElectLeaders -------------------------------------------------------------------------------

@handles(ElectLeadersRequest)
async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    election_type = request.election_type if ctx.api_version >= 1 else PREFERRED_ELECTION
    Result = ElectLeadersResponse.ReplicaElectionResult
    Partition = ElectLeadersResponse.PartitionResult
    if not ctx.authorized_cluster(AclOperation.ALTER):  # ALTER on the cluster (KafkaApis)
        return ElectLeadersResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, replica_election_results=[
                Result(topic=t.topic, partition_result=[
                    Partition(partition_id=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
                    for p in t.partitions])
                for t in request.topic_partitions or ()])
    if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
        message = f"Unknown election type {election_type}"
        return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[
            Result(topic=t.topic, partition_result=[
                Partition(partition_id=p, error_code=ErrorCode.INVALID_REQUEST, error_message=message)
                for p in t.partitions])
            for t in request.topic_partitions or ()])
    wanted = None if request.topic_partitions is None else [
        (t.topic, t.partitions) for t in request.topic_partitions]
    outcomes = await ctx.cluster.elect_leaders(wanted, election_type == UNCLEAN_ELECTION, request.timeout_ms)
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
        Result(topic=topic, partition_result=[
            Partition(partition_id=p, error_code=code, error_message=message) for p, code, message in partitions])
        for topic, partitions in outcomes])


# -- AlterPartitionReassignments / ListPartitionReassignments --------------------------------------

@handles(AlterPartitionReassignmentsRequest)
async def handle_alter_partition_reassignments(
        ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse
    if not ctx.authorized_cluster(AclOperation.ALTER):  # ALTER on the cluster (KafkaApis)
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code, error_message=None, responses=[
            TopicResponse(name=t.name, partitions=[PartitionResponse(partition_index=p.partition_index, error_code=code,
                                                                     error_message=None) for p in t.partitions])
            for t in request.topics])
    targets = [(t.name, [(p.partition_index, _target(p)) for p in t.partitions])
               for t in request.topics]  # a target of None (null) cancels a reassignment in progress
    # v1 (KIP-860): false refuses a target that changes a partition's replication factor
    allow_rf_change = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    outcomes = await ctx.cluster.alter_partition_reassignments(targets, allow_rf_change)
    if outcomes is None:
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                                                   error_message=_NOT_CONTROLLER, responses=[],
                                                   allow_replication_factor_change=allow_rf_change)
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                               allow_replication_factor_change=allow_rf_change, responses=[
        TopicResponse(name=topic, partitions=[
            PartitionResponse(partition_index=p, error_code=code, error_message=message)
            for p, code, message in partitions])
        for topic, partitions in outcomes])


@handles(ListPartitionReassignmentsRequest)
async def handle_list_partition_reassignments(
        ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):  # DESCRIBE on the cluster (KafkaApis)
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                  error_message=None, topics=[])
    wanted = None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
    ongoing = await ctx.cluster.list_partition_reassignments(wanted)
    if ongoing is None:
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                                                  error_message=_NOT_CONTROLLER, topics=[])
    Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[
        Topic(name=topic, partitions=[
            Partition(partition_index=p, replicas=replicas, adding_replicas=adding, removing_replicas=removing)
            for p, replicas, adding, removing in partitions])
        for topic, partitions in ongoing])
