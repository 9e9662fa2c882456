"""Client telemetry bookkeeping (KIP-714): subscription configs and matching, Kafka's push errors,
OTLP decoding. The wire path is conformance/test_client_telemetry.py."""
from __future__ import annotations

import uuid

import pytest

pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")

from opentelemetry.proto.common.v1 import common_pb2  # noqa: E402
from opentelemetry.proto.metrics.v1 import metrics_pb2  # noqa: E402

from kafkapy.metrics.client_telemetry import (  # noqa: E402
    INVALID_CONFIG, INVALID_RECORD, INVALID_REQUEST, THROTTLING_QUOTA_EXCEEDED, TELEMETRY_TOO_LARGE,
    UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE, ZERO_UUID, ClientTelemetry, Subscription,
    TelemetryError, decode_metrics, validate_client_metrics_configs,
)
from kafkapy.protocol.compression import ZSTD, compress  # noqa: E402

ATTRS = {"client_id": "orders-producer", "client_software_name": "confluent-kafka-python",
         "client_software_version": "2.16.1", "client_source_address": "127.0.0.1", "client_source_port": "50000"}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _payload(delta_sum: float = 3.0, gauge: float = 1.5) -> bytes:
    data = metrics_pb2.MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    g = scope.metrics.add(name="org.apache.kafka.producer.request.latency.avg")
    point = g.gauge.data_points.add(as_double=gauge)
    point.attributes.append(common_pb2.KeyValue(key="node.id", value=common_pb2.AnyValue(string_value="1")))
    s = scope.metrics.add(name="org.apache.kafka.producer.record.send.total")
    s.sum.aggregation_temporality = 1  # DELTA
    s.sum.data_points.add(as_int=int(delta_sum))
    h = scope.metrics.add(name="org.apache.kafka.producer.latency")
    h.histogram.data_points.add(count=4, sum=10.0)
    return data.SerializeToString()


def _code(call) -> int:
    with pytest.raises(TelemetryError) as info:
        call()
    return info.value.code


def test_configs_are_validated_as_kafka_does():
    validate_client_metrics_configs({"metrics": "*", "interval.ms": "1000", "match": "client_id=a.*"})
    assert _code(lambda: validate_client_metrics_configs({"nope": "1"})) == INVALID_REQUEST
    assert _code(lambda: validate_client_metrics_configs({"interval.ms": "50"})) == INVALID_CONFIG
    assert _code(lambda: validate_client_metrics_configs({"interval.ms": "x"})) == INVALID_CONFIG
    assert _code(lambda: validate_client_metrics_configs({"match": "client_colour=red"})) == INVALID_CONFIG
    assert _code(lambda: validate_client_metrics_configs({"match": "client_id=("})) == INVALID_CONFIG
    assert _code(lambda: validate_client_metrics_configs({"match": "client_id"})) == INVALID_CONFIG


def test_matching_is_a_full_match_of_every_pattern():
    sub = Subscription.from_configs("s", {"metrics": "a", "match": "client_id=orders-.*,client_software_name=conf.*"})
    assert sub.matches(ATTRS)
    assert not sub.matches(dict(ATTRS, client_id="x-orders-producer"))
    assert not sub.matches(dict(ATTRS, client_software_name=None))
    assert Subscription.from_configs("all", {"metrics": "a"}).matches({})


def test_subscriptions_combine_and_star_asks_for_everything():
    telemetry = ClientTelemetry(Clock())
    subs = [Subscription.from_configs("a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"}),
            Subscription.from_configs("b", {"metrics": "org.apache.kafka.consumer.", "interval.ms": "2000"}),
            Subscription.from_configs("c", {"metrics": "x", "interval.ms": "100", "match": "client_id=other"})]
    instance = telemetry.get_subscriptions(ZERO_UUID, ATTRS, subs)
    assert instance.instance_id != ZERO_UUID
    assert instance.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.")
    assert instance.interval_ms == 2000
    star = ClientTelemetry(Clock()).get_subscriptions(ZERO_UUID, ATTRS, subs + [Subscription.from_configs(
        "d", {"metrics": "*"})])
    assert star.metrics == ("",)
    none = ClientTelemetry(Clock()).get_subscriptions(ZERO_UUID, ATTRS, [])
    assert none.metrics == () and none.interval_ms == 300_000


def test_push_errors_and_values():
    clock = Clock()
    telemetry = ClientTelemetry(clock)
    subs = [Subscription.from_configs("a", {"metrics": "*", "interval.ms": "1000"})]
    instance = telemetry.get_subscriptions(ZERO_UUID, ATTRS, subs)
    iid, sid = instance.instance_id, instance.subscription_id

    def push(payload=_payload(), *, subscription=sid, terminating=False, compression=0, max_bytes=1 << 20,
             instance_id=iid):
        return telemetry.push(instance_id, subscription, terminating, compression, payload, ATTRS, subs, max_bytes)

    assert _code(lambda: push(instance_id=ZERO_UUID)) == INVALID_REQUEST
    assert _code(lambda: push(subscription=sid + 1)) == UNKNOWN_SUBSCRIPTION_ID
    clock.now += 1.0
    push(compress(ZSTD, _payload()), compression=ZSTD)
    clock.now += 0.5
    assert _code(lambda: push()) == THROTTLING_QUOTA_EXCEEDED
    clock.now += 1.0
    assert _code(lambda: push(compression=9)) == UNSUPPORTED_COMPRESSION_TYPE
    clock.now += 1.0
    assert _code(lambda: push(max_bytes=10)) == TELEMETRY_TOO_LARGE
    clock.now += 1.0
    assert _code(lambda: push(b"\xff\xff\xff")) == INVALID_RECORD
    clock.now += 1.0
    push(_payload(delta_sum=4.0, gauge=2.5))
    samples = {(name, attrs): value for _, client_id, name, attrs, value in telemetry.samples()}
    assert samples[("org.apache.kafka.producer.request.latency.avg", "node.id=1")] == 2.5  # gauge: latest
    assert samples[("org.apache.kafka.producer.record.send.total", "")] == 7.0  # delta sum: added up
    assert samples[("org.apache.kafka.producer.latency.count", "")] == 4.0  # no temporality: latest
    # a new subscription: the old id is unknown, the client asks again and pushes at once
    subs.append(Subscription.from_configs("b", {"metrics": "x", "interval.ms": "500"}))
    assert _code(lambda: push()) == UNKNOWN_SUBSCRIPTION_ID
    again = telemetry.get_subscriptions(iid, ATTRS, subs)
    assert again.subscription_id != sid and again.interval_ms == 500
    telemetry.push(iid, again.subscription_id, True, 0, b"", ATTRS, subs, 1 << 20)
    assert _code(lambda: telemetry.push(iid, again.subscription_id, False, 0, b"", ATTRS, subs, 1 << 20)) \
        == INVALID_REQUEST  # nothing after the terminating push
    # forgotten after 3 intervals (at least a minute)
    clock.now += 61
    assert telemetry.samples() == []


def test_get_again_before_the_interval_is_throttled():
    clock = Clock()
    telemetry = ClientTelemetry(clock)
    subs = [Subscription.from_configs("a", {"metrics": "*", "interval.ms": "10000"})]
    iid = telemetry.get_subscriptions(ZERO_UUID, ATTRS, subs).instance_id
    clock.now += 1
    assert _code(lambda: telemetry.get_subscriptions(iid, ATTRS, subs)) == THROTTLING_QUOTA_EXCEEDED
    clock.now += 10
    assert telemetry.get_subscriptions(iid, ATTRS, subs).instance_id == iid
    assert telemetry.get_subscriptions(uuid.uuid4(), ATTRS, subs).instance_id != iid


def test_decode_metrics():
    values = decode_metrics(_payload())
    assert values[("org.apache.kafka.producer.request.latency.avg", "node.id=1")] == (1.5, False)
    assert values[("org.apache.kafka.producer.record.send.total", "")] == (3.0, True)
    assert values[("org.apache.kafka.producer.latency.sum", "")] == (10.0, False)
