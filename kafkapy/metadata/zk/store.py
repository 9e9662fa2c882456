"""ZkMetadataStore: the MetadataStore of a broker in a ZooKeeper cluster.

Reads come from the broker's MetadataCache (what the controller's UpdateMetadata requests said),
as on a Kafka ZooKeeper-mode broker; topic config overrides come from `/config/topics/<t>` and
are re-read when a config change notification names them. Writes go to ZooKeeper the way Kafka's
AdminZkClient makes them from whichever broker serves the request: a new topic is its config znode
plus `/brokers/topics/<t>`, a deletion is `/admin/delete_topics/<t>`, a config change is the
entity's znode plus a `config_change_` notification. The controller picks the writes up from its
watches and tells every broker through UpdateMetadata, which updates this store's cache.

Admin writes are blocking ZooKeeper calls on the caller's thread: a few milliseconds on the
handler paths that make them (CreateTopics, AlterConfigs, ...), never on produce or fetch.
"""
from __future__ import annotations

import logging
import time
import threading
import uuid
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from urllib.parse import quote

from ...protocol.errors import ErrorCode, KafkaError
from ..quotas import CLIENT_ID, USER, QuotaEntity, format_quota_value, quota_values
from ..acls import AclBinding, AclBindingFilter
from ..errors import (
    InvalidPartitionsError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from ..ids import new_topic_id, uuid_to_kafka_str
from ..cache import MetadataCache, MetadataDelta
from ..store import (
    BrokerInfo,
    ChangeKind,
    MetadataChange,
    MetadataListener,
    MetadataStore,
    PartitionMetadata,
    TopicConfigValidator,
    TopicMetadata,
)
from ..replica_assignment import assign_replicas
from ..topic_rules import check_new_topic_name, is_internal_topic, plan_assignments, plan_new_partitions
from .acl_store import ZkAclCache
from .client import KafkaZkClient, TopicExistsError
from .paths import TopicAssignment, desanitize_entity_name, sanitize_entity_name

__all__ = ["ZkMetadataStore"]

log = logging.getLogger(__name__)

_UNKNOWN_TOPIC = "This server does not host this topic-partition."
_DEFAULT_ENTITY = "<default>"


class ZkMetadataStore(MetadataStore):
    """Cluster metadata for one broker: cached from UpdateMetadata, written to ZooKeeper."""

    def __init__(self, zk: KafkaZkClient, cluster_id: str, *, node_id: int, listener_name: str,
                 topic_config_validator: TopicConfigValidator | None = None,
                 default_num_partitions: int = 1, default_replication_factor: int = 1,
                 delete_topic_enable: bool = True):
        self.zk = zk
        self.node_id = node_id
        self.listener_name = listener_name
        self.topic_config_validator = topic_config_validator
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable
        self.cache = MetadataCache()
        self._cluster_id = cluster_id
        self._lock = threading.RLock()
        self._listeners: list[MetadataListener] = []
        self._topic_configs: dict[str, MappingProxyType] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._acls = ZkAclCache(zk, on_change=self._on_acls_changed)
        self._scram: dict[str, dict[str, str]] | None = None  # user -> {mechanism: stored form}
        self._scram_stale: set[str] = set()  # users' znode names announced changed since read
        self.registration_hook = None  # set by the cluster member: (host, port, rack) -> None

    # -- the cache ------------------------------------------------------------------------------
    def apply_update_metadata(self, request) -> MetadataDelta:
        """Apply an UpdateMetadata request and tell the listeners what changed."""
        with self._lock:
            delta = self.cache.apply(request)
            for name in delta.created_topics | delta.changed_topics:
                if name not in self._topic_configs:
                    self._topic_configs[name] = MappingProxyType(self._read_topic_configs(name))
                self._rebuild(name)
            deleted = []
            for name in delta.deleted_topics:
                topic = self._topics.pop(name, None)
                self._topic_configs.pop(name, None)
                if topic is not None:
                    deleted.append(topic)
        for name in sorted(delta.created_topics):
            topic = self._topics.get(name)
            if topic is not None:
                self._notify(MetadataChange(ChangeKind.TOPIC_CREATED, topic=topic))
        for name in sorted(delta.changed_topics - delta.created_topics):
            topic = self._topics.get(name)
            if topic is not None:
                self._notify(MetadataChange(ChangeKind.PARTITION_CHANGED, topic=topic))
        for topic in deleted:
            self._notify(MetadataChange(ChangeKind.TOPIC_DELETED, topic=topic))
        return delta

    def _rebuild(self, name: str) -> None:
        partitions = self.cache.partitions(name)
        topic_id = self.cache.topic_id(name)
        if partitions is None:
            self._topics.pop(name, None)
            return
        self._topics[name] = TopicMetadata(
            name, topic_id or uuid.UUID(int=0), partitions, self._topic_configs.get(name, MappingProxyType({})),
            is_internal_topic(name))

    def _read_topic_configs(self, name: str) -> dict[str, str]:
        try:
            return dict(self.zk.get_entity_config("topics", name))
        except Exception as exc:  # ZooKeeper unreachable: keep serving with the defaults, say so once
            log.warning("cannot read the config overrides of topic %s from ZooKeeper: %s", name, exc)
            return {}

    def on_config_changes(self, entity_paths: Sequence[str]) -> None:
        """A `config_change_` notification named these entities (e.g. "topics/foo", "brokers/1")."""
        for path in entity_paths:
            entity_type, _, name = path.partition("/")
            if entity_type == "topics":
                with self._lock:
                    self._topic_configs[name] = MappingProxyType(self._read_topic_configs(name))
                    self._rebuild(name)
                    topic = self._topics.get(name)
                if topic is not None:
                    self._notify(MetadataChange(ChangeKind.TOPIC_CONFIGS_CHANGED, topic=topic))
            elif entity_type == "brokers":
                resource = "" if name == _DEFAULT_ENTITY else name
                self._notify(MetadataChange(ChangeKind.BROKER_CONFIGS_CHANGED, resource=resource))
        if any(path.startswith(("users/", "clients/")) for path in entity_paths):
            self._notify(MetadataChange(ChangeKind.CLIENT_QUOTAS_CHANGED))
        with self._lock:  # SCRAM: read the user's znode again on its next use
            self._scram_stale.update(path.split("/")[1] for path in entity_paths
                                     if path.startswith("users/") and path.count("/") == 1)

    def topic_configs(self, name: str) -> Mapping[str, str]:
        """A topic's config overrides (read from ZooKeeper the first time)."""
        with self._lock:
            configs = self._topic_configs.get(name)
            if configs is None:
                configs = self._topic_configs[name] = MappingProxyType(self._read_topic_configs(name))
            return configs

    # -- brokers --------------------------------------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def register_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> BrokerInfo:
        if node_id == self.node_id and self.registration_hook is not None:
            self.registration_hook(host, port, rack)
        return BrokerInfo(node_id, host, port, rack)

    def unregister_broker(self, node_id: int) -> None:
        """Brokers leave the cluster when their ZooKeeper session ends; nothing to do here."""

    def list_brokers(self) -> list[BrokerInfo]:
        return self.cache.broker_infos(self.listener_name)

    def controller_id(self) -> int:
        return self.cache.controller_id

    def broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """The inter-broker endpoint of a live broker, per the last UpdateMetadata."""
        return self.cache.endpoint(node_id, self.listener_name)

    def is_live(self, node_id: int) -> bool:
        return node_id in self.cache.brokers

    def offline_replicas(self, name: str, partition: int) -> tuple[int, ...]:
        return self.cache.offline_replicas(name, partition)

    # -- topics ---------------------------------------------------------------------------------
    def _registered_racks(self) -> dict[int, str | None]:
        return {broker_id: registration.rack for broker_id, (registration, _) in self.zk.get_all_brokers().items()}

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     configs: Mapping[str, str] | None = None, internal: bool = False,
                     validate_only: bool = False) -> TopicMetadata:
        existing = set(self.zk.get_all_topics())
        check_new_topic_name(name, existing)
        configs = dict(configs or {})
        if self.topic_config_validator is not None:
            self.topic_config_validator(configs, None)
        racks = self._registered_racks()
        replica_lists = plan_assignments(num_partitions, replication_factor, assignments, sorted(racks),
                                         self.default_num_partitions, self.default_replication_factor)
        if not assignments:  # Kafka's placement: random start, rack-aware when every broker has a rack
            placed = assign_replicas(sorted(racks), len(replica_lists), len(replica_lists[0]), racks=racks)
            replica_lists = [placed[p] for p in range(len(replica_lists))]
        topic_id = new_topic_id()
        partitions = tuple(PartitionMetadata(p, tuple(replicas), (), -1, 0, 0)
                           for p, replicas in enumerate(replica_lists))
        topic = TopicMetadata(name, topic_id, partitions, MappingProxyType(configs),
                              internal or is_internal_topic(name))
        if validate_only:
            return topic
        assignment = TopicAssignment(name, topic_id, {p: list(r) for p, r in enumerate(replica_lists)}, {}, {})
        try:
            self.zk.create_topic(assignment, configs)
        except TopicExistsError:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None
        log.info("created topic %s (id %s) in ZooKeeper with %d partition(s), replication factor %d%s", name,
                 uuid_to_kafka_str(topic_id), len(partitions), len(replica_lists[0]),
                 f", configs {configs}" if configs else "")
        with self._lock:
            self._topic_configs[name] = MappingProxyType(configs)
        return topic

    def delete_topic(self, name_or_id: str | uuid.UUID) -> TopicMetadata:
        if isinstance(name_or_id, uuid.UUID):
            topic = self.topic_by_id(name_or_id)
            if topic is None:
                raise UnknownTopicIdError("This server does not host this topic ID.")
        else:
            topic = self.get_topic(name_or_id)
            if topic is None:
                if self.zk.get_topic(name_or_id) is None:
                    raise UnknownTopicOrPartitionError(_UNKNOWN_TOPIC)
                topic = TopicMetadata(name_or_id, uuid.UUID(int=0), ())
        self.zk.mark_topic_for_deletion(topic.name)
        log.info("marked topic %s for deletion", topic.name)
        return topic

    def create_partitions(self, name: str, new_total: int, assignments: Sequence[Sequence[int]] | None = None, *,
                          validate_only: bool = False) -> TopicMetadata:
        found = self.zk.get_topic(name)
        if found is None or name in self.zk.get_topics_pending_deletion():
            raise UnknownTopicOrPartitionError(_UNKNOWN_TOPIC)
        assignment, _version = found
        current = len(assignment.partitions)
        factor = len(assignment.partitions[0]) if assignment.partitions else 1
        if assignment.adding or assignment.removing:
            raise KafkaError(f"A partition reassignment is in progress for the topic '{name}'.",
                             ErrorCode.REASSIGNMENT_IN_PROGRESS)
        racks = self._registered_racks()
        replica_lists = plan_new_partitions(name, current, new_total, factor, assignments, sorted(racks))
        if assignments is None:  # continue the existing layout, as Kafka's AdminZkClient does
            brokers = sorted(racks)
            first = assignment.partitions.get(0, [brokers[0]])[0]
            start = next((i for i, b in enumerate(brokers) if b >= first), 0)
            placed = assign_replicas(brokers, new_total - current, factor, racks=racks, start_partition=current,
                                     fixed_start=start)
            replica_lists = [placed[current + i] for i in range(new_total - current)]
        partitions = dict(assignment.partitions)
        for offset, replicas in enumerate(replica_lists):
            partitions[current + offset] = list(replicas)
        topic = TopicMetadata(name, assignment.topic_id or uuid.UUID(int=0),
                              tuple(PartitionMetadata(p, tuple(r), (), -1) for p, r in sorted(partitions.items())))
        if validate_only:
            return topic
        if new_total <= current:
            raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
        self.zk.set_topic_assignment_unfenced(TopicAssignment(name, assignment.topic_id, partitions, {}, {}),
                                              expected_version=_version)
        log.info("topic %s: %d partitions requested (was %d)", name, new_total, current)
        return topic

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        topic = self.get_topic(name)
        if topic is None and self.zk.get_topic(name) is None:
            raise UnknownTopicOrPartitionError(_UNKNOWN_TOPIC)
        self.zk.set_entity_config("topics", name, dict(configs))
        log.info("topic %s config overrides are now %s", name, dict(configs))
        with self._lock:
            self._topic_configs[name] = MappingProxyType(dict(configs))
            self._rebuild(name)
            topic = self._topics.get(name, topic)
        if topic is not None:
            self._notify(MetadataChange(ChangeKind.TOPIC_CONFIGS_CHANGED, topic=topic))
        return topic

    def get_topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        name = self.cache.name_of(topic_id)
        return self._topics.get(name) if name is not None else None

    def list_topics(self) -> list[TopicMetadata]:
        with self._lock:
            return [self._topics[n] for n in sorted(self._topics)]

    # -- partitions: the controller decides these; brokers send it requests --------------------
    def _controller_only(self) -> KafkaError:
        return KafkaError("This is not the correct controller for this cluster.", ErrorCode.NOT_CONTROLLER)

    def set_partition_leader_and_isr(self, name: str, partition: int, leader: int,
                                     isr: Sequence[int]) -> PartitionMetadata:
        raise self._controller_only()

    def bump_leader_epoch(self, name: str, partition: int) -> PartitionMetadata:
        raise self._controller_only()

    def elect_leader(self, name: str, partition: int, unclean: bool = False) -> PartitionMetadata:
        raise self._controller_only()

    def alter_partition_reassignment(self, name: str, partition: int,
                                     replicas: Sequence[int] | None) -> PartitionMetadata:
        raise self._controller_only()

    # -- ACLs: in ZooKeeper as Kafka's AclAuthorizer keeps them, shared by every broker ---------
    def watch_acl_changes(self) -> None:
        """Load every ACL from ZooKeeper and follow the other brokers' changes (once, at start)."""
        self._acls.start()

    def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self._acls.describe(acl_filter)

    def create_acls(self, acls: Sequence[AclBinding]) -> None:
        self._acls.create(acls)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        return self._acls.delete(filters)

    def _on_acls_changed(self) -> None:
        self._notify(MetadataChange(ChangeKind.ACLS_CHANGED))

    # -- dynamic broker configs ----------------------------------------------------------------
    def get_broker_configs(self, resource: str) -> dict[str, str]:
        return dict(self.zk.get_entity_config("brokers", resource or _DEFAULT_ENTITY))

    def set_broker_configs(self, resource: str, configs: Mapping[str, str]) -> None:
        self.zk.set_entity_config("brokers", resource or _DEFAULT_ENTITY, dict(configs))

    # -- group configs: /config/groups/<group> (Kafka 3.9's ZooKeeper mode has none; same layout as
    # the other entity configs, and other brokers ignore the config_change_ notification) --------
    def get_group_configs(self, group_id: str) -> dict[str, str]:
        return dict(self.zk.get_entity_config("groups", quote(group_id, safe="")))

    def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        # the znode name is the group id URL-encoded, as Kafka sanitizes user names ("/" is not a name)
        self.zk.set_entity_config("groups", quote(group_id, safe=""), dict(configs))
    # -- reads on a client's request path (ApiVersions, telemetry) -----------------------------------
    def _cached_read(self, key: str, load, ttl: float = 1.0, fallback=None):
        """`load()`'s value, read again in a background thread once it is `ttl` old: ApiVersions and
        telemetry requests never wait on ZooKeeper after the first read, nor stop during an outage
        (they keep the last value, as a Kafka broker keeps its caches). When even the first read fails
        (ZooKeeper away before anything was read) and a `fallback` is given, that is the answer until a
        background read succeeds: ApiVersions, the first request of every connection, must not fail."""
        with self._lock:
            cache = self.__dict__.setdefault("_read_cache", {})
            entry = cache.get(key)
            if entry is not None:
                read_at, value, refreshing = entry
                if time.monotonic() - read_at >= ttl and not refreshing:
                    cache[key] = (read_at, value, True)
                    threading.Thread(target=self._refresh_read, args=(key, load, value), daemon=True,
                                     name=f"zk-read-{key}").start()
                return value
        try:
            value = load()
        except Exception as exc:
            if fallback is None:
                raise
            log.warning("could not read %s from ZooKeeper (%s); answering from what this broker holds until it "
                        "can", key, exc)
            with self._lock:
                cache.setdefault(key, (float("-inf"), fallback, False))  # stale: the next call reads again
            return fallback
        with self._lock:
            cache[key] = (time.monotonic(), value, False)
        return value

    def _refresh_read(self, key: str, load, old) -> None:
        try:
            value = load()
        except Exception as exc:  # ZooKeeper unreachable: keep the last value, try again later
            log.debug("could not read %s from ZooKeeper: %s", key, exc)
            with self._lock:
                self._read_cache[key] = (time.monotonic(), old, False)
            return
        with self._lock:
            self._read_cache[key] = (time.monotonic(), value, False)

    def _forget_read(self, key: str) -> None:
        with self._lock:
            self.__dict__.setdefault("_read_cache", {}).pop(key, None)

    # -- finalized features: /feature, its znode version the epoch (as Kafka's ZooKeeper mode) ----------
    def stored_features(self) -> tuple[int, dict[str, int]]:
        def load() -> tuple[int, dict[str, int]]:
            state, version = self.zk.get_feature()
            return max(version, 0), dict(state.features) if state is not None else {}

        # nothing read yet and ZooKeeper away: no finalized level stored, as a fresh /feature (the
        # defaults of metadata/features.py apply); the real levels replace it once ZooKeeper answers
        epoch, levels = self._cached_read("feature", load, fallback=(0, {}))
        return epoch, dict(levels)

    def store_features(self, changes: Mapping[str, int]) -> None:
        self.zk.update_feature(changes)
        self._forget_read("feature")
        log.info("finalized features in %s changed: %s", "/feature", dict(changes))

    # -- client-metrics subscriptions: /config/client-metrics/<name>, beside the other config entities
    def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        def load() -> dict[str, dict[str, str]]:
            return {name: configs for name, configs in self.zk.get_all_entity_configs("client-metrics").items()
                    if configs}

        return {name: dict(configs) for name, configs in self._cached_read("client-metrics", load, fallback={}).items()}

    def set_client_metrics_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.zk.set_entity_config("client-metrics", name, dict(configs))
        self._forget_read("client-metrics")

    # -- client quotas: /config/users/<u>, /config/clients/<c>, /config/users/<u>/clients/<c> --------
    def describe_client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        quotas = {}
        for path, configs in self.zk.get_quota_entity_configs().items():
            values = quota_values(configs)
            if values:
                quotas[_quota_entity(path)] = values
        return quotas

    def alter_client_quotas(self, changes: Mapping[QuotaEntity, Mapping[str, float | None]]) -> None:
        # As Kafka's AdminZkClient: each entity's znode is rewritten whole (other keys kept) and
        # announced with its own config_change_ notification.
        for entity, ops in changes.items():
            entity_type, name = _quota_znode(entity)
            current = self.zk.get_entity_config(entity_type, name)
            updated = {k: v for k, v in current.items() if k not in ops}
            updated.update({k: format_quota_value(k, v) for k, v in ops.items() if v is not None})
            self.zk.set_entity_config(entity_type, name, updated)
            log.info("client quotas of %s now %s", entity, updated or "none")
        self._notify(MetadataChange(ChangeKind.CLIENT_QUOTAS_CHANGED))

    # -- SCRAM credentials: `SCRAM-SHA-256`/`SCRAM-SHA-512` entries of /config/users/<user> ------
    def _scram_cache(self) -> dict[str, dict[str, str]]:
        """Every user's SCRAM entries, read once, then per user after its config_change_ (call off the loop)."""
        with self._lock:
            if self._scram is None:
                self._scram = {}
                self._scram_stale.clear()
                for znode, configs in self.zk.get_all_entity_configs("users").items():
                    self._scram_put(znode, configs)
            for znode in list(self._scram_stale):
                self._scram_stale.discard(znode)
                self._scram_put(znode, self.zk.get_entity_config("users", znode))
            return self._scram

    def _scram_put(self, znode: str, configs: Mapping[str, str]) -> None:
        user = desanitize_entity_name(znode)
        creds = {k: v for k, v in configs.items() if k.startswith("SCRAM-")}
        if creds:
            self._scram[user] = creds
        else:
            self._scram.pop(user, None)

    def scram_users(self) -> list[str]:
        return sorted(self._scram_cache())

    def scram_credentials(self, user: str) -> dict[str, str]:
        return dict(self._scram_cache().get(user, {}))

    def alter_scram_credentials(self, changes: Mapping[str, Mapping[str, str | None]]) -> None:
        # As Kafka's AdminZkClient: the user's znode is rewritten whole (quota keys kept), then a
        # config_change_ notification makes every broker read it again.
        for user, by_mechanism in changes.items():
            znode = sanitize_entity_name(user)
            current = self.zk.get_entity_config("users", znode)
            updated = {k: v for k, v in current.items() if k not in by_mechanism}
            updated.update({k: v for k, v in by_mechanism.items() if v is not None})
            self.zk.set_entity_config("users", znode, updated)
            with self._lock:
                if self._scram is not None:
                    self._scram_put(znode, updated)

    # -- lifecycle ------------------------------------------------------------------------------
    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: MetadataListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify(self, change: MetadataChange) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("metadata listener %r failed on %s", listener, change.kind.value)

    def close(self) -> None:
        """The cluster member closes the ZooKeeper client."""


def _znode_name(name: str | None) -> str:
    return _DEFAULT_ENTITY if name is None else sanitize_entity_name(name)


def _entity_name(znode_name: str) -> str | None:
    return None if znode_name == _DEFAULT_ENTITY else desanitize_entity_name(znode_name)


def _quota_znode(entity: QuotaEntity) -> tuple[str, str]:
    """(entity type, znode name below it) of a quota entity, as Kafka's ZooKeeper layout."""
    components = entity.as_dict()
    if USER in components:
        name = _znode_name(components[USER])
        if CLIENT_ID in components:
            name += f"/clients/{_znode_name(components[CLIENT_ID])}"
        return "users", name
    return "clients", _znode_name(components[CLIENT_ID])


def _quota_entity(path: str) -> QuotaEntity:
    """The entity of "users/<u>", "users/<u>/clients/<c>" or "clients/<c>"."""
    parts = path.split("/")
    if parts[0] == "clients":
        return QuotaEntity.client(_entity_name(parts[1]))
    if len(parts) == 4:
        return QuotaEntity.user_client(_entity_name(parts[1]), _entity_name(parts[3]))
    return QuotaEntity.user(_entity_name(parts[1]))
