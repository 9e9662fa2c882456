"""Client telemetry (KIP-714) against a real broker process: a client-metrics subscription set with
IncrementalAlterConfigs on CLIENT_METRICS, then a confluent-kafka producer and a Java 3.9 producer
push their metrics, which appear on /metrics; Kafka's errors for bad pushes over the wire."""
from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from conformance.broker_process import free_port, start_broker
from conformance.java.test_java_clients import JavaPrograms, java_programs  # noqa: F401  (fixture)
from kafkapy.admin.client import AdminClient
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    DescribeConfigsRequest,
    GetTelemetrySubscriptionsRequest,
    IncrementalAlterConfigsRequest,
    ListClientMetricsResourcesRequest,
    MetadataRequest,
    PushTelemetryRequest,
)

pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
prometheus_parser = pytest.importorskip("prometheus_client.parser")

CLIENT_METRICS = 16
PYTHON_CLIENT = "telemetry-confluent-producer"


@pytest.fixture(scope="module")
def telemetry_broker():
    port, console_port = free_port(), free_port()
    with start_broker(overrides={"kafkapy.metrics.listener": f"http://127.0.0.1:{port}",
                                 "kafkapy.console.listener": f"http://127.0.0.1:{console_port}",
                                 "telemetry.max.bytes": "100000"}) as broker:
        broker.metrics_url = f"http://127.0.0.1:{port}/metrics"
        broker.console_url = f"http://127.0.0.1:{console_port}"
        yield broker


def _subscribe(bootstrap: str, name: str, **configs: str):
    R = IncrementalAlterConfigsRequest
    with AdminClient(bootstrap) as admin:
        return admin.send(R(resources=[R.AlterConfigsResource(
            resource_type=CLIENT_METRICS, resource_name=name,
            configs=[R.AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v)
                     for k, v in configs.items()])], validate_only=False)).responses[0]


def _client_series(url: str, client_id: str) -> dict[str, float]:
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for family in prometheus_parser.text_string_to_metric_families(body):
        if family.name == "kafkapy_client_telemetry_metric":
            for sample in family.samples:
                if sample.labels["client_id"] == client_id:
                    out[sample.labels["metric"]] = sample.value
    return out


def _wait_for_series(url: str, client_id: str, prefix: str, timeout: float = 20.0, poll=None) -> dict:
    deadline = time.monotonic() + timeout
    series: dict = {}
    while time.monotonic() < deadline:
        if poll is not None:
            poll()
        series = _client_series(url, client_id)
        if any(name.startswith(prefix) for name in series):
            return series
        time.sleep(0.3)
    pytest.fail(f"no {prefix}* metrics of {client_id} on /metrics within {timeout:.0f} s (saw {sorted(series)})")


def test_subscription_configs(telemetry_broker):
    bootstrap = telemetry_broker.bootstrap
    assert _subscribe(bootstrap, "cfg-check", metrics="org.apache.kafka.", interval_ms="2000",
                      match="client_id=nobody").error_code == 0
    assert _subscribe(bootstrap, "cfg-check", interval_ms="5").error_code == ErrorCode.INVALID_CONFIG
    assert _subscribe(bootstrap, "cfg-check", colour="red").error_code == ErrorCode.INVALID_REQUEST
    D = DescribeConfigsRequest
    with AdminClient(bootstrap) as admin:
        described = admin.send(D(resources=[D.DescribeConfigsResource(
            resource_type=CLIENT_METRICS, resource_name="cfg-check", configuration_keys=None)])).results[0]
        listed = admin.send(ListClientMetricsResourcesRequest())
    assert {c.name: c.value for c in described.configs} == {"metrics": "org.apache.kafka.", "interval.ms": "2000",
                                                            "match": "client_id=nobody"}
    assert "cfg-check" in [r.name for r in listed.client_metrics_resources]


def test_list_config_resources_v1(telemetry_broker):
    """Kafka 4.1's ListConfigResources (74 v1, KIP-1142): every config resource type, or those asked for."""
    L = ListClientMetricsResourcesRequest
    bootstrap = telemetry_broker.bootstrap
    assert _subscribe(bootstrap, "listed", metrics="x", match="client_id=nobody").error_code == 0
    with AdminClient(bootstrap) as admin:
        admin.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="listed-topic")],
                                   allow_auto_topic_creation=True))
        every = admin.send(L(resource_types=[]), floor=1)
        only = admin.send(L(resource_types=[16]), floor=1)
        v0 = admin.send(L(), cap=0)
        bad = admin.send(L(resource_types=[99]), floor=1)
    found = {(r.resource_type, r.name) for r in every.client_metrics_resources}
    assert {(16, "listed"), (2, "listed-topic"), (4, "1"), (8, "1")} <= found
    assert {r.resource_type for r in only.client_metrics_resources} == {16}
    assert "listed" in [r.name for r in v0.client_metrics_resources]
    assert bad.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_cli_configures_subscriptions(telemetry_broker):
    """`kafkapy configs --entity-type client-metrics`, as kafka-configs.sh."""
    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "kafkapy", "configs", *argv, "--entity-type", "client-metrics",
                               "--entity-name", "cli-sub", "-b", telemetry_broker.bootstrap],
                              capture_output=True, text=True, timeout=60)

    done = cli("alter", "--add-config", "metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.],"
                                        "interval.ms=10000,match=[client_id=nobody]")
    assert done.returncode == 0, done.stderr
    described = cli("describe")
    assert "org.apache.kafka.producer.,org.apache.kafka.consumer." in described.stdout
    assert "CLIENT_METRICS_CONFIG" in described.stdout
    refused = cli("alter", "--add-config", "interval.ms=5")
    assert refused.returncode == 1 and "INVALID_CONFIG" in refused.stderr and "Traceback" not in refused.stderr


def test_confluent_kafka_producer_pushes_metrics(telemetry_broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    bootstrap = telemetry_broker.bootstrap
    assert _subscribe(bootstrap, "confluent-clients", metrics="*", interval_ms="1000",
                      match="client_id=telemetry-confluent-.*").error_code == 0
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": PYTHON_CLIENT})
    try:
        for i in range(50):
            producer.produce("telemetry-confluent", b"v%d" % i)
        assert producer.flush(15) == 0
        series = _wait_for_series(telemetry_broker.metrics_url, PYTHON_CLIENT, "org.apache.kafka.producer.",
                                  poll=lambda: producer.poll(0.2))
    finally:
        producer.flush(5)
    assert "org.apache.kafka.producer.node.request.latency.avg" in series, sorted(series)
    # and on the console's Clients page, with the subscription
    page = urllib.request.urlopen(telemetry_broker.console_url + "/clients", timeout=10).read().decode()
    assert PYTHON_CLIENT in page and "confluent-clients" in page
    assert "org.apache.kafka.producer.node.request.latency.avg" in page and "Traceback" not in page
    # a consumer of the same subscription pushes its consumer metrics
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "client.id": "telemetry-confluent-consumer",
                                         "group.id": "telemetry-group", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["telemetry-confluent"])
        _wait_for_series(telemetry_broker.metrics_url, "telemetry-confluent-consumer", "org.apache.kafka.consumer.",
                         timeout=30, poll=lambda: consumer.poll(0.2))
    finally:
        consumer.close()


def test_java_producer_pushes_metrics(telemetry_broker, java_programs: JavaPrograms):  # noqa: F811
    client_id = f"telemetry-java-{uuid.uuid4().hex[:6]}"
    java_programs.run("TelemetryCheck", telemetry_broker.bootstrap, "telemetry-java", "java-producers", client_id,
                      timeout=90)
    series = _wait_for_series(telemetry_broker.metrics_url, client_id, "org.apache.kafka.producer.", timeout=10)
    assert all(name.startswith("org.apache.kafka.producer.") for name in series), sorted(series)


def test_bad_pushes_get_kafkas_errors(telemetry_broker):
    bootstrap = telemetry_broker.bootstrap
    assert _subscribe(bootstrap, "raw-clients", metrics="*", interval_ms="60000",
                      match="client_id=raw-telemetry").error_code == 0
    with AdminClient(bootstrap, client_id="raw-telemetry") as admin:
        got = admin.send(GetTelemetrySubscriptionsRequest())
        assert got.error_code == 0 and got.requested_metrics == [""] and got.push_interval_ms == 60000
        assert got.telemetry_max_bytes == 100000

        def push(**kw):
            fields = dict(client_instance_id=got.client_instance_id, subscription_id=got.subscription_id,
                          terminating=False, compression_type=0, metrics=b"")
            fields.update(kw)
            return admin.send(PushTelemetryRequest(**fields)).error_code

        assert push(client_instance_id=uuid.UUID(int=0)) == ErrorCode.INVALID_REQUEST
        assert push(subscription_id=got.subscription_id + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push() == 0
        assert push() == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # again before the 60 s interval
        # asking again resets the clock; then the payload checks
        assert admin.send(GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id)).error_code == 0
        assert push(metrics=b"x" * 100001) == ErrorCode.TELEMETRY_TOO_LARGE
        admin.send(GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id))
        assert push(compression_type=7) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        admin.send(GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id))
        assert push(metrics=b"\xff\xff\xff\xff") == ErrorCode.INVALID_RECORD
        admin.send(GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id))
        assert push(terminating=True) == 0
        assert push() == ErrorCode.INVALID_REQUEST  # nothing after the terminating push
    # the broker is unharmed
    with AdminClient(bootstrap) as admin:
        assert admin.send(ListClientMetricsResourcesRequest()).error_code == 0
