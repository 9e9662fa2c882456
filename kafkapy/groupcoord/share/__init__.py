"""Share groups (KIP-932, "Queues for Kafka"): the coordinator and share-partition state.

Imported on the first share request only (Broker.share_groups); see coordinator.py and
partition.py, and docs/share-groups.md.
"""
from .coordinator import SHARE_GROUP_CONFIGS, ShareGroupConfig, ShareGroupCoordinator
from .partition import AckBatch, SharePartition, validate_ack_batches

__all__ = ["AckBatch", "SHARE_GROUP_CONFIGS", "SharePartition", "ShareGroupConfig", "ShareGroupCoordinator",
           "validate_ack_batches"]
