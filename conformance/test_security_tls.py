"""TLS listeners with real clients against one broker process with three listeners:

- PLAINTEXT (the harness's readiness port),
- SSL (ssl.client.auth=none: server-authenticated TLS),
- MTLS, an SSL listener with `listener.name.mtls.ssl.client.auth=required` and
  `ssl.principal.mapping.rules` that map OU=eng certificates only.

confluent-kafka, kafka-python and aiokafka produce and consume over SSL without a client certificate
and over MTLS with one; a client without a certificate is refused on MTLS, and one whose subject no
rule maps is closed with one INFO line naming the DN. Bad input on the SSL port (garbage, a plaintext
Kafka request, a handshake that stops half way) gets a closed connection and at most one log line,
while other connections keep working.
"""
from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid

import pytest

pytest.importorskip("cryptography")

from conformance.aiokafka_round_trip import aiokafka_round_trip  # noqa: E402
from conformance.broker_process import free_port, start_broker  # noqa: E402
from conformance.tls_certs import make_certs, tls_listener_overrides  # noqa: E402

pytestmark = pytest.mark.timeout(240)

RULES = "RULE:^CN=([^,]+),OU=eng,.*$/$1/L"  # no DEFAULT: other subjects fail authentication
COUNT = 200


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("tls-certs"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, certs):
    plain, ssl_port, mtls_port = free_port(), free_port(), free_port()
    broker = start_broker({
        **tls_listener_overrides(certs, plain, ssl_port, mtls_port),
        "listener.name.mtls.ssl.principal.mapping.rules": RULES,
    }, work_dir=tmp_path_factory.mktemp("tls-broker"), port=plain)
    broker.ssl_port, broker.mtls_port = ssl_port, mtls_port
    deadline = time.monotonic() + 10  # the port accepts before start-up has finished logging
    while "listening on" not in broker.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield broker
    finally:
        broker.close()


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _values(topic: str) -> list[bytes]:
    return [f"{topic}-{i}".encode() * 10 for i in range(COUNT)]


# -- confluent-kafka (librdkafka) ---------------------------------------------------------------------

def _rdkafka_conf(certs, port: int, client: str | None) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca_pem)}
    if client:
        files = certs.client(client)
        conf.update({"ssl.certificate.location": str(files.cert_pem), "ssl.key.location": str(files.key_pem)})
    return conf


def _rdkafka_round_trip(conf: dict, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    producer = Producer({**conf, "acks": "all", "linger.ms": 5})
    for value in _values(topic):
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < COUNT and time.monotonic() < deadline:
            got.extend(m.value() for m in consumer.consume(500, 1.0) if not m.error())
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("listener, client", [("ssl", None), ("mtls", "alice")])
def test_confluent_kafka_over_tls(tls_broker, certs, listener, client):
    pytest.importorskip("confluent_kafka")
    port = tls_broker.ssl_port if listener == "ssl" else tls_broker.mtls_port
    topic = _topic(f"tls-rdkafka-{listener}")
    assert _rdkafka_round_trip(_rdkafka_conf(certs, port, client), topic) == _values(topic)


def test_confluent_kafka_without_certificate_is_refused_on_mtls(tls_broker, certs):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**_rdkafka_conf(certs, tls_broker.mtls_port, None), "socket.timeout.ms": 3000})
    with pytest.raises(confluent_kafka.KafkaException):
        admin.list_topics(timeout=5)


def test_unmapped_subject_is_closed_with_one_line(tls_broker, certs):
    """bob's certificate is valid, but no ssl.principal.mapping.rules rule maps OU=ops."""
    before = tls_broker.log_path.read_text()
    context = ssl.create_default_context(cafile=str(certs.ca_pem))
    bob = certs.client("bob", org_unit="ops")
    context.load_cert_chain(str(bob.cert_pem), str(bob.key_pem))
    with socket.create_connection(("127.0.0.1", tls_broker.mtls_port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(_api_versions_request())
            try:
                data = tls.recv(4)
            except (ssl.SSLError, OSError):
                data = b""
            assert data == b""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        new = tls_broker.log_path.read_text()[len(before):]
        if "authentication failed" in new:
            break
        time.sleep(0.1)
    lines = [line for line in new.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "No rules apply to CN=bob,OU=ops,O=acme,C=US" in lines[0]


# -- kafka-python ------------------------------------------------------------------------------------

@pytest.mark.parametrize("listener, client", [("ssl", None), ("mtls", "alice")])
def test_kafka_python_over_tls(tls_broker, certs, listener, client):
    kafka = pytest.importorskip("kafka")
    port = tls_broker.ssl_port if listener == "ssl" else tls_broker.mtls_port
    conf = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SSL", "ssl_cafile": str(certs.ca_pem)}
    if client:
        files = certs.client(client)
        conf.update({"ssl_certfile": str(files.cert_pem), "ssl_keyfile": str(files.key_pem)})
    topic = _topic(f"tls-kafka-python-{listener}")
    producer = kafka.KafkaProducer(acks="all", **conf)
    for value in _values(topic):
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                                   consumer_timeout_ms=20000, **conf)
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == COUNT:
            break
    consumer.close()
    assert got == _values(topic)


# -- aiokafka ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("listener, client", [("ssl", None), ("mtls", "alice")])
def test_aiokafka_over_tls(tls_broker, certs, listener, client):
    pytest.importorskip("aiokafka")
    from aiokafka.helpers import create_ssl_context

    port = tls_broker.ssl_port if listener == "ssl" else tls_broker.mtls_port
    files = certs.client(client) if client else None
    context = create_ssl_context(cafile=str(certs.ca_pem), certfile=str(files.cert_pem) if files else None,
                                 keyfile=str(files.key_pem) if files else None)
    topic = _topic(f"tls-aiokafka-{listener}")

    common = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SSL", "ssl_context": context}
    assert aiokafka_round_trip(topic, _values(topic), **common) == _values(topic)


# -- bad input ---------------------------------------------------------------------------------------

def _api_versions_request() -> bytes:
    client_id = b"tls-test"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def _closed_by_broker(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _tls_api_versions_works(certs, port: int) -> bool:
    context = ssl.create_default_context(cafile=str(certs.ca_pem))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(_api_versions_request())
            size = struct.unpack(">i", tls.recv(4))[0]
            return size > 0


def test_bad_input_on_the_ssl_port(tls_broker, certs):
    before = len(tls_broker.log_path.read_text())
    port = tls_broker.ssl_port
    # a client that starts a TLS handshake and stops half way (a truncated ClientHello)
    incoming = ssl.MemoryBIO()
    outgoing = ssl.MemoryBIO()
    half = ssl.create_default_context(cafile=str(certs.ca_pem)).wrap_bio(incoming, outgoing,
                                                                          server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        half.do_handshake()
    hello = outgoing.read()
    stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
    stalled.sendall(hello[: len(hello) // 2])
    try:
        # garbage bytes
        with socket.create_connection(("127.0.0.1", port), timeout=10) as garbage:
            garbage.sendall(b"\x00\x01garbage" * 100)
            assert _closed_by_broker(garbage, 10)
        # a plaintext Kafka request (ApiVersions) sent to the SSL port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as plaintext:
            plaintext.sendall(_api_versions_request())
            assert _closed_by_broker(plaintext, 10)
        lines = _new_lines(tls_broker, before)
        assert len(lines) <= 2, lines  # at most one line per bad connection
        # other connections keep working, TLS and plaintext, while the stalled one waits
        assert _tls_api_versions_works(certs, port)
        with socket.create_connection(("127.0.0.1", tls_broker.port), timeout=10) as ok:
            ok.sendall(_api_versions_request())
            assert struct.unpack(">i", ok.recv(4))[0] > 0
        topic = _topic("tls-after-bad-input")
        pytest.importorskip("confluent_kafka")
        assert _rdkafka_round_trip(_rdkafka_conf(certs, port, None), topic) == _values(topic)
        # the stalled handshake is closed by the broker's handshake timeout (asyncio's 60 s)
        before = len(tls_broker.log_path.read_text())
        assert _closed_by_broker(stalled, 75)
        time.sleep(0.5)
        lines = _new_lines(tls_broker, before)
        assert len(lines) <= 1, lines
    finally:
        stalled.close()


def _new_lines(broker, since: int) -> list[str]:
    return [line for line in broker.log_path.read_text()[since:].splitlines() if line.strip()]


# -- cluster: brokers talk TLS (with client certificates) to each other -------------------------------

def test_cluster_replicates_over_an_ssl_inter_broker_listener(tmp_path, certs):
    """Two brokers whose inter-broker listener is SSL with ssl.client.auth=required: the controller's
    requests, replica fetches and AlterPartition all go over mTLS (BrokerConnection with the context of
    `inter_broker_ssl_context`); clients use PLAINTEXT. acks=all to an RF=2 topic needs both ISRs."""
    from conformance.cluster_harness import wait_for_isr, wait_until

    ssl_ports = {1: free_port(), 2: free_port()}
    # clients use a third listener: in cluster mode the first listener's Metadata answers with the
    # inter-broker listener's endpoints (Broker.brokers_for), which here are TLS
    client_ports = {1: free_port(), 2: free_port()}
    from kafkapy.devcluster.brokers import LocalCluster
    from kafkapy.devcluster.zookeeper import JavaZooKeeper

    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available, cluster tests cannot run: {reason}")
    cluster = LocalCluster(tmp_path, brokers=2, overrides={
        "inter.broker.listener.name": "SSL", "default.replication.factor": "2",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem),
        "ssl.client.auth": "required"})
    for broker_id, node in cluster.brokers.items():
        listeners = (f"PLAINTEXT://127.0.0.1:{node.port},SSL://127.0.0.1:{ssl_ports[broker_id]},"
                     f"CLIENT://127.0.0.1:{client_ports[broker_id]}")
        node.overrides.update({"listeners": listeners, "advertised.listeners": listeners,
                               "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CLIENT:PLAINTEXT"})
    try:
        cluster.start(90)
        topic = _topic("tls-inter-broker")
        from confluent_kafka.admin import AdminClient, NewTopic

        bootstrap = ",".join(f"127.0.0.1:{port}" for port in client_ports.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(lambda: admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30) is None, 60,
                   ignore=(Exception,), message="topic created")
        wait_for_isr(cluster, topic, 2)
        conf = {"bootstrap.servers": bootstrap}
        got = _rdkafka_round_trip(conf, topic)
        assert sorted(got) == sorted(_values(topic))
        for node in cluster.brokers.values():
            assert "cannot connect" not in node.log_tail(200)
    finally:
        cluster.stop()


def test_broker_refuses_to_start_with_a_bad_key_store(tmp_path, certs):
    """The listening sockets are bound before the logs load, so the port may accept briefly; the
    process then exits 1 with one line naming the key."""
    from conformance.broker_process import BrokerStartError

    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"not a key store\n")
    plain, ssl_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}"
    broker = None
    try:
        broker = start_broker({"listeners": listeners, "advertised.listeners": listeners, "ssl.keystore.type": "PEM",
                               "ssl.keystore.location": str(garbage)}, work_dir=tmp_path / "broker", port=plain,
                              timeout=15)
        output_of = lambda: broker.log_path.read_text()  # noqa: E731
        assert broker.proc.wait(15) == 1
    except BrokerStartError as exc:
        message = str(exc)
        output_of = lambda: message  # noqa: E731
    finally:
        if broker is not None:
            broker.close()
    lines = [line for line in output_of().splitlines() if "invalid configuration" in line]
    assert lines == [f"kafkapy: invalid configuration: Invalid value {garbage} for configuration "
                     "ssl.keystore.location: not a PEM file"], output_of()
