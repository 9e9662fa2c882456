"""The partitions this broker hosts: topic lookups and the partition logs behind them.

Topic metadata lives in the controller's store. On a single node this keeps the local logs in step
with it (creating logs for new partitions, deleting logs of deleted topics, applying config
changes). In cluster mode the store only records the change (in ZooKeeper): logs are opened and
removed when the controller says so (LeaderAndIsr / StopReplica, kafkapy.replication), through
`open_log` and `remove_log`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..log.config import LogConfig
from ..protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from ..log.partition_log import PartitionLog
    from .broker import Broker

log = logging.getLogger(__name__)


class PartitionManager:
    """Partition logs by (topic, partition), created and removed as topic metadata changes."""

    def __init__(self, broker: Broker):
        self.broker = broker
        self._logs: dict[tuple[str, int], PartitionLog] = {}

    # -- lookups ------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    @property
    def cluster_mode(self) -> bool:
        return self.broker.cluster is not None

    def leader_epoch(self, topic: str, partition: int) -> int:
        replicas = self.broker.replicas
        if replicas is not None:  # the epoch of the last LeaderAndIsr accepted here
            hosted = replicas.partition(topic, partition)
            return hosted.leader_epoch if hosted is not None else -1
        meta = self.broker.metadata.get_topic(topic)
        if meta is None or partition >= len(meta.partitions):
            return -1
        return meta.partitions[partition].leader_epoch

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
        return self.broker.metadata.get_topic(name)

    def topic_by_id(self, topic_id):
        return self.broker.metadata.topic_by_id(topic_id)

    def topics(self) -> list:
        return self.broker.metadata.list_topics()

    def log_config(self, topic: str) -> LogConfig:
        from .config import effective_topic_properties

        if self.cluster_mode:
            overrides = self.broker.metadata.topic_configs(topic)
        else:
            meta = self.broker.metadata.get_topic(topic)
            overrides = meta.configs if meta is not None else {}
        return LogConfig.from_properties(effective_topic_properties(overrides, self.broker.config))

    # -- changes ------------------------------------------------------------------------
    def open_log(self, topic: str, partition: int) -> PartitionLog:
        """The local log of a partition this broker hosts, created if missing (cluster mode)."""
        plog = self._logs.get((topic, partition))
        if plog is None:
            plog = self.broker.logs.create(topic, partition, self.log_config(topic))
            self._logs[(topic, partition)] = plog
        return plog

    def remove_log(self, topic: str, partition: int, delete: bool) -> None:
        """Stop hosting a partition (cluster mode); `delete` removes its log directory too."""
        self._logs.pop((topic, partition), None)
        if delete:
            self.broker.logs.delete(topic, partition)
        self.broker.purgatory.notify((topic, partition))

    def sync_with_metadata(self) -> None:
        """Open or create a log for every partition in the metadata; drop logs of unknown topics.

        In cluster mode the logs found on disk are kept as they are until the controller's
        LeaderAndIsr or StopReplica says what to do with them."""
        if self.cluster_mode:
            self._logs.update(self.broker.logs.all_logs())
            return
        known = set()
        for meta in self.broker.metadata.list_topics():
            config = self.log_config(meta.name)
            for partition in range(len(meta.partitions)):
                known.add((meta.name, partition))
                if (meta.name, partition) not in self._logs:
                    self._logs[(meta.name, partition)] = self.broker.logs.create(meta.name, partition, config)
        for key, plog in list(self.broker.logs.all_logs().items()):
            if key not in known:
                log.warning("deleting log %s-%d: its topic is not in the metadata", key[0], key[1])
                self.broker.logs.delete(*key)
                self._logs.pop(key, None)

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     assignments: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None,
                     validate_only: bool = False, internal: bool = False):
        """Create a topic in the metadata store and its partition logs; returns its metadata."""
        if num_partitions == -1 and not assignments:
            num_partitions = self.broker.config.get("num.partitions")
        if replication_factor == -1 and not assignments:
            replication_factor = self.broker.config.get("default.replication.factor")
        meta = self.broker.metadata.create_topic(
            name, num_partitions, replication_factor, assignments=assignments, configs=configs or {},
            internal=internal, validate_only=validate_only)
        if not validate_only and not self.cluster_mode:
            config = self.log_config(name)
            for partition in range(len(meta.partitions)):
                self._logs[(name, partition)] = self.broker.logs.create(name, partition, config)
            log.info("created topic %s with %d partitions", name, len(meta.partitions))
        return meta

    def auto_create(self, name: str):
        """Create `name` with broker defaults if auto.create.topics.enable; None when not allowed."""
        if not self.broker.config.get("auto.create.topics.enable"):
            return None
        try:
            return self.create_topic(name)
        except KafkaError as exc:
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return self.topic(name)
            raise

    def delete_topic(self, name: str) -> None:
        meta = self.broker.metadata.get_topic(name)
        if meta is None:
            raise KafkaError(f"unknown topic {name}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.broker.metadata.delete_topic(name)
        if self.cluster_mode:  # the controller deletes the replicas (StopReplica delete=true)
            log.info("topic %s marked for deletion", name)
            return
        for partition in range(len(meta.partitions)):
            self._logs.pop((name, partition), None)
            self.broker.logs.delete(name, partition)
            self.broker.purgatory.notify((name, partition))
        self.broker.fetch_sessions.remove_topic(name)
        log.info("deleted topic %s", name)

    def create_partitions(self, name: str, total: int, assignments=None, validate_only: bool = False) -> None:
        meta = self.broker.metadata.create_partitions(name, total, assignments, validate_only=validate_only)
        if not validate_only and not self.cluster_mode:
            config = self.log_config(name)
            for partition in range(len(meta.partitions)):
                if (name, partition) not in self._logs:
                    self._logs[(name, partition)] = self.broker.logs.create(name, partition, config)

    def apply_topic_config(self, name: str) -> None:
        """Push a topic's changed configs to its partition logs."""
        self.broker.logs.update_config(name, self.log_config(name))
