"""The broker configs the group coordinator reads, typed, with Kafka's defaults."""
from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from typing import Any, Callable

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class GroupCoordinatorConfig:
    """Kafka's group coordinator and offsets settings (names: the field with '_' -> '.')."""

    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offsets_load_buffer_size: int = 5242880
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = INT32_MAX
    # KIP-848 consumer groups (Kafka 4.0 defaults)
    group_coordinator_rebalance_protocols: tuple[str, ...] = ("classic", "consumer", "streams")
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_max_size: int = INT32_MAX
    group_consumer_assignors: tuple[str, ...] = (
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor")
    group_consumer_migration_policy: str = "bidirectional"
    # KIP-1071 streams groups (Kafka 4.4 defaults)
    group_streams_session_timeout_ms: int = 45000
    group_streams_min_session_timeout_ms: int = 45000
    group_streams_max_session_timeout_ms: int = 60000
    group_streams_heartbeat_interval_ms: int = 5000
    group_streams_min_heartbeat_interval_ms: int = 5000
    group_streams_max_heartbeat_interval_ms: int = 15000
    group_streams_max_size: int = INT32_MAX
    group_streams_num_standby_replicas: int = 0
    group_streams_max_standby_replicas: int = 2
    group_streams_initial_rebalance_delay_ms: int = 3000
    group_streams_assignment_interval_ms: int = 1000
    group_streams_min_assignment_interval_ms: int = 0
    group_streams_max_assignment_interval_ms: int = 15000
    group_streams_task_offset_interval_ms: int = 60000
    group_streams_acceptable_recovery_lag: int = 10000

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000

    @classmethod
    def from_getter(cls, get: Callable[[str], Any]) -> GroupCoordinatorConfig:
        """Read every field from `get(kafka_property_name)`; None keeps Kafka's default."""
        config = cls()
        for f in fields(cls):
            name = f.name.replace("_", ".")
            value = get(name)
            if value is None:
                continue
            if isinstance(f.default, tuple):  # list-typed properties
                items = value.split(",") if isinstance(value, str) else value
                setattr(config, f.name, tuple(str(v).strip() for v in items if str(v).strip()))
            elif isinstance(f.default, str):
                setattr(config, f.name, str(value))
            else:
                setattr(config, f.name, int(value))
        return config
