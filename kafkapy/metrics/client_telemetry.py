"""Client telemetry (KIP-714): client-metrics subscriptions, the pushed metrics, as Kafka's
ClientMetricsManager keeps them.

An operator configures subscriptions as config resources of type CLIENT_METRICS (16) with three
configs: `metrics` (metric name prefixes, `*` for all), `interval.ms` (how often matching clients
push) and `match` (`selector=regex` pairs on the client's instance id, client id, software name and
version, source address and port; every pair must match in full). A client asks with
GetTelemetrySubscriptions which metrics to push (the union over the subscriptions it matches, the
smallest interval), then pushes them with PushTelemetry as OTLP MetricsData protobuf, compressed
with one of the types offered. The latest pushed values are what the broker's /metrics shows.

Pure bookkeeping, no I/O: the handlers (kafkapy/broker/handlers/telemetry.py) pass the stored
subscriptions and the clock in; tests drive it directly.
"""
from __future__ import annotations

import re
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Mapping

__all__ = [
    "CLIENT_METRICS_CONFIGS", "ClientTelemetry", "Subscription", "TelemetryError", "decode_metrics",
    "validate_client_metrics_configs",
]

# ClientMetricsConfigs' names and defaults
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
CLIENT_METRICS_CONFIGS = (METRICS, INTERVAL_MS, MATCH)
ALL_METRICS = "*"
# ClientMetricsConfigs' match selectors
MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                   "client_source_address", "client_source_port")
# what Kafka accepts, in its order of preference: zstd, lz4, gzip, snappy
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)

# Kafka's error codes (kafkapy.protocol.error_codes), repeated here to keep this layer free of handlers
INVALID_REQUEST, INVALID_CONFIG, UNSUPPORTED_COMPRESSION_TYPE = 42, 40, 76
INVALID_RECORD, THROTTLING_QUOTA_EXCEEDED = 87, 89
UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE = 117, 118

ZERO_UUID = uuid.UUID(int=0)


class TelemetryError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _split_list(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def validate_client_metrics_configs(configs: Mapping[str, str]) -> None:
    """ClientMetricsConfigs.validate: unknown names are INVALID_REQUEST, bad values INVALID_CONFIG."""
    for name, value in configs.items():
        if name not in CLIENT_METRICS_CONFIGS:
            raise TelemetryError(f"Unknown client metrics configuration: {name}", INVALID_REQUEST)
    if INTERVAL_MS in configs:
        try:
            interval = int(configs[INTERVAL_MS])
        except (TypeError, ValueError):
            raise TelemetryError(f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}",
                                 INVALID_CONFIG) from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise TelemetryError(f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                                 f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}", INVALID_CONFIG)
    _parse_match(configs.get(MATCH))


def _parse_match(value: str | None) -> dict[str, re.Pattern]:
    patterns: dict[str, re.Pattern] = {}
    for item in _split_list(value):
        selector, sep, regex = item.partition("=")
        selector = selector.strip()
        if not sep or not regex.strip():
            raise TelemetryError(f"Illegal client matching pattern: {item}", INVALID_CONFIG)
        if selector not in MATCH_SELECTORS:
            raise TelemetryError(f"Illegal client matching pattern: {item}, unknown selector {selector}",
                                 INVALID_CONFIG)
        try:
            patterns[selector] = re.compile(regex.strip())
        except re.error as exc:
            raise TelemetryError(f"Illegal regex pattern {regex!r} in {item}: {exc}", INVALID_CONFIG) from None
    return patterns


@dataclass(frozen=True)
class Subscription:
    """One stored CLIENT_METRICS resource."""
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern]

    @classmethod
    def from_configs(cls, name: str, configs: Mapping[str, str]) -> Subscription:
        interval = configs.get(INTERVAL_MS)
        return cls(name, tuple(_split_list(configs.get(METRICS))),
                   int(interval) if interval else DEFAULT_INTERVAL_MS, _parse_match(configs.get(MATCH)))

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        for selector, pattern in self.match.items():
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int
    last_get: float = 0.0
    last_push: float = 0.0
    terminating: bool = False
    pushes: int = 0
    # (metric name, data point attributes) -> latest value
    values: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def client_id(self) -> str:
        return self.attributes.get("client_id") or ""


def _subscription_id(metrics: Iterable[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka hashes the metrics, the interval and the instance id: a change of either is a new id."""
    crc = zlib.crc32(f"{sorted(metrics)}|{interval_ms}|{instance_id}".encode())
    return crc - (1 << 32) if crc >= 1 << 31 else crc


class ClientTelemetry:
    """The broker's client instances and their latest pushed metrics (ClientMetricsManager)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.instances: dict[uuid.UUID, ClientInstance] = {}
        # (when read, the parsed subscriptions): the handlers' short cache of the metadata store
        self.cached_subscriptions: tuple[float, list[Subscription]] = (float("-inf"), [])

    # -- subscriptions -------------------------------------------------------------------------
    @staticmethod
    def _combine(subscriptions: Iterable[Subscription], attributes) -> tuple[tuple[str, ...], int]:
        metrics: set[str] = set()
        interval = None
        for subscription in subscriptions:
            if not subscription.metrics or not subscription.matches(attributes):
                continue
            metrics.update(subscription.metrics)
            interval = subscription.interval_ms if interval is None else min(interval, subscription.interval_ms)
        if ALL_METRICS in metrics:
            # an empty prefix asks for every metric (KIP-714's RequestedMetrics = [""])
            return ("",), interval
        return tuple(sorted(metrics)), interval if interval is not None else DEFAULT_INTERVAL_MS

    def _instance(self, instance_id: uuid.UUID, attributes, subscriptions) -> ClientInstance:
        attributes = dict(attributes, client_instance_id=str(instance_id))
        metrics, interval = self._combine(subscriptions, attributes)
        subscription_id = _subscription_id(metrics, interval, instance_id)
        known = self.instances.get(instance_id)
        if known is not None and known.subscription_id == subscription_id:
            known.attributes = attributes
            return known
        instance = ClientInstance(instance_id, attributes, subscription_id, metrics, interval)
        if known is not None:  # the subscription changed: keep what was pushed under the old one
            instance.values, instance.pushes, instance.last_push = known.values, known.pushes, known.last_push
            instance.last_get = known.last_get
        self.instances[instance_id] = instance
        return instance

    def get_subscriptions(self, instance_id: uuid.UUID, attributes: Mapping[str, str | None],
                          subscriptions: Iterable[Subscription]) -> ClientInstance:
        """GetTelemetrySubscriptions: a new instance id for a client that sends none."""
        self.expire()
        now = self.clock()
        if instance_id == ZERO_UUID:
            instance_id = uuid.uuid4()
        elif instance_id in self.instances:
            known = self.instances[instance_id]
            # a client asks again only after its push interval, or after an error that tells it to
            if not known.terminating and known.last_get and (now - known.last_get) * 1000 < known.interval_ms \
                    and known.last_push <= known.last_get:
                raise TelemetryError(f"Client {instance_id} asked for its subscriptions too often",
                                     THROTTLING_QUOTA_EXCEEDED)
        instance = self._instance(instance_id, attributes, list(subscriptions))
        instance.last_get = now
        instance.terminating = False
        return instance

    def push(self, instance_id: uuid.UUID, subscription_id: int, terminating: bool, compression_type: int,
             payload: bytes, attributes: Mapping[str, str | None], subscriptions: Iterable[Subscription],
             max_bytes: int) -> ClientInstance:
        """PushTelemetry: validate as Kafka does, then keep the decoded values."""
        if instance_id == ZERO_UUID:
            raise TelemetryError("Invalid client instance id", INVALID_REQUEST)
        now = self.clock()
        known = self.instances.get(instance_id)
        if known is not None and known.terminating:
            raise TelemetryError(f"Client {instance_id} sent a push after its terminating push", INVALID_REQUEST)
        instance = self._instance(instance_id, attributes, list(subscriptions))
        if instance.subscription_id != subscription_id:
            raise TelemetryError(f"Unknown client subscription id {subscription_id} for client {instance_id}",
                                 UNKNOWN_SUBSCRIPTION_ID)
        # too often: less than the interval since the last push, unless the client asked for its
        # subscriptions since (a new subscription restarts the clock) or this is its last push
        if not terminating and instance.last_push and instance.last_push >= instance.last_get \
                and (now - instance.last_push) * 1000 < instance.interval_ms:
            raise TelemetryError(f"Client {instance_id} pushed telemetry too often", THROTTLING_QUOTA_EXCEEDED)
        instance.last_push = now
        instance.terminating = terminating
        if compression_type not in ACCEPTED_COMPRESSION_TYPES and compression_type != 0:
            raise TelemetryError(f"Unsupported compression type {compression_type}", UNSUPPORTED_COMPRESSION_TYPE)
        if len(payload) > max_bytes:
            raise TelemetryError(f"Telemetry of {len(payload)} bytes is larger than telemetry.max.bytes "
                                 f"{max_bytes}", TELEMETRY_TOO_LARGE)
        if payload:
            from ..protocol.compression import decompress

            try:
                data = decompress(compression_type, payload, max_size=max(max_bytes, 1) * 64)
                values = decode_metrics(data)
            except Exception as exc:  # corrupt compression or protobuf: the client's fault, one line
                raise TelemetryError(f"Error decoding pushed metrics: {exc}", INVALID_RECORD) from None
            for key, (value, delta) in values.items():
                instance.values[key] = instance.values.get(key, 0.0) + value if delta else value
        instance.pushes += 1
        return instance

    def expire(self) -> None:
        """Forget instances silent for three push intervals (at least a minute), as Kafka does."""
        now = self.clock()
        for instance_id, instance in list(self.instances.items()):
            last = max(instance.last_get, instance.last_push)
            if now - last > max(3 * instance.interval_ms / 1000, 60.0):
                del self.instances[instance_id]

    def samples(self) -> list[tuple[str, str, str, str, float]]:
        """(client instance id, client id, metric name, data point attributes, value), sorted."""
        self.expire()
        out = []
        for instance in self.instances.values():
            for (name, attrs), value in instance.values.items():
                out.append((str(instance.instance_id), instance.client_id, name, attrs, value))
        out.sort()
        return out


# OTLP AggregationTemporality
_DELTA = 1


def _attrs(attributes) -> str:
    parts = []
    for kv in attributes:
        which = kv.value.WhichOneof("value")
        parts.append(f"{kv.key}={getattr(kv.value, which) if which else ''}")
    return ",".join(sorted(parts))


def _number(point) -> float:
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


def decode_metrics(data: bytes) -> dict[tuple[str, str], tuple[float, bool]]:
    """OTLP MetricsData v1 -> {(metric name, point attributes): (value, is a delta)}.

    Gauges and sums give their value (a delta sum is added up by the caller); histograms and
    summaries give `<name>.count` and `<name>.sum`.
    """
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    message = metrics_pb2.MetricsData()
    message.ParseFromString(data)
    values: dict[tuple[str, str], tuple[float, bool]] = {}
    for resource_metrics in message.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    for point in metric.gauge.data_points:
                        values[(metric.name, _attrs(point.attributes))] = (_number(point), False)
                elif kind == "sum":
                    delta = metric.sum.aggregation_temporality == _DELTA
                    for point in metric.sum.data_points:
                        values[(metric.name, _attrs(point.attributes))] = (_number(point), delta)
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    body = getattr(metric, kind)
                    delta = getattr(body, "aggregation_temporality", 0) == _DELTA
                    for point in body.data_points:
                        attrs = _attrs(point.attributes)
                        values[(metric.name + ".count", attrs)] = (float(point.count), delta)
                        values[(metric.name + ".sum", attrs)] = (float(point.sum), delta)
    return values
