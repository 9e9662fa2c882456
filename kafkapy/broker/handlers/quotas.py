"""DescribeClientQuotas, AlterClientQuotas: client quotas kept in the metadata store (KIP-546).

Entities are user and/or client-id, each a name or `<default>` (a null entity_name on the wire);
enforcement is kafkapy.security.quotas, which the broker switches on when the first quota is
stored and off when the last one is removed. As Kafka, describing needs DESCRIBE_CONFIGS and
altering ALTER_CONFIGS on the cluster resource (when an authorizer is configured).
"""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from ...metadata.quotas import CLIENT_ID, IP, USER, QuotaEntity, QuotaError, validate_quota
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)

# DescribeClientQuotasRequest.ComponentData.match_type
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class _UnsupportedEntityType(QuotaError):
    """A filter component of an entity type Kafka does not know: UNSUPPORTED_VERSION, as Kafka answers."""


class _Filter:
    """A DescribeClientQuotas filter: per entity type exact name, `<default>` or any; `strict`
    also requires the entity to have no other components."""

    def __init__(self, components, strict: bool):
        self.strict = strict
        self.components: dict[str, tuple[int, str | None]] = {}
        for component in components:
            entity_type = component.entity_type
            if entity_type not in (USER, CLIENT_ID, IP):
                raise _UnsupportedEntityType(f"Custom entity type {entity_type!r} not supported")
            if entity_type in self.components:
                raise QuotaError(f"Duplicate {entity_type} filter component entity type")
            if component.match_type == MATCH_EXACT:
                if component.match is None:
                    raise QuotaError("Match for an exact match must not be null")
            elif component.match_type == MATCH_DEFAULT:
                if component.match is not None:
                    raise QuotaError("Match for a default match must be null")
            elif component.match_type == MATCH_SPECIFIED:
                if component.match is not None:
                    raise QuotaError("Match for a specified match must be null")
            else:
                raise QuotaError(f"Unexpected match type: {component.match_type}")
            self.components[entity_type] = (component.match_type, component.match)

    def matches(self, entity: QuotaEntity) -> bool:
        names = entity.as_dict()
        for entity_type, (match_type, match) in self.components.items():
            if entity_type not in names:
                return False
            name = names[entity_type]
            if match_type == MATCH_EXACT and name != match:
                return False
            if match_type == MATCH_DEFAULT and name is not None:
                return False
        return not self.strict or set(names) <= set(self.components)


@handles(DescribeClientQuotasRequest)
async def handle_describe_client_quotas(ctx: RequestContext,
                                        request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    Response = DescribeClientQuotasResponse
    if not ctx.authorized_cluster(AclOperation.DESCRIBE_CONFIGS):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=None, entries=None)
    try:
        quota_filter = _Filter(request.components, request.strict)
    except QuotaError as exc:
        code = ErrorCode.UNSUPPORTED_VERSION if isinstance(exc, _UnsupportedEntityType) else ErrorCode.INVALID_REQUEST
        return Response(throttle_time_ms=0, error_code=code, error_message=str(exc), entries=None)
    entries = []
    quotas = ctx.metadata.describe_client_quotas()
    for entity, values in sorted(quotas.items(), key=lambda item: str(item[0])):
        if not quota_filter.matches(entity):
            continue
        entries.append(Response.EntryData(
            entity=[Response.EntityData(entity_type=t, entity_name=n) for t, n in entity.components],
            values=[Response.ValueData(key=k, value=float(v)) for k, v in sorted(values.items())]))
    # KafkaApis leaves the message unset: the schema's default, ""
    return Response(throttle_time_ms=0, error_code=0, error_message="", entries=entries)


@handles(AlterClientQuotasRequest)
async def handle_alter_client_quotas(ctx: RequestContext,
                                     request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    Response = AlterClientQuotasResponse
    if not ctx.authorized_cluster(AclOperation.ALTER_CONFIGS):
        return Response(throttle_time_ms=0, entries=[Response.EntryData(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
            entity=[Response.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
            for entry in request.entries])
    results = []
    changes: dict[QuotaEntity, dict[str, float | None]] = {}
    for entry in request.entries:
        echoed = [Response.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]
        try:
            entity = _entity(entry)
            ops: dict[str, float | None] = {}
            for op in entry.ops:
                if op.key in ops:
                    raise QuotaError(f"Duplicate quota key {op.key} for entity {entity}")
                if op.remove:
                    validate_quota(op.key, 1.0)
                    ops[op.key] = None
                else:
                    validate_quota(op.key, op.value)
                    ops[op.key] = float(op.value)
            if entity in changes:
                raise QuotaError(f"Duplicate entity {entity}")
        except QuotaError as exc:
            results.append(Response.EntryData(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc),
                                              entity=echoed))
            continue
        changes[entity] = ops
        results.append(Response.EntryData(error_code=0, error_message=None, entity=echoed))
    if changes and not request.validate_only:
        ctx.metadata.alter_client_quotas(changes)
        log.info("client %s (%s) altered client quotas of %s", ctx.client_id, ctx.principal,
                 ", ".join(str(e) for e in changes))
    return Response(throttle_time_ms=0, entries=results)


def _entity(entry) -> QuotaEntity:
    components: dict[str, str | None] = {}
    for component in entry.entity:
        if component.entity_type in components:
            raise QuotaError(f"Duplicate {component.entity_type} entity type")
        components[component.entity_type] = component.entity_name
    entity = QuotaEntity.of(components)
    entity.validate()
    return entity
