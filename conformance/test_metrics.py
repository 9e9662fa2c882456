"""The Prometheus endpoint against a real broker process and real clients (kafka-python).

A scripted workload (records produced to two topics, a group that commits part way, a consumer that
never commits) runs once per module; the tests then scrape /metrics with prometheus-client's
parser and check the values against what the workload did. The Grafana dashboard's queries are
checked against the same scrape.
"""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conformance.broker_process import BrokerStartError, free_port, start_broker

prometheus_parser = pytest.importorskip("prometheus_client.parser")
kafka = pytest.importorskip("kafka")

from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "kafkapy-dashboard.json"
TOPIC_A, TOPIC_B = "metrics-a", "metrics-b"
PER_PARTITION_A = 15   # to each of metrics-a's 2 partitions
COUNT_B = 20
COMMITTED_A0 = 5       # the group commits offset 5 on metrics-a/0 and nothing on metrics-a/1 ...
COMMITTED_A1 = 12      # ... then 12 on metrics-a/1
GROUP = "metrics-group"
SPARK_CLIENT = "spark-like-reader"


def _offset_and_metadata(offset: int):
    from kafka.structs import OffsetAndMetadata

    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:  # kafka-python < 2.1
        return OffsetAndMetadata(offset, "")


@pytest.fixture(scope="module")
def metrics_broker():
    port = free_port()
    with start_broker(overrides={"kafkapy.metrics.listener": f"http://127.0.0.1:{port}",
                                 "group.initial.rebalance.delay.ms": "0"}) as broker:
        broker.metrics_url = f"http://127.0.0.1:{port}/metrics"
        _workload(broker.bootstrap)
        yield broker


def _workload(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(TOPIC_A, 2, 1), NewTopic(TOPIC_B, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i in range(PER_PARTITION_A):
            producer.send(TOPIC_A, b"value-%d" % i, key=b"k", partition=0)
            producer.send(TOPIC_A, b"value-%d" % i, partition=1)
        for i in range(COUNT_B):
            producer.send(TOPIC_B, b"b-%d" % i, partition=0)
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=5)
    # a group that reads metrics-a and commits part way
    group = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False,
                          auto_offset_reset="earliest", client_id="metrics-group-member")
    try:
        group.assign([TopicPartition(TOPIC_A, 0), TopicPartition(TOPIC_A, 1)])
        _poll_until(group, 2 * PER_PARTITION_A)
        group.commit({TopicPartition(TOPIC_A, 0): _offset_and_metadata(COMMITTED_A0),
                      TopicPartition(TOPIC_A, 1): _offset_and_metadata(COMMITTED_A1)})
    finally:
        group.close(autocommit=False)
    # a consumer that never commits (as Spark's source): only its fetch position shows where it is
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, client_id=SPARK_CLIENT,
                           enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    reader.assign([TopicPartition(TOPIC_B, 0)])
    _poll_until(reader, COUNT_B)
    reader.poll(timeout_ms=500)  # the next fetch asks from offset COUNT_B
    # closed at the end: its position is tracked while it is connected (and 10 minutes after)
    reader.close()


def _poll_until(consumer, n: int, timeout_s: float = 20.0) -> None:
    got = 0
    deadline = time.monotonic() + timeout_s
    while got < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += len(records)
    assert got >= n, f"consumed {got} of {n}"


def _scrape(url: str, accept: str | None = None) -> tuple[str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode(), response.headers.get("Content-Type", "")


def _samples(text: str) -> dict[str, list[tuple[dict, float]]]:
    out: dict[str, list[tuple[dict, float]]] = {}
    for family in prometheus_parser.text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def _value(samples, name: str, **labels) -> float:
    matches = [v for lbls, v in samples.get(name, []) if lbls == labels]
    assert len(matches) == 1, f"{name}{labels}: {matches} in {samples.get(name)}"
    return matches[0]


@pytest.fixture(scope="module")
def scraped(metrics_broker):
    text, _ = _scrape(metrics_broker.metrics_url)
    return _samples(text)


def test_messages_and_bytes_in_per_topic_and_total(scraped):
    name = "kafka_server_brokertopicmetrics_messagesin_total"
    assert _value(scraped, name, topic=TOPIC_A) == 2 * PER_PARTITION_A
    assert _value(scraped, name, topic=TOPIC_B) == COUNT_B
    assert _value(scraped, name) == 2 * PER_PARTITION_A + COUNT_B
    bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
    per_topic = [v for lbls, v in scraped[bytes_in] if lbls.get("topic")]
    assert all(v > 0 for v in per_topic)
    assert _value(scraped, bytes_in) == sum(per_topic)
    # every record produced was read by a consumer at least once
    assert _value(scraped, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC_B) > 0
    assert _value(scraped, "kafka_server_brokertopicmetrics_failedproducerequests_total") == 0


def test_log_end_offsets_and_sizes(scraped):
    assert _value(scraped, "kafka_log_log_logendoffset", topic=TOPIC_A, partition="0") == PER_PARTITION_A
    assert _value(scraped, "kafka_log_log_logendoffset", topic=TOPIC_A, partition="1") == PER_PARTITION_A
    assert _value(scraped, "kafka_log_log_logendoffset", topic=TOPIC_B, partition="0") == COUNT_B
    assert _value(scraped, "kafka_log_log_size", topic=TOPIC_B, partition="0") > 0
    assert _value(scraped, "kafka_topic_partitions", topic=TOPIC_A) == 2
    assert _value(scraped, "kafka_topic_partition_current_offset", topic=TOPIC_B, partition="0") == COUNT_B


def test_request_counts_per_api(scraped):
    def count(request: str) -> float:
        return sum(v for lbls, v in scraped["kafka_network_requestmetrics_requests_total"]
                   if lbls["request"] == request)

    for api in ("Produce", "FetchConsumer", "Metadata", "ApiVersions", "OffsetCommit", "CreateTopics"):
        assert count(api) >= 1, api
    assert _value(scraped, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == count("Produce")
    quantiles = {lbls["quantile"] for lbls, _ in scraped["kafka_network_requestmetrics_totaltimems"]
                 if lbls["request"] == "Produce"}
    assert quantiles == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert _value(scraped, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") >= 1


def test_consumer_group_lag_is_log_end_minus_committed(scraped):
    lag = "kafka_consumergroup_lag"
    assert _value(scraped, lag, consumergroup=GROUP, topic=TOPIC_A, partition="0") == PER_PARTITION_A - COMMITTED_A0
    assert _value(scraped, lag, consumergroup=GROUP, topic=TOPIC_A, partition="1") == PER_PARTITION_A - COMMITTED_A1
    assert _value(scraped, "kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC_A) == \
        2 * PER_PARTITION_A - COMMITTED_A0 - COMMITTED_A1
    assert _value(scraped, "kafka_consumergroup_current_offset", consumergroup=GROUP, topic=TOPIC_A,
                  partition="0") == COMMITTED_A0
    assert _value(scraped, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1


def test_non_committing_consumer_fetch_position(scraped):
    rows = [(lbls, v) for lbls, v in scraped["kafkapy_consumer_fetch_position"]
            if lbls["client_id"] == SPARK_CLIENT and lbls["topic"] == TOPIC_B]
    assert rows and rows[0][0]["host"] == "127.0.0.1" and rows[0][1] == COUNT_B
    lag = [v for lbls, v in scraped["kafkapy_consumer_fetch_lag"]
           if lbls["client_id"] == SPARK_CLIENT and lbls["topic"] == TOPIC_B]
    assert lag == [0]
    # it never committed: no group shows it
    assert not [1 for lbls, _ in scraped.get("kafka_consumergroup_lag", []) if lbls["topic"] == TOPIC_B]


def test_single_node_health_and_connections(metrics_broker, scraped):
    assert _value(scraped, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert _value(scraped, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert _value(scraped, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert _value(scraped, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert _value(scraped, "kafka_brokers") == 1
    idle = _value(scraped, "kafka_network_socketserver_networkprocessoravgidle_percent")
    assert 0.0 <= idle <= 1.0
    # a connection held open while scraping is counted on its listener
    producer = KafkaProducer(bootstrap_servers=metrics_broker.bootstrap)
    try:
        producer.partitions_for(TOPIC_A)
        samples = _samples(_scrape(metrics_broker.metrics_url)[0])
        assert _value(samples, "kafka_server_socket_server_metrics_connection_count",
                      listener="PLAINTEXT", networkProcessor="0") >= 1
    finally:
        producer.close(timeout=5)


def test_openmetrics_and_unknown_paths(metrics_broker):
    text, ctype = _scrape(metrics_broker.metrics_url, accept="application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text") and text.rstrip().endswith("# EOF")
    with pytest.raises(urllib.error.HTTPError) as err:
        _scrape(metrics_broker.metrics_url.replace("/metrics", "/nothing"))
    assert err.value.code == 404


_PROMQL_WORDS = {"sum", "rate", "irate", "increase", "by", "without", "avg", "max", "min", "count", "topk",
                 "bottomk", "histogram_quantile", "on", "ignoring", "group_left", "group_right", "and", "or",
                 "unless", "offset", "label_replace", "delta", "deriv", "abs", "clamp_min", "clamp_max",
                 "avg_over_time", "max_over_time", "min_over_time", "sum_over_time", "time", "vector", "bool",
                 "sort_desc", "sort", "scalar", "absent", "changes", "resets"}


def dashboard_metric_names(dashboard: dict) -> set[str]:
    """Metric names queried by the dashboard's PromQL expressions."""
    names: set[str] = set()

    def exprs(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    yield value
                else:
                    yield from exprs(value)
        elif isinstance(node, list):
            for item in node:
                yield from exprs(item)

    for expr in exprs(dashboard):
        stripped = re.sub(r"\{[^}]*\}", "", expr)         # label matchers
        stripped = re.sub(r'"[^"]*"', "", stripped)        # strings (label_replace arguments)
        stripped = re.sub(r"\[[^\]]*\]", "", stripped)     # ranges
        stripped = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", stripped)
        for word in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", stripped):
            if word not in _PROMQL_WORDS and not re.fullmatch(r"\d+[smhdwy]?", word):
                names.add(word)
    return names


def test_grafana_dashboard_queries_only_exported_names(scraped):
    dashboard = json.loads(DASHBOARD.read_text())
    names = dashboard_metric_names(dashboard)
    assert len(names) >= 15
    missing = sorted(n for n in names if n not in scraped)
    assert not missing, f"the dashboard queries names the broker does not export: {missing}"


def test_malformed_listener_url_stops_start_up_with_a_clear_error():
    with pytest.raises(BrokerStartError) as err:
        with start_broker(overrides={"kafkapy.metrics.listener": "127.0.0.1:9404"}, timeout=15):
            pass
    assert "kafkapy.metrics.listener" in str(err.value)
    assert "http://host:port" in str(err.value)


def test_metrics_port_in_use_stops_start_up_with_a_clear_error():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # the Kafka listener is bound (and accepts) before the broker starts serving, so the start
        # may look successful until the process exits
        try:
            with start_broker(overrides={"kafkapy.metrics.listener": f"http://127.0.0.1:{port}"},
                              timeout=15) as broker:
                deadline = time.monotonic() + 15
                while broker.is_running() and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert not broker.is_running()
                message = broker.stderr_tail()
        except BrokerStartError as err:
            message = str(err)
    assert "kafkapy.metrics.listener" in message and "cannot listen there" in message
    assert "Traceback" not in message
