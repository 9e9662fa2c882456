"""ACL bindings and binding filters with Kafka's codes, validation and filter-matching rules.

An ACL binding is a resource pattern (type, name, LITERAL or PREFIXED) plus an access control entry
(principal, host, operation, ALLOW/DENY). Filters select bindings the way Kafka's
`AclBindingFilter.matches` does: ANY matches everything, MATCH also selects the LITERAL "*"
wildcard and PREFIXED patterns that cover the name, a null name/principal/host matches any.

These are the records the metadata store keeps and the CreateAcls/DescribeAcls/DeleteAcls handlers
serve; kafkapy.security.authorizer decides requests from them.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from .errors import InvalidRequestError

__all__ = ["AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType", "CLUSTER_RESOURCE_NAME",
           "PatternType", "ResourceType", "WILDCARD_RESOURCE", "validate_filter", "validate_new_acl"]

CLUSTER_RESOURCE_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _known(enum: type[IntEnum], code: int) -> IntEnum:
    """Kafka's `fromCode`: a code this broker does not know reads as UNKNOWN."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One stored ACL: a resource pattern and an access control entry (Kafka's AclBinding)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(cls, resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
           operation: int, permission_type: int) -> AclBinding:
        """Build from wire codes; unknown codes become UNKNOWN (rejected by validate_new_acl)."""
        return cls(_known(ResourceType, resource_type), resource_name, _known(PatternType, pattern_type),
                   principal, host, _known(AclOperation, operation), _known(AclPermissionType, permission_type))

    def __str__(self) -> str:  # Kafka's AclBinding.toString, which operators know from its logs
        return (f"(pattern=ResourcePattern(resourceType={self.resource_type.name}, name={self.resource_name}, "
                f"patternType={self.pattern_type.name}), entry=(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name}))")

    def sort_key(self) -> tuple:
        return (self.resource_type, self.resource_name, self.pattern_type, self.principal, self.host,
                self.operation, self.permission_type)

    def to_json(self) -> dict[str, Any]:
        return {"resource_type": self.resource_type.name, "resource_name": self.resource_name,
                "pattern_type": self.pattern_type.name, "principal": self.principal, "host": self.host,
                "operation": self.operation.name, "permission_type": self.permission_type.name}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> AclBinding:
        return cls(ResourceType[raw["resource_type"]], raw["resource_name"], PatternType[raw["pattern_type"]],
                   raw["principal"], raw["host"], AclOperation[raw["operation"]],
                   AclPermissionType[raw["permission_type"]])


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects ACL bindings (Kafka's AclBindingFilter); None for a name, principal or host matches any."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(cls, resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
           host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
        return cls(_known(ResourceType, resource_type), resource_name, _known(PatternType, pattern_type),
                   principal, host, _known(AclOperation, operation), _known(AclPermissionType, permission_type))

    @property
    def is_unknown(self) -> bool:
        return (self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN
                or self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN)

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        # ResourcePatternFilter.matches
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        # MATCH: the filter names a concrete resource; select every pattern that covers it.
        if acl.pattern_type == PatternType.LITERAL:
            return self.resource_name == acl.resource_name or acl.resource_name == WILDCARD_RESOURCE
        if acl.pattern_type == PatternType.PREFIXED:
            return self.resource_name.startswith(acl.resource_name)
        return False

    def _matches_entry(self, acl: AclBinding) -> bool:
        # AccessControlEntryFilter.matches
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == acl.permission_type


def validate_new_acl(acl: AclBinding) -> None:
    """Reject what Kafka's AclApis and AclControlManager reject (INVALID_REQUEST)."""
    # The broker's checks (AclApis) come first, then the controller's (AclControlManager).
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_RESOURCE_NAME:
        raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}")
    if not acl.resource_name:
        raise InvalidRequestError("Invalid empty resource name")
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidRequestError(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequestError(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidRequestError(f"Invalid operation {acl.operation.name}")
    if acl.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        raise InvalidRequestError(f"Invalid permissionType {acl.permission_type.name}")
    if ":" not in acl.principal:
        raise InvalidRequestError(f"Could not parse principal from `{acl.principal}` (no colon is present "
                                  "separating the principal type from the principal name)")


def validate_filter(acl_filter: AclBindingFilter) -> None:
    """Kafka's AclControlManager.validateFilter: a filter with UNKNOWN parts selects nothing sensible."""
    if acl_filter.resource_type == ResourceType.UNKNOWN or acl_filter.pattern_type == PatternType.UNKNOWN:
        raise InvalidRequestError("Unknown patternFilter.")
    if acl_filter.operation == AclOperation.UNKNOWN or acl_filter.permission_type == AclPermissionType.UNKNOWN:
        raise InvalidRequestError("Unknown entryFilter.")
