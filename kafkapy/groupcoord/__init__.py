"""Consumer groups and committed offsets: Kafka's classic group coordinator over __consumer_offsets."""
from .config import GroupCoordinatorConfig
from .coordinator import GroupCoordinator, GroupOverview, JoinRequest
from .group import GroupState, GroupSummary, JoinResult, OffsetAndMetadata, SyncResult
from .offsets_topic import OFFSETS_TOPIC, OffsetsTopicStore, partition_for

__all__ = [
    "GroupCoordinator", "GroupCoordinatorConfig", "GroupOverview", "GroupState", "GroupSummary",
    "JoinRequest", "JoinResult", "OFFSETS_TOPIC", "OffsetAndMetadata", "OffsetsTopicStore",
    "SyncResult", "partition_for",
]
