"""Cluster metadata: topics, partitions, brokers and config overrides (embedded store; ZooKeeper later)."""
from .embedded import EmbeddedMetadataStore
from .store import BrokerInfo, ChangeKind, MetadataChange, MetadataStore, PartitionMetadata, TopicMetadata

__all__ = ["BrokerInfo", "ChangeKind", "EmbeddedMetadataStore", "MetadataChange", "MetadataStore",
           "PartitionMetadata", "TopicMetadata"]
