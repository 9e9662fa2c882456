"""Group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ListGroups, DescribeGroups, DeleteGroups, ConsumerGroupDescribe.

Each handler only translates between the request/response versions and the group
coordinator (kafkapy.groupcoord), which holds every rule. JoinGroup and SyncGroup park on a
future that the coordinator completes when the rebalance reaches the member.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from ...metadata.acls import AclOperation, ResourceType
from ...groupcoord import OFFSETS_TOPIC, JoinRequest, partition_for
from ...protocol.error_messages import default_message
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from ..dispatch import RequestContext, handles
from ..coordinator_writes import coordinator_write_durable

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
_GROUP = ResourceType.GROUP


async def wait_for(register: Callable[[Callable[[Any], None]], None]) -> Any:
    """Call `register(callback)` and wait until the coordinator calls the callback."""
    future = asyncio.get_running_loop().create_future()

    def complete(result: Any) -> None:
        if not future.done():
            future.set_result(result)

    register(complete)
    return await future


# -- FindCoordinator -----------------------------------------------------------------------
def _node(broker, node_id: int, listener_name: str | None = None) -> tuple[str, int] | None:
    for info in broker.brokers_for(listener_name):
        if info.node_id == node_id:
            return info.host, info.port
    return None


def find_coordinator(broker, key: str, key_type: int,
                     listener_name: str | None = None) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port) of the coordinator for one key."""
    if key_type == TRANSACTION_KEY_TYPE:
        error, node_id = broker.transaction_coordinator.find_coordinator(key)
    elif key_type == GROUP_KEY_TYPE:
        if broker.group_coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "no group coordinator", -1, "", -1
        meta = broker.group_coordination.offsets_topic()
        if meta is None or not meta.partitions:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is not available", -1, "", -1
        node_id = meta.partitions[partition_for(key, len(meta.partitions))].leader
        error = ErrorCode.NONE
    else:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
    if error != ErrorCode.NONE:
        return error, ErrorCode(error).name, -1, "", -1
    address = _node(broker, node_id, listener_name) if node_id >= 0 else None
    if address is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator has no live leader", -1, "", -1
    return ErrorCode.NONE, "NONE", node_id, address[0], address[1]


def _coordinator_key_denied(ctx: RequestContext, key: str, key_type: int) -> tuple | None:
    """KafkaApis: DESCRIBE on the group or the transactional id, else its *_AUTHORIZATION_FAILED."""
    if key_type == GROUP_KEY_TYPE and not ctx.authorized(AclOperation.DESCRIBE, _GROUP, key):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif key_type == TRANSACTION_KEY_TYPE and not ctx.authorized(AclOperation.DESCRIBE,
                                                                 ResourceType.TRANSACTIONAL_ID, key):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        return None
    return error, ErrorCode(error).name, -1, "", -1


@handles(FindCoordinatorRequest)
async def handle_find_coordinator(ctx: RequestContext,
                                  request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    broker = ctx.services
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node_id, host, port = _coordinator_key_denied(ctx, key, request.key_type) or \
                find_coordinator(broker, key, request.key_type, ctx.listener_name)
            if error:
                log.debug("FindCoordinator %r (key type %d): %s", key, request.key_type, message)
            # KafkaApis sets no message on a v4+ coordinator: the schema's default, ""
            coordinators.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=node_id, host=host, port=port, error_code=error, error_message=""))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    error, message, node_id, host, port = _coordinator_key_denied(ctx, request.key, request.key_type) or \
        find_coordinator(broker, request.key, request.key_type, ctx.listener_name)
    if error:
        log.debug("FindCoordinator %r (key type %d): %s", request.key, request.key_type, message)
    # v0-3: Errors.message(), the error's default text ("NONE" on success)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=default_message(error),
                                   node_id=node_id, host=host, port=port)


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ---------------------------------------
@handles(JoinGroupRequest)
async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    if not ctx.authorized(AclOperation.READ, _GROUP, request.group_id):
        return JoinGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                 generation_id=-1, protocol_name=None if version >= 7 else "", leader="",
                                 member_id="", members=[])
    instance_id = request.group_instance_id if version >= 5 else None
    join = JoinRequest(
        group_id=request.group_id, member_id=request.member_id, group_instance_id=instance_id,
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        rebalance_timeout_ms=request.session_timeout_ms if version == 0 else request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms, protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        # KIP-394: from v4 a dynamic member first gets its id (MEMBER_ID_REQUIRED)
        require_known_member_id=version >= 4 and instance_id is None,
        support_skipping_assignment=version >= 9,
        reason=request.reason if version >= 8 else None)
    coordinator = ctx.group_coordinator
    result = await wait_for(lambda done: coordinator.join_group(join, done))
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader_id,
        skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in result.members])


@handles(SyncGroupRequest)
async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    version = ctx.api_version
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return SyncGroupResponse(throttle_time_ms=0, error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                 assignment=b"")
    if not ctx.authorized(AclOperation.READ, _GROUP, request.group_id):
        return SyncGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                 assignment=b"")
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    coordinator = ctx.group_coordinator
    result = await wait_for(lambda done: coordinator.sync_group(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if version >= 3 else None, request.protocol_type, request.protocol_name,
        assignments, done))
    if result.error == ErrorCode.NONE:
        # the leader's SyncGroup wrote the group's metadata: answer once it is as durable as an
        # offset commit (on the ISR in cluster mode), as Kafka answers after its append completes
        error = await coordinator_write_durable(ctx.services, coordinator.partition_for(request.group_id))
        if error != ErrorCode.NONE:
            return SyncGroupResponse(throttle_time_ms=0, error_code=error, assignment=b"")
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)


@handles(HeartbeatRequest)
async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorized(AclOperation.READ, _GROUP, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = ctx.group_coordinator.heartbeat(
        request.group_id, request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None, request.generation_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


@handles(LeaveGroupRequest)
async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    version = ctx.api_version
    if not ctx.authorized(AclOperation.READ, _GROUP, request.group_id):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[])
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    error, member_errors = ctx.group_coordinator.leave_group(request.group_id, leaving)
    if version < 3:
        # a single member: its error is the response's (Kafka's LeaveGroupResponse.getError)
        if error == ErrorCode.NONE:
            error = next((e for e in member_errors if e != ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
    members = [LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=e)
               for (m, i), e in zip(leaving, member_errors)]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=members)


# -- admin ---------------------------------------------------------------------------------
@handles(ListGroupsRequest)
async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    version = ctx.api_version
    states = request.states_filter if version >= 4 else None
    types = request.types_filter if version >= 5 else None
    error, groups = ctx.group_coordinator.list_groups(states, types)
    share = ctx.services.loaded_share_groups  # share groups (KIP-932), once the first share request built them
    if share is not None and error == ErrorCode.NONE:
        groups = list(groups) + share.list_groups(ctx.group_coordinator.manager.is_local, states, types)
    # KafkaApis: DESCRIBE on the cluster lists every group, otherwise those the principal may DESCRIBE
    if groups and not ctx.authorized_cluster(AclOperation.DESCRIBE, log_if_denied=False):
        groups = [g for g in groups if ctx.authorized(AclOperation.DESCRIBE, _GROUP, g.group_id, log_if_denied=False)]
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[
        ListGroupsResponse.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                                       group_state=g.state, group_type=g.group_type) for g in groups])


@handles(DescribeGroupsRequest)
async def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coordinator = ctx.group_coordinator
    include_operations = ctx.api_version >= 3 and request.include_authorized_operations
    described = []
    for group_id in request.groups:
        if not ctx.authorized(AclOperation.DESCRIBE, _GROUP, group_id):
            described.append(DescribeGroupsResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
                protocol_type="", protocol_data="", members=[]))
            continue
        error, summary = coordinator.describe_group(group_id)
        if error == ErrorCode.NONE and summary.missing is not None and ctx.api_version >= 6:
            # v6 (KIP-1043): an unknown or non-classic group is GROUP_ID_NOT_FOUND, still "Dead"
            share = ctx.services.loaded_share_groups
            message = summary.missing if share is None or share.describe(group_id) is None else \
                f"Group {group_id} is not a classic group."
            described.append(DescribeGroupsResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id,
                group_state=summary.state, protocol_type="", protocol_data="", members=[]))
            continue
        group = DescribeGroupsResponse.DescribedGroup(
            error_code=error, group_id=group_id, group_state=summary.state, protocol_type=summary.protocol_type,
            protocol_data=summary.protocol, members=[
                DescribeGroupsResponse.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                for m in summary.members])
        if include_operations and error == ErrorCode.NONE:
            group.authorized_operations = ctx.authorized_operations(_GROUP, group_id)
        described.append(group)
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


@handles(DeleteGroupsRequest)
async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    denied = ctx.unauthorized_names(AclOperation.DELETE, _GROUP, request.groups_names)
    results = ctx.group_coordinator.delete_groups([g for g in request.groups_names if g not in denied])
    if ctx.services.loaded_share_groups is not None:  # share groups (KIP-932), once a share request built them
        unknown = [g for g, error in results.items() if error == ErrorCode.GROUP_ID_NOT_FOUND]
        results.update(await ctx.services.share_coordination.delete_groups(unknown))
    results.update({g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in denied})
    # v3 (KIP-1043) has an ErrorMessage per group; Kafka 4.4 leaves it null but for share groups whose
    # state the persister failed to delete
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=results[g], error_message=None)
        for g in request.groups_names])


@handles(ConsumerGroupDescribeRequest)
async def handle_consumer_group_describe(ctx: RequestContext,
                                         request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    """KIP-848 groups as Kafka 4.0 describes them (groupcoord/consumer/describe.py).

    A classic or unknown group answers GROUP_ID_NOT_FOUND, which is what makes the Java admin
    client (describeConsumerGroups, kafka-consumer-groups.sh) retry with DescribeGroups.
    """
    coordinator = ctx.group_coordinator
    if "consumer" not in coordinator.config.group_coordinator_rebalance_protocols:
        # as KafkaApis without the consumer protocol: every group UNSUPPORTED_VERSION (the admin
        # client then describes it with DescribeGroups)
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.UNSUPPORTED_VERSION, error_message="The version of API is not supported.",
                group_id=group_id) for group_id in request.group_ids])
    denied = ctx.unauthorized_names(AclOperation.DESCRIBE, _GROUP, request.group_ids)
    results = {r.group_id: r for r in coordinator.describe_consumer_groups(
        [g for g in request.group_ids if g not in denied], lambda topic_id: _topic_name(ctx.services, topic_id))}
    groups = []
    for group_id in request.group_ids:
        if group_id in denied:
            groups.append(ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        result = results[group_id]
        d = result.description
        if d is None:
            groups.append(ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=result.error, error_message=result.message, group_id=group_id))
            continue
        # Kafka 4.0 (KAFKA-18813): a group whose assignments name a topic the caller may not DESCRIBE
        # is not shown at all
        topics = {t.topic_name for m in d.members for t in (*m.assignment, *m.target_assignment)}
        if topics and ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, topics):
            groups.append(ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        group = ConsumerGroupDescribeResponse.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=d.state, group_epoch=d.group_epoch,
            assignment_epoch=d.assignment_epoch, assignor_name=d.assignor_name,
            members=[_described_member(m) for m in d.members])
        if request.include_authorized_operations:
            group.authorized_operations = ctx.authorized_operations(_GROUP, group_id)
        groups.append(group)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _topic_name(broker, topic_id) -> str | None:
    meta = broker.partitions.topic_by_id(topic_id)
    return None if meta is None else meta.name


def _described_assignment(topics) -> ConsumerGroupDescribeResponse.Assignment:
    return ConsumerGroupDescribeResponse.Assignment(topic_partitions=[
        ConsumerGroupDescribeResponse.TopicPartitions(topic_id=t.topic_id, topic_name=t.topic_name,
                                                      partitions=list(t.partitions)) for t in topics])


def _described_member(m) -> ConsumerGroupDescribeResponse.Member:
    return ConsumerGroupDescribeResponse.Member(
        member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
        client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex, assignment=_described_assignment(m.assignment),
        target_assignment=_described_assignment(m.target_assignment), member_type=m.member_type)
