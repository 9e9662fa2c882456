"""Counters every broker keeps (`broker.metrics`): per-topic traffic, per-API requests, errors, timings.

Cheap by design, so they are always on: a few integer additions per request (per partition for
Produce and Fetch), never per record — the produce handler reports each appended batch set's record
count from the batch headers (last offset - base offset + 1), Fetch's bytes out are the lengths of
the record slices in its response. The Prometheus exporter (exporter.py) and the web console read
them; `detailed` (set when `kafkapy.metrics.listener` is on) adds what only the exporter shows:
queue/local/remote/response-send time reservoirs, request versions, error counts per code, the
event loop's idle fraction and the fetch positions of consumers.

Quantiles: Kafka's request timers are Yammer histograms (an exponentially decaying reservoir of
1028 samples) that the JMX exporter renders as quantile="0.50".."0.999"; here a ring of the last
RESERVOIR_SIZE samples per API and timer, sorted at read time.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

log = logging.getLogger(__name__)

RESERVOIR_SIZE = 1028
# the quantiles Kafka's Yammer histograms publish (50th, 75th, 95th, 98th, 99th, 999th percentile)
QUANTILES = (0.50, 0.75, 0.95, 0.98, 0.99, 0.999)
# a consumer's fetch positions are forgotten when it has not fetched for this long
FETCH_POSITION_EXPIRY_S = 10 * 60.0
_PRODUCE_KEY, _FETCH_KEY = 0, 1
_ERROR_LOG_SIZE = 200


class Reservoir:
    """The last RESERVOIR_SIZE samples (milliseconds) and how many there were in all."""

    __slots__ = ("samples", "next", "count", "sum")

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.next = 0
        self.count = 0
        self.sum = 0.0

    def add(self, value: float) -> None:
        self.count += 1
        self.sum += value
        i = self.next
        if i < len(self.samples):
            self.samples[i] = value
        else:
            self.samples.append(value)
        self.next = i + 1 if i + 1 < RESERVOIR_SIZE else 0

    def quantiles(self, qs=QUANTILES) -> list[float]:
        """The values at quantiles `qs` of the samples held (0.0 each while there are none)."""
        values = sorted(self.samples)
        n = len(values)
        if not n:
            return [0.0 for _ in qs]
        return [values[min(n - 1, int(q * n))] for q in qs]


class TopicStats:
    """BrokerTopicMetrics of one topic (and, under the key None, of all topics)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "produce_requests", "failed_produce_requests",
                 "fetch_requests", "failed_fetch_requests")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)

    def __eq__(self, other: object) -> bool:
        if type(other) is not TopicStats:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None

    def __repr__(self) -> str:
        return "TopicStats(" + ", ".join(f"{n}={getattr(self, n)}" for n in self.__slots__) + ")"


class ApiStats:
    """RequestMetrics of one request name (Produce, FetchConsumer, FetchFollower, Metadata, ...)."""

    __slots__ = ("name", "count", "errors", "total", "queue", "local", "remote", "send", "versions",
                 "error_codes")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.errors = 0          # responses carrying at least one error code
        self.total = Reservoir()
        self.queue = Reservoir()
        self.local = Reservoir()
        self.remote = Reservoir()
        self.send = Reservoir()
        self.versions: dict[int, int] = {}
        self.error_codes: dict[int, int] = {}   # error code -> occurrences (Kafka's ErrorsPerSec)


class ClientFetches:
    """The last fetch position of each partition a consumer (client id + host) fetches."""

    __slots__ = ("seen", "positions")

    def __init__(self) -> None:
        self.seen = 0.0
        # (topic name, or topic id for Fetch v13+, partition) -> fetch offset
        self.positions: dict[tuple[Any, int], int] = {}


def _api_names() -> dict[int, str]:
    from ..protocol.messages import REQUEST_TYPES

    return {key: name.removesuffix("Request") for key, name in REQUEST_TYPES.class_names().items()}


def _error_codes(obj, depth: int = 0):
    """Every error_code field in a response (generated structs), a few levels deep."""
    slots = getattr(type(obj), "__slots__", ())
    for field in slots:
        value = getattr(obj, field, None)
        if field == "error_code":
            if value:
                yield value
        elif depth < 3 and isinstance(value, list) and value and hasattr(type(value[0]), "__slots__"):
            for item in value:
                yield from _error_codes(item, depth + 1)


def error_name(code: int) -> str:
    from ..protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


class BrokerMetrics:
    """The broker's counters; `broker.metrics`, always present."""

    def __init__(self) -> None:
        self.detailed = False
        self.started = time.time()
        self.all_topics = TopicStats()
        self.topics: dict[str, TopicStats] = {}
        self.apis: dict[str, ApiStats] = {}
        self._names = _api_names()
        self._errors: deque[dict] = deque(maxlen=_ERROR_LOG_SIZE)
        # detailed only: consumers' fetch positions, the event loop's lag and idle fraction
        self.fetches: dict[tuple[str, str], ClientFetches] = {}
        # ISR changes committed by the controller (cluster mode; replication/replica_manager.py)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.loop_lag_s = 0.0
        self.loop_idle = 1.0
        self._probe: asyncio.Task | None = None

    # -- what the console reads ----------------------------------------------------------------
    def totals(self) -> dict:
        """Cumulative counts since start: messages/bytes in and out, and per API count, errors, p99."""
        t = self.all_topics
        return {
            "messages_in": t.messages_in, "bytes_in": t.bytes_in, "bytes_out": t.bytes_out,
            "requests": {name: {"count": s.count, "errors": s.errors,
                                "p99_ms": s.total.quantiles((0.99,))[0]}
                         for name, s in sorted(self.apis.items())},
        }

    def recent_errors(self, limit: int = 50) -> list[dict]:
        """The latest error responses, newest first: time (epoch seconds), api, client_id, error."""
        return list(self._errors)[::-1][:limit]

    # -- hooks ---------------------------------------------------------------------------------
    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def produced(self, topic: str, messages: int, nbytes: int) -> None:
        """A produce to one partition of `topic` appended `messages` records in `nbytes` bytes."""
        for stats in (self.all_topics, self.topics.get(topic) or self.topic(topic)):
            stats.messages_in += messages
            stats.bytes_in += nbytes
            stats.produce_requests += 1

    def produce_failed(self, topic: str) -> None:
        """A produce to one partition of `topic` was refused."""
        for stats in (self.all_topics, self.topics.get(topic) or self.topic(topic)):
            stats.produce_requests += 1
            stats.failed_produce_requests += 1

    def isr_changed(self, expand: bool) -> None:
        """An ISR change of a partition led here was committed."""
        if expand:
            self.isr_expands += 1
        else:
            self.isr_shrinks += 1

    def api(self, name: str) -> ApiStats:
        stats = self.apis.get(name)
        if stats is None:
            stats = self.apis[name] = ApiStats(name)
        return stats

    def on_response(self, ctx, key: int, version: int, request, response, started: float,
                    busy_s: float | None):
        """Dispatch's hook after the handler: counts the request and its errors; returns the
        timing to finish once the response is written (`response_sent`), or None when it is done."""
        now = time.perf_counter()
        name = self._names.get(key, str(key))
        codes: list[int] = []
        if key == _FETCH_KEY:
            follower = _fetch_replica_id(request, version) >= 0
            name = "FetchFollower" if follower else "FetchConsumer"
            if response is not None:
                codes = self._fetch_response(response, follower)
            if not follower and self.detailed:
                self._track_fetch(ctx, request, version)
        elif response is not None:
            top = getattr(response, "error_code", 0)
            if key != _PRODUCE_KEY or top:
                codes = list(_error_codes(response))
            else:
                codes = [p.error_code for t in response.responses for p in t.partition_responses
                         if p.error_code]
        stats = self.apis.get(name) or self.api(name)
        stats.count += 1
        if codes:
            stats.errors += 1
            client = ctx.header.client_id if ctx.header is not None else None
            self._errors.append({"time": time.time(), "api": name, "client_id": client,
                                 "error": error_name(codes[0])})
        handler_ms = (now - started) * 1000
        if not self.detailed:
            if response is None:
                stats.total.add(handler_ms)
                return None
            return (stats, started, now)
        stats.versions[version] = stats.versions.get(version, 0) + 1
        for code in codes:
            stats.error_codes[code] = stats.error_codes.get(code, 0) + 1
        if not codes:
            stats.error_codes[0] = stats.error_codes.get(0, 0) + 1
        queue_ms = self.loop_lag_s * 1000
        local_ms = busy_s * 1000 if busy_s is not None else handler_ms
        stats.queue.add(queue_ms)
        stats.local.add(local_ms)
        stats.remote.add(max(handler_ms - local_ms, 0.0))
        if response is None:
            stats.send.add(0.0)
            stats.total.add(queue_ms + handler_ms)
            return None
        return (stats, started, now)

    def response_sent(self, timing) -> None:
        """The connection's hook once the response of a request timed by on_response is written."""
        stats, started, handled = timing
        now = time.perf_counter()
        total_ms = (now - started) * 1000
        if self.detailed:
            stats.send.add((now - handled) * 1000)
            total_ms += self.loop_lag_s * 1000
        stats.total.add(total_ms)

    def _fetch_response(self, response, follower: bool) -> list[int]:
        codes = []
        if response.error_code:
            codes.append(response.error_code)
        all_topics = self.all_topics
        out_total = 0
        for topic in response.responses:
            name = topic.topic
            stats = self.topics.get(name) or self.topic(name) if name and not follower else None
            out = 0
            for p in topic.partitions:
                records = p.records
                size = len(records) if records is not None else 0
                out += size
                if p.error_code:
                    codes.append(p.error_code)
                    if stats is not None:
                        stats.failed_fetch_requests += 1
                        all_topics.failed_fetch_requests += 1
                if stats is not None:
                    stats.fetch_requests += 1
            if stats is not None:
                stats.bytes_out += out
                all_topics.fetch_requests += len(topic.partitions)
            out_total += out
        if not follower:
            all_topics.bytes_out += out_total
        return codes

    def _track_fetch(self, ctx, request, version: int) -> None:
        header = ctx.header
        key = (header.client_id or "" if header is not None else "", ctx.client_host)
        client = self.fetches.get(key)
        if client is None:
            client = self.fetches[key] = ClientFetches()
        client.seen = time.monotonic()
        positions = client.positions
        by_id = version >= 13
        if version >= 7 and getattr(request, "session_epoch", -1) in (0, -1):
            positions.clear()  # a full fetch names every partition the consumer reads
        for topic in request.topics:
            tkey = topic.topic_id if by_id else topic.topic
            for p in topic.partitions:
                positions[(tkey, p.partition)] = p.fetch_offset
        for topic in getattr(request, "forgotten_topics_data", None) or ():
            tkey = topic.topic_id if by_id else topic.topic
            for index in topic.partitions:
                positions.pop((tkey, index), None)

    def expire_fetches(self, now: float | None = None) -> None:
        """Forget consumers that have not fetched for FETCH_POSITION_EXPIRY_S."""
        now = time.monotonic() if now is None else now
        for key in [k for k, c in self.fetches.items() if now - c.seen > FETCH_POSITION_EXPIRY_S]:
            del self.fetches[key]

    # -- event loop probe ----------------------------------------------------------------------
    def start_probe(self, loop: asyncio.AbstractEventLoop, interval_s: float = 0.25) -> None:
        """Sample the loop's scheduling lag and idle fraction (uvloop has no hooks to time callbacks)."""
        if self._probe is None:
            self._probe = loop.create_task(self._run_probe(interval_s))

    def stop_probe(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None

    async def _run_probe(self, interval_s: float) -> None:
        # lag: how late a timer fires (what a ready request waits for the loop: its queue time);
        # idle: 1 - the loop thread's CPU time over wall time, over windows of ~5 s
        window_wall, window_cpu = time.monotonic(), time.thread_time()
        while True:
            expected = time.monotonic() + interval_s
            await asyncio.sleep(interval_s)
            now = time.monotonic()
            self.loop_lag_s = max(now - expected, 0.0)
            if now - window_wall >= 5.0:
                cpu = time.thread_time()
                busy = (cpu - window_cpu) / (now - window_wall)
                self.loop_idle = min(max(1.0 - busy, 0.0), 1.0)
                window_wall, window_cpu = now, cpu
                self.expire_fetches(now)


def _fetch_replica_id(request, version: int) -> int:
    if version >= 15:
        state = getattr(request, "replica_state", None)
        return state.replica_id if state is not None else -1
    return getattr(request, "replica_id", -1)
