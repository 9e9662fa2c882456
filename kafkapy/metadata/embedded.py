"""EmbeddedMetadataStore: the cluster metadata of a single kafkapy node, kept in one local JSON file.

Every change rewrites the file atomically (write a temp file, fsync, rename, fsync the directory),
so a crash leaves either the old or the new metadata, never a torn file.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .errors import InconsistentClusterIdError, UnknownTopicIdError, UnknownTopicOrPartitionError
from .ids import new_cluster_id, new_topic_id, uuid_to_kafka_str
from .store import (
    BrokerInfo,
    ChangeKind,
    MetadataChange,
    MetadataListener,
    MetadataStore,
    PartitionMetadata,
    TopicConfigValidator,
    TopicMetadata,
)
from .topic_rules import check_new_topic_name, is_internal_topic, plan_assignments, plan_new_partitions

if TYPE_CHECKING:
    import uuid

    from .acls import AclBinding, AclBindingFilter
    from .quotas import QuotaEntity

__all__ = ["METADATA_FILE", "EmbeddedMetadataStore"]

log = logging.getLogger(__name__)

METADATA_FILE = "kafkapy-metadata.json"
FORMAT_VERSION = 1
_UNKNOWN_TOPIC = "This server does not host this topic-partition."


class EmbeddedMetadataStore(MetadataStore):
    """MetadataStore backed by `<data_dir>/kafkapy-metadata.json`.

    `cluster_id`, when given, is used to format a new store and must match an existing one
    (InconsistentClusterIdError). `topic_config_validator` checks config overrides of new topics.
    Live brokers are those registered since the store was opened; registrations are persisted.
    """

    def __init__(self, data_dir: str | Path, *, cluster_id: str | None = None,
                 topic_config_validator: TopicConfigValidator | None = None,
                 default_num_partitions: int = 1, default_replication_factor: int = 1):
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / METADATA_FILE
        self.topic_config_validator = topic_config_validator
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self._lock = threading.RLock()
        self._listeners: list[MetadataListener] = []
        self._topics: dict[str, TopicMetadata] = {}
        self._topics_by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._brokers: dict[int, BrokerInfo] = {}
        self._live: set[int] = set()
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}
        self._acls: set[AclBinding] = set()
        self._client_quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._scram: dict[str, dict[str, str]] = {}  # user -> {mechanism: Kafka's stored form}
        self._client_metrics: dict[str, dict[str, str]] = {}  # CLIENT_METRICS resources (KIP-714)
        self._features: dict[str, int] = {}  # finalized feature levels stored by UpdateFeatures
        self._features_epoch = 0
        self._closed = False
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._cluster_id = self._load(cluster_id)

    # -- persistence ------------------------------------------------------------------------------
    def _load(self, wanted_cluster_id: str | None) -> str:
        try:
            (self.data_dir / (METADATA_FILE + ".tmp")).unlink()
            log.warning("removed an unfinished metadata write in %s", self.data_dir)
        except FileNotFoundError:
            pass
        if not self.path.exists():
            cluster_id = wanted_cluster_id or _cluster_id_from_meta_properties(self.data_dir) or new_cluster_id()
            self._cluster_id = cluster_id
            self._persist()
            log.info("formatted new metadata store in %s with cluster id %s", self.data_dir, cluster_id)
            return cluster_id
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"unsupported metadata format version {data.get('version')!r}")
            cluster_id = data["cluster_id"]
            for raw in data.get("brokers", []):
                broker = BrokerInfo(raw["node_id"], raw["host"], raw["port"], raw.get("rack"))
                self._brokers[broker.node_id] = broker
            for raw in data.get("topics", []):
                topic = _topic_from_json(raw)
                self._topics[topic.name] = topic
                self._topics_by_id[topic.topic_id] = topic
            self._broker_configs = {k: dict(v) for k, v in data.get("broker_configs", {}).items()}
            self._group_configs = {k: dict(v) for k, v in data.get("group_configs", {}).items()}
            if data.get("acls"):
                from .acls import AclBinding  # the ACL model loads only where ACLs are stored

                self._acls = {AclBinding.from_json(raw) for raw in data["acls"]}
            if data.get("client_quotas"):
                from .quotas import QuotaEntity

                self._client_quotas = {QuotaEntity.of(raw["entity"]): {k: float(v) for k, v in raw["quotas"].items()}
                                       for raw in data["client_quotas"]}
            self._scram = {user: dict(creds) for user, creds in data.get("scram_credentials", {}).items()}
            self._client_metrics = {name: dict(c) for name, c in data.get("client_metrics", {}).items()}
            self._features = {name: int(level) for name, level in data.get("features", {}).items()}
            self._features_epoch = int(data.get("features_epoch", 0))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Never start from empty metadata over a file we could not read: that would orphan every log.
            raise RuntimeError(f"cannot read kafkapy metadata file {self.path}: {exc}") from exc
        if wanted_cluster_id is not None and wanted_cluster_id != cluster_id:
            raise InconsistentClusterIdError(f"The cluster id {wanted_cluster_id} does not match the stored cluster "
                                             f"id {cluster_id} in {self.path}")
        log.info("loaded metadata from %s: cluster id %s, %d topics", self.path, cluster_id, len(self._topics))
        return cluster_id

    def _persist(self) -> None:
        data = {
            "version": FORMAT_VERSION,
            "cluster_id": self._cluster_id,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                        for b in sorted(self._brokers.values(), key=lambda b: b.node_id)],
            "topics": [_topic_to_json(t) for t in sorted(self._topics.values(), key=lambda t: t.name)],
            "broker_configs": self._broker_configs,
        }
        if self._group_configs:
            data["group_configs"] = self._group_configs
        if self._acls:
            from .acls import AclBinding

            data["acls"] = [acl.to_json() for acl in sorted(self._acls, key=AclBinding.sort_key)]
        if self._client_metrics:
            data["client_metrics"] = self._client_metrics
        if self._features or self._features_epoch:
            data["features"] = self._features
            data["features_epoch"] = self._features_epoch
        if self._client_quotas:
            data["client_quotas"] = [{"entity": entity.as_dict(), "quotas": quotas}
                                     for entity, quotas in sorted(self._client_quotas.items(), key=lambda e: str(e[0]))]
        if self._scram:
            data["scram_credentials"] = self._scram
        tmp = self.data_dir / (METADATA_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _notify(self, change: MetadataChange) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("metadata listener %r failed on %s", listener, change.kind.value)

    # -- brokers ----------------------------------------------------------------------------------
    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def register_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> BrokerInfo:
        broker = BrokerInfo(node_id, host, port, rack)
        with self._lock:
            self._live.add(node_id)
            # Not written to disk by itself: a broker registers again at every start (as a Kafka
            # broker's ephemeral znode), so its endpoint is live state; the file carries it along
            # with the next change. Saves two fsyncs on the way to the first answer.
            self._brokers[node_id] = broker
            log.info("registered broker %d at %s:%d%s", node_id, host, port, f" (rack {rack})" if rack else "")
            self._notify(MetadataChange(ChangeKind.BROKER_REGISTERED, broker=broker))
        return broker

    def unregister_broker(self, node_id: int) -> None:
        with self._lock:
            self._live.discard(node_id)

    def list_brokers(self) -> list[BrokerInfo]:
        with self._lock:
            return [self._brokers[n] for n in sorted(self._live)]

    def is_live(self, node_id: int) -> bool:
        return node_id in self._live

    def controller_id(self) -> int:
        # KRaft brokers report some live broker as "controller"; clients only need a reachable node.
        with self._lock:
            return min(self._live) if self._live else -1

    # -- topics -----------------------------------------------------------------------------------
    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     configs: Mapping[str, str] | None = None, internal: bool = False,
                     validate_only: bool = False) -> TopicMetadata:
        with self._lock:
            check_new_topic_name(name, self._topics)
            configs = dict(configs or {})
            if self.topic_config_validator is not None:
                self.topic_config_validator(configs, None)
            replica_lists = plan_assignments(num_partitions, replication_factor, assignments, sorted(self._live),
                                             self.default_num_partitions, self.default_replication_factor)
            partitions = tuple(_new_partition(p, replicas, self._live) for p, replicas in enumerate(replica_lists))
            topic = TopicMetadata(name, new_topic_id(), partitions, MappingProxyType(configs),
                                  internal or is_internal_topic(name))
            while topic.topic_id in self._topics_by_id:  # 2^-122 odds, but ids must stay unique
                topic = topic._replace(topic_id=new_topic_id())
            if validate_only:
                return topic
            self._put(topic)
            self._persist()
            log.info("created topic %s (id %s) with %d partition(s), replication factor %d%s", name,
                     uuid_to_kafka_str(topic.topic_id),
                     len(partitions), len(partitions[0].replicas), f", configs {configs}" if configs else "")
            self._notify(MetadataChange(ChangeKind.TOPIC_CREATED, topic=topic))
            return topic

    def delete_topic(self, name_or_id: str | uuid.UUID) -> TopicMetadata:
        with self._lock:
            if not isinstance(name_or_id, str):  # a topic id (uuid.UUID)
                topic = self._topics_by_id.get(name_or_id)
                if topic is None:
                    raise UnknownTopicIdError("This server does not host this topic ID.")
            else:
                topic = self._topics.get(name_or_id)
                if topic is None:
                    raise UnknownTopicOrPartitionError(_UNKNOWN_TOPIC)
            del self._topics[topic.name]
            del self._topics_by_id[topic.topic_id]
            self._persist()
            log.info("deleted topic %s (id %s)", topic.name, uuid_to_kafka_str(topic.topic_id))
            self._notify(MetadataChange(ChangeKind.TOPIC_DELETED, topic=topic))
            return topic

    def create_partitions(self, name: str, new_total: int, assignments: Sequence[Sequence[int]] | None = None, *,
                          validate_only: bool = False) -> TopicMetadata:
        with self._lock:
            topic = self._require(name)
            current = len(topic.partitions)
            factor = len(topic.partitions[0].replicas) if topic.partitions else 1
            replica_lists = plan_new_partitions(name, current, new_total, factor, assignments, sorted(self._live))
            added = tuple(_new_partition(current + i, replicas, self._live) for i, replicas in enumerate(replica_lists))
            topic = topic._replace(partitions=topic.partitions + added)
            if validate_only:
                return topic
            self._put(topic)
            self._persist()
            log.info("topic %s now has %d partitions (was %d)", name, new_total, current)
            self._notify(MetadataChange(ChangeKind.PARTITIONS_CREATED, topic=topic))
            return topic

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        with self._lock:
            topic = self._require(name)._replace(configs=MappingProxyType(dict(configs)))
            self._put(topic)
            self._persist()
            log.info("topic %s config overrides are now %s", name, dict(configs))
            self._notify(MetadataChange(ChangeKind.TOPIC_CONFIGS_CHANGED, topic=topic))
            return topic

    def get_topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._topics_by_id.get(topic_id)

    def list_topics(self) -> list[TopicMetadata]:
        with self._lock:
            return [self._topics[n] for n in sorted(self._topics)]

    # -- partitions -------------------------------------------------------------------------------
    def set_partition_leader_and_isr(self, name: str, partition: int, leader: int,
                                     isr: Sequence[int]) -> PartitionMetadata:
        with self._lock:
            old = self._require_partition(name, partition)
            epoch = old.leader_epoch + 1 if leader != old.leader else old.leader_epoch
            return self._update_partition(name, old._replace(leader=leader, isr=tuple(isr), leader_epoch=epoch,
                                                        partition_epoch=old.partition_epoch + 1))

    def bump_leader_epoch(self, name: str, partition: int) -> PartitionMetadata:
        with self._lock:
            old = self._require_partition(name, partition)
            return self._update_partition(name, old._replace(leader_epoch=old.leader_epoch + 1,
                                                        partition_epoch=old.partition_epoch + 1))

    def elect_leader(self, name: str, partition: int, unclean: bool = False) -> PartitionMetadata:
        from . import partition_changes

        with self._lock:
            old = self._require_partition(name, partition)
            return self._update_partition(name, partition_changes.elect_leader(old, unclean, self._live))

    def alter_partition_reassignment(self, name: str, partition: int,
                                     replicas: Sequence[int] | None) -> PartitionMetadata:
        from . import partition_changes

        with self._lock:
            old = self._require_partition(name, partition)
            if replicas is None:
                new = partition_changes.cancel_reassignment(old, self._live)
            else:
                new = partition_changes.reassign(old, replicas, self._brokers.keys(), self._live)
            if new is None:
                return old
            log.info("partition %s-%d: replicas %s -> %s%s", name, partition, list(old.replicas), list(new.replicas),
                     f" (adding {list(new.adding_replicas)}, removing {list(new.removing_replicas)})"
                     if partition_changes.reassignment_in_progress(new) else "")
            return self._update_partition(name, new)

    # -- ACLs -------------------------------------------------------------------------------------
    def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        with self._lock:
            from .acls import AclBinding

            return sorted((acl for acl in self._acls if acl_filter.matches(acl)), key=AclBinding.sort_key)

    def create_acls(self, acls: Sequence[AclBinding]) -> None:
        with self._lock:
            new = [acl for acl in acls if acl not in self._acls]
            if not new:
                return
            self._acls.update(new)
            self._persist()
            for acl in new:
                log.info("created ACL %s", acl)
            self._notify(MetadataChange(ChangeKind.ACLS_CHANGED))

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        with self._lock:
            # Every filter sees the ACLs as they were before this request (as in Kafka).
            matches = [self.describe_acls(acl_filter) for acl_filter in filters]
            deleted = {acl for matched in matches for acl in matched}
            if deleted:
                self._acls -= deleted
                self._persist()
                from .acls import AclBinding

                for acl in sorted(deleted, key=AclBinding.sort_key):
                    log.info("deleted ACL %s", acl)
                self._notify(MetadataChange(ChangeKind.ACLS_CHANGED))
            return matches

    # -- dynamic broker configs -------------------------------------------------------------------
    def get_broker_configs(self, resource: str) -> dict[str, str]:
        with self._lock:
            return dict(self._broker_configs.get(resource, {}))

    def set_broker_configs(self, resource: str, configs: Mapping[str, str]) -> None:
        with self._lock:
            if configs:
                self._broker_configs[resource] = dict(configs)
            else:
                self._broker_configs.pop(resource, None)
            self._persist()
            self._notify(MetadataChange(ChangeKind.BROKER_CONFIGS_CHANGED, resource=resource))

    # -- group configs ----------------------------------------------------------------------------
    def get_group_configs(self, group_id: str) -> dict[str, str]:
        with self._lock:
            return dict(self._group_configs.get(group_id, {}))

    def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        with self._lock:
            if configs:
                self._group_configs[group_id] = dict(configs)
            else:
                self._group_configs.pop(group_id, None)
            self._persist()
    # -- finalized features -------------------------------------------------------------------------
    def stored_features(self) -> tuple[int, dict[str, int]]:
        with self._lock:
            return self._features_epoch, dict(self._features)

    def store_features(self, changes: Mapping[str, int]) -> None:
        with self._lock:
            self._features.update(changes)  # 0 kept: a feature turned off stays off over a new default
            self._features_epoch += 1
            self._persist()
            log.info("finalized features now %s (epoch %d)", self._features or "defaults", self._features_epoch)

    # -- client-metrics subscriptions ---------------------------------------------------------------
    def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {name: dict(configs) for name, configs in self._client_metrics.items()}

    def set_client_metrics_configs(self, name: str, configs: Mapping[str, str]) -> None:
        with self._lock:
            if configs:
                self._client_metrics[name] = dict(configs)
            else:
                self._client_metrics.pop(name, None)
            self._persist()
            log.info("client metrics subscription %s now %s", name, dict(configs) or "removed")

    # -- client quotas ----------------------------------------------------------------------------
    def describe_client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        with self._lock:
            return {entity: dict(quotas) for entity, quotas in self._client_quotas.items()}

    def alter_client_quotas(self, changes: Mapping[QuotaEntity, Mapping[str, float | None]]) -> None:
        with self._lock:
            for entity, ops in changes.items():
                from .quotas import apply_quota_ops

                updated = apply_quota_ops(self._client_quotas.get(entity, {}), ops.items())
                if updated:
                    self._client_quotas[entity] = updated
                else:
                    self._client_quotas.pop(entity, None)
                log.info("client quotas of %s now %s", entity, updated or "none")
            self._persist()
            self._notify(MetadataChange(ChangeKind.CLIENT_QUOTAS_CHANGED))

    # -- SCRAM credentials ------------------------------------------------------------------------
    def scram_users(self) -> list[str]:
        with self._lock:
            return sorted(self._scram)

    def scram_credentials(self, user: str) -> dict[str, str]:
        with self._lock:
            return dict(self._scram.get(user, {}))

    def alter_scram_credentials(self, changes: Mapping[str, Mapping[str, str | None]]) -> None:
        with self._lock:
            for user, by_mechanism in changes.items():
                creds = self._scram.setdefault(user, {})
                for mechanism, value in by_mechanism.items():
                    if value is None:
                        creds.pop(mechanism, None)
                    else:
                        creds[mechanism] = value
                if not creds:
                    del self._scram[user]
            self._persist()

    # -- lifecycle --------------------------------------------------------------------------------
    def add_listener(self, listener: MetadataListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: MetadataListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def close(self) -> None:
        # Every change is already durable; closing only stops notifications.
        with self._lock:
            self._listeners.clear()
            self._closed = True

    # -- internals --------------------------------------------------------------------------------
    def _require(self, name: str) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(_UNKNOWN_TOPIC)
        return topic

    def _require_partition(self, name: str, partition: int) -> PartitionMetadata:
        topic = self._require(name)
        if not 0 <= partition < len(topic.partitions):
            raise UnknownTopicOrPartitionError(_UNKNOWN_TOPIC)
        return topic.partitions[partition]

    def _put(self, topic: TopicMetadata) -> None:
        self._topics[topic.name] = topic
        self._topics_by_id[topic.topic_id] = topic

    def _update_partition(self, name: str, new: PartitionMetadata) -> PartitionMetadata:
        topic = self._topics[name]
        partitions = list(topic.partitions)
        partitions[new.partition] = new
        topic = topic._replace(partitions=tuple(partitions))
        self._put(topic)
        self._persist()
        log.info("partition %s-%d: leader %d, leader epoch %d, isr %s", name, new.partition, new.leader,
                 new.leader_epoch, list(new.isr))
        self._notify(MetadataChange(ChangeKind.PARTITION_CHANGED, topic=topic, partition=new.partition))
        return new


def _new_partition(index: int, replicas: Sequence[int], live: set[int]) -> PartitionMetadata:
    isr = tuple(r for r in replicas if r in live) or tuple(replicas)
    return PartitionMetadata(index, tuple(replicas), isr, isr[0], 0, 0)


def _topic_to_json(topic: TopicMetadata) -> dict[str, Any]:
    return {
        "name": topic.name, "topic_id": str(topic.topic_id), "internal": topic.internal,
        "configs": dict(topic.configs),
        "partitions": [_partition_to_json(p) for p in topic.partitions],
    }


def _partition_to_json(p: PartitionMetadata) -> dict[str, Any]:
    raw = {"partition": p.partition, "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
           "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch}
    if p.adding_replicas or p.removing_replicas:
        raw["adding_replicas"] = list(p.adding_replicas)
        raw["removing_replicas"] = list(p.removing_replicas)
    return raw


def _topic_from_json(raw: Mapping[str, Any]) -> TopicMetadata:
    partitions = tuple(PartitionMetadata(p["partition"], tuple(p["replicas"]), tuple(p["isr"]), p["leader"],
                                         p.get("leader_epoch", 0), p.get("partition_epoch", 0),
                                         tuple(p.get("adding_replicas", ())), tuple(p.get("removing_replicas", ())))
                       for p in raw["partitions"])
    import uuid  # loaded with the first topic, not at start-up

    return TopicMetadata(raw["name"], uuid.UUID(raw["topic_id"]), partitions,
                         MappingProxyType(dict(raw.get("configs", {}))), bool(raw.get("internal", False)))


def _cluster_id_from_meta_properties(data_dir: Path) -> str | None:
    """Adopt the cluster id of a directory formatted by kafka-storage.sh (meta.properties)."""
    path = data_dir / "meta.properties"
    try:
        for line in path.read_text(encoding="latin-1").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "cluster.id" and value.strip():
                log.info("using cluster id %s from %s", value.strip(), path)
                return value.strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
    return None
