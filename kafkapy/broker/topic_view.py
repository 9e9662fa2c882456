"""The broker's topics as KIP-848 consumer groups see them (groupcoord.consumer's TopicView)."""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from ..groupcoord.consumer.group import TopicMetadata

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore
    from .partitions import PartitionManager

log = logging.getLogger(__name__)


class BrokerTopicView:
    """The broker's topics as consumer groups see them (a groupcoord.consumer TopicView).

    `version` moves on every topic or broker change the metadata store reports, so that groups
    re-read their subscribed topics only then; descriptions are cached per version. The broker
    builds it with the group coordinator and registers `on_metadata_change` with the store."""

    def __init__(self, partitions: PartitionManager, metadata: MetadataStore):
        self._partitions = partitions
        self._metadata = metadata
        self.version = 0
        self._lock = threading.Lock()
        self._cache: dict[str, TopicMetadata | None] = {}
        self._cache_version = -1
        self._racks: dict[int, str] | None = None

    def on_metadata_change(self, change) -> None:
        kind = getattr(getattr(change, "kind", None), "value", "")
        if kind in ("topic_created", "topic_deleted", "partitions_created", "partition_changed",
                    "broker_registered"):
            with self._lock:
                self.version += 1

    def _broker_racks(self) -> dict[int, str]:
        try:
            brokers = self._metadata.list_brokers()
        except Exception:  # a store that cannot list brokers right now: no racks
            log.debug("listing brokers for rack-aware assignment failed", exc_info=True)
            return {}
        return {b.node_id: b.rack for b in brokers if b.rack}

    def describe(self, name: str) -> TopicMetadata | None:
        if self._cache_version != self.version:
            self._cache = {}
            self._racks = None
            self._cache_version = self.version
        if name in self._cache:
            return self._cache[name]
        meta = self._partitions.topic(name)
        if meta is None:
            topic = None
        else:
            if self._racks is None:
                self._racks = self._broker_racks()
            racks = self._racks
            partition_racks = {}
            if racks:
                for p in meta.partitions:
                    replica_racks = frozenset(racks[r] for r in p.replicas if r in racks)
                    if replica_racks:
                        partition_racks[p.partition] = replica_racks
            topic = TopicMetadata(meta.topic_id, meta.name, len(meta.partitions), partition_racks)
        self._cache[name] = topic
        return topic

    def names(self) -> list[str]:
        return [meta.name for meta in self._partitions.topics()]
