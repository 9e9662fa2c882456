"""ACL authorization with Kafka's AclAuthorizer semantics (ZooKeeper mode; StandardAuthorizer agrees).

`authorize(principal, host, operation, resource_type, name)` answers one action:

- principals listed in `super.users` are always allowed;
- the ACLs that apply to a resource are the LITERAL ones with its name, the LITERAL `*` wildcard and
  every PREFIXED pattern its name starts with;
- when none apply at all (whoever they name) and `allow.everyone.if.no.acl.found=true`: allowed;
- an ACL entry applies to the principal when it names it or `User:*`, and to the host when it
  names the client's address or `*`, or (Kafka 4.4, KIP-1276) is a CIDR network holding the
  client's address (host_patterns.py);
- a DENY entry for the operation or ALL wins over any ALLOW;
- an ALLOW entry for the operation or ALL allows it, and (as AclAuthorizer's `allowOps`) ALLOW
  READ, WRITE, DELETE or ALTER also allows DESCRIBE, ALLOW ALTER_CONFIGS allows DESCRIBE_CONFIGS.
  Nothing implies IDEMPOTENT_WRITE: KafkaApis asks for it, or WRITE on any topic, itself.

The ACLs are read from the metadata store (both modes have `describe_acls`) into an index keyed by
(resource type, name) plus the prefixed patterns by (type, prefix), rebuilt on the first check after
the store reports ACLS_CHANGED, so a check costs a few dict look-ups whatever the number of ACLs.
This module is pure: no asyncio, no sockets.
"""
from __future__ import annotations

import logging
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable

from ..metadata.errors import ConfigError
from .host_patterns import host_network, in_network
from ..metadata.acls import (
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["AclAuthorizer", "KAFKA_AUTHORIZER_CLASSES", "SUPPORTED_OPERATIONS",
           "create_authorizer", "parse_super_users"]

# kafka.authorizer.logger is where Kafka writes its allow/deny decisions
log = logging.getLogger("kafkapy.authorizer")

KAFKA_AUTHORIZER_CLASSES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
})

WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"

Op = AclOperation
_ALLOW_OPS: dict[AclOperation, frozenset[AclOperation]] = {
    Op.DESCRIBE: frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL}),
    Op.DESCRIBE_CONFIGS: frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL}),
}

# Kafka's AclEntry.supportedOperations: what the authorized-operations bit fields report
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                         Op.ALTER_CONFIGS),
    # Kafka 4.x adds the group configs' DESCRIBE_CONFIGS and ALTER_CONFIGS (KIP-848's group resources; 3400 in
    # the bit field), which kafkapy serves too (share.*, streams.*, consumer.* on GROUP resources); Kafka 3.9
    # answers READ, DESCRIBE, DELETE (328)
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                           Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}

_ALL_ACLS = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: `User:a;User:b` (Kafka splits on ';' and trims each entry)."""
    users = set()
    for part in (text or "").split(";"):
        part = part.strip()
        if not part:
            continue
        kind, sep, name = part.partition(":")
        if not sep or not kind:
            raise ConfigError.invalid_value("super.users", text, f"expected principals of the form User:<name> "
                                            f"separated by ';', got {part!r}")
        users.add(part)
    return frozenset(users)


@dataclass(frozen=True, slots=True)
class _Entry:
    principal: str
    host: str
    operation: AclOperation
    allow: bool
    network: object = None  # the host's network when it is a CIDR pattern (KIP-1276)

    def applies_to_host(self, host: str) -> bool:
        h = self.host
        if h == host or h == WILDCARD_HOST:
            return True
        return self.network is not None and in_network(host, self.network)


class _AclIndex:
    """The stored ACLs by resource: literal (type, name) -> entries, prefixed (type, prefix) -> entries."""

    __slots__ = ("literal", "prefixed", "prefix_lengths")

    def __init__(self, acls: Iterable[AclBinding]):
        literal: dict[tuple[int, str], list[_Entry]] = defaultdict(list)
        prefixed: dict[tuple[int, str], list[_Entry]] = defaultdict(list)
        lengths: dict[int, set[int]] = defaultdict(set)
        for acl in acls:
            entry = _Entry(acl.principal, acl.host, acl.operation, acl.permission_type == AclPermissionType.ALLOW,
                           host_network(acl.host))
            key = (int(acl.resource_type), acl.resource_name)
            if acl.pattern_type == PatternType.PREFIXED:
                prefixed[key].append(entry)
                lengths[int(acl.resource_type)].add(len(acl.resource_name))
            elif acl.pattern_type == PatternType.LITERAL:
                literal[key].append(entry)
        self.literal = {k: tuple(v) for k, v in literal.items()}
        self.prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self.prefix_lengths = {k: tuple(sorted(v)) for k, v in lengths.items()}

    def matching(self, resource_type: int, name: str) -> list[_Entry]:
        """Every entry whose pattern covers the resource (Kafka's matchingAcls)."""
        found: list[_Entry] = []
        literal = self.literal
        found.extend(literal.get((resource_type, name), ()))
        if name != WILDCARD_RESOURCE:
            found.extend(literal.get((resource_type, WILDCARD_RESOURCE), ()))
        prefixed = self.prefixed
        for length in self.prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found.extend(prefixed.get((resource_type, name[:length]), ()))
        return found


class AclAuthorizer:
    """Decides whether a principal from a host may perform an operation on a resource."""

    def __init__(self, super_users: frozenset[str] = frozenset(), allow_everyone_if_no_acl_found: bool = False,
                 load_acls: Callable[[], Iterable[AclBinding]] = tuple):
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._load_acls = load_acls
        self._index: _AclIndex | None = None
        # ZooKeeper change notifications invalidate from kazoo's thread: an index built from ACLs read
        # before an invalidation must not be installed after it
        self._generation = 0
        self._lock = threading.Lock()

    @classmethod
    def for_store(cls, config_get: Callable[[str], object], store) -> AclAuthorizer:
        """The authorizer over a metadata store's ACLs, re-indexed when the store says they changed."""
        authorizer = cls(parse_super_users(config_get("super.users")),
                         bool(config_get("allow.everyone.if.no.acl.found")),
                         lambda: store.describe_acls(_ALL_ACLS))
        store.add_listener(authorizer._on_metadata_change)
        return authorizer

    def _on_metadata_change(self, change) -> None:
        if change.kind.value == "acls_changed":
            self.invalidate()

    def invalidate(self) -> None:
        """The stored ACLs changed: index them again on the next check (safe from any thread)."""
        with self._lock:
            self._generation += 1
            self._index = None

    def _acls(self) -> _AclIndex:
        index = self._index
        if index is None:
            generation = self._generation
            index = _AclIndex(self._load_acls())
            with self._lock:
                if generation == self._generation:
                    self._index = index
        return index

    def authorize(self, principal: object, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str, log_if_denied: bool = True) -> bool:
        """Kafka's AclAuthorizer.authorizeAction for one (operation, resource)."""
        principal_text = str(principal)
        if principal_text in self.super_users:
            return True
        entries = self._acls().matching(int(resource_type), name)
        if not entries:
            allowed = self.allow_everyone_if_no_acl_found
        else:
            allowed = _decide(entries, principal_text, host, operation)
        if not allowed and log_if_denied:
            log.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
                     principal_text, operation.name, host, resource_type.name, name)
        return allowed

    def authorized_operations(self, principal: object, host: str, resource_type: ResourceType, name: str) -> int:
        """The bit field of the resource type's supported operations this principal may perform."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name, log_if_denied=False):
                bits |= 1 << op
        return bits

    def authorize_by_resource_type(self, principal: object, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do `operation` on some resource of
        this type? (Asked for an idempotent producer without IDEMPOTENT_WRITE: WRITE on any topic.)"""
        # As Kafka: a check on a made-up name lets super users (and allow.everyone.if.no.acl.found) through.
        if self.authorize(principal, host, operation, resource_type, "hardcode", log_if_denied=False):
            return True
        principal_text = str(principal)
        index = self._acls()
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        rtype = int(resource_type)
        for table, literal in ((index.literal, True), (index.prefixed, False)):
            for (kind, name), entries in table.items():
                if kind != rtype:
                    continue
                for e in entries:
                    if e.principal not in (principal_text, WILDCARD_PRINCIPAL) or not e.applies_to_host(host):
                        continue
                    if e.operation != operation and e.operation != Op.ALL:
                        continue
                    if e.allow:
                        (allow_literal if literal else allow_prefixed).add(name)
                    else:
                        (deny_literal if literal else deny_prefixed).add(name)
        if WILDCARD_RESOURCE in deny_literal:
            return False
        if WILDCARD_RESOURCE in allow_literal:
            return True

        def denied_by_prefix(name: str) -> bool:
            return any(name[:i] in deny_prefixed for i in range(len(name) + 1))

        if any(not denied_by_prefix(p) for p in allow_prefixed):
            return True
        return any(name not in deny_literal and not denied_by_prefix(name) for name in allow_literal)


def _decide(entries: list[_Entry], principal: str, host: str, operation: AclOperation) -> bool:
    allow_ops = _ALLOW_OPS.get(operation)
    allowed = False
    for e in entries:
        if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
            continue
        if e.host != host and e.host != WILDCARD_HOST and (e.network is None or not in_network(host, e.network)):
            continue
        if e.allow:
            if not allowed:
                allowed = e.operation in allow_ops if allow_ops else e.operation in (operation, Op.ALL)
        elif e.operation == operation or e.operation == Op.ALL:
            return False  # DENY wins
    return allowed


def create_authorizer(config_get: Callable[[str], object], store) -> AclAuthorizer | None:
    """The broker's authorizer from `authorizer.class.name`; None when it is empty (nothing is checked).

    kafkapy implements Kafka's own ACL authorizers. Any other class name is accepted with a warning and
    served by the same ACL authorizer (deny unless an ACL allows): a class kafkapy cannot load never
    leaves the broker open.
    """
    name = (config_get("authorizer.class.name") or "").strip()
    if not name:
        return None
    if name not in KAFKA_AUTHORIZER_CLASSES:
        log.warning("authorizer.class.name=%s is not one of Kafka's ACL authorizers (%s): kafkapy cannot load it "
                    "and enforces the stored ACLs with AclAuthorizer's semantics instead", name,
                    ", ".join(sorted(KAFKA_AUTHORIZER_CLASSES)))
    authorizer = AclAuthorizer.for_store(config_get, store)
    log.info("authorizer enabled: %d super user(s), allow.everyone.if.no.acl.found=%s",
             len(authorizer.super_users), str(authorizer.allow_everyone_if_no_acl_found).lower())
    return authorizer
