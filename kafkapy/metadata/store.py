"""The cluster metadata interface: brokers, topics, partitions, topic and broker config overrides.

`MetadataStore` is what the broker codes against; `EmbeddedMetadataStore` (embedded.py) keeps the
metadata in a local file, and a ZooKeeper backend can implement the same interface later.

Records handed out are immutable snapshots: a change builds new records (`record._replace(...)`), so
a reader holding a `TopicMetadata` never sees it change under its feet. They are NamedTuples rather
than frozen dataclasses because a broker builds these classes at start-up, and a NamedTuple class
costs a fifth of a dataclass's (docs/benchmarks.md, start-up).
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import uuid

    from .quotas import QuotaEntity
    from .acls import AclBinding, AclBindingFilter

__all__ = ["BrokerInfo", "ChangeKind", "MetadataChange", "MetadataListener", "MetadataStore", "PartitionMetadata",
           "TopicConfigValidator", "TopicMetadata"]


class BrokerInfo(NamedTuple):
    """A registered broker and the endpoint clients reach it at."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class PartitionMetadata(NamedTuple):
    """Replicas, leader and in-sync replicas of one partition."""

    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # Set while a reassignment is in progress (then `replicas` is the target plus the removing ones).
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


class TopicMetadata(NamedTuple):
    """A topic: id, partitions (index == partition number), config overrides, internal flag."""

    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionMetadata, ...]
    configs: Mapping[str, str] = MappingProxyType({})  # read-only, so one empty mapping serves every topic
    internal: bool = False

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


class ChangeKind(Enum):
    BROKER_REGISTERED = "broker_registered"
    TOPIC_CREATED = "topic_created"
    TOPIC_DELETED = "topic_deleted"
    PARTITIONS_CREATED = "partitions_created"
    TOPIC_CONFIGS_CHANGED = "topic_configs_changed"
    PARTITION_CHANGED = "partition_changed"
    BROKER_CONFIGS_CHANGED = "broker_configs_changed"
    ACLS_CHANGED = "acls_changed"
    CLIENT_QUOTAS_CHANGED = "client_quotas_changed"


class MetadataChange(NamedTuple):
    """What changed: `topic` is the new (or, for TOPIC_DELETED, the removed) topic; `partition` is
    set for PARTITION_CHANGED; `resource` is the broker config resource ("" = cluster default)."""

    kind: ChangeKind
    topic: TopicMetadata | None = None
    partition: int | None = None
    broker: BrokerInfo | None = None
    resource: str | None = None


MetadataListener = Callable[[MetadataChange], None]
# Validates topic config overrides: (new overrides, current overrides or None) -> None, raising
# ConfigError (INVALID_CONFIG). The broker supplies one built on its config table.
TopicConfigValidator = Callable[[Mapping[str, str], "Mapping[str, str] | None"], None]


class MetadataStore(abc.ABC):
    """Cluster metadata with Kafka's validation and error codes (see kafkapy.metadata.errors).

    Listeners are called synchronously after a change is durable; a failing listener is logged and
    does not undo the change.
    """

    @property
    @abc.abstractmethod
    def cluster_id(self) -> str:
        """22-character URL-safe base64 cluster id, generated once and kept."""

    # -- brokers --------------------------------------------------------------------------------
    @abc.abstractmethod
    def register_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> BrokerInfo:
        """Register (or update) a live broker."""

    @abc.abstractmethod
    def unregister_broker(self, node_id: int) -> None:
        """Mark a broker as no longer live (its registration is kept)."""

    @abc.abstractmethod
    def list_brokers(self) -> list[BrokerInfo]:
        """Live brokers, by node id."""

    @abc.abstractmethod
    def controller_id(self) -> int:
        """Node id reported as controller in Metadata/DescribeCluster (-1 when no broker is live)."""

    # -- topics ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     configs: Mapping[str, str] | None = None, internal: bool = False,
                     validate_only: bool = False) -> TopicMetadata:
        """Create a topic; -1 partitions/replication factor mean the store's defaults.

        With `assignments` (partition -> replica node ids) both counts must be -1. Raises
        InvalidTopicError, TopicAlreadyExistsError, InvalidPartitionsError,
        InvalidReplicationFactorError, InvalidReplicaAssignmentError, InvalidRequestError, ConfigError.
        With validate_only nothing is stored and the returned topic id is a fresh, unused one.
        """

    @abc.abstractmethod
    def delete_topic(self, name_or_id: str | uuid.UUID) -> TopicMetadata:
        """Delete a topic by name (UnknownTopicOrPartitionError) or id (UnknownTopicIdError)."""

    @abc.abstractmethod
    def create_partitions(self, name: str, new_total: int, assignments: Sequence[Sequence[int]] | None = None, *,
                          validate_only: bool = False) -> TopicMetadata:
        """Grow a topic to `new_total` partitions (InvalidPartitionsError unless it is an increase)."""

    @abc.abstractmethod
    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        """Replace the topic's config overrides with `configs` (already validated by the caller)."""

    @abc.abstractmethod
    def get_topic(self, name: str) -> TopicMetadata | None: ...

    @abc.abstractmethod
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    @abc.abstractmethod
    def list_topics(self) -> list[TopicMetadata]:
        """All topics, by name."""

    # -- partitions -----------------------------------------------------------------------------
    @abc.abstractmethod
    def set_partition_leader_and_isr(self, name: str, partition: int, leader: int,
                                     isr: Sequence[int]) -> PartitionMetadata:
        """Change a partition's leader and ISR; a new leader bumps the leader epoch."""

    @abc.abstractmethod
    def bump_leader_epoch(self, name: str, partition: int) -> PartitionMetadata:
        """Increase a partition's leader epoch by one (e.g. when the leader restarts its log)."""

    @abc.abstractmethod
    def elect_leader(self, name: str, partition: int, unclean: bool = False) -> PartitionMetadata:
        """Preferred (or unclean) leader election of one partition, with Kafka's rules
        (kafkapy.metadata.partition_changes.elect_leader); raises UnknownTopicOrPartitionError or a
        KafkaError with ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE."""

    @abc.abstractmethod
    def alter_partition_reassignment(self, name: str, partition: int,
                                     replicas: Sequence[int] | None) -> PartitionMetadata:
        """Reassign a partition to `replicas`, or cancel its ongoing reassignment (None); raises
        UnknownTopicOrPartitionError, InvalidReplicaAssignmentError, NO_REASSIGNMENT_IN_PROGRESS."""

    # -- ACLs -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Stored ACLs the filter matches, in a stable order."""

    @abc.abstractmethod
    def create_acls(self, acls: Sequence[AclBinding]) -> None:
        """Store ACLs (already validated); an ACL stored already is kept once."""

    @abc.abstractmethod
    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every ACL any filter matches, in one change; returns each filter's matches."""

    # -- dynamic broker configs -------------------------------------------------------------------
    @abc.abstractmethod
    def get_broker_configs(self, resource: str) -> dict[str, str]:
        """Dynamic broker configs of `resource`: "" for the cluster default, else a node id."""

    @abc.abstractmethod
    def set_broker_configs(self, resource: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic broker configs of `resource` (already validated by the caller)."""

    # -- group configs (IncrementalAlterConfigs on GROUP resources: the share groups' share.*) ------
    def get_group_configs(self, group_id: str) -> dict[str, str]:
        """The config overrides of a group ({} if none). This default keeps them in memory;
        the embedded store persists them, the ZooKeeper store keeps them in /config/groups/<group>."""
        return dict(getattr(self, "_memory_group_configs", {}).get(group_id, {}))

    def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the config overrides of a group (already validated by the caller)."""
        if not hasattr(self, "_memory_group_configs"):
            self._memory_group_configs: dict[str, dict[str, str]] = {}
        if configs:
            self._memory_group_configs[group_id] = dict(configs)
        else:
            self._memory_group_configs.pop(group_id, None)
    # -- finalized feature levels (KIP-584; kafkapy/metadata/features.py) ------------------------
    def stored_features(self) -> tuple[int, dict[str, int]]:
        """(epoch, the levels UpdateFeatures stored); defaults are not stored."""
        return 0, {}

    def store_features(self, changes: Mapping[str, int]) -> None:
        """Set finalized levels (0: turned off), already validated, in one change."""
        raise NotImplementedError("this metadata store keeps no finalized features")

    # -- client-metrics subscriptions (KIP-714 CLIENT_METRICS config resources) ------------------
    def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        """Every CLIENT_METRICS resource by name with its configs (kafkapy/metrics/client_telemetry.py)."""
        return {}

    def set_client_metrics_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the configs of CLIENT_METRICS resource `name` (none: remove it), already validated."""
        raise NotImplementedError("this metadata store keeps no client-metrics subscriptions")

    # -- client quotas ----------------------------------------------------------------------------
    @abc.abstractmethod
    def describe_client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every quota entity (kafkapy.security.quotas.QuotaEntity) that has quotas, with them."""

    @abc.abstractmethod
    def alter_client_quotas(self, changes: Mapping[QuotaEntity, Mapping[str, float | None]]) -> None:
        """Set (value) or remove (None) quotas of entities, already validated, in one change."""

    # -- SCRAM credentials (KIP-554) ----------------------------------------------------------------
    # Kafka's stored form per user and mechanism: {"SCRAM-SHA-256": "salt=..,stored_key=..,server_key=..,
    # iterations=.."}; kafkapy/security/sasl/scram.py reads and writes it.
    def scram_users(self) -> list[str]:
        """Users with at least one SCRAM credential, sorted."""
        return []

    def scram_credentials(self, user: str) -> dict[str, str]:
        """A user's SCRAM credentials by mechanism name ({} when none)."""
        return {}

    def alter_scram_credentials(self, changes: Mapping[str, Mapping[str, str | None]]) -> None:
        """Set (a value) or delete (None) credentials: {user: {mechanism: stored form or None}}."""
        raise NotImplementedError(f"{type(self).__name__} does not store SCRAM credentials")

    # -- lifecycle ------------------------------------------------------------------------------
    @abc.abstractmethod
    def add_listener(self, listener: MetadataListener) -> None: ...

    @abc.abstractmethod
    def remove_listener(self, listener: MetadataListener) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def topic_names(self) -> list[str]:
        return [topic.name for topic in self.list_topics()]

    def topic_configs(self, name: str) -> Mapping[str, str]:
        """A topic's config overrides ({} for an unknown topic)."""
        meta = self.get_topic(name)
        return meta.configs if meta is not None else {}

    def is_live(self, node_id: int) -> bool:
        return any(b.node_id == node_id for b in self.list_brokers())

    def broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """A live broker's (host, port), None when it is not live."""
        for b in self.list_brokers():
            if b.node_id == node_id:
                return b.host, b.port
        return None

    def offline_replicas(self, name: str, partition: int) -> tuple[int, ...]:
        """Replicas of a partition whose log dir is offline (known in a cluster only)."""
        return ()
