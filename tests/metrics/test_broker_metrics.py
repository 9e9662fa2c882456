"""BrokerMetrics (the always-on counters), the reservoir, the listener URL and the collector, in-process."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.metrics.broker_metrics import (FETCH_POSITION_EXPIRY_S, QUANTILES, RESERVOIR_SIZE, BrokerMetrics,
                                            Reservoir)
from kafkapy.metrics.http_endpoint import parse_listener_url
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.headers import RequestHeader
from kafkapy.protocol.messages import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from kafkapy.protocol.records import build_batch
from tests.broker.inprocess import InProcessBroker


def _ctx(key: int, version: int, client_id: str = "client-1"):
    return SimpleNamespace(header=RequestHeader(key, version, 1, client_id), client_host="10.0.0.7")


def _produce_response(codes: dict[int, int]) -> ProduceResponse:
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
        ProduceResponse.PartitionProduceResponse(index=p, error_code=c) for p, c in codes.items()])])


# -- reservoir ---------------------------------------------------------------------------------
def test_reservoir_quantiles_of_the_latest_samples():
    r = Reservoir()
    assert r.quantiles() == [0.0] * len(QUANTILES)
    for v in range(1, 1001):
        r.add(float(v))
    q = dict(zip(QUANTILES, r.quantiles()))
    assert 495 <= q[0.5] <= 505 and 985 <= q[0.99] <= 995 and q[0.999] >= 995
    assert r.count == 1000 and r.sum == sum(range(1, 1001))
    for _ in range(RESERVOIR_SIZE):  # a full window of newer samples replaces every old one
        r.add(5000.0)
    assert r.quantiles((0.0, 0.5)) == [5000.0, 5000.0] and len(r.samples) == RESERVOIR_SIZE


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=3000))
def test_reservoir_quantiles_are_ordered_samples(values):
    r = Reservoir()
    for v in values:
        r.add(v)
    qs = r.quantiles()
    assert qs == sorted(qs)
    assert all(v in values[-RESERVOIR_SIZE:] for v in qs)


# -- listener URL --------------------------------------------------------------------------------
@given(st.integers(min_value=0, max_value=65535))
def test_listener_url_round_trip(port):
    assert parse_listener_url(f"http://127.0.0.1:{port}") == ("127.0.0.1", port)


@pytest.mark.parametrize("bad", ["127.0.0.1:9404", "https://127.0.0.1:9404", "http://127.0.0.1",
                                 "http://:9404", "http://127.0.0.1:99999", "http://127.0.0.1:9404/metrics", ""])
def test_listener_url_errors_say_what_is_expected(bad):
    with pytest.raises(ValueError):
        parse_listener_url(bad)


def test_config_refuses_a_malformed_listener():
    from kafkapy.broker.config import BrokerConfig
    from kafkapy.metadata.errors import ConfigError

    with pytest.raises(ConfigError, match="kafkapy.metrics.listener"):
        BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "kafkapy.metrics.listener": "localhost:9404"})


# -- counters -----------------------------------------------------------------------------------
def test_totals_and_recent_errors():
    m = BrokerMetrics()
    m.produced("t", 10, 700)
    m.produced("u", 5, 300)
    m.produce_failed("t")
    request = ProduceRequest(acks=1, topic_data=[])
    timing = m.on_response(_ctx(0, 9), 0, 9, request, _produce_response({0: 0}), time.perf_counter(), None)
    m.response_sent(timing)
    m.on_response(_ctx(0, 9, "bad-client"), 0, 9, request,
                  _produce_response({0: ErrorCode.NOT_LEADER_OR_FOLLOWER, 1: 0}), time.perf_counter(), None)
    totals = m.totals()
    assert (totals["messages_in"], totals["bytes_in"], totals["bytes_out"]) == (15, 1000, 0)
    produce = totals["requests"]["Produce"]
    assert produce["count"] == 2 and produce["errors"] == 1 and produce["p99_ms"] >= 0
    assert m.topics["t"].failed_produce_requests == 1 and m.topics["t"].produce_requests == 2
    [error] = m.recent_errors()
    assert error["api"] == "Produce" and error["client_id"] == "bad-client"
    assert error["error"] == "NOT_LEADER_OR_FOLLOWER" and error["time"] <= time.time()


def test_recent_errors_newest_first_and_bounded():
    m = BrokerMetrics()
    from kafkapy.protocol.messages import MetadataRequest, MetadataResponse

    for i in range(300):
        response = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(
            name=f"t{i}", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
        m.on_response(_ctx(3, 12, f"c{i}"), 3, 12, MetadataRequest(), response, time.perf_counter(), None)
    errors = m.recent_errors(limit=3)
    assert [e["client_id"] for e in errors] == ["c299", "c298", "c297"]
    assert len(m.recent_errors(limit=1000)) == 200
    assert m.totals()["requests"]["Metadata"]["errors"] == 300


def _fetch(version: int, partitions: dict[int, int], forgotten=(), session_epoch: int = -1,
           replica_id: int = -1) -> FetchRequest:
    topic = FetchRequest.FetchTopic(topic="t", partitions=[
        FetchRequest.FetchPartition(partition=p, fetch_offset=o) for p, o in partitions.items()])
    return FetchRequest(replica_id=replica_id, session_epoch=session_epoch, topics=[topic],
                        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic="t", partitions=list(forgotten))])


def _fetch_response(sizes: dict[int, int], error: int = 0) -> FetchResponse:
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=p, error_code=error, records=b"x" * n)
        for p, n in sizes.items()])])


def test_fetch_bytes_out_consumers_only_and_failures():
    m = BrokerMetrics()
    m.on_response(_ctx(1, 12), 1, 12, _fetch(12, {0: 0}), _fetch_response({0: 100, 1: 50}), time.perf_counter(), None)
    m.on_response(_ctx(1, 12), 1, 12, _fetch(12, {0: 0}, replica_id=2), _fetch_response({0: 999}),
                  time.perf_counter(), None)
    m.on_response(_ctx(1, 12), 1, 12, _fetch(12, {0: 0}), _fetch_response({0: 0}, ErrorCode.OFFSET_OUT_OF_RANGE),
                  time.perf_counter(), None)
    assert m.all_topics.bytes_out == 150 and m.topics["t"].bytes_out == 150
    assert m.topics["t"].fetch_requests == 3 and m.topics["t"].failed_fetch_requests == 1
    requests = m.totals()["requests"]
    assert requests["FetchConsumer"]["count"] == 2 and requests["FetchFollower"]["count"] == 1
    assert requests["FetchConsumer"]["errors"] == 1


def test_fetch_positions_follow_sessions_and_expire():
    m = BrokerMetrics()
    m.detailed = True
    ctx = _ctx(1, 12, "spark")
    m.on_response(ctx, 1, 12, _fetch(12, {0: 10, 1: 20}, session_epoch=0), None, time.perf_counter(), None)
    # an incremental fetch names only what changed; forgotten partitions leave
    m.on_response(ctx, 1, 12, _fetch(12, {0: 15}, forgotten=[1], session_epoch=1), None, time.perf_counter(), None)
    client = m.fetches[("spark", "10.0.0.7")]
    assert client.positions == {("t", 0): 15}
    m.expire_fetches(time.monotonic() + FETCH_POSITION_EXPIRY_S / 2)
    assert ("spark", "10.0.0.7") in m.fetches
    m.expire_fetches(time.monotonic() + FETCH_POSITION_EXPIRY_S + 1)
    assert not m.fetches


def test_detailed_timers_and_versions():
    m = BrokerMetrics()
    m.detailed = True
    started = time.perf_counter() - 0.010
    timing = m.on_response(_ctx(0, 9), 0, 9, ProduceRequest(acks=1), _produce_response({0: 0}), started, 0.004)
    m.response_sent(timing)
    stats = m.apis["Produce"]
    assert stats.versions == {9: 1} and stats.error_codes == {0: 1}
    assert 3.9 <= stats.local.samples[0] <= 4.1 and stats.remote.samples[0] >= 5.5
    assert stats.total.samples[0] >= 10 and stats.send.count == 1
    # acks=0: no response, timed at once
    assert m.on_response(_ctx(0, 9), 0, 9, ProduceRequest(acks=0), None, time.perf_counter(), 0.001) is None
    assert stats.total.count == 2


# -- the collector over an in-process broker ------------------------------------------------------
def test_collector_reads_logs_groups_and_counters(tmp_path):
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from kafkapy.groupcoord.group import OffsetAndMetadata
    from kafkapy.metrics.collectors import METRIC_SOURCES, BrokerCollector

    node = InProcessBroker(tmp_path, **{"group.initial.rebalance.delay.ms": 0})
    try:
        broker = node.broker
        node.create_topic("orders", 2)
        batch = build_batch([(b"k", b"v%d" % i) for i in range(7)])
        response = node.call(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="orders", partition_data=[ProduceRequest.PartitionProduceData(index=1, records=batch)])]), 9)
        assert response.responses[0].partition_responses[0].error_code == 0
        group = broker.group_coordinator.manager.get_or_create_group("g", True)
        group.offsets[("orders", 1)] = OffsetAndMetadata(3)
        broker.metrics.produced("deleted-topic", 1, 10)  # counters of a topic that no longer exists go
        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(broker, broker.metrics))
        samples = {}
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for s in family.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        assert samples[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "orders"),))] == 7
        assert samples[("kafka_log_log_logendoffset", (("partition", "1"), ("topic", "orders")))] == 7
        assert samples[("kafka_consumergroup_lag", (("consumergroup", "g"), ("partition", "1"), ("topic", "orders")))] == 4
        assert samples[("kafka_consumergroup_lag_sum", (("consumergroup", "g"), ("topic", "orders")))] == 4
        assert samples[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
        assert "deleted-topic" not in broker.metrics.topics
        assert samples[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 8  # the total keeps it
        # every family emitted is documented (docs/operations.md is written from METRIC_SOURCES)
        emitted = {name for name, _ in samples}
        documented = set(METRIC_SOURCES) | {n + suffix for n in METRIC_SOURCES for suffix in ("_count", "_sum")}
        assert emitted <= documented, sorted(emitted - documented)
    finally:
        node.close()


def test_fetch_positions_by_topic_id_are_named_at_scrape_time(tmp_path):
    from kafkapy.metrics.collectors import BrokerCollector

    node = InProcessBroker(tmp_path)
    try:
        broker = node.broker
        broker.metrics.detailed = True
        meta = node.create_topic("clicks", 2)
        topic_id = (meta or broker.partitions.topic("clicks")).topic_id
        request = FetchRequest(replica_id=-1, session_epoch=-1, topics=[FetchRequest.FetchTopic(
            topic_id=topic_id, partitions=[FetchRequest.FetchPartition(partition=1, fetch_offset=0)])])
        broker.metrics.on_response(_ctx(1, 13, "spark-exec"), 1, 13, request, None, time.perf_counter(), None)
        state = BrokerCollector(broker, broker.metrics).read()
        assert state.fetches == [("spark-exec", "10.0.0.7", "clicks", 1, 0, 0)]
    finally:
        node.close()


def test_share_groups_on_metrics(tmp_path):
    from kafkapy.groupcoord.share.partition import ACCEPT, AckBatch
    from kafkapy.metrics.collectors import BrokerCollector

    node = InProcessBroker(tmp_path)
    try:
        broker = node.broker
        node.create_topic("jobs", 1)
        batch = build_batch([(b"k", b"v%d" % i) for i in range(10)])
        response = node.call(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="jobs", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9)
        assert response.responses[0].partition_responses[0].error_code == 0
        assert broker.loaded_share_groups is None
        assert not any(key[0].startswith("kafkapy_sharegroup") for key, _ in _scrape(broker, BrokerCollector))
        share = broker.share_groups
        share.heartbeat("sg", "m1", 0, None, ["jobs"], "c", "/h", 0.0)
        assert share.alter_group_configs("sg", [("share.auto.offset.reset", 0, "earliest")], False)[0] == 0
        sp = share.share_partition("sg", "jobs", 0, 0, 10)
        assert sp.acquire([(0, 9, True)], "m1", 100, 30.0, 0.0) == [(0, 9, 1)]
        assert sp.acknowledge("m1", [AckBatch(0, 3, [ACCEPT]), AckBatch(6, 6, [ACCEPT])], 30.0, 0.0) == 0
        samples = dict(_scrape(broker, BrokerCollector))
        labels = (("partition", "0"), ("sharegroup", "sg"), ("topic", "jobs"))
        assert samples[("kafkapy_sharegroup_members", (("sharegroup", "sg"),))] == 1
        assert samples[("kafkapy_sharegroup_partition_start_offset", labels)] == 4
        assert samples[("kafkapy_sharegroup_partition_lag", labels)] == 5    # 4-9 less the accepted 6
        assert samples[("kafkapy_sharegroup_partition_records", labels[:2] + (("state", "acquired"),)
                        + labels[2:])] == 5
    finally:
        node.close()


def _scrape(broker, collector_cls):
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector_cls(broker, broker.metrics))
    text = generate_latest(registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield (sample.name, tuple(sorted(sample.labels.items()))), sample.value
