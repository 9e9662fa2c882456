"""ZkConfigsAndAcls: the dynamic configs (/config) and ACLs (/kafka-acl) in ZooKeeper, and the
change notifications both announce themselves with, as Kafka 3.7 keeps them; KafkaZkClient
(client.py) adds the rest of Kafka's operations.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo import exceptions as kz

from .errors import BadVersionError
from .paths import (ACL_CHANGE_PREFIX, CONFIG_CHANGE_PREFIX, CONFIG_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH,
                    LITERAL_ACL_CHANGES_PATH, ZnodeDecodeError, acl_change_path, acl_path,
                    acl_persistent_paths, acl_resource_type_enum_name, acl_root_path, config_entity_path,
                    config_entity_type_path, decode_acl_change, decode_acls, decode_config,
                    decode_config_change, encode_acl_change, encode_acls, encode_config,
                    encode_config_change, sequence_number)
from .session import UNKNOWN_VERSION, WatchHandle, ZkSession

log = logging.getLogger(__name__)

CONFIG_CHANGE_EXPIRY_MS = 15 * 60 * 1000  # Kafka's changeExpirationMs for notification purging


class ZkConfigsAndAcls(ZkSession):
    """The config and ACL znodes of one session (see the module docstring)."""

    # -- configs ---------------------------------------------------------------------------------------

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """The overrides in /config/<type>/<name> ({} if none); `name` as the znode spells it."""
        found = self._get(config_entity_path(entity_type, name))
        return decode_config(found[0]) if found is not None else {}

    def set_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """Replaces the overrides, then tells every broker through a config_change_ notification."""
        self._set_or_create(config_entity_path(entity_type, name), encode_config(configs))
        self._create(f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}",
                     encode_config_change(f"{entity_type}/{name}"), sequence=True)

    def get_all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        names = self._children(config_entity_type_path(entity_type))
        found = self._get_many([config_entity_path(entity_type, name) for name in names])
        return {name: decode_config(found[config_entity_path(entity_type, name)][0])
                for name in sorted(names) if config_entity_path(entity_type, name) in found}

    def get_quota_entity_configs(self) -> dict[str, dict[str, str]]:
        """The client quota znodes by entity path ("users/<u>", "users/<u>/clients/<c>", "clients/<c>";
        names sanitized as in ZooKeeper, `<default>` for defaults), in two pipelined rounds."""
        users = self._children(config_entity_type_path("users"))
        clients = self._children(config_entity_type_path("clients"))
        user_clients = self._children_many([f"{config_entity_path('users', u)}/clients" for u in users])
        entity_paths = ([f"users/{u}" for u in users] + [f"clients/{c}" for c in clients]
                        + [f"users/{u}/clients/{c}" for u in users
                           for c in user_clients.get(f"{config_entity_path('users', u)}/clients", [])])
        znodes = {p: config_entity_path(*p.split("/", 1)) for p in entity_paths}
        found = self._get_many(list(znodes.values()))
        return {p: decode_config(found[z][0]) for p, z in znodes.items() if z in found}

    def watch_config_changes(self, callback: Callable[[list[str]], None], *,
                             purge_after_ms: int = CONFIG_CHANGE_EXPIRY_MS) -> WatchHandle:
        """callback(entity paths such as "topics/foo") for each batch of new config_change_ nodes.

        Like Kafka, the first batch covers every notification already present. Notifications
        older than `purge_after_ms` are deleted after they have been handed over.
        """
        follower = _NotificationFollower(self, CONFIG_CHANGES_PATH, CONFIG_CHANGE_PREFIX, decode_config_change,
                                         callback, purge_after_ms)
        return self.watch_children(CONFIG_CHANGES_PATH, follower.on_children)

    # -- ACLs ------------------------------------------------------------------------------------------

    def ensure_acl_paths(self) -> None:
        """The znodes Kafka's AclAuthorizer creates before it loads (KafkaZkClient.createAclPaths)."""
        for path in acl_persistent_paths():
            self._ensure_path(path)

    def get_acls(self, resource_type: Any, name: str, pattern: Any = "literal") -> tuple[list[dict[str, str]], int]:
        """(ACL entries, znode version) of one resource pattern; ([], UNKNOWN_VERSION) if it has none."""
        found = self._get(acl_path(resource_type, name, pattern))
        if found is None:
            return [], UNKNOWN_VERSION
        return decode_acls(found[0]), found[1].version

    def set_acls(self, resource_type: Any, name: str, acls: Iterable[Mapping[str, str]], expected_version: int,
                 pattern: Any = "literal", *, notify: bool = True) -> int:
        """Compare-and-set of a resource's ACLs (empty list deletes the znode), then a change notification.

        `expected_version` is what get_acls returned (UNKNOWN_VERSION to create); returns the new
        version (UNKNOWN_VERSION once deleted). Raises BadVersionError when another writer got there first.
        With notify=False the caller writes the notification (AclAuthorizer writes one only when the
        ACLs really changed).
        """
        path = acl_path(resource_type, name, pattern)
        entries = list(acls)
        try:
            if not entries:
                if expected_version != UNKNOWN_VERSION:
                    self._retry(lambda client: client.delete(path, version=expected_version))
                new_version = UNKNOWN_VERSION
            elif expected_version == UNKNOWN_VERSION:
                self._create(path, encode_acls(entries))
                new_version = 0
            else:
                stat = self._retry(lambda client: client.set(path, encode_acls(entries), version=expected_version))
                new_version = stat.version
        except (kz.BadVersionError, kz.NodeExistsError, kz.NoNodeError):
            raise BadVersionError(f"{path}: ACLs changed since they were read") from None
        if notify:
            self.create_acl_change_notification(resource_type, name, pattern)
        return new_version

    def create_acl_change_notification(self, resource_type: Any, name: str, pattern: Any = "literal") -> None:
        """Tells every broker to re-read this resource pattern's ACLs (an acl_changes_ node)."""
        self._create(f"{acl_change_path(pattern)}/{ACL_CHANGE_PREFIX}", encode_acl_change(resource_type, name, pattern),
                     sequence=True)

    def get_all_acls(self) -> dict[tuple[str, str, str], tuple[list[dict[str, str]], int]]:
        """Every stored ACL: (RESOURCE_TYPE, name, LITERAL|PREFIXED) -> (entries, znode version).

        A znode whose JSON cannot be read is left out with a warning rather than failing the load.
        """
        result = {}
        for pattern in ("LITERAL", "PREFIXED"):
            root = acl_root_path(pattern)
            for type_name in self._children(root):
                names = self._children(f"{root}/{type_name}")
                found = self._get_many([f"{root}/{type_name}/{name}" for name in names])
                resource_type = acl_resource_type_enum_name(type_name)
                for name in names:
                    got = found.get(f"{root}/{type_name}/{name}")
                    if got is None:
                        continue
                    try:
                        result[(resource_type, name, pattern)] = (decode_acls(got[0]), got[1].version)
                    except ZnodeDecodeError as exc:
                        log.warning("ignoring unreadable ACL znode %s/%s/%s: %s", root, type_name, name, exc)
        return result

    def watch_acl_changes(self, callback: Callable[[list[tuple[str, str, str]]], None], *,
                          purge_after_ms: int = CONFIG_CHANGE_EXPIRY_MS) -> WatchHandle:
        """callback([(RESOURCE_TYPE, name, PATTERN_TYPE), ...]) for new literal and extended ACL changes."""
        handle = WatchHandle()
        for pattern, parent in (("literal", LITERAL_ACL_CHANGES_PATH), ("prefixed", EXTENDED_ACL_CHANGES_PATH)):
            follower = _NotificationFollower(self, parent, ACL_CHANGE_PREFIX,
                                             lambda data, pattern=pattern: decode_acl_change(data, pattern),
                                             callback, purge_after_ms)
            self._watch_children(parent, follower.on_children, handle)  # one handle stops both
        return handle


class _NotificationFollower:
    """Kafka's ZkNodeChangeNotificationListener over one parent of persistent-sequential change nodes.

    Hands each node's decoded content to `deliver` exactly once, in sequence order (batched per
    children event), and deletes processed nodes older than `purge_after_ms` so that the parent
    stays small. Runs on kazoo's callback thread, one event at a time.
    """

    def __init__(self, client: ZkSession, parent: str, prefix: str, decode: Callable[[bytes], Any],
                 deliver: Callable[[list[Any]], None], purge_after_ms: int):
        self._client = client
        self._parent = parent
        self._prefix = prefix
        self._decode = decode
        self._deliver = deliver
        self._purge_after_ms = purge_after_ms
        self._last_sequence = -1
        self._created_ms: dict[str, int] = {}  # processed node name -> its ctime, for purging
        self._lock = threading.Lock()

    def on_children(self, children: list[str]) -> None:
        with self._lock:
            numbered = []
            for name in children:
                try:
                    numbered.append((sequence_number(name, self._prefix), name))
                except ZnodeDecodeError:
                    continue  # not a notification; Kafka ignores stray children too
            numbered.sort()
            fresh = [(seq, name) for seq, name in numbered if seq > self._last_sequence]
            found = self._client._get_many([f"{self._parent}/{name}" for _, name in fresh])
            items: list[Any] = []
            for seq, name in fresh:
                self._last_sequence = seq
                got = found.get(f"{self._parent}/{name}")
                if got is None:
                    continue  # purged by another broker before we read it
                data, stat = got
                self._created_ms[name] = stat.ctime
                try:
                    item = self._decode(data)
                except ZnodeDecodeError as exc:
                    log.warning("ignoring unreadable change notification %s/%s: %s", self._parent, name, exc)
                    continue
                if item not in items:
                    items.append(item)
            if items:
                self._deliver(items)
            self._purge({name for _, name in numbered})

    def _purge(self, present: set[str]) -> None:
        cutoff = time.time() * 1000 - self._purge_after_ms
        for name in list(self._created_ms):
            if name not in present:
                del self._created_ms[name]
            elif self._created_ms[name] < cutoff:
                try:
                    self._client._retry(lambda client, name=name: client.delete(f"{self._parent}/{name}"))
                except kz.NoNodeError:
                    pass  # another broker purged it first
                del self._created_ms[name]
