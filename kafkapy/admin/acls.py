"""`kafkapy acls list|create|delete`: kafka-acls.sh (the broker answers when an authorizer is set)."""
from __future__ import annotations

import argparse

from ..protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from .client import AdminClient
from .errors import CliError, KafkaApiError
from .output import emit

__all__ = ["list_acls", "create_acls", "delete_acls", "RESOURCE_TYPES", "OPERATIONS", "PATTERN_TYPES"]

RESOURCE_TYPES = {"unknown": 0, "any": 1, "topic": 2, "group": 3, "cluster": 4, "transactional-id": 5,
                  "delegation-token": 6, "user": 7}
PATTERN_TYPES = {"unknown": 0, "any": 1, "match": 2, "literal": 3, "prefixed": 4}
OPERATIONS = {"unknown": 0, "any": 1, "all": 2, "read": 3, "write": 4, "create": 5, "delete": 6, "alter": 7,
              "describe": 8, "cluster-action": 9, "describe-configs": 10, "alter-configs": 11,
              "idempotent-write": 12, "create-tokens": 13, "describe-tokens": 14}
PERMISSIONS = {"unknown": 0, "any": 1, "deny": 2, "allow": 3}
_NAMES = {table_id: {v: k for k, v in table.items()}
          for table_id, table in (("resource", RESOURCE_TYPES), ("pattern", PATTERN_TYPES), ("op", OPERATIONS),
                                  ("perm", PERMISSIONS))}


def _lookup(table: dict, value: str, what: str) -> int:
    key = value.strip().lower().replace("_", "-")
    if key not in table:
        raise CliError(f"unknown {what} {value!r}: one of {', '.join(k for k in table if k != 'unknown')}",
                       exit_code=2)
    return table[key]


def _resource(args: argparse.Namespace, *, filter_: bool) -> tuple[int, str | None]:
    given = [(kind, name) for kind, name in (("topic", args.topic), ("group", args.group),
                                             ("transactional-id", args.transactional_id)) if name is not None]
    if args.cluster:
        given.append(("cluster", "kafka-cluster"))
    if len(given) > 1:
        raise CliError("give one resource: --topic, --group, --transactional-id or --cluster", exit_code=2)
    if not given:
        if filter_:
            return RESOURCE_TYPES["any"], None
        raise CliError("say which resource: --topic T, --group G, --transactional-id T or --cluster", exit_code=2)
    kind, name = given[0]
    return RESOURCE_TYPES[kind], name


def _principal_and_permission(args: argparse.Namespace, *, filter_: bool) -> tuple[str | None, int]:
    if args.allow_principal and args.deny_principal:
        raise CliError("give --allow-principal or --deny-principal, not both", exit_code=2)
    principal = args.allow_principal or args.deny_principal or args.principal
    if args.allow_principal:
        permission = PERMISSIONS["allow"]
    elif args.deny_principal:
        permission = PERMISSIONS["deny"]
    else:
        permission = _lookup(PERMISSIONS, args.permission or ("any" if filter_ else "allow"), "permission")
    if principal is None and not filter_:
        raise CliError("say whose ACL: --allow-principal User:NAME or --deny-principal User:NAME", exit_code=2)
    if principal is not None and ":" not in principal:
        raise CliError(f"bad principal {principal!r}: expected TYPE:NAME such as User:alice", exit_code=2)
    return principal, permission


def _rows(resources) -> list[dict]:
    rows = []
    for resource in resources:
        for acl in resource.acls:
            rows.append({"resource_type": _NAMES["resource"].get(resource.resource_type, "?").upper(),
                         "name": resource.resource_name,
                         "pattern": _NAMES["pattern"].get(resource.pattern_type, "?").upper(),
                         "principal": acl.principal, "host": acl.host,
                         "operation": _NAMES["op"].get(acl.operation, "?").upper(),
                         "permission": _NAMES["perm"].get(acl.permission_type, "?").upper()})
    return rows


_HEADERS = ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
_KEYS = ["resource_type", "name", "pattern", "principal", "host", "operation", "permission"]


def list_acls(client: AdminClient, args: argparse.Namespace) -> int:
    resource_type, name = _resource(args, filter_=True)
    principal, permission = _principal_and_permission(args, filter_=True)
    pattern = _lookup(PATTERN_TYPES, args.resource_pattern_type or ("any" if name is None else "literal"), "pattern")
    request = DescribeAclsRequest(resource_type_filter=resource_type, resource_name_filter=name,
                                  pattern_type_filter=pattern, principal_filter=principal, host_filter=args.host,
                                  operation=_lookup(OPERATIONS, (args.operation or ["any"])[0], "operation"),
                                  permission_type=permission)
    response = client.send(request)
    if response.error_code:
        raise KafkaApiError(response.error_code, "cannot list ACLs", detail=response.error_message)
    emit(args.format, _rows(response.resources), _HEADERS, _KEYS)
    return 0


def create_acls(client: AdminClient, args: argparse.Namespace) -> int:
    resource_type, name = _resource(args, filter_=False)
    principal, permission = _principal_and_permission(args, filter_=False)
    pattern = _lookup(PATTERN_TYPES, args.resource_pattern_type or "literal", "pattern")
    if pattern not in (PATTERN_TYPES["literal"], PATTERN_TYPES["prefixed"]):
        raise CliError("--resource-pattern-type for new ACLs is literal or prefixed", exit_code=2)
    operations = [_lookup(OPERATIONS, op, "operation") for op in args.operation or ["all"]]
    creations = [CreateAclsRequest.AclCreation(resource_type=resource_type, resource_name=name,
                                               resource_pattern_type=pattern, principal=principal,
                                               host=args.host or "*", operation=op, permission_type=permission)
                 for op in operations]
    response = client.send(CreateAclsRequest(creations=creations))
    for result in response.results:
        if result.error_code:
            raise KafkaApiError(result.error_code, "cannot create the ACL", detail=result.error_message)
    rows = [{"resource_type": _NAMES["resource"][resource_type].upper(), "name": name,
             "pattern": _NAMES["pattern"][pattern].upper(), "principal": principal, "host": args.host or "*",
             "operation": _NAMES["op"][op].upper(), "permission": _NAMES["perm"][permission].upper()}
            for op in operations]
    emit(args.format, rows, _HEADERS, _KEYS)
    return 0


def delete_acls(client: AdminClient, args: argparse.Namespace) -> int:
    resource_type, name = _resource(args, filter_=True)
    principal, permission = _principal_and_permission(args, filter_=True)
    pattern = _lookup(PATTERN_TYPES, args.resource_pattern_type or ("any" if name is None else "literal"), "pattern")
    filters = [DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=args.host, operation=_lookup(OPERATIONS, op, "operation"),
        permission_type=permission) for op in args.operation or ["any"]]
    response = client.send(DeleteAclsRequest(filters=filters))
    rows = []
    for result in response.filter_results:
        if result.error_code:
            raise KafkaApiError(result.error_code, "cannot delete ACLs", detail=result.error_message)
        for acl in result.matching_acls:
            rows.append({"resource_type": _NAMES["resource"].get(acl.resource_type, "?").upper(),
                         "name": acl.resource_name, "pattern": _NAMES["pattern"].get(acl.pattern_type, "?").upper(),
                         "principal": acl.principal, "host": acl.host,
                         "operation": _NAMES["op"].get(acl.operation, "?").upper(),
                         "permission": _NAMES["perm"].get(acl.permission_type, "?").upper()})
    emit(args.format, rows, _HEADERS, _KEYS)
    return 0
