"""The streams group configs of Kafka 4.4's GroupConfig (DescribeConfigs/IncrementalAlterConfigs on a
GROUP resource): per-group overrides of the group.streams.* broker defaults, bounded by the
broker's group.streams.min/max.* settings as Kafka validates them.

The overrides live in the metadata store with the group's other configs (share.*), read again
after CACHE_TTL_S so that every broker of a cluster sees a change; a write keeps the other
configs of the group.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from ...protocol.errors import ErrorCode

log = logging.getLogger(__name__)

CACHE_TTL_S = 2.0

# group config -> the broker config giving its default
STREAMS_GROUP_CONFIGS: dict[str, str] = {
    "streams.session.timeout.ms": "group_streams_session_timeout_ms",
    "streams.heartbeat.interval.ms": "group_streams_heartbeat_interval_ms",
    "streams.num.standby.replicas": "group_streams_num_standby_replicas",
    "streams.initial.rebalance.delay.ms": "group_streams_initial_rebalance_delay_ms",
    "streams.assignment.interval.ms": "group_streams_assignment_interval_ms",
    "streams.task.offset.interval.ms": "group_streams_task_offset_interval_ms",
    "streams.acceptable.recovery.lag": "group_streams_acceptable_recovery_lag",
}


class StreamsGroupConfigs:
    """Streams group config overrides: lookups for the coordinator, describe and alter for the handlers."""

    def __init__(self, config: Any, load: Callable[[str], dict] | None = None,
                 store: Callable[[str, dict], None] | None = None,
                 on_stored: Callable[[str, dict], None] | None = None):
        self.config = config
        self._load, self._store, self._on_stored = load, store, on_stored
        self._cache: dict[str, dict[str, str]] = {}
        self._read_at: dict[str, float] = {}

    def bind(self, load: Callable[[str], dict], store: Callable[[str, dict], None],
             on_stored: Callable[[str, dict], None] | None = None) -> None:
        """Keep the overrides in a store (the broker's metadata store) from now on."""
        self._load, self._store, self._on_stored = load, store, on_stored
        self._cache.clear()
        self._read_at.clear()

    def _all(self, group_id: str) -> dict[str, str]:
        """Every stored config of the group (streams.* and the others)."""
        if self._load is None:
            return self._cache.get(group_id, {})
        now = time.monotonic()
        if now - self._read_at.get(group_id, -CACHE_TTL_S) >= CACHE_TTL_S:
            try:
                self._cache[group_id] = dict(self._load(group_id))
            except Exception as exc:  # e.g. ZooKeeper unreachable: keep what was read last
                log.warning("cannot read the configs of group %s: %s", group_id, exc)
            self._read_at[group_id] = now
        return self._cache.get(group_id, {})

    def get(self, group_id: str, name: str) -> int:
        value = self._all(group_id).get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                log.warning("group %s: ignoring the invalid stored value %r of %s", group_id, value, name)
        return int(getattr(self.config, STREAMS_GROUP_CONFIGS[name]))

    def describe(self, group_id: str) -> list[tuple[str, str, bool]]:
        """(name, value, is_default) of every streams group config."""
        stored = self._all(group_id)
        return [(name, str(self.get(group_id, name)), name not in stored) for name in STREAMS_GROUP_CONFIGS]

    def _check(self, name: str, value: int, merged: dict[str, str]) -> str | None:
        c = self.config
        if name == "streams.session.timeout.ms":
            low, high = c.group_streams_min_session_timeout_ms, c.group_streams_max_session_timeout_ms
        elif name == "streams.heartbeat.interval.ms":
            low, high = c.group_streams_min_heartbeat_interval_ms, c.group_streams_max_heartbeat_interval_ms
        elif name == "streams.num.standby.replicas":
            low, high = 0, c.group_streams_max_standby_replicas
        elif name == "streams.assignment.interval.ms":
            low, high = c.group_streams_min_assignment_interval_ms, c.group_streams_max_assignment_interval_ms
        else:
            low, high = 0, 2**63 - 1
        if value < low:
            return f"{name} must be greater than or equal to {low}"
        if value > high:
            return f"{name} must be less than or equal to {high}"
        return None

    def alter(self, group_id: str, ops: Iterable[tuple[str, int, str | None]], validate_only: bool
              ) -> tuple[int, str | None]:
        """IncrementalAlterConfigs ops (name, 0 SET / 1 DELETE, value) on streams.* configs."""
        merged = dict(self._all(group_id))
        for name, operation, value in ops:
            if name not in STREAMS_GROUP_CONFIGS:
                return ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}"
            if operation == 1:
                merged.pop(name, None)
                continue
            if operation != 0 or value is None:
                return ErrorCode.INVALID_CONFIG, f"Unsupported operation on group config {name}"
            try:
                number = int(value)
            except ValueError:
                return ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}"
            problem = self._check(name, number, merged)
            if problem is not None:
                return ErrorCode.INVALID_CONFIG, problem
            merged[name] = str(number)
        session = int(merged.get("streams.session.timeout.ms", self.config.group_streams_session_timeout_ms))
        interval = int(merged.get("streams.heartbeat.interval.ms", self.config.group_streams_heartbeat_interval_ms))
        if interval >= session:
            return ErrorCode.INVALID_CONFIG, ("streams.heartbeat.interval.ms must be less than "
                                              "streams.session.timeout.ms")
        if not validate_only:
            if self._store is not None:
                try:
                    self._store(group_id, merged)
                except Exception as exc:
                    return ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot store the configs of group {group_id}: {exc}"
            self._cache[group_id] = merged
            self._read_at[group_id] = time.monotonic()
            if self._on_stored is not None:
                self._on_stored(group_id, merged)
        return ErrorCode.NONE, None
