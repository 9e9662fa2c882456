"""Client quotas as Kafka enforces them: byte rates, request time and controller mutations.

Entities and precedence are Kafka's DefaultQuotaCallback (KIP-55): for a request from user U with
client id C the first configured entity of

    /config/users/U/clients/C, /config/users/U/clients/<default>, /config/users/U,
    /config/users/<default>/clients/C, /config/users/<default>/clients/<default>,
    /config/users/<default>, /config/clients/C, /config/clients/<default>

gives the quota, and every connection that resolves to the same entity shares one rate sensor
(the entity's components filled in with U and C: `users/<default>` gives each user its own).

Rates are Kafka's `Rate` over `SampledStat`: 11 samples of 1 s; a sample starts when a value
arrives after the previous sample's second is over; the rate is the samples' sum over the span
since the oldest one, padded to 10 full windows while fewer are retained. A recorded value that
takes the rate above the bound throttles the client for ((rate - bound) / bound) * window span
(ClientQuotaManager.throttleTime), capped at one window for request_percentage
(RequestQuotaManager) and not capped for byte rates. controller_mutation_rate is Kafka's token
bucket (KIP-599): a burst of rate * 11 s of partitions, throttle = deficit / rate.

The broker's ClientQuotaTracker holds a `ClientQuotas` only while some quota exists (its `current`
is None otherwise): dispatch calls `after_request` after every handler, which sets the response's
throttle_time_ms and mutes the connection (KIP-219).
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore
    from .principal import KafkaPrincipal

from ..metadata.quotas import (CLIENT_ID, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE,  # noqa: F401
    INTEGER_KEYS, IP, PRODUCER_BYTE_RATE, QUOTA_KEYS, REQUEST_PERCENTAGE, USER, QuotaEntity, QuotaError,
    apply_quota_ops, format_quota_value, quota_values, validate_quota)

log = logging.getLogger(__name__)

__all__ = ["CLIENT_ID", "ClientQuotas", "QUOTA_KEYS", "QuotaEntity", "QuotaError", "Rate",
           "TokenBucket", "USER", "resolve_quota", "throttle_time_ms"]


class QuotaConnection(Protocol):
    """What a throttled response does to its connection (KIP-219: mute it)."""

    def mute_for(self, seconds: float) -> None: ...


class RequestContext(Protocol):
    """What the quotas read of a request's context (broker.dispatch.RequestContext satisfies it):
    kept here, below the broker layer, so that security/ never imports the broker."""

    connection: QuotaConnection
    api_version: int
    client_id: str | None
    principal: KafkaPrincipal
    metadata: MetadataStore
    config: Any  # broker.config.BrokerConfig


QUOTA_WINDOW_NUM = 11  # quota.window.num
QUOTA_WINDOW_SIZE_S = 1.0  # quota.window.size.seconds
SENSOR_EXPIRY_S = 3600.0  # Kafka's INACTIVE_SENSOR_EXPIRATION_TIME_SECONDS

_PRODUCE, _FETCH = 0, 1
_CREATE_TOPICS, _DELETE_TOPICS, _CREATE_PARTITIONS = 19, 20, 37
_MUTATIONS = frozenset({_CREATE_TOPICS, _DELETE_TOPICS, _CREATE_PARTITIONS})
# KIP-599: from these versions a request over controller_mutation_rate fails topic by topic.
STRICT_MUTATION_VERSIONS = {_CREATE_TOPICS: 6, _DELETE_TOPICS: 5, _CREATE_PARTITIONS: 3}
THROTTLING_QUOTA_EXCEEDED = 89
THROTTLED_MESSAGE = "The throttling quota has been exceeded."
# Broker-to-broker requests (Kafka's ClusterAction) are exempt from the request quota.
_CLUSTER_ACTIONS = frozenset({4, 5, 6, 7, 27, 56, 57, 63, 67})


# -- precedence ----------------------------------------------------------------------------------

def _candidates(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """Kafka's order of entities for (user, client id), each with the sensor's (user, client-id) tags."""
    return [
        (QuotaEntity.user_client(user, client_id), (user, client_id)),
        (QuotaEntity.user_client(user, None), (user, client_id)),
        (QuotaEntity.user(user), (user, "")),
        (QuotaEntity.user_client(None, client_id), (user, client_id)),
        (QuotaEntity.user_client(None, None), (user, client_id)),
        (QuotaEntity.user(None), (user, "")),
        (QuotaEntity.client(client_id), ("", client_id)),
        (QuotaEntity.client(None), ("", client_id)),
    ]


def resolve_quota(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str,
                  client_id: str) -> tuple[float | None, tuple[str, str]]:
    """The bound of `key` for this user and client id, and the tags of the sensor it is shared on.

    As Kafka, the entity is chosen per quota type: a user's producer_byte_rate does not hide a
    client's consumer_byte_rate.
    """
    for entity, tags in _candidates(user, client_id):
        configured = quotas.get(entity)
        if configured is not None and key in configured:
            return configured[key], tags
    return None, ("", "")


# -- measurement ---------------------------------------------------------------------------------

class Rate:
    """Kafka's Rate(SampledStat) with quota.window.num samples of quota.window.size.seconds."""

    __slots__ = ("samples", "window", "_starts", "_values", "_current")

    def __init__(self, samples: int = QUOTA_WINDOW_NUM, window_s: float = QUOTA_WINDOW_SIZE_S):
        self.samples = samples
        self.window = window_s
        self._starts: list[float] = []
        self._values: list[float] = []
        self._current = 0

    def record(self, value: float, now: float) -> None:
        if not self._starts:
            self._starts.append(now)
            self._values.append(0.0)
            self._current = 0
        elif now - self._starts[self._current] >= self.window:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._starts.append(now)
                self._values.append(0.0)
            else:
                self._starts[self._current] = now
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window
        for i, start in enumerate(self._starts):
            if now - start >= expire:
                self._starts[i] = now
                self._values[i] = 0.0

    def window_size(self, now: float) -> float:
        """Seconds the rate divides by: since the oldest sample, at least samples - 1 windows."""
        self._purge(now)
        oldest = min(self._starts) if self._starts else now
        elapsed = now - oldest
        full = int(elapsed // self.window)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window
        return elapsed

    def measure(self, now: float) -> float:
        size = self.window_size(now)
        return sum(self._values) / size if size > 0 else 0.0


def throttle_time_ms(observed: float, bound: float, window_s: float) -> int:
    """ClientQuotaManager.throttleTime: the delay X with observed * W / (W + X) = bound."""
    if observed <= bound:
        return 0
    return int(round((observed - bound) / bound * window_s * 1000.0))


class TokenBucket:
    """Kafka's TokenBucket (KIP-599) for controller_mutation_rate: burst = rate * samples * window."""

    __slots__ = ("tokens", "last", "burst_s")

    def __init__(self, samples: int = QUOTA_WINDOW_NUM, window_s: float = QUOTA_WINDOW_SIZE_S):
        self.burst_s = samples * window_s
        self.tokens: float | None = None
        self.last = 0.0

    def refill(self, rate: float, now: float) -> float:
        if self.tokens is None:
            self.tokens = rate * self.burst_s
        else:
            self.tokens = min(rate * self.burst_s, self.tokens + rate * max(now - self.last, 0.0))
        self.last = now
        return self.tokens

    def record(self, value: float, rate: float, now: float) -> int:
        """Take `value` tokens; the throttle (ms) until the bucket is back at zero."""
        self.refill(rate, now)
        self.tokens -= value
        return 0 if self.tokens >= 0 else int(math.ceil(-self.tokens / rate * 1000.0))

    def throttle_ms(self, rate: float, now: float) -> int:
        tokens = self.refill(rate, now)
        return 0 if tokens >= 0 else int(math.ceil(-tokens / rate * 1000.0))


class _Sensor:
    __slots__ = ("rate", "last_used")

    def __init__(self, rate: Any, last_used: float):
        self.rate = rate
        self.last_used = last_used


class ClientQuotas:
    """The quotas in force on this broker and one sensor per (quota key, user tag, client-id tag)."""

    def __init__(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], *, samples: int = QUOTA_WINDOW_NUM,
                 window_s: float = QUOTA_WINDOW_SIZE_S, clock: Callable[[], float] = time.monotonic):
        self.samples = samples
        self.window = window_s
        self.clock = clock
        self._sensors: dict[tuple[str, str, str], _Sensor] = {}
        self._resolved: dict[tuple[str, str, str], tuple[float | None, tuple[str, str]]] = {}
        self._last_sweep = clock()
        # id(request) -> (throttle ms, rejected topic -> throttle ms) for mutation requests that
        # before_request saw; after_request finishes them
        self._mutations: dict[int, tuple[int, dict[Any, int], list[Any]]] = {}
        self.quotas: dict[QuotaEntity, dict[str, float]] = {}
        self.keys: frozenset[str] = frozenset()
        self.update(quotas)

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """New quota values; sensors keep their history, as Kafka's updateQuotaMetricConfigs."""
        self.quotas = {entity: dict(values) for entity, values in quotas.items() if values}
        self.keys = frozenset(key for values in self.quotas.values() for key in values)
        self._resolved.clear()

    # -- recording -------------------------------------------------------------------------------
    def _bound(self, key: str, user: str, client_id: str) -> tuple[float | None, tuple[str, str]]:
        cache_key = (key, user, client_id)
        found = self._resolved.get(cache_key)
        if found is None:
            found = self._resolved[cache_key] = resolve_quota(self.quotas, key, user, client_id)
        return found

    def _sensor(self, key: str, tags: tuple[str, str], now: float, factory: Callable[[], Any]) -> Any:
        sensor = self._sensors.get((key, *tags))
        if sensor is None:
            sensor = self._sensors[(key, *tags)] = _Sensor(factory(), now)
        sensor.last_used = now
        return sensor.rate

    def record(self, key: str, user: str, client_id: str, value: float, now: float | None = None) -> int:
        """Record `value` against the rate quota `key`; the throttle time in ms (0 within quota)."""
        if key not in self.keys:
            return 0
        bound, tags = self._bound(key, user, client_id)
        if bound is None:
            return 0
        now = self.clock() if now is None else now
        rate = self._sensor(key, tags, now, lambda: Rate(self.samples, self.window))
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        throttle = throttle_time_ms(observed, bound, rate.window_size(now))
        if key == REQUEST_PERCENTAGE:  # RequestQuotaManager: boundedThrottleTime, max one window
            throttle = min(throttle, int(self.window * 1000))
        return throttle

    def unrecord(self, key: str, user: str, client_id: str, value: float, now: float | None = None) -> None:
        bound, tags = self._bound(key, user, client_id)
        sensor = self._sensors.get((key, *tags))
        if bound is not None and sensor is not None:
            sensor.rate.record(-value, self.clock() if now is None else now)

    def mutation_throttle_ms(self, user: str, client_id: str, now: float | None = None) -> int:
        """How long this client's controller_mutation_rate bucket is still in deficit (strict mode)."""
        found = self._mutation_bucket(user, client_id, now) if CONTROLLER_MUTATION_RATE in self.keys else None
        return found[1].throttle_ms(found[0], found[2]) if found is not None else 0

    def record_mutations(self, user: str, client_id: str, partitions: float, now: float | None = None) -> int:
        if CONTROLLER_MUTATION_RATE not in self.keys or partitions <= 0:
            return 0
        found = self._mutation_bucket(user, client_id, now)
        return found[1].record(partitions, found[0], found[2]) if found is not None else 0

    def _mutation_bucket(self, user: str, client_id: str, now: float | None) -> tuple[float, TokenBucket, float] | None:
        """(bound, the client's controller_mutation_rate bucket, now), None without such a quota."""
        bound, tags = self._bound(CONTROLLER_MUTATION_RATE, user, client_id)
        if bound is None:
            return None
        now = self.clock() if now is None else now
        return bound, self._sensor(CONTROLLER_MUTATION_RATE, tags, now,
                                   lambda: TokenBucket(self.samples, self.window)), now

    def _consumer_fetch(self, response: Any, user: str, client_id: str, now: float) -> int:
        """Kafka's handleFetchRequest: the response counts against consumer_byte_rate; a throttled
        fetch is answered without records and its bytes are taken back out of the rate."""
        if CONSUMER_BYTE_RATE not in self.keys:
            return 0
        bound, _ = self._bound(CONSUMER_BYTE_RATE, user, client_id)
        if bound is None:
            return 0
        # Kafka caps a consumer's fetch at what a quota window can take (maxValueInQuotaWindow),
        # or a large fetch would be throttled for ever; here the records beyond it are dropped.
        _trim_records(response, bound * (self.samples - 1) * self.window)
        size = _fetch_response_size(response)
        throttle = self.record(CONSUMER_BYTE_RATE, user, client_id, size, now)
        if throttle > 0:
            self.unrecord(CONSUMER_BYTE_RATE, user, client_id, size, now)
            _trim_records(response, 0)
        return throttle

    def before_request(self, ctx: RequestContext, api_key: int, request: Any) -> None:
        """controller_mutation_rate before a CreateTopics / DeleteTopics / CreatePartitions runs.

        As Kafka's ControllerMutationQuotaManager: partitions are counted from the metadata before
        the change (new partitions; a deleted topic's partitions). Strict versions (KIP-599) check
        the bucket before each topic and take the topics it cannot afford out of the request;
        after_request answers them THROTTLING_QUOTA_EXCEEDED. Older versions are recorded whole
        and throttled after. Needs a call from dispatch before the handler; without it
        after_request counts what the response shows (permissive only).
        """
        if api_key not in _MUTATIONS or CONTROLLER_MUTATION_RATE not in self.keys:
            return
        if getattr(request, "validate_only", False):
            return
        user, client_id = ctx.principal.name, ctx.client_id or ""
        bound, tags = self._bound(CONTROLLER_MUTATION_RATE, user, client_id)
        if bound is None:
            return
        now = self.clock()
        bucket = self._sensor(CONTROLLER_MUTATION_RATE, tags, now, lambda: TokenBucket(self.samples, self.window))
        if len(self._mutations) > 10_000:  # handlers that raised never reached after_request
            self._mutations.clear()
        planned = _planned_mutations(ctx, api_key, request)
        order = [key for key, _ in planned]
        rejected: dict[Any, int] = {}
        throttle = 0
        if ctx.api_version >= STRICT_MUTATION_VERSIONS[api_key]:
            for key, partitions in planned:
                wait = bucket.throttle_ms(bound, now)
                if wait > 0:
                    rejected[key] = throttle = wait
                elif partitions:
                    bucket.record(partitions, bound, now)
            if rejected:
                _drop_topics(api_key, request, rejected)
        else:
            throttle = bucket.record(sum(n for _, n in planned), bound, now) if planned else 0
        self._mutations[id(request)] = (throttle, rejected, order)

    def _finish_mutations(self, api_key: int, request: Any, response: Any) -> int | None:
        pending = self._mutations.pop(id(request), None)
        if pending is None:
            return None
        throttle, rejected, order = pending
        if rejected and response is not None:
            _add_rejected(api_key, response, rejected, order)
        return throttle

    def _sweep(self, now: float) -> None:
        self._last_sweep = now
        stale = [k for k, s in self._sensors.items() if now - s.last_used > SENSOR_EXPIRY_S]
        for k in stale:
            del self._sensors[k]

    # -- the dispatch hook ---------------------------------------------------------------------------
    def after_request(self, ctx: RequestContext, api_key: int, request: Any, response: Any,
                      request_size_bytes: int, handler_seconds: float) -> None:
        """Record the request against its client's quotas; throttle the response and the channel."""
        now = self.clock()
        if now - self._last_sweep > 60.0:
            self._sweep(now)
        user = ctx.principal.name
        client_id = ctx.client_id or ""
        throttle = 0
        if api_key == _FETCH and _is_replica_fetch(request):
            return  # followers are governed by replication throttles
        if api_key == _PRODUCE:
            throttle = self.record(PRODUCER_BYTE_RATE, user, client_id, request_size_bytes, now)
        elif api_key == _FETCH and response is not None:
            throttle = self._consumer_fetch(response, user, client_id, now)
        elif api_key in _MUTATIONS and response is not None:
            throttle = self._finish_mutations(api_key, request, response)
            if throttle is None:  # before_request did not run: count what the response shows
                throttle = self.record_mutations(user, client_id,
                                                 _mutated_partitions(ctx, api_key, request, response), now)
        if api_key not in _CLUSTER_ACTIONS and not (api_key == _PRODUCE and getattr(request, "acks", 1) == 0):
            throttle = max(throttle, self.record(REQUEST_PERCENTAGE, user, client_id, handler_seconds * 100.0, now))
        if throttle <= 0:
            return
        if response is not None and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(response.throttle_time_ms or 0, throttle)
        # KIP-219: the response goes out now, then the channel is muted. Clients older than
        # Produce v6 / Fetch v8 expect the broker to hold the response instead; they get it at
        # once and their next request waits out the mute, which bounds their rate the same way.
        ctx.connection.mute_for(throttle / 1000.0)


def _is_replica_fetch(request: Any) -> bool:
    if getattr(request, "replica_id", -1) >= 0:
        return True
    state = getattr(request, "replica_state", None)
    return state is not None and getattr(state, "replica_id", -1) >= 0


def _trim_records(response: Any, limit: float) -> None:
    """Drop the records of the partitions after the first `limit` bytes (0: every partition's);
    as KIP-74, the first partition with records keeps them when limit > 0."""
    total = 0
    for topic in response.responses or ():
        for part in topic.partitions or ():
            size = len(part.records) if part.records is not None else 0
            if not size:
                continue
            if limit <= 0 or (total and total + size > limit):
                part.records = b""
                part.aborted_transactions = None if part.aborted_transactions is None else []
            else:
                total += size


def _fetch_response_size(response: Any) -> int:
    """Bytes of record data plus a per-partition allowance for the fields around them."""
    size = 16
    for topic in response.responses or ():
        size += 24
        for part in topic.partitions or ():
            records = part.records
            size += 48 + (len(records) if records is not None else 0)
    return size


def _topic_key(api_key: int, entry: Any) -> Any:
    """How a topic is named in a mutation request: a name, or (DeleteTopics v6) a name or an id."""
    if api_key == _DELETE_TOPICS and not isinstance(entry, str):
        return entry.name if entry.name else entry.topic_id
    return entry if isinstance(entry, str) else entry.name


def _request_topics(api_key: int, request: Any) -> list[Any]:
    if api_key == _DELETE_TOPICS:
        return list(request.topics) if request.topics else list(request.topic_names or ())
    return list(request.topics)


def _planned_mutations(ctx: RequestContext, api_key: int, request: Any) -> list[tuple[Any, int]]:
    """(topic key, partitions it would create or delete) in request order, from the metadata now."""
    metadata = ctx.metadata
    planned = []
    for entry in _request_topics(api_key, request):
        key = _topic_key(api_key, entry)
        if api_key == _CREATE_TOPICS:
            if metadata.get_topic(entry.name) is not None:
                count = 0  # TOPIC_ALREADY_EXISTS: nothing created
            elif entry.assignments:
                count = len(entry.assignments)
            else:
                count = entry.num_partitions if entry.num_partitions > 0 else ctx.config.get("num.partitions")
        elif api_key == _DELETE_TOPICS:
            topic = metadata.get_topic(key) if isinstance(key, str) else metadata.topic_by_id(key)
            count = topic.partition_count if topic is not None else 0
        else:
            topic = metadata.get_topic(entry.name)
            count = max(entry.count - topic.partition_count, 0) if topic is not None else 0
        planned.append((key, count))
    return planned


def _drop_topics(api_key: int, request: Any, rejected: Mapping[Any, int]) -> None:
    """Take the rejected topics out of the request so that the handler leaves them alone."""
    if api_key == _DELETE_TOPICS and not request.topics:
        request.topic_names = [name for name in request.topic_names if name not in rejected]
    else:
        request.topics = [entry for entry in request.topics if _topic_key(api_key, entry) not in rejected]


def _add_rejected(api_key: int, response: Any, rejected: Mapping[Any, int], order: list[Any]) -> None:
    """THROTTLING_QUOTA_EXCEEDED results for the rejected topics, in the request's order."""
    from ..protocol.messages import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

    if api_key == _CREATE_TOPICS:
        results = response.topics
        results += [CreateTopicsResponse.CreatableTopicResult(
            name=key, error_code=THROTTLING_QUOTA_EXCEEDED, error_message=THROTTLED_MESSAGE) for key in rejected]
        response.topics = _in_order(results, order, lambda r: r.name)
    elif api_key == _DELETE_TOPICS:
        results = response.responses
        for key in rejected:
            result = DeleteTopicsResponse.DeletableTopicResult(error_code=THROTTLING_QUOTA_EXCEEDED,
                                                                error_message=THROTTLED_MESSAGE)
            if isinstance(key, str):
                result.name = key
            else:
                result.topic_id = key
            results.append(result)
        response.responses = _in_order(results, order, lambda r: r.name if r.name else r.topic_id)
    else:
        results = response.results
        results += [CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=key, error_code=THROTTLING_QUOTA_EXCEEDED, error_message=THROTTLED_MESSAGE) for key in rejected]
        response.results = _in_order(results, order, lambda r: r.name)
    if hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(response.throttle_time_ms or 0, max(rejected.values()))


def _in_order(results: list[Any], order: list[Any], key: Callable[[Any], Any]) -> list[Any]:
    rank = {k: i for i, k in enumerate(order)}
    return sorted(results, key=lambda r: rank.get(key(r), len(rank)))


def _mutated_partitions(ctx: RequestContext, api_key: int, request: Any, response: Any) -> int:
    """Partitions a CreateTopics / DeleteTopics / CreatePartitions request created or deleted."""
    count = 0
    if api_key == _CREATE_TOPICS:
        if getattr(request, "validate_only", False):
            return 0
        wanted = {t.name: t for t in request.topics}
        default = ctx.config.get("num.partitions")
        for result in response.topics:
            if result.error_code:
                continue
            n = getattr(result, "num_partitions", -1)
            if n is None or n < 0:
                topic = wanted.get(result.name)
                n = -1 if topic is None else (len(topic.assignments) or topic.num_partitions)
            count += n if n > 0 else default
    elif api_key == _DELETE_TOPICS:
        # The topic is gone by now; Kafka counts its partitions, here each deleted topic counts one.
        count = sum(1 for result in response.responses if not result.error_code)
    else:
        if getattr(request, "validate_only", False):
            return 0
        ok = {r.name for r in response.results if not r.error_code}
        for topic in request.topics:
            if topic.name in ok:
                count += len(topic.assignments) if topic.assignments else 1
    return count


# -- the quotas in force ----------------------------------------------------------------------------
