"""CreateAcls, DescribeAcls, DeleteAcls: ACLs kept in the metadata store.

As in Kafka, the APIs answer SECURITY_DISABLED unless `authorizer.class.name` is set. With it set,
kafkapy stores, lists and deletes ACLs with Kafka's validation and filter semantics
(kafkapy.metadata.acls), and kafkapy.security.authorizer enforces them; describing needs DESCRIBE
on the cluster, creating and deleting ALTER (CLUSTER_AUTHORIZATION_FAILED otherwise).
"""
from __future__ import annotations

import itertools
import logging

from ...metadata.acls import AclBinding, AclBindingFilter, AclOperation, validate_filter, validate_new_acl
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from ...security.host_patterns import validate_host_pattern
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)

_NO_AUTHORIZER = "No Authorizer is configured."
_UNAUTHORIZED = "Cluster authorization failed."


def authorizer_configured(services) -> bool:
    """True when `authorizer.class.name` is set."""
    return bool(services.config.get("authorizer.class.name"))


@handles(CreateAclsRequest)
async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    Result = CreateAclsResponse.AclCreationResult
    if not ctx.authorized_cluster(AclOperation.ALTER):
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=_UNAUTHORIZED)
            for _ in request.creations])
    if not authorizer_configured(ctx.services):
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=ErrorCode.SECURITY_DISABLED, error_message=_NO_AUTHORIZER) for _ in request.creations])
    results = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        acl = AclBinding.of(creation.resource_type, creation.resource_name, creation.resource_pattern_type,
                            creation.principal, creation.host, creation.operation, creation.permission_type)
        try:
            validate_new_acl(acl)
            validate_host_pattern(acl.host)  # CIDR patterns (KIP-1276, Kafka 4.4)
        except KafkaError as exc:
            results.append(Result(error_code=exc.code, error_message=str(exc)))
            continue
        valid.append(acl)
        results.append(Result(error_code=0, error_message=None))
    if valid:
        ctx.metadata.create_acls(valid)
    return CreateAclsResponse(throttle_time_ms=0, results=results)


@handles(DescribeAclsRequest)
async def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=_UNAUTHORIZED, resources=[])
    if not authorizer_configured(ctx.services):
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message="No Authorizer is configured on the broker", resources=[])
    acl_filter = AclBindingFilter.of(request.resource_type_filter, request.resource_name_filter,
                                     request.pattern_type_filter, request.principal_filter, request.host_filter,
                                     request.operation, request.permission_type)
    if acl_filter.is_unknown:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                    error_message="Filter contain UNKNOWN elements", resources=[])
    acls = ctx.metadata.describe_acls(acl_filter)  # sorted, so equal patterns are adjacent
    resources = []
    for (resource_type, name, pattern_type), group in itertools.groupby(
            acls, key=lambda a: (a.resource_type, a.resource_name, a.pattern_type)):
        resources.append(DescribeAclsResponse.DescribeAclsResource(
            resource_type=resource_type, resource_name=name, pattern_type=pattern_type, acls=[
                DescribeAclsResponse.AclDescription(principal=a.principal, host=a.host, operation=a.operation,
                                                    permission_type=a.permission_type) for a in group]))
    # KafkaApis leaves the message unset: the schema's default, ""
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message="", resources=resources)


@handles(DeleteAclsRequest)
async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    Result = DeleteAclsResponse.DeleteAclsFilterResult
    if not ctx.authorized_cluster(AclOperation.ALTER):
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            Result(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=_UNAUTHORIZED, matching_acls=[])
            for _ in request.filters])
    if not authorizer_configured(ctx.services):
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            Result(error_code=ErrorCode.SECURITY_DISABLED, error_message=_NO_AUTHORIZER, matching_acls=[])
            for _ in request.filters])
    errors: dict[int, KafkaError] = {}
    valid: list[AclBindingFilter] = []
    for index, raw in enumerate(request.filters):
        acl_filter = AclBindingFilter.of(raw.resource_type_filter, raw.resource_name_filter, raw.pattern_type_filter,
                                         raw.principal_filter, raw.host_filter, raw.operation, raw.permission_type)
        try:
            validate_filter(acl_filter)
        except KafkaError as exc:
            errors[index] = exc
            continue
        valid.append(acl_filter)
    deleted = iter(ctx.metadata.delete_acls(valid) if valid else [])
    results = []
    for index in range(len(request.filters)):
        if index in errors:
            results.append(Result(error_code=errors[index].code, error_message=str(errors[index]), matching_acls=[]))
            continue
        results.append(Result(error_code=0, error_message=None, matching_acls=[
            DeleteAclsResponse.DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=a.resource_type, resource_name=a.resource_name,
                pattern_type=a.pattern_type, principal=a.principal, host=a.host, operation=a.operation,
                permission_type=a.permission_type)
            for a in next(deleted)]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
