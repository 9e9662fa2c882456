"""StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89): the streams rebalance protocol (KIP-1071).

The heartbeat handler translates as Kafka's KafkaApis.handleStreamsGroupHeartbeat does: READ on
the group; with a topology, Kafka's internal topics and invalid topic names are refused
(STREAMS_INVALID_TOPOLOGY) and DESCRIBE is needed on every topic it names; the coordinator
(kafkapy.groupcoord.streams) answers; the internal topics it lists are created here (CREATE on
the cluster or on each topic, else the MISSING_INTERNAL_TOPICS status says who may not).
"""
from __future__ import annotations

import logging

from ...groupcoord import OFFSETS_TOPIC
from ...groupcoord.streams.group import StreamsGroup, Tasks
from ...groupcoord.streams.membership import StreamsHeartbeat
from ...groupcoord.streams.topology import Status, Topology
from ...metadata.acls import AclOperation, ResourceType
from ...metadata.topic_rules import is_internal_topic, validate_topic_name
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import (
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)
from ..dispatch import RequestContext, handles
from ..coordinator_writes import coordinator_write_durable

log = logging.getLogger(__name__)

_Response = StreamsGroupHeartbeatResponse
_Describe = StreamsGroupDescribeResponse


def _task_ids(cls, tasks: dict[str, frozenset[int]]) -> list:
    return [cls(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items())]


def _owned(tasks) -> dict[str, list[int]] | None:
    if tasks is None:
        return None
    out: dict[str, list[int]] = {}
    for t in tasks:
        out.setdefault(t.subtopology_id, []).extend(t.partitions)
    return out


def _valid_name(name: str) -> bool:
    try:
        validate_topic_name(name)
        return True
    except KafkaError:
        return False


def _create_internal_topics(ctx: RequestContext, to_create: dict, status: list) -> None:
    """Create the internal topics the coordinator asked for (Kafka's createStreamsInternalTopics)."""
    broker = ctx.services
    names = sorted(to_create)
    unauthorized: list[str] = []
    if not ctx.authorized_cluster(AclOperation.CREATE, log_if_denied=False):
        unauthorized = sorted(ctx.unauthorized_names(AclOperation.CREATE, ResourceType.TOPIC, names))
    if unauthorized:
        detail = f"Unauthorized to CREATE on topics {', '.join(unauthorized)}."
        for i, (code, text) in enumerate(status):
            if code == Status.MISSING_INTERNAL_TOPICS:
                status[i] = (code, f"{text}; {detail}")
                break
        else:
            status.append((Status.MISSING_INTERNAL_TOPICS, detail))
        return
    for name in names:
        topic = to_create[name]
        try:
            broker.partitions.create_topic(name, topic.partitions, topic.replication_factor,
                                           configs=dict(topic.configs))
            log.info("created internal topic %s (%d partitions) for a streams group", name, topic.partitions)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("creating internal topic %s of a streams group failed: %s", name, exc)


@handles(StreamsGroupHeartbeatRequest)
async def handle_streams_group_heartbeat(ctx: RequestContext,
                                         request: StreamsGroupHeartbeatRequest) -> StreamsGroupHeartbeatResponse:
    broker = ctx.services
    coordinator = broker.group_coordinator
    if not coordinator.streams.enabled:
        return _Response(error_code=ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topology = None
    if request.topology is not None:
        topology = Topology.from_request(request.topology)
        required = sorted(topology.required_topics())
        prohibited = [t for t in required if is_internal_topic(t)]
        if prohibited:
            return _Response(error_code=ErrorCode.STREAMS_INVALID_TOPOLOGY,
                             error_message=f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams"
                                           f" topology is prohibited.")
        invalid = [t for t in required if not _valid_name(t)]
        if invalid:
            return _Response(error_code=ErrorCode.STREAMS_INVALID_TOPOLOGY,
                             error_message=f"Topic names {','.join(invalid)} are not valid topic names.")
        if required and ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, required):
            return _Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    endpoint = request.user_endpoint
    heartbeat = StreamsHeartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        topology=topology, active_tasks=_owned(request.active_tasks), standby_tasks=_owned(request.standby_tasks),
        warmup_tasks=_owned(request.warmup_tasks), process_id=request.process_id,
        user_endpoint=None if endpoint is None else (endpoint.host, endpoint.port),
        client_tags=None if request.client_tags is None else {kv.key: kv.value for kv in request.client_tags},
        task_offsets=None if request.task_offsets is None else
        [(t.subtopology_id, t.partition, t.offset) for t in request.task_offsets],
        task_end_offsets=None if request.task_end_offsets is None else
        [(t.subtopology_id, t.partition, t.offset) for t in request.task_end_offsets],
        shutdown_application=request.shutdown_application,
        endpoint_information_epoch=request.endpoint_information_epoch,
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host)
    partition = coordinator.partition_for(request.group_id) if request.group_id else -1
    plog = broker.partitions.get_log(OFFSETS_TOPIC, partition) if partition >= 0 else None
    end_before = plog.log_end_offset if plog is not None else -1
    result = coordinator.streams_group_heartbeat(heartbeat)
    if result.error == ErrorCode.NONE and plog is not None and plog.log_end_offset != end_before:
        error = await coordinator_write_durable(broker, partition)
        if error != ErrorCode.NONE:
            return _Response(error_code=error)
    if result.error != ErrorCode.NONE:
        return _Response(error_code=result.error, error_message=result.message)
    status = list(result.status)
    if result.internal_topics_to_create:
        _create_internal_topics(ctx, result.internal_topics_to_create, status)
    if ctx.api_version < 1:
        status = [s for s in status if s[0] != Status.MISSING_CLIENT_TAGS]
    response = _Response(
        error_code=ErrorCode.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms, task_offset_interval_ms=result.task_offset_interval_ms,
        acceptable_recovery_lag=result.acceptable_recovery_lag,  # v1; v0's legacy field stays 0, as Kafka 4.4
        status=[_Response.Status(status_code=code, status_detail=detail) for code, detail in status],
        endpoint_information_epoch=result.endpoint_information_epoch)
    tasks: Tasks | None = result.tasks
    if tasks is not None:
        response.active_tasks = _task_ids(_Response.TaskIds, tasks.active)
        response.standby_tasks = _task_ids(_Response.TaskIds, tasks.standby)
        response.warmup_tasks = _task_ids(_Response.TaskIds, tasks.warmup)
    if result.partitions_by_endpoint is not None:
        response.partitions_by_user_endpoint = [
            _Response.EndpointToPartitions(
                user_endpoint=_Response.Endpoint(host=host, port=port),
                active_partitions=[_Response.TopicPartition(topic=t, partitions=p) for t, p in active],
                standby_partitions=[_Response.TopicPartition(topic=t, partitions=p) for t, p in standby])
            for host, port, active, standby in result.partitions_by_endpoint]
    return response


def _describe_group(group: StreamsGroup) -> _Describe.DescribedGroup:
    topology = None
    if group.topology is not None:
        # configured: the internal topics' decided partition counts; not (yet): as declared (Kafka 4.4)
        decided = {}
        if group.configured is not None and group.configured.tasks is not None:
            decided = group.configured.internal_partitions

        def info(t):
            return _Describe.TopicInfo(name=t.name, partitions=decided.get(t.name, t.partitions),
                                       replication_factor=t.replication_factor,
                                       topic_configs=[_Describe.KeyValue(key=k, value=v) for k, v in t.topic_configs])

        subtopologies = [_Describe.Subtopology(
            subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
            repartition_sink_topics=list(s.repartition_sink_topics),
            state_changelog_topics=[info(t) for t in s.state_changelog_topics],
            repartition_source_topics=[info(t) for t in s.repartition_source_topics])
            for s in group.topology.subtopologies]
        topology = _Describe.Topology(epoch=group.topology.epoch, subtopologies=subtopologies)

    def assignment(tasks: Tasks) -> _Describe.Assignment:
        return _Describe.Assignment(active_tasks=_task_ids(_Describe.TaskIds, tasks.active),
                                    standby_tasks=_task_ids(_Describe.TaskIds, tasks.standby),
                                    warmup_tasks=_task_ids(_Describe.TaskIds, tasks.warmup))

    members = []
    for m in sorted(group.members.values(), key=lambda x: x.member_id):
        members.append(_Describe.Member(
            member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
            client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
            process_id=m.process_id,
            user_endpoint=None if m.user_endpoint is None else _Describe.Endpoint(host=m.user_endpoint[0],
                                                                                  port=m.user_endpoint[1]),
            client_tags=[_Describe.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
            task_offsets=[_Describe.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in m.task_offsets],
            task_end_offsets=[_Describe.TaskOffset(subtopology_id=s, partition=p, offset=o)
                              for s, p, o in m.task_end_offsets],
            assignment=assignment(m.assigned), target_assignment=assignment(group.target.get(m.member_id, Tasks())),
            is_classic=False))
    return _Describe.DescribedGroup(
        error_code=ErrorCode.NONE, group_id=group.group_id, group_state=group.state.value,
        group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, topology=topology, members=members,
        assignor_name="sticky")


@handles(StreamsGroupDescribeRequest)
async def handle_streams_group_describe(ctx: RequestContext,
                                        request: StreamsGroupDescribeRequest) -> StreamsGroupDescribeResponse:
    coordinator = ctx.group_coordinator
    if not coordinator.streams.enabled:
        return _Describe(groups=[_Describe.DescribedGroup(error_code=ErrorCode.UNSUPPORTED_VERSION, group_id=g)
                                 for g in request.group_ids])
    groups = []
    for group_id in request.group_ids:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_Describe.DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        error = coordinator.group_status(group_id)
        if error is not None:
            groups.append(_Describe.DescribedGroup(error_code=error, group_id=group_id))
            continue
        group = coordinator.manager.get_group(group_id)
        if isinstance(group, StreamsGroup) and not group.is_dead:
            coordinator.streams.ensure_configured(group)
            described = _describe_group(group)
            if request.include_authorized_operations:
                described.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, group_id)
            if ctx.api_version >= 1:
                described.topology_description_status = 1 if request.include_topology_description else 0
            if group.topology is not None and ctx.unauthorized_names(
                    AclOperation.DESCRIBE, ResourceType.TOPIC, sorted(group.topology.required_topics())):
                # KafkaApis: a group whose topology names a topic the client may not describe
                described = _Describe.DescribedGroup(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, group_id=group_id,
                    error_message="The described group uses topics that the client is not authorized to describe.")
            groups.append(described)
        elif group is not None and group.state.value != "Dead":
            groups.append(_Describe.DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, group_id=group_id,
                                                   error_message=f"Group {group_id} is not a streams group."))
        else:
            groups.append(_Describe.DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, group_id=group_id,
                                                   error_message=f"Group {group_id} not found."))
    return _Describe(groups=groups)
