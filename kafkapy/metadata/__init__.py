"""Cluster metadata: what the cluster knows, and where it is kept.

- `store.py`: the `MetadataStore` interface every broker codes against (brokers, topics, partitions,
  config overrides, ACLs, client quotas, SCRAM credentials) and its records;
- `embedded.py`: the single node's store, one JSON file in the data directory;
- `zk/`: a cluster broker's store over ZooKeeper (Kafka 3.7's znode layout in `zk/paths.py`, the
  kazoo client in `zk/client.py`, ACLs in `zk/acl_store.py`, the store in `zk/store.py`);
- `cache.py`: a cluster broker's view of the cluster as the controller's UpdateMetadata gave it;
- the models and their rules: `acls.py`, `quotas.py`, `ids.py`, `topic_rules.py`,
  `replica_assignment.py` (new topics' replicas), `partition_changes.py` (the single node's own
  elections and reassignments), `errors.py`.

The controller that acts on this metadata in a cluster is `kafkapy/controller/`.
"""
from __future__ import annotations

from ..lazy_exports import lazy_exports

__all__ = ["BrokerInfo", "ChangeKind", "EmbeddedMetadataStore", "MetadataChange", "MetadataStore",
           "PartitionMetadata", "TopicMetadata"]

# Imported on first use: every module of the package imports the package first, and a broker
# that only needs metadata/errors.py should not pay for the stores at start-up.
__getattr__, __dir__ = lazy_exports(__name__, {
    "EmbeddedMetadataStore": ".embedded", "BrokerInfo": ".store", "ChangeKind": ".store",
    "MetadataChange": ".store", "MetadataStore": ".store", "PartitionMetadata": ".store",
    "TopicMetadata": ".store"})
