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
            if value is not None:
                setattr(config, f.name, int(value))
        return config
