"""The partitions this broker hosts: topic lookups and the partition logs behind them.

Topic metadata lives in the metadata store; who decides where partitions live is the broker's
membership: on a single node (a cluster of one, cluster_of_one.py) the embedded store, so that
logs are created, led and deleted here as topics change; in a cluster the controller, whose
LeaderAndIsr / StopReplica (kafkapy.replication) open and remove logs through `open_log` and
`remove_log`. Roles, leader epochs and the ISR are the replica manager's.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..log.config import LogConfig
from ..protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from ..log.manager import LogManager
    from ..log.partition_log import PartitionLog
    from ..metadata.store import MetadataStore
    from ..replication.purgatory import Purgatory
    from ..replication.replica_manager import ReplicaManager
    from .config import BrokerConfig
    from .interfaces import Membership

log = logging.getLogger(__name__)


class PartitionManager:
    """Partition logs by (topic, partition), created and removed as topic metadata changes."""

    def __init__(self, config: BrokerConfig, metadata: MetadataStore, logs: LogManager, purgatory: Purgatory,
                 cluster: Membership):
        self.config = config
        self.metadata = metadata
        self.logs = logs
        self.purgatory = purgatory
        self.cluster = cluster
        # the replica manager, built after this (it looks partitions up here): set by the broker
        self.replicas: ReplicaManager | None = None
        self._logs: dict[tuple[str, int], PartitionLog] = {}

    # -- lookups ------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The leader epoch of a hosted partition (-1 when not hosted)."""
        hosted = self.replicas.partition(topic, partition)
        return hosted.leader_epoch if hosted is not None else -1

    def leader_epoch_error(self, topic: str, partition: int, requested: int) -> int:
        """Kafka's check of a client's current leader epoch: NONE when it is -1 (not sent) or ours,
        FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when newer."""
        if requested < 0:
            return ErrorCode.NONE
        current = self.leader_epoch(topic, partition)
        if requested == current:
            return ErrorCode.NONE
        return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH

    def topic(self, name: str):
        return self.metadata.get_topic(name)

    def topic_by_id(self, topic_id):
        return self.metadata.topic_by_id(topic_id)

    def topics(self) -> list:
        return self.metadata.list_topics()

    def log_config(self, topic: str) -> LogConfig:
        from .config import effective_topic_properties

        overrides = self.metadata.topic_configs(topic)
        return LogConfig.from_properties(effective_topic_properties(overrides, self.config))

    # -- changes ------------------------------------------------------------------------
    def open_log(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The local log of a partition this broker hosts, created if missing (with `config`, the
        topic's log config, when the caller has it already)."""
        plog = self._logs.get((topic, partition))
        if plog is None:
            plog = self.logs.create(topic, partition, config or self.log_config(topic))
            self._logs[(topic, partition)] = plog
        return plog

    def remove_log(self, topic: str, partition: int, delete: bool) -> None:
        """Stop hosting a partition's log; `delete` removes its log directory too."""
        self._logs.pop((topic, partition), None)
        if delete:
            self.logs.delete(topic, partition)
        self.purgatory.notify((topic, partition))

    def sync_with_metadata(self) -> None:
        """After the logs are loaded: host the partitions as the membership says (a cluster of one
        leads every partition of its metadata; a cluster member keeps the logs found on disk until
        the controller says what to do with them)."""
        self.cluster.host_loaded_partitions(self)

    def adopt_loaded_logs(self) -> None:
        self._logs.update(self.logs.all_logs())

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     assignments: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None,
                     validate_only: bool = False, internal: bool = False):
        """Create a topic in the metadata store and its partition logs; returns its metadata."""
        if num_partitions == -1 and not assignments:
            num_partitions = self.config.get("num.partitions")
        if replication_factor == -1 and not assignments:
            replication_factor = self.config.get("default.replication.factor")
        meta = self.metadata.create_topic(
            name, num_partitions, replication_factor, assignments=assignments, configs=configs or {},
            internal=internal, validate_only=validate_only)
        if not validate_only:
            self.cluster.topic_created(self, meta)
        return meta

    def auto_create(self, name: str):
        """Create `name` with broker defaults if auto.create.topics.enable; None when not allowed."""
        if not self.config.get("auto.create.topics.enable"):
            return None
        try:
            return self.create_topic(name)
        except KafkaError as exc:
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return self.topic(name)
            raise

    def delete_topic(self, name: str) -> None:
        meta = self.metadata.get_topic(name)
        if meta is None:
            raise KafkaError(f"unknown topic {name}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.metadata.delete_topic(name)
        self.cluster.topic_deleted(self, meta)

    def create_partitions(self, name: str, total: int, assignments=None, validate_only: bool = False) -> None:
        meta = self.metadata.create_partitions(name, total, assignments, validate_only=validate_only)
        if not validate_only:
            self.cluster.partitions_created(self, meta)

    def apply_topic_config(self, name: str) -> None:
        """Push a topic's changed configs to its partition logs."""
        self.logs.update_config(name, self.log_config(name))
