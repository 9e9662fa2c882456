"""A single node as a cluster of one: the membership object of a broker without zookeeper.connect.

It has the interface of the ZooKeeper membership (cluster_member.ClusterMember), so that the broker
and its handlers take one path whatever the mode:
- the metadata store is the embedded one (one JSON file in the data directory), and it plays the
  controller: when a topic or partition is created, loaded or deleted here, this broker leads it
  alone at once (`ReplicaManager.lead_alone`: replicas and ISR are this broker, the high
  watermark is the log end), where a cluster waits for the controller's LeaderAndIsr;
- start, controlled shutdown and stop have nothing to do (no session, no registration);
- producer ids come from a local block file.
Nothing here imports ZooKeeper or the inter-broker client.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..metadata.store import BrokerInfo, ChangeKind, MetadataChange

if TYPE_CHECKING:
    from ..metadata.store import TopicMetadata
    from .broker import Broker
    from .partitions import PartitionManager

log = logging.getLogger(__name__)


class ClusterOfOne:
    """The membership of a broker that is its own cluster (see the module docstring)."""

    mode = "single node"
    controller = None  # the embedded store decides; there is no controller object
    controller_epoch_seen = 0

    def __init__(self, broker: Broker):
        from .config import open_metadata_store

        self.broker = broker
        self.metadata = open_metadata_store(broker.config)
        self.metadata.register_broker(broker.node_id, broker.advertised_host, broker.advertised_port,
                                      broker.config.get("broker.rack"))
        self.metadata.add_listener(self._on_metadata_change)

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

    def producer_ids(self):
        from ..log.producer_ids import ProducerIdAllocator

        return ProducerIdAllocator(self.broker.data_dir / "kafkapy-producer-ids")

    def brokers_for(self, listener_name: str | None) -> list[BrokerInfo]:
        """This broker as clients on `listener_name` reach it; [] when it has no such listener."""
        broker = self.broker
        if listener_name is None or listener_name == broker.config.listeners[0].name:
            return self.metadata.list_brokers()
        endpoint = broker.endpoints.get(listener_name)
        if endpoint is None:
            return []
        return [BrokerInfo(broker.node_id, endpoint[0], endpoint[1], broker.config.get("broker.rack"))]

    # -- partitions: the embedded store is the controller --------------------------------------
    def host_loaded_partitions(self, partitions: PartitionManager) -> None:
        """At start: a log (created if missing) for every partition in the metadata, each led here;
        logs of topics the metadata does not know are deleted."""
        known = set()
        for meta in self.metadata.list_topics():
            for index in range(len(meta.partitions)):
                known.add((meta.name, index))
            self._lead(partitions, meta)
        for key in list(self.broker.logs.all_logs()):
            if key not in known:
                log.warning("deleting log %s-%d: its topic is not in the metadata", key[0], key[1])
                partitions.remove_log(*key, delete=True)

    def topic_created(self, partitions: PartitionManager, meta: TopicMetadata) -> None:
        self._lead(partitions, meta)
        log.info("created topic %s with %d partitions", meta.name, len(meta.partitions))

    def partitions_created(self, partitions: PartitionManager, meta: TopicMetadata) -> None:
        self._lead(partitions, meta)

    def topic_deleted(self, partitions: PartitionManager, meta: TopicMetadata) -> None:
        replicas = self.broker.replicas
        for index in range(len(meta.partitions)):
            replicas.stop_hosting(meta.name, index)
            partitions.remove_log(meta.name, index, delete=True)
        self.broker.fetch_sessions.remove_topic(meta.name)
        log.info("deleted topic %s", meta.name)

    def _lead(self, partitions: PartitionManager, meta: TopicMetadata) -> None:
        replicas = self.broker.replicas
        config = partitions.log_config(meta.name)
        for index, state in enumerate(meta.partitions):
            plog = partitions.open_log(meta.name, index, config)
            replicas.lead_alone(meta.name, index, plog, meta.topic_id, state.leader_epoch,
                                state.partition_epoch)

    def _on_metadata_change(self, change: MetadataChange) -> None:
        # ElectLeaders and reassignments on one node bump a partition's leader epoch in the store
        # (metadata/partition_changes.py): lead at the new epoch, as a LeaderAndIsr would say.
        if change.kind is not ChangeKind.PARTITION_CHANGED or change.topic is None:
            return
        meta, index = change.topic, change.partition
        plog = self.broker.partitions.get_log(meta.name, index)
        if plog is not None and index is not None and index < len(meta.partitions):
            state = meta.partitions[index]
            self.broker.replicas.lead_alone(meta.name, index, plog, meta.topic_id, state.leader_epoch,
                                            state.partition_epoch)
