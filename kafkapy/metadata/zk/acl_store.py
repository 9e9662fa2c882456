"""ZkAclCache: a cluster broker's ACLs, kept in ZooKeeper exactly as Kafka's AclAuthorizer keeps them.

The layout (Kafka 3.7, ZkData.scala's ZkAclStore and ZkAclChangeStore) is what a 3.7 broker reads
and writes, so kafkapy and Kafka brokers of one cluster share their ACLs:

- `/kafka-acl/<ResourceType>/<name>` (LITERAL patterns) and
  `/kafka-acl-extended/prefixed/<ResourceType>/<name>` (PREFIXED) hold
  `{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"}]}`.
  Resource types, operations and permission types are in Pascal case (SecurityUtils:
  TRANSACTIONAL_ID -> "TransactionalId", DESCRIBE_CONFIGS -> "DescribeConfigs"). A resource
  pattern left with no ACLs has no znode.
- A write is a read-modify-write of one znode with compare-and-set on its version, retried after a
  conflict (AclAuthorizer.updateResourceAcls), followed by a change notification only when the ACLs
  changed: `/kafka-acl-changes/acl_changes_<seq>` holding `TOPIC:name` for a literal pattern, or
  `/kafka-acl-extended-changes/acl_changes_<seq>` holding
  `{"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}` (paths.encode_acl_change).
- Every broker keeps all ACLs in memory: loaded at start, then each notification makes it re-read
  the resource pattern named. Describe reads the cache; a broker's own writes update it at once.

Entries this broker cannot read (an operation it does not know, a principal without a colon) are
kept verbatim when it rewrites their znode, so ACLs written by a newer Kafka survive our writes.

Threads: ZooKeeper calls block the caller. One lock serializes every read-modify-write and
refresh, so a re-read can never overwrite a newer write with older data; describe reads an
immutable snapshot and takes no lock.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ...protocol.errors import ErrorCode, KafkaError
from ..acls import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType
from .client import UNKNOWN_VERSION, BadVersionError, KafkaZkClient, WatchHandle
from .paths import ZnodeDecodeError

__all__ = ["ResourceKey", "ZkAclCache", "decode_entry", "encode_entry", "resource_key"]

log = logging.getLogger(__name__)

# A resource pattern: the identity of one ACL znode.
ResourceKey = tuple[ResourceType, str, PatternType]

# AclAuthorizer's limits: a write that keeps losing compare-and-set races gives up after this many retries.
MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_JITTER_MS = 50

_STORED_PATTERNS = (PatternType.LITERAL, PatternType.PREFIXED)
_FILTER_ONLY = ("UNKNOWN", "ANY")


def _pascal(name: str) -> str:
    """SecurityUtils.toPascalCase: DESCRIBE_CONFIGS -> DescribeConfigs."""
    return "".join(part.capitalize() for part in name.split("_"))


def _names(enum: type[IntEnum]) -> dict[str, Any]:
    """Kafka's lookup table (SecurityUtils): the Pascal-case name and the same upper-cased; we also
    take the enum name (DESCRIBE_CONFIGS), which Kafka never writes."""
    table: dict[str, Any] = {}
    for member in enum:
        if member.name not in _FILTER_ONLY:
            pascal = _pascal(member.name)
            table[pascal] = table[pascal.upper()] = table[member.name] = member
    return table


_OPERATIONS = _names(AclOperation)
_PERMISSION_TYPES = _names(AclPermissionType)


def _lookup(table: Mapping[str, Any], name: Any) -> Any:
    if not isinstance(name, str):
        return None
    return table.get(name) or table.get(name.upper())


def encode_entry(acl: AclBinding) -> dict[str, str]:
    """One element of a znode's "acls" list, as AclEntry.toMap writes it."""
    return {"principal": acl.principal, "permissionType": _pascal(acl.permission_type.name),
            "operation": _pascal(acl.operation.name), "host": acl.host}


def decode_entry(key: ResourceKey, raw: Mapping[str, Any]) -> AclBinding | None:
    """An element of a znode's "acls" list as a binding of resource pattern `key`; None if this
    broker cannot represent it (AclEntry.fromBytes would fail on it or read an UNKNOWN)."""
    principal, host = raw.get("principal"), raw.get("host")
    operation = _lookup(_OPERATIONS, raw.get("operation"))
    permission_type = _lookup(_PERMISSION_TYPES, raw.get("permissionType"))
    if not isinstance(principal, str) or ":" not in principal or not isinstance(host, str):
        return None
    if operation is None or permission_type is None:
        return None
    return AclBinding(key[0], key[1], key[2], principal, host, operation, permission_type)


def resource_key(resource_type: str, name: str, pattern: str) -> ResourceKey | None:
    """The key of a pattern the ZooKeeper client names as ("TOPIC", name, "LITERAL"); None if unknown here."""
    try:
        key = (ResourceType[resource_type.upper()], name, PatternType[pattern.upper()])
    except KeyError:
        return None
    if key[0].name in _FILTER_ONLY or key[2] not in _STORED_PATTERNS:
        return None
    return key


def _describe_key(key: ResourceKey) -> str:
    return f"ResourcePattern(resourceType={key[0].name}, name={key[1]}, patternType={key[2].name})"


@dataclass(frozen=True, slots=True, eq=False)
class _Znode:
    """One ACL znode as last read or written: its entries in znode order, decoded, and its version."""

    raw: tuple[Mapping[str, Any], ...]
    decoded: tuple[AclBinding | None, ...]  # aligned with raw; None: an entry we cannot represent
    known: frozenset[AclBinding]
    version: int

    @classmethod
    def of(cls, key: ResourceKey, entries: Iterable[Mapping[str, Any]], version: int) -> _Znode:
        raw = tuple(entries)
        decoded = tuple(decode_entry(key, entry) for entry in raw)
        return cls(raw, decoded, frozenset(b for b in decoded if b is not None), version)

    @property
    def exists(self) -> bool:
        return self.version != UNKNOWN_VERSION

    def rewritten(self, wanted: frozenset[AclBinding]) -> list[dict[str, Any]]:
        """The entries to store so that the readable ones are exactly `wanted` (a set, as in Kafka)."""
        entries: list[dict[str, Any]] = []
        kept: set[AclBinding] = set()
        for raw, binding in zip(self.raw, self.decoded):
            if binding is None:
                if raw not in entries:
                    entries.append(dict(raw))
            elif binding in wanted and binding not in kept:
                kept.add(binding)
                entries.append(encode_entry(binding))
        entries.extend(encode_entry(b) for b in sorted(wanted - kept, key=AclBinding.sort_key))
        return entries


_ABSENT = _Znode((), (), frozenset(), UNKNOWN_VERSION)


def _named_resource(acl_filter: AclBindingFilter) -> ResourceKey | None:
    """The one resource pattern a filter can match, if it names one (ResourcePatternFilter.matchesAtMostOne)."""
    if acl_filter.resource_type.name in _FILTER_ONLY or acl_filter.resource_name is None:
        return None
    if acl_filter.pattern_type not in _STORED_PATTERNS:
        return None
    return acl_filter.resource_type, acl_filter.resource_name, acl_filter.pattern_type


class ZkAclCache:
    """Every ACL of the cluster: stored in ZooKeeper as AclAuthorizer stores it, cached in memory."""

    def __init__(self, zk: KafkaZkClient, *, on_change: Callable[[], None] | None = None,
                 max_update_retries: int = MAX_UPDATE_RETRIES, retry_backoff_ms: int = RETRY_BACKOFF_MS,
                 retry_backoff_jitter_ms: int = RETRY_BACKOFF_JITTER_MS):
        self._zk = zk
        self._on_change = on_change  # called (no lock held) whenever the cached ACLs change
        self.max_update_retries = max_update_retries
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_jitter_ms = retry_backoff_jitter_ms
        self._znodes: Mapping[ResourceKey, _Znode] = {}  # replaced, never mutated: describe reads it unlocked
        self._loaded = False
        self._update_lock = threading.RLock()
        self._watch: WatchHandle | None = None

    # -- loading and following other brokers ----------------------------------------------------
    def start(self) -> None:
        """Load every ACL, then follow the change notifications (what AclAuthorizer.configure does)."""
        self.load()
        if self._watch is None:
            # Notifications live for 15 minutes, so a change made between the load and the watch
            # is still there when the watch's first batch reads the existing ones.
            self._watch = self._zk.watch_acl_changes(self.refresh)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def load(self) -> None:
        """(Re)read every ACL znode (AclAuthorizer.loadCache)."""
        with self._update_lock:
            self._zk.ensure_acl_paths()
            znodes: dict[ResourceKey, _Znode] = {}
            for (resource_type, name, pattern), (entries, version) in self._zk.get_all_acls().items():
                key = resource_key(resource_type, name, pattern)
                if key is None:
                    log.warning("ignoring ACLs of unknown resource type %s (%s pattern %r)", resource_type,
                                pattern, name)
                    continue
                znodes[key] = znode = _Znode.of(key, entries, version)
                self._warn_unreadable(key, znode)
            self._znodes = znodes
            self._loaded = True
        log.info("loaded %d ACL(s) on %d resource pattern(s) from ZooKeeper",
                 sum(len(z.known) for z in znodes.values()), len(znodes))

    def refresh(self, resources: Iterable[tuple[str, str, str]]) -> None:
        """Re-read the resource patterns that change notifications named, as ("TOPIC", name, "LITERAL")."""
        changed = False
        with self._update_lock:
            updates: dict[ResourceKey, _Znode] = {}
            for resource_type, name, pattern in resources:
                key = resource_key(resource_type, name, pattern)
                if key is None:
                    log.warning("ignoring an ACL change notification for unknown resource %s:%s (%s)", resource_type,
                                name, pattern)
                    continue
                try:
                    znode = self._read(key)
                except ZnodeDecodeError as exc:  # Kafka's listener fails on it too; keep what we had
                    log.warning("cannot read the ACLs of %s after a change notification: %s", _describe_key(key), exc)
                    continue
                if znode.known != self._znodes.get(key, _ABSENT).known:
                    changed = True
                    self._warn_unreadable(key, znode)
                    log.info("ACLs of %s changed in ZooKeeper: now %d ACL(s)", _describe_key(key), len(znode.known))
                updates[key] = znode
            self._install(updates)
        if changed:
            self._changed()

    # -- reads ------------------------------------------------------------------------------------
    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The cached bindings the filter matches, in AclBinding.sort_key order."""
        self._ensure_loaded()
        return sorted((acl for znode in self._znodes.values() for acl in znode.known if acl_filter.matches(acl)),
                      key=AclBinding.sort_key)

    # -- writes -----------------------------------------------------------------------------------
    def create(self, acls: Iterable[AclBinding]) -> list[AclBinding]:
        """Add ACLs (one compare-and-set per resource pattern); returns those that were not there yet."""
        self._ensure_loaded()
        by_resource: dict[ResourceKey, set[AclBinding]] = {}
        for acl in acls:
            by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), set()).add(acl)
        created: list[AclBinding] = []
        for key in sorted(by_resource):
            wanted = frozenset(by_resource[key])
            before, _after = self._update(key, lambda znode, wanted=wanted: znode.known | wanted)
            for acl in sorted(wanted - before.known, key=AclBinding.sort_key):
                log.info("created ACL %s", acl)
                created.append(acl)
        if created:
            self._changed()
        return created

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every ACL any filter matches; returns each filter's matches, every filter seeing
        the ACLs as they were before this call (as the single node answers)."""
        self._ensure_loaded()
        matches: list[list[AclBinding]] = [[] for _ in filters]
        # Resources with a cached match, plus any a filter names exactly: the cache may not show
        # an ACL another broker has just added there, so that one is read from ZooKeeper.
        candidates = {key for key, znode in self._znodes.items()
                      if any(f.matches(acl) for acl in znode.known for f in filters)}
        candidates.update(key for key in map(_named_resource, filters) if key is not None)

        def remaining(znode: _Znode) -> frozenset[AclBinding]:
            return frozenset(acl for acl in znode.known if not any(f.matches(acl) for f in filters))

        deleted = False
        for key in sorted(candidates):
            before, after = self._update(key, remaining)
            for index, acl_filter in enumerate(filters):
                matches[index].extend(acl for acl in before.known if acl_filter.matches(acl))
            for acl in sorted(before.known - after.known, key=AclBinding.sort_key):
                log.info("deleted ACL %s", acl)
                deleted = True
        if deleted:
            self._changed()
        return [sorted(found, key=AclBinding.sort_key) for found in matches]

    # -- internals --------------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if not self._loaded:
            with self._update_lock:
                if not self._loaded:
                    self.load()

    def _read(self, key: ResourceKey) -> _Znode:
        entries, version = self._zk.get_acls(key[0].name, key[1], key[2].name)
        return _Znode.of(key, entries, version)

    def _install(self, updates: Mapping[ResourceKey, _Znode]) -> None:
        """Publish new znode states (lock held): a new snapshot, so that describe needs no lock."""
        if not updates:
            return
        znodes = dict(self._znodes)
        for key, znode in updates.items():
            if znode.exists:
                znodes[key] = znode
            else:
                znodes.pop(key, None)
        self._znodes = znodes

    def _update(self, key: ResourceKey,
                change: Callable[[_Znode], frozenset[AclBinding]]) -> tuple[_Znode, _Znode]:
        """AclAuthorizer.updateResourceAcls: CAS-write `change(current)`; returns (the state the
        written change was computed from, the state written). Starts from the cache; a lost race
        re-reads the znode and computes the change again."""
        resource_type, name, pattern = key[0].name, key[1], key[2].name
        with self._update_lock:
            cached = self._znodes.get(key)
            first = current = cached if cached is not None else self._read(key)
            fresh = cached is None
            for _attempt in range(self.max_update_retries + 1):
                wanted = change(current)
                if wanted == current.known:
                    if fresh:
                        final = current
                        break
                    # Nothing to write according to the cache; make sure ZooKeeper agrees (Kafka
                    # rewrites the znode instead, which checks the version the same way).
                    current, fresh = self._read(key), True
                    continue
                entries = current.rewritten(wanted)
                try:
                    version = self._zk.set_acls(resource_type, name, entries, current.version, pattern, notify=False)
                except BadVersionError:
                    log.debug("ACLs of %s changed under us (znode version %d); re-reading", _describe_key(key),
                              current.version)
                    time.sleep((self.retry_backoff_ms + random.randrange(max(self.retry_backoff_jitter_ms, 1))) / 1000)
                    current, fresh = self._read(key), True
                    continue
                final = _Znode.of(key, entries, version)
                break
            else:
                raise KafkaError(f"Failed to update ACLs for {_describe_key(key)} after trying a maximum of "
                                 f"{self.max_update_retries} times", ErrorCode.UNKNOWN_SERVER_ERROR)
            self._install({key: final})
            # Notify when we wrote, and also when a retry found our own write already applied (its
            # reply was lost with the connection), i.e. whenever the ACLs differ from the first read.
            if final is not current or final.known != first.known:
                self._zk.create_acl_change_notification(resource_type, name, pattern)
        return current, final

    def _warn_unreadable(self, key: ResourceKey, znode: _Znode) -> None:
        unreadable = [raw for raw, binding in zip(znode.raw, znode.decoded) if binding is None]
        if unreadable:
            log.warning("%s: keeping %d ACL entr%s this broker cannot read: %s", _describe_key(key), len(unreadable),
                        "y" if len(unreadable) == 1 else "ies", unreadable)

    def _changed(self) -> None:
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:
                log.exception("ACL change listener %r failed", self._on_change)
