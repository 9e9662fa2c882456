"""The broker configs the transaction coordinator reads, typed, with Kafka's defaults."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable


@dataclass(slots=True)
class TransactionCoordinatorConfig:
    """Kafka's transaction coordinator settings (names: the field with '_' -> '.')."""

    transactional_id_expiration_ms: int = 604800000
    transaction_max_timeout_ms: int = 900000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_segment_bytes: int = 104857600
    transaction_state_log_load_buffer_size: int = 5242880
    transaction_state_log_min_isr: int = 2
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    transaction_partition_verification_enable: bool = True
    # How long to wait before retrying markers that could not be written (Kafka retries its
    # WriteTxnMarkers requests after retry.backoff.ms).
    marker_retry_backoff_ms: int = 100

    @classmethod
    def from_getter(cls, get: Callable[[str], Any]) -> TransactionCoordinatorConfig:
        """Read every field from `get(kafka_property_name)`; None (or unknown) keeps Kafka's default."""
        config = cls()
        for f in fields(cls):
            if f.name == "marker_retry_backoff_ms":
                continue
            try:
                value = get(f.name.replace("_", "."))
            except KeyError:
                value = None
            if value is None:
                continue
            setattr(config, f.name, value if isinstance(value, bool) else int(value))
        return config
