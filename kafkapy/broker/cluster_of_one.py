"""A single node as a cluster of one: the membership object of a broker without zookeeper.connect.

It has the interface of the ZooKeeper membership (cluster_member.ClusterMember), so that the broker
and its handlers take one path whatever the mode:
- the metadata store is the embedded one (one JSON file in the data directory), and it plays the
  controller: when a topic or partition is created, loaded or deleted here, this broker leads it
  alone at once (`ReplicaManager.lead_alone`: replicas and ISR are this broker, the high
  watermark is the log end), where a cluster waits for the controller's LeaderAndIsr;
- ElectLeaders and reassignments are decided by the embedded store with the KRaft controller's
  rules (metadata/partition_changes.py), at once, and this node always answers as the controller;
- start, controlled shutdown and stop have nothing to do (no session, no registration);
- producer ids come from a local block file.
Nothing here imports ZooKeeper or the inter-broker client.

It is built before the parts that need the metadata store it opens (the logs, the partitions, the
replica manager): the broker hands it those with `attach` once they exist.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from ..metadata.store import BrokerInfo, ChangeKind, MetadataChange
from ..protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from ..log.manager import LogManager
    from ..metadata.store import TopicMetadata
    from ..replication.replica_manager import ReplicaManager
    from .config import BrokerConfig
    from .fetch_sessions import FetchSessionCache
    from .partitions import PartitionManager

log = logging.getLogger(__name__)


class ClusterOfOne:
    """The membership of a broker that is its own cluster (see the module docstring)."""

    mode = "single node"
    controller = None  # the embedded store decides; there is no controller object
    controller_epoch_seen = 0

    def __init__(self, config: BrokerConfig, advertised_host: str, advertised_port: int,
                 endpoints: dict[str, tuple[str, int]], data_dir: Path):
        """`endpoints`: the broker's advertised (host, port) by listener name, the broker's own
        dict (ports of port-0 listeners are filled in when it starts); `data_dir`: where the
        producer id block file lives."""
        from .config import open_metadata_store

        self.config = config
        self.node_id: int = config.node_id
        self._endpoints = endpoints
        self._data_dir = data_dir
        self._logs: LogManager | None = None
        self._partitions: PartitionManager | None = None
        self._replicas: ReplicaManager | None = None
        self._fetch_sessions: Callable[[], FetchSessionCache] | None = None
        self.metadata = open_metadata_store(config)
        self.metadata.register_broker(self.node_id, advertised_host, advertised_port, config.get("broker.rack"))
        self.metadata.add_listener(self._on_metadata_change)

    def attach(self, *, logs: LogManager, partitions: PartitionManager, replicas: ReplicaManager,
               fetch_sessions: Callable[[], FetchSessionCache]) -> None:
        """The parts built after the membership (they need its metadata store), once they exist:
        this node leads its partitions through them; `fetch_sessions` builds the session cache
        on first use."""
        self._logs = logs
        self._partitions = partitions
        self._replicas = replicas
        self._fetch_sessions = fetch_sessions

    # -- life cycle ----------------------------------------------------------------------------
    async def topic_names(self) -> list[str]:
        """The topics whose logs to load (recovery needs each topic's own config)."""
        return self.metadata.topic_names()

    async def start(self, host: str, port: int) -> None:
        """Nothing to join: the broker registered in the embedded store when it opened it."""

    async def controlled_shutdown(self) -> None:
        """No other replica takes over: nothing to hand over."""

    async def stop(self) -> None:
        self.metadata.remove_listener(self._on_metadata_change)

    def log_dir_changed(self, path, status: str) -> None:
        """No controller to tell: the broker itself handles its log dirs (Broker._log_dir_changed)."""

    def producer_ids(self):
        from ..log.producer_ids import ProducerIdAllocator

        return ProducerIdAllocator(self._data_dir / "kafkapy-producer-ids")

    def brokers_for(self, listener_name: str | None) -> list[BrokerInfo]:
        """This broker as clients on `listener_name` reach it; [] when it has no such listener."""
        if listener_name is None or listener_name == self.config.listeners[0].name:
            return self.metadata.list_brokers()
        endpoint = self._endpoints.get(listener_name)
        if endpoint is None:
            return []
        return [BrokerInfo(self.node_id, endpoint[0], endpoint[1], self.config.get("broker.rack"))]

    # -- partitions: the embedded store is the controller --------------------------------------
    def host_loaded_partitions(self, partitions: PartitionManager) -> None:
        """At start: a log (created if missing) for every partition in the metadata, each led here;
        logs of topics the metadata does not know are deleted."""
        known = set()
        for meta in self.metadata.list_topics():
            for index in range(len(meta.partitions)):
                known.add((meta.name, index))
            self._lead(partitions, meta)
        for key in list(self._logs.all_logs()):
            if key not in known:
                log.warning("deleting log %s-%d: its topic is not in the metadata", key[0], key[1])
                partitions.remove_log(*key, delete=True)

    def topic_created(self, partitions: PartitionManager, meta: TopicMetadata) -> None:
        self._lead(partitions, meta)
        log.info("created topic %s with %d partitions", meta.name, len(meta.partitions))

    def partitions_created(self, partitions: PartitionManager, meta: TopicMetadata) -> None:
        self._lead(partitions, meta)

    def topic_deleted(self, partitions: PartitionManager, meta: TopicMetadata) -> None:
        replicas = self._replicas
        for index in range(len(meta.partitions)):
            replicas.stop_hosting(meta.name, index)
            partitions.remove_log(meta.name, index, delete=True)
        self._fetch_sessions().remove_topic(meta.name)
        log.info("deleted topic %s", meta.name)

    def _lead(self, partitions: PartitionManager, meta: TopicMetadata) -> None:
        replicas = self._replicas
        config = partitions.log_config(meta.name)
        for index, state in enumerate(meta.partitions):
            plog = partitions.open_log(meta.name, index, config)
            replicas.lead_alone(meta.name, index, plog, meta.topic_id, state.leader_epoch,
                                state.partition_epoch)

    # -- the controller's decisions: the embedded store takes them (metadata/partition_changes.py) -
    def is_active_controller(self) -> bool:
        """Always: the embedded store on this node is the only controller there is."""
        return True

    async def elect_leaders(self, wanted: Sequence[tuple[str, Sequence[int]]] | None, unclean: bool,
                            timeout_ms: int) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
        """(topic, [(partition, error code, message)]) in the order asked, the store's new leaders
        already in force. `wanted` None is every partition: as KRaft's
        ReplicationControlManager.electLeaders, each topic is answered, with only its partitions
        that needed an election."""
        if wanted is None:
            return [(meta.name, [(p, code, message) for p in range(meta.partition_count)
                                 for code, message in [self._elect(meta.name, p, unclean)]
                                 if code != ErrorCode.ELECTION_NOT_NEEDED])
                    for meta in self.metadata.list_topics()]
        return [(topic, [(p, *self._elect(topic, p, unclean)) for p in partitions]) for topic, partitions in wanted]

    def _elect(self, topic: str, partition: int, unclean: bool) -> tuple[int, str | None]:
        meta = self.metadata.get_topic(topic)
        if meta is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
        if not 0 <= partition < meta.partition_count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
        try:
            new = self.metadata.elect_leader(topic, partition, unclean)
        except KafkaError as exc:
            return exc.code, str(exc)
        log.info("%s election made broker %d the leader of %s-%d (leader epoch %d)",
                 "unclean" if unclean else "preferred", new.leader, topic, partition, new.leader_epoch)
        return ErrorCode.NONE, None

    async def alter_partition_reassignments(
            self, targets: Sequence[tuple[str, Sequence[tuple[int, list[int] | None]]]],
            allow_replication_factor_change: bool = True,
    ) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
        """(topic, [(partition, error code, message)]) in the order asked; a target of None cancels
        the partition's reassignment. Never None: this node is always the controller."""
        return [(topic, [(p, *self._reassign(topic, p, replicas, allow_replication_factor_change))
                         for p, replicas in partitions])
                for topic, partitions in targets]

    def _reassign(self, topic: str, partition: int, replicas: list[int] | None,
                  allow_replication_factor_change: bool = True) -> tuple[int, str | None]:
        meta = self.metadata.get_topic(topic)
        if meta is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
        if not 0 <= partition < meta.partition_count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
        if not allow_replication_factor_change and (target := replicas) is not None:
            # with the first such request only: neither is on the start-up path (test_startup_imports)
            from ..controller.reassignment import ReplicaAssignment, replication_factor_change
            from ..metadata import partition_changes

            # Kafka checks the brokers of the target first (validateManualPartitionAssignment)
            try:
                partition_changes.validate_assignment(target, [b.node_id for b in self.metadata.list_brokers()])
            except KafkaError as exc:
                return exc.code, str(exc)
            state = meta.partitions[partition]
            refused = replication_factor_change(target, ReplicaAssignment(
                tuple(state.replicas), tuple(state.adding_replicas), tuple(state.removing_replicas)))
            if refused is not None:
                return refused
        try:
            self.metadata.alter_partition_reassignment(topic, partition, replicas)
        except KafkaError as exc:
            log.info("Unable to alter partition reassignment for %s:%d because of an %s error: %s", topic,
                     partition, exc.code.name, exc)
            return exc.code, str(exc)
        return ErrorCode.NONE, None

    async def list_partition_reassignments(self, wanted: Sequence[tuple[str, Sequence[int]]] | None
                                           ) -> list[tuple[str, list[tuple[int, list[int], list[int], list[int]]]]]:
        """(topic, [(partition, replicas, adding, removing)]) of the ongoing reassignments among
        `wanted` (None: all), in the order asked; unknown topics and partitions are left out, as in
        Kafka."""
        store = self.metadata
        if wanted is None:
            asked = [(meta, range(meta.partition_count)) for meta in store.list_topics()]
        else:
            asked = [(meta, partitions) for topic, partitions in wanted
                     if (meta := store.get_topic(topic)) is not None]
        ongoing = []
        for meta, indexes in asked:
            states = [meta.partitions[p] for p in indexes if 0 <= p < meta.partition_count]
            moving = [(s.partition, list(s.replicas), list(s.adding_replicas), list(s.removing_replicas))
                      for s in states if s.adding_replicas or s.removing_replicas]
            if moving:
                ongoing.append((meta.name, moving))
        return ongoing

    def _on_metadata_change(self, change: MetadataChange) -> None:
        # ElectLeaders and reassignments on one node bump a partition's leader epoch in the store
        # (metadata/partition_changes.py): lead at the new epoch, as a LeaderAndIsr would say.
        if change.kind is not ChangeKind.PARTITION_CHANGED or change.topic is None:
            return
        meta, index = change.topic, change.partition
        plog = self._partitions.get_log(meta.name, index)
        if plog is not None and index is not None and index < len(meta.partitions):
            state = meta.partitions[index]
            self._replicas.lead_alone(meta.name, index, plog, meta.topic_id, state.leader_epoch,
                                      state.partition_epoch)
