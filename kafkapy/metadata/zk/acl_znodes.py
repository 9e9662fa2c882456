"""The ACL znodes of a Kafka 3.7 cluster in ZooKeeper mode (AclAuthorizer's layout): the ACL roots
and their paths, the ACL entries' JSON and the change notifications, byte-for-byte as Kafka writes
them. Re-exported by paths.py, which holds the rest of the layout.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .znode_json import ZnodeDecodeError, _dump, _load_object, _require

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"


# The resource types AclAuthorizer gives a child znode under each ACL root (AclEntry.ResourceTypes).
ACL_RESOURCE_TYPE_NAMES = ("Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")


def acl_persistent_paths() -> tuple[str, ...]:
    """What Kafka's createAclPaths makes before AclAuthorizer loads: every ACL root with one child
    per resource type, and both change-notification parents."""
    roots = (acl_root_path("LITERAL"), acl_root_path("PREFIXED"))
    return (*(f"{root}/{name}" for root in roots for name in ACL_RESOURCE_TYPE_NAMES),
            LITERAL_ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH)


def acl_resource_type_name(resource_type: Any) -> str:
    """The znode spelling of a resource type: TRANSACTIONAL_ID (or the enum) -> "TransactionalId".

    Accepts an enum with `.name`, an upper-snake name, or the camel-case name itself.
    """
    name = getattr(resource_type, "name", resource_type)
    if not isinstance(name, str) or not name:
        raise ValueError(f"not a resource type: {resource_type!r}")
    if "_" in name or name.isupper() or name.islower():
        return "".join(part.capitalize() for part in name.lower().split("_"))
    return name


def _pattern_name(pattern: Any) -> str:
    name = str(getattr(pattern, "name", pattern)).upper()
    if name not in ("LITERAL", "PREFIXED"):
        raise ValueError(f"ACLs are stored only for LITERAL and PREFIXED patterns, not {pattern!r}")
    return name


def acl_root_path(pattern: Any = "literal") -> str:
    """/kafka-acl for literal patterns, /kafka-acl-extended/prefixed for prefixed ones."""
    return LITERAL_ACL_PATH if _pattern_name(pattern) == "LITERAL" else f"{EXTENDED_ACL_PATH}/prefixed"


def acl_path(resource_type: Any, name: str, pattern: Any = "literal") -> str:
    return f"{acl_root_path(pattern)}/{acl_resource_type_name(resource_type)}/{name}"


def acl_change_path(pattern: Any = "literal") -> str:
    """Parent of the acl_changes_ notifications for this pattern type."""
    return LITERAL_ACL_CHANGES_PATH if _pattern_name(pattern) == "LITERAL" else EXTENDED_ACL_CHANGES_PATH


def encode_acls(acls: Iterable[Mapping[str, str]]) -> bytes:
    """Entries as Kafka stores them: {"principal","permissionType","operation","host"} (camel-case values)."""
    return _dump({"version": 1, "acls": [dict(acl) for acl in acls]})


def decode_acls(data: bytes | None) -> list[dict[str, str]]:
    if not data:
        return []
    obj = _load_object(data, LITERAL_ACL_PATH)
    acls = obj.get("acls") or []
    if not isinstance(acls, list) or not all(isinstance(a, dict) for a in acls):
        raise ZnodeDecodeError(f"ACL znode: malformed acls {acls!r}")
    return [dict(a) for a in acls]


def acl_resource_type_enum_name(resource_type: Any) -> str:
    """Kafka's enum spelling of a resource type: "TransactionalId" (or the enum) -> "TRANSACTIONAL_ID"."""
    camel = acl_resource_type_name(resource_type)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()


def encode_acl_change(resource_type: Any, name: str, pattern: Any = "literal") -> bytes:
    """A change notification: text `TOPIC:name` for literal patterns, JSON for the others.

    Both spell the resource type as the Java enum name (TOPIC, TRANSACTIONAL_ID), unlike the ACL
    znode paths: LiteralAclChangeStore writes `ResourceType.toString`, ExtendedAclChangeStore
    `ResourceType.name`, and readers parse them with `ResourceType.fromString`, which accepts
    only that spelling (upper-cased).
    """
    if _pattern_name(pattern) == "LITERAL":
        return f"{acl_resource_type_enum_name(resource_type)}:{name}".encode("utf-8")
    return _dump({"version": 1, "resourceType": acl_resource_type_enum_name(resource_type), "name": name,
                  "patternType": _pattern_name(pattern)})


def decode_acl_change(data: bytes, pattern: Any = "literal") -> tuple[str, str, str]:
    """(RESOURCE_TYPE, name, PATTERN_TYPE) of a change notification, resource type upper-snake."""
    if _pattern_name(pattern) == "LITERAL":
        text = data.decode("utf-8", errors="replace")
        resource_type, sep, name = text.partition(":")
        if not sep:
            raise ZnodeDecodeError(f"{LITERAL_ACL_CHANGES_PATH}: expected ResourceType:name, got {text!r}")
        return acl_resource_type_enum_name(resource_type), name, "LITERAL"
    obj = _load_object(data, EXTENDED_ACL_CHANGES_PATH)
    return (acl_resource_type_enum_name(_require(obj, "resourceType", str, EXTENDED_ACL_CHANGES_PATH)),
            _require(obj, "name", str, EXTENDED_ACL_CHANGES_PATH),
            _require(obj, "patternType", str, EXTENDED_ACL_CHANGES_PATH).upper())
