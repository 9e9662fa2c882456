"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: which brokers hold replicas.

On a single node, elections and reassignments are decided by the metadata store with the KRaft
controller's rules (kafkapy.metadata.partition_changes); in a cluster, by the controller
(kafkapy.controller.kafka_controller and .reassignment), reached through this broker's controller
object, which answers NOT_CONTROLLER unless it is the active one. Where a replica lives on a broker's disks (AlterReplicaLogDirs,
DescribeLogDirs) is kafkapy.broker.handlers.log_dirs.
"""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)

PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


# -- ElectLeaders -------------------------------------------------------------------------------

@handles(ElectLeadersRequest)
async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    store = ctx.broker.metadata
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
    unclean = election_type == UNCLEAN_ELECTION
    if ctx.broker.controller is not None:
        return await _elect_in_cluster(ctx.broker, request, unclean)
    results = []
    if request.topic_partitions is None:
        # Every partition; as in Kafka, those that already have the wanted leader are left out.
        for topic in store.list_topics():
            outcomes = (_elect(store, topic.name, p, unclean) for p in range(topic.partition_count))
            results.append(Result(topic=topic.name, partition_result=[
                Partition(partition_id=p, error_code=code, error_message=message)
                for p, (code, message) in enumerate(outcomes) if code != ErrorCode.ELECTION_NOT_NEEDED]))
    else:
        for wanted in request.topic_partitions:
            results.append(Result(topic=wanted.topic, partition_result=[
                Partition(partition_id=p, error_code=code, error_message=message)
                for p in wanted.partitions for code, message in [_elect(store, wanted.topic, p, unclean)]]))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=results)


async def _elect_in_cluster(broker, request: ElectLeadersRequest, unclean: bool) -> ElectLeadersResponse:
    """Cluster mode: the local controller object elects (a non-controller answers NOT_CONTROLLER per
    partition, as Kafka's ZooKeeper-mode brokers do); the answer waits until this broker's metadata
    cache shows the new leaders."""
    from .topics import wait_for_cache

    Result = ElectLeadersResponse.ReplicaElectionResult
    Partition = ElectLeadersResponse.PartitionResult
    store = broker.metadata
    if request.topic_partitions is None:
        wanted = [(t.name, p) for t in store.list_topics() for p in range(t.partition_count)]
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    outcomes = await broker.controller.elect_leaders(wanted, unclean)
    elected = [key for key, (code, _) in outcomes.items() if code == ErrorCode.NONE]

    def visible() -> bool:
        for topic, partition in elected:
            part = broker.metadata.cache.partition(topic, partition)
            if part is None or part.leader < 0:
                return False
            if not unclean and part.replicas and part.leader != part.replicas[0]:
                return False
        return True

    if elected:
        await wait_for_cache(broker, visible, request.timeout_ms)
    by_topic: dict[str, list] = {}
    for (topic, partition), (code, message) in outcomes.items():
        if request.topic_partitions is None and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(topic, []).append(Partition(partition_id=partition, error_code=code,
                                                        error_message=message))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
        Result(topic=topic, partition_result=parts) for topic, parts in by_topic.items()])


def _elect(store, topic: str, partition: int, unclean: bool) -> tuple[int, str | None]:
    meta = store.get_topic(topic)
    if meta is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    if not 0 <= partition < meta.partition_count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    try:
        new = store.elect_leader(topic, partition, unclean)
    except KafkaError as exc:
        return exc.code, str(exc)
    log.info("%s election made broker %d the leader of %s-%d (leader epoch %d)",
             "unclean" if unclean else "preferred", new.leader, topic, partition, new.leader_epoch)
    return ErrorCode.NONE, None


# -- AlterPartitionReassignments / ListPartitionReassignments --------------------------------------

@handles(AlterPartitionReassignmentsRequest)
async def handle_alter_partition_reassignments(
        ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    store = ctx.broker.metadata
    TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse
    if not ctx.authorized_cluster(AclOperation.ALTER):  # ALTER on the cluster (KafkaApis)
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code, error_message=None, responses=[
            TopicResponse(name=t.name, partitions=[PartitionResponse(partition_index=p.partition_index, error_code=code,
                                                                     error_message=None) for p in t.partitions])
            for t in request.topics])
    if ctx.broker.controller is not None:
        return await _reassign_in_cluster(ctx.broker, request)
    responses = []
    for topic in request.topics:
        partitions = []
        for target in topic.partitions:
            code, message = _reassign(store, topic.name, target.partition_index, target.replicas)
            partitions.append(PartitionResponse(partition_index=target.partition_index, error_code=code,
                                                error_message=message))
        responses.append(TopicResponse(name=topic.name, partitions=partitions))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                               responses=responses)


def _target_replicas(wanted) -> list[int] | None:
    """A reassignment's target replicas; None (null) cancels one in progress."""
    target = wanted.replicas
    return None if target is None else list(target)


async def _reassign_in_cluster(broker, request: AlterPartitionReassignmentsRequest
                               ) -> AlterPartitionReassignmentsResponse:
    """Cluster mode: only the active controller reassigns; the others answer NOT_CONTROLLER for the
    whole request, as Kafka's ZooKeeper-mode brokers do. The answer does not wait for the data to move."""
    TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse
    targets = {(t.name, p.partition_index): _target_replicas(p)
               for t in request.topics for p in t.partitions}
    outcomes = await broker.controller.alter_partition_reassignments(targets)
    if outcomes is None:
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                                                   error_message="This is not the correct controller for this "
                                                                 "cluster.", responses=[])
    by_topic: dict[str, list] = {}
    for (topic, partition), (code, message) in outcomes.items():
        by_topic.setdefault(topic, []).append(PartitionResponse(partition_index=partition, error_code=code,
                                                                error_message=message))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=[
        TopicResponse(name=topic, partitions=parts) for topic, parts in by_topic.items()])


def _reassign(store, topic: str, partition: int, replicas: list[int] | None) -> tuple[int, str | None]:
    meta = store.get_topic(topic)
    if meta is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    if not 0 <= partition < meta.partition_count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
    try:
        store.alter_partition_reassignment(topic, partition, replicas)
    except KafkaError as exc:
        log.info("Unable to alter partition reassignment for %s:%d because of an %s error: %s", topic, partition,
                 exc.code.name, exc)
        return exc.code, str(exc)
    return ErrorCode.NONE, None


@handles(ListPartitionReassignmentsRequest)
async def handle_list_partition_reassignments(
        ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    store = ctx.broker.metadata
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):  # DESCRIBE on the cluster (KafkaApis)
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                  error_message=None, topics=[])
    if ctx.broker.controller is not None:
        return await _list_in_cluster(ctx.broker, request)
    if request.topics is None:
        wanted = [(meta, range(meta.partition_count)) for meta in store.list_topics()]
    else:  # unknown topics and partitions are left out, as in Kafka
        wanted = [(meta, t.partition_indexes) for t in request.topics
                  if (meta := store.get_topic(t.name)) is not None]
    Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment
    topics = []
    for meta, indexes in wanted:
        ongoing = [meta.partitions[p] for p in indexes if 0 <= p < meta.partition_count]
        ongoing = [Partition(partition_index=p.partition, replicas=list(p.replicas),
                             adding_replicas=list(p.adding_replicas), removing_replicas=list(p.removing_replicas))
                   for p in ongoing if p.adding_replicas or p.removing_replicas]
        if ongoing:
            topics.append(Topic(name=meta.name, partitions=ongoing))
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=topics)


async def _list_in_cluster(broker, request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    wanted = None if request.topics is None else [(t.name, p) for t in request.topics for p in t.partition_indexes]
    ongoing = await broker.controller.list_partition_reassignments(wanted)
    if ongoing is None:
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                                                  error_message="This is not the correct controller for this "
                                                                "cluster.", topics=[])
    Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment
    by_topic: dict[str, list] = {}
    for (topic, partition), assignment in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append(Partition(
            partition_index=partition, replicas=list(assignment.replicas), adding_replicas=list(assignment.adding),
            removing_replicas=list(assignment.removing)))
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[
        Topic(name=topic, partitions=parts) for topic, parts in by_topic.items()])
