"""Fault injection and request recording on KafkaBroker, with real clients over real sockets:
confluent-kafka's idempotent producer through NOT_LEADER_OR_FOLLOWER, a kafka-python consumer
through a disconnect, a Java producer against a Produce that is never answered, the requests a
confluent-kafka group consumer sends, rule matching and life (delay, count, probability, expiry,
removal, client id, topic), and the HTTP control endpoint (isolation="process" and
`kafkapy serve --ephemeral --control`). Everything listens on 127.0.0.1 and is stopped on failure.
"""
from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests.testing.children import stop_child

from kafkapy.net.client import BrokerConnection, BrokerConnectionError
from kafkapy.protocol.error_codes import ErrorCode
from kafkapy.protocol.messages import MetadataRequest
from kafkapy.testing import KafkaBroker

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(90)

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.fixture(scope="module")
def broker():
    with KafkaBroker(**{"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}) as b:
        yield b


@pytest.fixture(autouse=True)
def clean_faults(request):
    yield
    if "broker" in request.fixturenames:
        b = request.getfixturevalue("broker")
        b.clear_rules()
        b.set_latency(0)


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def metadata(broker: KafkaBroker, topics: list[str] | None = None, client_id: str = "raw",
             timeout: float = 10.0) -> tuple[float, list[tuple[str, int]]]:
    """One Metadata v9 request over a fresh connection: (seconds it took, [(topic, error code)])."""
    request = MetadataRequest(topics=None if topics is None else [
        MetadataRequest.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False)

    async def send():
        connection = BrokerConnection("127.0.0.1", broker.port, client_id=client_id, request_timeout_s=timeout)
        try:
            start = time.monotonic()
            response = await connection.send(request, 9)
            return time.monotonic() - start, [(t.name, t.error_code) for t in response.topics]
        finally:
            connection.close()

    return asyncio.run(send())


def consume(bootstrap: str, topic: str, count: int, timeout: float = 20.0, **config) -> list:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name("g"),
                                         "auto.offset.reset": "earliest", **config})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 0.2) if not m.error()]
    finally:
        consumer.close()
    return got


# -- with real clients ------------------------------------------------------------------------------
def test_idempotent_producer_retries_not_leader_and_delivers_exactly_once(broker):
    topic = topic_name("idem")
    broker.create_topic(topic)
    rule = broker.inject("Produce", error="NOT_LEADER_OR_FOLLOWER", count=2, topic=topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                                         "retry.backoff.ms": 50, "linger.ms": 0})
    reports = []
    producer.produce(topic, b"once", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(20) == 0
    assert reports == [None]
    assert rule.id not in [r.id for r in broker.rules()]          # both injected errors were used
    produces = broker.recorded("Produce")
    assert len(produces) >= 3 and all(r.client_id == "rdkafka" for r in produces)
    # the same idempotent batch each time (producer id, sequence 0), appended once
    assert consume(broker.bootstrap_servers, topic, 2, timeout=1.5) == [b"once"]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "wm"})
    try:
        assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10) == (0, 1)
    finally:
        consumer.close()


def test_injected_produce_error_appends_nothing(broker):
    topic = topic_name("noappend")
    broker.create_topic(topic)
    # not retriable, so that librdkafka reports it at once
    broker.inject("Produce", error="MESSAGE_TOO_LARGE", count=None, topic=topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                                         "enable.idempotence": False})
    errors = []
    producer.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE]
    broker.clear_rules()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "wm"})
    try:
        assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10) == (0, 0)
    finally:
        consumer.close()


def test_kafka_python_consumer_survives_an_injected_disconnect(broker):
    kafka = pytest.importorskip("kafka")
    topic = topic_name("disc")
    broker.create_topic(topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        producer.produce(topic, f"a{i}".encode())
    assert producer.flush(10) == 0
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=topic_name("kp"),
                                   auto_offset_reset="earliest", client_id="kp-consumer", request_timeout_ms=10000,
                                   reconnect_backoff_ms=50, fetch_max_wait_ms=100)
    got: list[bytes] = []

    def poll_until(n: int) -> None:
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)

    try:
        poll_until(1)
        assert got, "the consumer got nothing before the disconnect"
        rule = broker.inject("Fetch", disconnect=True, client_id="kp-consumer", count=1)
        for i in range(10):
            producer.produce(topic, f"b{i}".encode())
        assert producer.flush(10) == 0
        poll_until(20)
        assert rule.id not in [r.id for r in broker.rules()], "the disconnect did not happen"
        assert sorted(got) == sorted([f"a{i}".encode() for i in range(10)] + [f"b{i}".encode() for i in range(10)])
        fetch_peers = [r.peer for r in broker.recorded("Fetch") if r.client_id == "kp-consumer"]
        assert len(set(fetch_peers)) >= 2, "no new connection after the disconnect"
    finally:
        consumer.close()


def test_recorder_sees_every_api_a_group_consumer_sends(broker):
    topic = topic_name("rec")
    broker.create_topic(topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic, b"r")
    assert producer.flush(10) == 0
    broker.clear_recorded()
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap_servers, "group.id": topic_name("grp"), "client.id": "rec-consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "heartbeat.interval.ms": 100,
        "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = [m for m in consumer.consume(1, 0.2) if not m.error()]
        assert got and got[0].value() == b"r"
        consumer.commit(asynchronous=False)
        time.sleep(0.4)   # a few heartbeats
    finally:
        consumer.close()
    sent = {r.api for r in broker.recorded() if r.client_id == "rec-consumer"}
    expected = {"ApiVersions", "Metadata", "FindCoordinator", "JoinGroup", "SyncGroup", "OffsetFetch", "ListOffsets",
                "Fetch", "Heartbeat", "OffsetCommit", "LeaveGroup"}
    assert expected <= sent, f"missing {expected - sent}"
    assert sent - expected <= {"GetTelemetrySubscriptions", "PushTelemetry", "DescribeCluster"}, sent
    join = broker.recorded("JoinGroup")[-1]
    assert join.body.protocol_type == "consumer" and join.version >= 0


# -- rules and their life, with kafkapy's own client ------------------------------------------------
def test_error_count_topic_and_client_id_matching(broker):
    broker.inject("Metadata", error="UNKNOWN_TOPIC_OR_PARTITION", count=2, topic="a", client_id="me")
    assert metadata(broker, ["b"], client_id="me")[1] == [("b", 3)]     # topic b: not matched (and unknown)
    assert metadata(broker, ["a"], client_id="other")[1] == [("a", 3)]  # unknown anyway: see the hit counter
    assert broker.rules()[0].hits == 0
    assert metadata(broker, ["a"], client_id="me")[1] == [("a", 3)]
    assert metadata(broker, ["a", "b"], client_id="me")[1] == [("a", 3), ("b", 3)]
    assert broker.rules() == []
    topic = topic_name("exists")
    broker.create_topic(topic)
    rule = broker.inject("Metadata", error="LEADER_NOT_AVAILABLE", count=None, topic=topic)
    assert metadata(broker, [topic])[1] == [(topic, ErrorCode.LEADER_NOT_AVAILABLE)]
    assert metadata(broker, [topic])[1] == [(topic, ErrorCode.LEADER_NOT_AVAILABLE)]
    assert rule.remove() and not rule.remove()
    assert metadata(broker, [topic])[1] == [(topic, 0)]


def test_delay_latency_probability_and_expiry(broker):
    topic = topic_name("life")
    broker.create_topic(topic)
    broker.inject("Metadata", delay_ms=300, client_id="slow")
    took, topics = metadata(broker, [topic], client_id="slow")
    assert took >= 0.29 and topics == [(topic, 0)]          # delayed, then answered for real
    assert metadata(broker, [topic], client_id="slow")[0] < 0.25
    broker.set_latency(200)
    assert metadata(broker, [topic])[0] >= 0.19
    broker.set_latency(0)
    assert metadata(broker, [topic])[0] < 0.15

    rule = broker.inject("Metadata", error="LEADER_NOT_AVAILABLE", probability=0.5, topic=topic)
    assert rule.count is None                                  # with a probability: until removed
    errors = sum(metadata(broker, [topic])[1][0][1] != 0 for _ in range(40))
    assert 5 <= errors <= 35
    assert broker.rules()[0].hits == errors
    rule.remove()

    broker.inject("Metadata", error="LEADER_NOT_AVAILABLE", count=None, topic=topic, expires_in_s=0.5)
    assert metadata(broker, [topic])[1][0][1] == ErrorCode.LEADER_NOT_AVAILABLE
    time.sleep(0.6)
    assert metadata(broker, [topic])[1] == [(topic, 0)]
    assert broker.rules() == []


def test_drop_and_disconnect_with_a_raw_client(broker):
    broker.inject("Metadata", drop=True)
    with pytest.raises(BrokerConnectionError, match="timed out"):
        metadata(broker, None, timeout=0.5)
    broker.inject("Metadata", disconnect=True)
    with pytest.raises(BrokerConnectionError):
        metadata(broker, None)
    assert metadata(broker, None)[1] is not None          # both used up: answered again
    with pytest.raises(ValueError, match="unknown Kafka error"):
        broker.inject("Produce", error="NO_SUCH_ERROR")


def test_java_producer_times_out_on_a_never_answered_produce(broker):
    java = pytest.importorskip("conformance.java.test_java_clients",
                               reason="!!! Java fault test NOT RUN: conformance/java is not importable")
    programs = _java_programs(java)
    topic = topic_name("java-drop")
    broker.create_topic(topic)
    broker.inject("Produce", drop=True, count=None, topic=topic)
    programs.run("FaultCheck", broker.bootstrap_servers, topic, timeout=java.PROGRAM_TIMEOUT_S)
    dropped = [r for r in broker.recorded("Produce") if r.client_id == "fault-check"]
    assert dropped, "the Java producer sent no Produce"
    broker.clear_rules()


def _java_programs(java):
    """conformance/java's compiled programs (skips loudly, as the Java conformance tests do, without Java)."""
    import shutil

    if not shutil.which("java") or not shutil.which("javac"):
        java._unavailable("java/javac not found on PATH (Debian: apt-get install -y default-jdk-headless)")
    classpath = java._fetch_classpath()
    return java.JavaPrograms(java=shutil.which("java"), classes_dir=java._compile(shutil.which("javac"), classpath),
                             classpath=classpath)


# -- the control endpoint ------------------------------------------------------------------------
def http(method: str, url: str, payload=None) -> tuple[int, dict]:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def drive_control_endpoint(control: str, bootstrap: str) -> None:
    """The HTTP API end to end: rules, latency, recorded requests (bodies with base64 bytes)."""
    topic = topic_name("ctl")
    status, body = http("POST", control + "/rules", {"api": "Produce", "error": "MESSAGE_TOO_LARGE",
                                                      "topic": topic, "count": 5})
    assert status == 201 and body["rule"]["error"] == "MESSAGE_TOO_LARGE" and body["rule"]["count"] == 5
    rule_id = body["rule"]["id"]
    assert [r["id"] for r in http("GET", control + "/rules")[1]["rules"]] == [rule_id]
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    errors = []
    producer.produce(topic, b"payload", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE]
    status, body = http("GET", control + "/recorded?api=Produce")
    assert status == 200 and body["bytes"] == "base64"
    [produce] = [r for r in body["requests"] if r["body"]["topic_data"][0]["name"] == topic]
    assert produce["api"] == "Produce" and produce["api_key"] == 0 and produce["client_id"] == "rdkafka"
    records = base64.b64decode(produce["body"]["topic_data"][0]["partition_data"][0]["records"])
    assert b"payload" in records
    assert http("GET", control + "/rules")[1]["rules"][0]["hits"] == 1
    assert http("DELETE", f"{control}/rules/{rule_id}") == (200, {"removed": 1})
    assert http("DELETE", f"{control}/rules/{rule_id}")[0] == 404
    assert http("PUT", control + "/latency", {"ms": 50}) == (200, {"ms": 50})
    assert http("GET", control + "/latency") == (200, {"ms": 50})
    assert http("PUT", control + "/latency", {"ms": 0}) == (200, {"ms": 0})
    assert http("POST", control + "/rules", {"api": "Nope", "error": 6})[0] == 400
    assert http("POST", control + "/rules", {"api": "Produce"})[0] == 400          # no action
    assert http("POST", control + "/rules", {"api": "Produce", "eror": 6})[0] == 400  # unknown field
    assert http("GET", control + "/nothing")[0] == 404
    assert http("DELETE", control + "/recorded") == (200, {"cleared": True})
    assert http("GET", control + "/recorded")[1]["requests"] == []


def test_process_isolation_uses_the_control_endpoint():
    with KafkaBroker(isolation="process") as broker:
        assert broker.control_url.startswith("http://127.0.0.1:")
        topic = topic_name("proc")
        broker.create_topic(topic)
        rule = broker.inject("Metadata", error="LEADER_NOT_AVAILABLE", topic=topic, count=None)
        assert [r.id for r in broker.rules()] == [rule.id]
        assert metadata(broker, [topic])[1] == [(topic, ErrorCode.LEADER_NOT_AVAILABLE)]
        assert rule.remove() and not rule.remove()
        assert metadata(broker, [topic])[1] == [(topic, 0)]
        recorded = broker.recorded("Metadata")
        assert recorded and recorded[-1].body["topics"] == [{"topic_id": "00000000-0000-0000-0000-000000000000",
                                                             "name": topic}]
        broker.set_latency(150)
        assert metadata(broker, [topic])[0] >= 0.14
        broker.set_latency(0)
        broker.clear_recorded()
        assert broker.recorded() == []
        drive_control_endpoint(broker.control_url, broker.bootstrap_servers)


def test_in_process_broker_with_the_control_listener_property():
    with KafkaBroker(**{"kafkapy.control.listener": "127.0.0.1:0"}) as broker:
        assert broker.control_url.startswith("http://127.0.0.1:")
        status, body = http("POST", broker.control_url + "/rules", {"api": "Metadata", "delay_ms": 10})
        assert status == 201
        assert [r.id for r in broker.rules()] == [body["rule"]["id"]]     # the same injector
        url = broker.control_url
    with pytest.raises(urllib.error.URLError):     # the endpoint went with the broker
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            http("GET", url + "/rules")
            time.sleep(0.1)


def test_serve_ephemeral_control_prints_both_lines_and_serves_the_api():
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy", "serve", "--ephemeral", "--control"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        lines: list[str] = []

        def read() -> None:
            for _ in range(2):
                lines.append(proc.stdout.readline().decode().strip())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(30)
        assert len(lines) == 2, lines
        assert lines[0].startswith("KAFKAPY_CONTROL=http://127.0.0.1:"), lines
        assert lines[1].startswith("KAFKAPY_BOOTSTRAP=127.0.0.1:"), lines
        control = lines[0].split("=", 1)[1]
        bootstrap = lines[1].split("=", 1)[1]
        drive_control_endpoint(control, bootstrap)
    finally:
        stop_child(proc, 15)


def test_storage_faults_in_process():
    """inject_storage_fault and log_dirs on an in-process broker (isolation="thread"; the process
    isolation goes through the control endpoint: conformance/test_log_dir_failures.py)."""
    with KafkaBroker(**{"kafkapy.log.dir.space.check.interval.ms": "200"}) as b:
        topic = topic_name("disk")
        b.create_topic(topic)
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap_servers, "message.timeout.ms": 1500,
                                             "retries": 0})
        with pytest.raises(ValueError):
            b.inject_storage_fault(log_dir="/not/a/log/dir")
        fault = b.inject_storage_fault(log_dir=b.data_dir, error="ENOSPC")
        assert b.storage_faults() == [fault] and fault["hits"] == 0
        errors = []
        producer.produce(topic, b"refused", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(10)
        assert errors and errors[0] is not None
        assert [d["status"] for d in b.log_dirs()] == ["full"]
        assert b.storage_faults()[0]["hits"] >= 1
        assert b.clear_storage_faults(fault["id"]) == 1 and b.storage_faults() == []
        deadline = time.monotonic() + 10
        while b.log_dirs()[0]["status"] != "online" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b.log_dirs()[0]["status"] == "online" and b.log_dirs()[0]["recoveries"] == 1
        delivered = []
        producer.produce(topic, b"taken", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
        assert delivered == [None]
