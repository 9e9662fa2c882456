"""The last hour of the broker's throughput, request latency and group lag, for the console's plots.

A sample is taken every SAMPLE_INTERVAL_S (10 s) into ring buffers of HISTORY_POINTS (360) points.
Throughput comes from `broker.metrics.totals()` (kafkapy's metrics, docs/operations.md): counters
that are differenced into rates here. Without `broker.metrics` the throughput plots stay empty;
group lag is computed from the group coordinator and the logs, O(committed offsets) per sample.
"""
from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from typing import TYPE_CHECKING

from .state import group_lag_sum, known_groups

if TYPE_CHECKING:
    from .source import ConsoleSource

__all__ = ["History", "SAMPLE_INTERVAL_S", "HISTORY_POINTS"]

log = logging.getLogger(__name__)

# KAFKAPY_CONSOLE_SAMPLE_INTERVAL_S shortens the interval for tests and screenshots only.
SAMPLE_INTERVAL_S = float(os.environ.get("KAFKAPY_CONSOLE_SAMPLE_INTERVAL_S") or 10.0)
HISTORY_POINTS = 360


class History:
    """Ring buffers of (unix time, value) per series; rates are per second between two samples."""

    def __init__(self, broker: ConsoleSource, points: int = HISTORY_POINTS):
        self.broker = broker
        self.points = points
        self.window_s = points * SAMPLE_INTERVAL_S  # what the plots show: an hour at 10 s a sample
        self.throughput: dict[str, deque] = {name: deque(maxlen=points)
                                             for name in ("messages_in", "bytes_in", "bytes_out", "requests")}
        self.request_p99: dict[str, deque] = {}
        self.request_rate: dict[str, deque] = {}
        self.group_lag: dict[str, deque] = {}
        self.topic_rates: dict[str, float] = {}  # messages in per second over the last interval
        self._last: tuple[float, dict] | None = None
        self._last_topics: tuple[float, dict[str, int]] | None = None

    def totals(self) -> dict | None:
        metrics = getattr(self.broker, "metrics", None)
        if metrics is None or not hasattr(metrics, "totals"):
            return None
        return metrics.totals()

    def sample(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        try:
            totals = self.totals()
        except Exception:
            log.exception("console: broker.metrics.totals() failed; throughput plots skip this sample")
            totals = None
        if totals is not None:
            self._sample_totals(now, totals)
            self._sample_topics(now)
        groups = known_groups(self.broker)
        for group_id, group in groups.items():
            series = self.group_lag.get(group_id)
            if series is None:
                series = self.group_lag[group_id] = deque(maxlen=self.points)
            series.append((now, group_lag_sum(self.broker, group)))
        for group_id in [g for g in self.group_lag if g not in groups]:
            del self.group_lag[group_id]

    def _sample_totals(self, now: float, totals: dict) -> None:
        requests = totals.get("requests") or {}
        if self._last is not None:
            then, before = self._last
            elapsed = max(now - then, 1e-6)
            for name in ("messages_in", "bytes_in", "bytes_out"):
                delta = int(totals.get(name) or 0) - int(before.get(name) or 0)
                self.throughput[name].append((now, max(delta, 0) / elapsed))
            before_requests = before.get("requests") or {}
            total_rate = 0.0
            for api, stats in requests.items():
                delta = int(stats.get("count") or 0) - int((before_requests.get(api) or {}).get("count") or 0)
                rate = max(delta, 0) / elapsed
                total_rate += rate
                self.request_rate.setdefault(api, deque(maxlen=self.points)).append((now, rate))
            self.throughput["requests"].append((now, total_rate))
        for api, stats in requests.items():
            p99 = stats.get("p99_ms")
            if p99 is not None and math.isfinite(p99):
                self.request_p99.setdefault(api, deque(maxlen=self.points)).append((now, float(p99)))
        self._last = (now, {k: v for k, v in totals.items() if k != "requests"} | {
            "requests": {api: dict(stats) for api, stats in requests.items()}})

    def _sample_topics(self, now: float) -> None:
        topics = getattr(self.broker.metrics, "topics", None)
        if not isinstance(topics, dict):
            return
        counts = {name: int(getattr(stats, "messages_in", 0)) for name, stats in list(topics.items())}
        if self._last_topics is not None:
            then, before = self._last_topics
            elapsed = max(now - then, 1e-6)
            self.topic_rates = {name: max(count - before.get(name, 0), 0) / elapsed
                                for name, count in counts.items()}
        self._last_topics = (now, counts)

    def current_rates(self) -> dict[str, float]:
        """The per-API request rate of the last interval (0 when unknown)."""
        return {api: series[-1][1] for api, series in self.request_rate.items() if series}

    def busiest_apis(self, n: int = 4) -> list[str]:
        last = self._last[1].get("requests", {}) if self._last else {}
        return sorted(last, key=lambda api: -int(last[api].get("count") or 0))[:n]
