"""Replication throttles (KIP-73), as Kafka 3.7 applies them: the rate limits that
kafka-reassign-partitions --throttle sets.

Two broker configs bound the bytes per second of throttled replication on this broker:
`leader.replication.throttled.rate` (what it sends as a leader) and
`follower.replication.throttled.rate` (what it fetches as a follower); Long.MAX_VALUE means no limit.
Which replicas are throttled is per topic: `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas`, a list of `partition:brokerId` or `*`. A broker
throttles a partition on a side when its own id is listed for the partition on that side.

- Leader side (Kafka's ReplicaManager.shouldLeaderThrottle): a follower fetch leaves a partition's
  records out (no error) when the partition is throttled here, the follower is not in the ISR and
  the leader quota is exceeded. The bytes sent for throttled partitions count against the quota.
- Follower side (ReplicaFetcherThread.shouldFollowerThrottle): the fetcher leaves a partition out of
  its next request when the partition is throttled here, it has not caught up and the follower
  quota is exceeded. The bytes received for throttled partitions count against the quota.

A quota is Kafka's quota sensor over a SimpleRate: the bytes in the last
`replication.quota.window.num` windows of `replication.quota.window.size.seconds`, divided by the time
since the oldest of them began (at least one window), compared with the bound ("exceeded" is
strictly above it).

The partition lists are read from the topic's config overrides in the metadata store at each check
and parsed once per distinct value, so that an unthrottled partition costs a topic lookup and one
config lookup, and a change of the topic configs applies at the next fetch. The bounds are read
from the broker config at each check of a throttled partition, so dynamic broker configs apply at
once.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Protocol

__all__ = [
    "ALL_REPLICAS", "FOLLOWER_RATE", "FOLLOWER_REPLICAS", "LEADER_RATE", "LEADER_REPLICAS", "UNLIMITED",
    "ReplicationQuota", "ReplicationThrottle", "SampledRate", "ThrottledPartitions", "parse_throttled_replicas",
    "valid_throttled_replicas",
]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
WINDOW_NUM = "replication.quota.window.num"
WINDOW_SIZE_SECONDS = "replication.quota.window.size.seconds"
UNLIMITED = 2**63 - 1  # Long.MAX_VALUE: the default rate, no throttling


class _AllPartitions:
    """`*`: every partition of the topic (on every broker)."""

    __slots__ = ()

    def __contains__(self, item: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "ALL_REPLICAS"


ALL_REPLICAS = _AllPartitions()
ThrottledPartitions = frozenset[int] | _AllPartitions
_ENTRY = r"([0-9]+:[0-9]+)?"  # compiled by re (and cached) on first use, not at start-up


def valid_throttled_replicas(items: list[str]) -> bool:
    """Kafka's ThrottledReplicaListValidator on a parsed list value: every (trimmed) element is
    `partition:broker` or empty, or the elements together spell `*`."""
    trimmed = [item.strip() for item in items]
    return all(re.fullmatch(_ENTRY, item) for item in trimmed) or "".join(trimmed) == "*"


def parse_throttled_replicas(value: str, broker_id: int) -> ThrottledPartitions:
    """The partitions that `value` (a topic's throttled-replicas config) throttles on `broker_id`:
    ALL_REPLICAS for `*`, else those listed with this broker id (Kafka's parseThrottledPartitions).
    Empty elements are skipped; a value that is not valid throttles nothing."""
    items = [item.strip() for item in value.split(",")]
    if "".join(items) == "*":
        return ALL_REPLICAS
    partitions = set()
    for item in items:
        if not item:
            continue
        if not re.fullmatch(_ENTRY, item):
            return frozenset()
        partition, _, broker = item.partition(":")
        if int(broker) == broker_id:
            partitions.add(int(partition))
    return frozenset(partitions)


class SampledRate:
    """Kafka's SimpleRate over a SampledStat sum: values recorded into `samples` windows of
    `window_ms`, each starting at the first record after the previous one ended; a window is
    forgotten `samples * window_ms` after it started. The rate (per second) is the sum of the
    remembered windows over the time since the oldest began, at least one window."""

    __slots__ = ("samples", "window_ms", "_starts", "_values", "_current")

    def __init__(self, samples: int, window_ms: int):
        if samples < 1 or window_ms < 1:
            raise ValueError(f"need at least one sample of at least 1 ms, got {samples} x {window_ms} ms")
        self.samples = samples
        self.window_ms = window_ms
        self._starts: list[int] = []
        self._values: list[float] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        starts = self._starts
        if not starts:
            starts.append(now_ms)
            self._values.append(0.0)
        elif now_ms - starts[self._current] >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current == len(starts):
                starts.append(now_ms)
                self._values.append(0.0)
            else:
                starts[self._current] = now_ms
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def measure(self, now_ms: int) -> float:
        """The rate per second at `now_ms`."""
        self._purge(now_ms)
        if not self._starts:
            return 0.0
        elapsed = max(now_ms - min(self._starts), self.window_ms)
        return sum(self._values) * 1000.0 / elapsed

    def _purge(self, now_ms: int) -> None:
        # As Kafka: an expired window is reset to start now (empty), not removed.
        expire_ms = self.samples * self.window_ms
        starts = self._starts
        for i, start in enumerate(starts):
            if now_ms - start >= expire_ms:
                starts[i] = now_ms
                self._values[i] = 0.0


class ReplicationQuota:
    """One side's quota (Kafka's ReplicationQuotaManager): throttled bytes per second against a
    bound read from `bound()` at each check."""

    __slots__ = ("_bound", "_rate", "_clock")

    def __init__(self, bound: Callable[[], int], samples: int = 11, window_s: int = 1,
                 clock: Callable[[], float] = time.monotonic):
        self._bound = bound
        self._rate = SampledRate(samples, window_s * 1000)
        self._clock = clock

    @property
    def bound(self) -> int:
        return self._bound()

    def rate(self) -> float:
        return self._rate.measure(self._now_ms())

    def exceeded(self) -> bool:
        bound = self._bound()
        if bound >= UNLIMITED:
            return False
        return self._rate.measure(self._now_ms()) > bound

    def record(self, nbytes: int) -> None:
        if nbytes > 0:
            self._rate.record(nbytes, self._now_ms())

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


class TopicLookup(Protocol):
    def get_topic(self, name: str):  # -> TopicMetadata | None (anything with `.configs`)
        ...


class ReplicationThrottle:
    """What the leader path and the follower fetchers of one broker consult: the two quotas and,
    per topic, the partitions throttled here on each side."""

    def __init__(self, broker_id: int, config, topics: TopicLookup, clock: Callable[[], float] = time.monotonic):
        samples = config.get(WINDOW_NUM)
        window_s = config.get(WINDOW_SIZE_SECONDS)
        self.broker_id = broker_id
        self._topics = topics
        self.leader = ReplicationQuota(lambda: config.get(LEADER_RATE), samples, window_s, clock)
        self.follower = ReplicationQuota(lambda: config.get(FOLLOWER_RATE), samples, window_s, clock)
        self._parsed: dict[str, ThrottledPartitions] = {}

    def _listed(self, config_name: str, topic: str, partition: int) -> bool:
        meta = self._topics.get_topic(topic)
        if meta is None:
            return False
        configs: Mapping[str, str] = meta.configs
        value = configs.get(config_name)
        if not value:
            return False
        partitions = self._parsed.get(value)
        if partitions is None:
            if len(self._parsed) >= 1024:  # values are few; this only bounds a long run of changes
                self._parsed.clear()
            partitions = self._parsed[value] = parse_throttled_replicas(value, self.broker_id)
        return partition in partitions

    # -- leader side -----------------------------------------------------------------------------
    def leader_throttled(self, topic: str, partition: int) -> bool:
        """Whether this leader throttles the partition (Kafka's quota.isThrottled)."""
        return self._listed(LEADER_REPLICAS, topic, partition)

    def should_leader_throttle(self, topic: str, partition: int, follower_in_sync: bool) -> bool:
        """Whether a follower fetch of the partition gets its records left out now."""
        return not follower_in_sync and self._listed(LEADER_REPLICAS, topic, partition) and self.leader.exceeded()

    # -- follower side ---------------------------------------------------------------------------
    def follower_throttled(self, topic: str, partition: int) -> bool:
        return self._listed(FOLLOWER_REPLICAS, topic, partition)

    def should_follower_throttle(self, topic: str, partition: int, caught_up: bool) -> bool:
        """Whether the fetcher leaves the partition out of its next request."""
        return not caught_up and self._listed(FOLLOWER_REPLICAS, topic, partition) and self.follower.exceeded()
