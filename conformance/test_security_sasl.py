"""SASL against a real broker process: real clients, and bad input over raw sockets.

One broker, listeners:
- PLAINTEXT (admin: creates the SCRAM users through AlterUserScramCredentials),
- SASL_PLAINTEXT with PLAIN (JAAS `user_<name>` entries), SCRAM-SHA-256/512 and OAUTHBEARER (unsecured JWS),
- SHORT, SASL_PLAINTEXT with PLAIN and a 1.5 s session lifetime (KIP-368),
- SASL_SSL with the same mechanisms, when TLS is available (conformance/tls_certs.py).

confluent-kafka, kafka-python and aiokafka produce and consume with PLAIN and both SCRAM mechanisms;
confluent-kafka and kafka-python with OAUTHBEARER; kcat over SASL_SSL; a wrong password fails with an
authentication error. The raw-socket tests send what a broken or hostile client would and check the
error code or the closed connection, one log line, other connections unaffected, and that no
password or token reaches the broker log.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import uuid

import pytest

from conformance.aiokafka_round_trip import aiokafka_round_trip  # noqa: E402
from conformance.broker_process import free_port, start_broker
from conformance.kafka_wire import frame, kbytes, kstring, request_header_v1

pytestmark = pytest.mark.timeout(240)

ALICE_PW = "alice-Pw-7c1e2f"          # PLAIN user
SCRAM_PW = "scram-Pw-90ab44"          # SCRAM users sam256 / sam512
WRONG_PW = "wrong-Pw-55d0c1"
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="alice" password="{ALICE_PW}" user_alice="{ALICE_PW}";')
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
COUNT = 50
SECRETS = (ALICE_PW, SCRAM_PW, WRONG_PW)


def _tls_available() -> bool:
    try:
        import conformance.tls_certs  # noqa: F401
        from kafkapy.security import tls  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    if not _tls_available():
        return None
    from conformance.tls_certs import make_certs

    return make_certs(tmp_path_factory.mktemp("sasl-certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs):
    ports = {name: free_port() for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SHORT", "SASL_SSL")}
    names = ["PLAINTEXT", "SASL_PLAINTEXT", "SHORT"] + (["SASL_SSL"] if certs else [])
    listeners = ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in names)
    settings = {
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SHORT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": MECHANISMS,
        "sasl.jaas.config": JAAS,
        "listener.name.short.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.short.plain.connections.max.reauth.ms": "1500",
    }
    if certs:
        settings.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
                         "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem)})
    b = start_broker(settings, work_dir=tmp_path_factory.mktemp("sasl-broker"), port=ports["PLAINTEXT"])
    b.ports = ports
    try:
        _create_scram_users(b)
        yield b
    finally:
        b.close()


def _create_scram_users(b) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{b.ports['PLAINTEXT']}"})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("sam256", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     SCRAM_PW.encode()),
        UserScramCredentialUpsertion("sam512", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                     SCRAM_PW.encode())])
    for future in futures.values():
        future.result(30)
    described = {u: f.result(30) for u, f in admin.describe_user_scram_credentials(["sam256", "sam512"]).items()}
    assert {u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos] for u, d in described.items()} == {
        "sam256": [(ScramMechanism.SCRAM_SHA_256, 4096)], "sam512": [(ScramMechanism.SCRAM_SHA_512, 8192)]}


CREDENTIALS = {"PLAIN": ("alice", ALICE_PW), "SCRAM-SHA-256": ("sam256", SCRAM_PW),
               "SCRAM-SHA-512": ("sam512", SCRAM_PW)}


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _values(topic: str) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in range(COUNT)]


# -- confluent-kafka -------------------------------------------------------------------------------

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
            got.extend(m.value() for m in consumer.consume(100, 1.0) if not m.error())
    finally:
        consumer.close()
    return got


def _rdkafka_conf(broker, certs, mechanism: str, listener: str = "SASL_PLAINTEXT") -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}",
            "security.protocol": "SASL_SSL" if listener == "SASL_SSL" else "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=carol"})
    else:
        user, password = CREDENTIALS[mechanism]
        conf.update({"sasl.username": user, "sasl.password": password})
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(certs.ca_pem)
    return conf


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_confluent_kafka(broker, certs, mechanism):
    topic = _topic(f"sasl-rdkafka-{mechanism.lower()}")
    assert _rdkafka_round_trip(_rdkafka_conf(broker, certs, mechanism), topic) == _values(topic)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_confluent_kafka_over_sasl_ssl(broker, certs, mechanism):
    if certs is None:
        pytest.skip("TLS not available")
    topic = _topic(f"sasl-ssl-rdkafka-{mechanism.lower()}")
    assert _rdkafka_round_trip(_rdkafka_conf(broker, certs, mechanism, "SASL_SSL"), topic) == _values(topic)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_confluent_kafka_wrong_password_is_an_authentication_error(broker, certs, mechanism):
    from confluent_kafka import KafkaError, Producer

    errors = []
    conf = {**_rdkafka_conf(broker, certs, mechanism), "sasl.password": WRONG_PW,
            "error_cb": lambda err: errors.append(err)}
    producer = Producer(conf)
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert all(WRONG_PW not in e.str() for e in errors)


def test_confluent_kafka_reauthenticates_within_the_session_lifetime(broker, certs):
    """SHORT's sessions last 1.5 s; librdkafka re-authenticates (KIP-368) and keeps producing."""
    from confluent_kafka import Producer

    topic = _topic("sasl-reauth")
    log_start = len(broker.log_path.read_text(errors="replace"))
    conf = {**_rdkafka_conf(broker, certs, "PLAIN", "SHORT"), "acks": "all"}
    producer = Producer(conf)
    delivered, failed = [], []
    end = time.monotonic() + 6
    i = 0
    while time.monotonic() < end:
        producer.produce(topic, value=b"%d" % i,
                         on_delivery=lambda err, msg: (failed if err else delivered).append(err or msg))
        i += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0
    assert not failed and len(delivered) == i
    assert not [line for line in _new_log_lines(broker, log_start) if "expired without re-authentication" in line]


# -- kafka-python -----------------------------------------------------------------------------------

try:  # kafka-python 3.x, then 2.x
    from kafka.net.sasl.oauth import AbstractTokenProvider as _TokenProviderBase
except ImportError:
    try:
        from kafka.sasl.oauth import AbstractTokenProvider as _TokenProviderBase
    except ImportError:
        _TokenProviderBase = object


class _KafkaPythonTokenProvider(_TokenProviderBase):
    """kafka-python's token provider interface: token() -> an unsecured JWS for `carol`."""

    def token(self) -> str:
        return _unsecured_jws({"sub": "carol", "exp": time.time() + 3600, "iat": time.time()})

    def extensions(self) -> dict:
        return {}


def _kafka_python_conf(broker, certs, mechanism: str, listener: str = "SASL_PLAINTEXT") -> dict:
    conf = {"bootstrap_servers": f"127.0.0.1:{broker.ports[listener]}", "security_protocol": listener,
            "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        conf["sasl_oauth_token_provider"] = _KafkaPythonTokenProvider()
    else:
        user, password = CREDENTIALS[mechanism]
        conf.update({"sasl_plain_username": user, "sasl_plain_password": password})
    if listener == "SASL_SSL":
        conf["ssl_cafile"] = str(certs.ca_pem)
    return conf


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_kafka_python(broker, certs, mechanism):
    from kafka import KafkaConsumer, KafkaProducer

    conf = _kafka_python_conf(broker, certs, mechanism)
    topic = _topic(f"sasl-kafka-python-{mechanism.lower()}")
    producer = KafkaProducer(acks="all", **conf)
    for value in _values(topic):
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             **conf)
    got = [m.value for _, m in zip(range(COUNT), consumer)]
    consumer.close()
    assert got == _values(topic)


def test_kafka_python_over_sasl_ssl(broker, certs):
    if certs is None:
        pytest.skip("TLS not available")
    from kafka import KafkaProducer

    producer = KafkaProducer(acks="all", **_kafka_python_conf(broker, certs, "SCRAM-SHA-256", "SASL_SSL"))
    producer.send(_topic("sasl-ssl-kafka-python"), b"x").get(30)
    producer.close()


def test_kafka_python_wrong_password(broker, certs, caplog):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    conf = {**_kafka_python_conf(broker, certs, "SCRAM-SHA-512"), "sasl_plain_password": WRONG_PW}
    with pytest.raises(KafkaError) as info:
        KafkaProducer(max_block_ms=5000, **conf).send(_topic("never"), b"x").get(10)
    print(f"kafka-python with a wrong password: {info.value!r}")
    # kafka-python retries the bootstrap until it times out; each attempt logs the broker's error
    assert "Authentication failed during authentication due to invalid credentials" in caplog.text


# -- aiokafka ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_aiokafka(broker, mechanism):
    pytest.importorskip("aiokafka")
    user, password = CREDENTIALS[mechanism]
    topic = _topic(f"sasl-aiokafka-{mechanism.lower()}")
    common = {"bootstrap_servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
              "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
              "sasl_plain_username": user, "sasl_plain_password": password}

    assert aiokafka_round_trip(topic, _values(topic), **common) == _values(topic)


# -- kcat over SASL_SSL -----------------------------------------------------------------------------

def test_kcat_over_sasl_ssl(broker, certs):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None or certs is None:
        pytest.skip("kcat or TLS not available")
    topic = _topic("sasl-kcat")
    # PLAIN: Debian's kcat links librdkafka 2.0.2, whose SCRAM client-final repeats the client nonce
    # before the server's; kafkapy, like Kafka since CVE-2024-56128 (3.7.2, 3.8.1, 3.9.0), requires
    # the nonce to equal the server's, so SCRAM needs a newer librdkafka (2.16, confluent-kafka's, works)
    conf = ["-b", f"127.0.0.1:{broker.ports['SASL_SSL']}", "-X", "security.protocol=SASL_SSL",
            "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", f"sasl.password={ALICE_PW}",
            "-X", f"ssl.ca.location={certs.ca_pem}"]
    lines = [f"line-{i}" for i in range(20)]
    subprocess.run([kcat, *conf, "-P", "-t", topic], input="\n".join(lines).encode(), check=True, timeout=60)
    out = subprocess.run([kcat, *conf, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], capture_output=True,
                         check=True, timeout=60).stdout.decode().split()
    assert out == lines


# -- DescribeConfigs --------------------------------------------------------------------------------

def test_jaas_configs_are_sensitive_in_describe_configs(broker):
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['PLAINTEXT']}"})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(30)
    jaas = entries["sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert all(ALICE_PW not in str(e.value) for e in entries.values())


# -- raw sockets: bad input -------------------------------------------------------------------------

class Raw:
    """One raw client connection speaking just enough of the protocol."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: bytes) -> None:
        self.correlation += 1
        self.sock.sendall(frame(request_header_v1(api_key, version, self.correlation) + body))

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def receive(self) -> bytes | None:
        """The next frame's payload, None when the broker closed the connection."""
        size = self._exactly(4)
        if size is None:
            return None
        return self._exactly(struct.unpack(">i", size)[0])

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            data += chunk
        return data

    def closed_by_broker(self) -> bool:
        return self.receive() is None

    def handshake(self, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
        self.send(17, version, kstring(mechanism))
        payload = self.receive()
        assert payload is not None
        (error,) = struct.unpack_from(">h", payload, 4)
        (count,) = struct.unpack_from(">i", payload, 6)
        pos, names = 10, []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", payload, pos)
            names.append(payload[pos + 2: pos + 2 + length].decode())
            pos += 2 + length
        return error, names

    def authenticate(self, token: bytes, version: int = 1) -> tuple[int, str | None, bytes, int] | None:
        self.send(36, version, kbytes(token))
        payload = self.receive()
        if payload is None:
            return None
        (error,) = struct.unpack_from(">h", payload, 4)
        (length,) = struct.unpack_from(">h", payload, 6)
        message = None if length < 0 else payload[8:8 + length].decode()
        pos = 8 + max(length, 0)
        (size,) = struct.unpack_from(">i", payload, pos)
        auth = payload[pos + 4: pos + 4 + size]
        lifetime = struct.unpack_from(">q", payload, pos + 4 + size)[0] if version >= 1 else 0
        return error, message, auth, lifetime

    def metadata_works(self) -> bool:
        self.send(3, 1, struct.pack(">i", 0))  # Metadata v1, no topics
        return self.receive() is not None


def _plain(user: str, password: str) -> bytes:
    return f"\x00{user}\x00{password}".encode()


class _Scram:
    """A SCRAM-SHA-256 client written from RFC 5802, independent of kafkapy."""

    def __init__(self, user: str, password: str):
        self.user, self.password = user, password
        self.nonce = base64.b64encode(os.urandom(12)).decode()

    def first(self) -> bytes:
        self.bare = f"n={self.user},r={self.nonce}"
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(p.split("=", 1) for p in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(), base64.b64decode(fields["s"]),
                                     int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def _unsecured_jws(claims: dict) -> str:
    def enc(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{enc({'alg': 'none'})}.{enc(claims)}."


def _new_log_lines(broker, since: int) -> list[str]:
    return broker.log_path.read_text(errors="replace")[since:].splitlines()


@pytest.fixture
def raw(broker):
    """Connect to the SASL_PLAINTEXT port; after the test, a fresh connection still authenticates."""
    opened: list[Raw] = []

    def connect(listener: str = "SASL_PLAINTEXT") -> Raw:
        conn = Raw(broker.ports[listener])
        opened.append(conn)
        return conn

    bystander = connect()  # authenticated before the bad input, must keep working after it
    assert bystander.handshake("PLAIN") == (0, MECHANISMS.split(","))
    assert bystander.authenticate(_plain("alice", ALICE_PW))[0] == 0
    connect.log_start = len(broker.log_path.read_text(errors="replace"))
    yield connect
    assert bystander.metadata_works()
    fresh = Raw(broker.ports["SASL_PLAINTEXT"])
    assert fresh.handshake("PLAIN")[0] == 0 and fresh.authenticate(_plain("alice", ALICE_PW))[0] == 0
    assert fresh.metadata_works()
    fresh.close()
    for conn in opened:
        conn.close()
    # the broker's own lines (the harness writes the command line, with its --override values, first)
    lines = [line for line in broker.log_path.read_text(errors="replace").splitlines()
             if not line.startswith("===== start")]
    for secret in SECRETS:
        assert not [line for line in lines if secret in line]


def _closing_lines(broker, since: int) -> list[str]:
    time.sleep(0.2)
    return [line for line in _new_log_lines(broker, since) if "closing connection" in line
            or "authentication failed" in line]


def test_request_before_authentication_closes(broker, raw):
    conn = raw()
    conn.send(3, 1, struct.pack(">i", 0))
    assert conn.closed_by_broker()
    assert len(_closing_lines(broker, raw.log_start)) == 1


def test_api_versions_is_allowed_before_authentication(broker, raw):
    conn = raw()
    conn.send(18, 0, b"")
    payload = conn.receive()
    assert payload is not None and struct.unpack_from(">h", payload, 4)[0] == 0


def test_sasl_authenticate_before_handshake_closes(broker, raw):
    conn = raw()
    assert conn.authenticate(_plain("alice", ALICE_PW)) is None
    assert len(_closing_lines(broker, raw.log_start)) == 1


def test_unknown_mechanism(broker, raw):
    conn = raw()
    assert conn.handshake("GSSAPI") == (33, MECHANISMS.split(","))  # UNSUPPORTED_SASL_MECHANISM
    assert conn.closed_by_broker()
    assert len(_closing_lines(broker, raw.log_start)) == 1


def test_wrong_password(broker, raw):
    conn = raw()
    assert conn.handshake("PLAIN")[0] == 0
    error, message, _, _ = conn.authenticate(_plain("alice", WRONG_PW))
    assert error == 58 and message == ("Authentication failed during authentication due to invalid credentials "
                                       "with SASL mechanism PLAIN")
    assert conn.closed_by_broker()
    assert len(_closing_lines(broker, raw.log_start)) == 1


def test_scram_replayed_and_truncated_messages(broker, raw):
    client = _Scram("sam256", SCRAM_PW)
    first = raw()
    assert first.handshake("SCRAM-SHA-256")[0] == 0
    error, _, server_first, _ = first.authenticate(client.first())
    assert error == 0
    final = client.final(server_first)
    error, _, server_final, _ = first.authenticate(final)
    assert error == 0 and server_final.startswith(b"v=")
    # the same client-final on a new exchange: the server nonce differs
    replay = raw()
    replay.handshake("SCRAM-SHA-256")
    replay.authenticate(client.first())
    assert replay.authenticate(final)[0] == 58 and replay.closed_by_broker()
    truncated = raw()
    truncated.handshake("SCRAM-SHA-256")
    assert truncated.authenticate(client.first()[:7])[0] == 58 and truncated.closed_by_broker()
    assert len(_closing_lines(broker, raw.log_start)) == 2


def test_expired_oauthbearer_token(broker, raw):
    conn = raw()
    token = _unsecured_jws({"sub": "carol", "exp": time.time() - 3600})
    assert conn.handshake("OAUTHBEARER")[0] == 0
    error, _, challenge, _ = conn.authenticate(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    assert error == 0 and challenge == b'{"status":"invalid_token"}'
    assert conn.authenticate(b"\x01")[0] == 58
    assert conn.closed_by_broker()
    assert token not in broker.log_path.read_text(errors="replace")


def test_oversized_token_closes(broker, raw):
    conn = raw()
    assert conn.handshake("PLAIN")[0] == 0
    conn.send(36, 1, kbytes(b"\x00alice\x00" + b"x" * 600_000))
    assert conn.closed_by_broker()
    assert any("sasl.server.max.receive.size" in line for line in _closing_lines(broker, raw.log_start))


def test_garbage_raw_v0_token_closes(broker, raw):
    conn = raw()
    assert conn.handshake("SCRAM-SHA-256", version=0)[0] == 0
    conn.send_raw(b"\x00\x11\x00\x01garbage\xff\xfe")
    assert conn.closed_by_broker()
    assert len(_closing_lines(broker, raw.log_start)) == 1


def test_raw_v0_scram_flow_authenticates(broker, raw):
    conn = raw()
    client = _Scram("sam256", SCRAM_PW)
    assert conn.handshake("SCRAM-SHA-256", version=0)[0] == 0
    conn.send_raw(client.first())
    server_first = conn.receive()
    conn.send_raw(client.final(server_first))
    assert conn.receive().startswith(b"v=")
    assert conn.metadata_works()


def test_second_handshake_from_a_v0_client_is_illegal(broker, raw):
    conn = raw()
    conn.handshake("PLAIN")
    assert conn.authenticate(_plain("alice", ALICE_PW), version=0)[0] == 0
    assert conn.handshake("PLAIN")[0] == 34  # ILLEGAL_SASL_STATE
    assert conn.metadata_works()


def test_session_lifetime_closes_a_client_that_does_not_reauthenticate(broker, raw):
    conn = raw("SHORT")
    conn.handshake("PLAIN")
    error, _, _, lifetime = conn.authenticate(_plain("alice", ALICE_PW))
    assert error == 0 and lifetime == 1500
    assert conn.metadata_works()
    time.sleep(1.7)
    conn.send(3, 1, struct.pack(">i", 0))
    assert conn.closed_by_broker()
    assert any("expired without re-authentication" in line for line in _closing_lines(broker, raw.log_start))


def test_reauthentication_on_the_same_connection(broker, raw):
    conn = raw("SHORT")
    conn.handshake("PLAIN")
    assert conn.authenticate(_plain("alice", ALICE_PW))[0] == 0
    time.sleep(1.7)
    assert conn.handshake("PLAIN")[0] == 0
    assert conn.authenticate(_plain("alice", ALICE_PW))[0] == 0
    assert conn.metadata_works()


# -- cluster mode: SCRAM credentials in ZooKeeper ---------------------------------------------------

def test_cluster_scram_credentials_in_zookeeper(tmp_path):
    """Two brokers with a SASL_PLAINTEXT listener each: AlterUserScramCredentials answers NOT_CONTROLLER
    on the other broker, the controller writes /config/users/<user> as Kafka does (with a
    config_change_ notification), and both brokers authenticate the user, then refuse it once deleted."""
    from kazoo.client import KazooClient

    from conformance.cluster_harness import wait_until
    from kafkapy.devcluster.brokers import LocalCluster
    from kafkapy.devcluster.zookeeper import JavaZooKeeper
    from kafkapy.net.client import BrokerConnection, BrokerConnectionError, sasl_authenticate
    from kafkapy.protocol.messages import AlterUserScramCredentialsRequest as Alter
    from kafkapy.protocol.messages import DescribeUserScramCredentialsRequest as Describe
    from kafkapy.protocol.messages import MetadataRequest

    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available: {reason}")
    cluster = LocalCluster(tmp_path, brokers=2, overrides={"sasl.enabled.mechanisms": "SCRAM-SHA-256",
                                                           "inter.broker.listener.name": "PLAINTEXT"})
    sasl_ports = {}
    for broker_id, node in cluster.brokers.items():
        sasl_ports[broker_id] = free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{sasl_ports[broker_id]}"
        node.overrides.update({"listeners": listeners, "advertised.listeners": listeners})
    cluster.start()
    try:
        controller = cluster.controller_id()
        other = next(b for b in cluster.brokers if b != controller)
        salt = os.urandom(16)
        upsert = Alter.ScramCredentialUpsertion(name="zk-user", mechanism=1, iterations=4096, salt=salt,
                                                salted_password=hashlib.pbkdf2_hmac("sha256", SCRAM_PW.encode(),
                                                                                    salt, 4096))

        async def send(broker_id: int, request, version: int):
            conn = BrokerConnection("127.0.0.1", cluster.brokers[broker_id].port, request_timeout_s=10)
            try:
                return await conn.send(request, version)
            finally:
                conn.close()

        async def authenticates(broker_id: int) -> bool:
            def hook(reader, writer):
                return sasl_authenticate(reader, writer, mechanism="SCRAM-SHA-256", username="zk-user",
                                         password=SCRAM_PW)
            conn = BrokerConnection("127.0.0.1", sasl_ports[broker_id], authenticate=hook, request_timeout_s=10)
            try:
                await conn.send(MetadataRequest(topics=[]), 1)
                return True
            except BrokerConnectionError:
                return False
            finally:
                conn.close()

        refused = asyncio.run(send(other, Alter(deletions=[], upsertions=[upsert]), 0))
        assert [(r.user, r.error_code) for r in refused.results] == [("zk-user", 41)]  # NOT_CONTROLLER
        done = asyncio.run(send(controller, Alter(deletions=[], upsertions=[upsert]), 0))
        assert [(r.user, r.error_code) for r in done.results] == [("zk-user", 0)]
        zk = KazooClient(hosts=cluster.zookeeper_connect)
        zk.start(10)
        try:
            data, _ = zk.get("/config/users/zk-user")
            stored = json.loads(data)["config"]["SCRAM-SHA-256"]
            assert stored.startswith(f"salt={base64.b64encode(salt).decode()},stored_key=")
            assert stored.endswith(",iterations=4096")
            assert any(zk.get(f"/config/changes/{c}")[0] == b'{"version":2,"entity_path":"users/zk-user"}'
                       for c in zk.get_children("/config/changes"))
        finally:
            zk.stop()
        for broker_id in cluster.brokers:
            wait_until(lambda: asyncio.run(authenticates(broker_id)), 20, message=f"broker {broker_id} knows zk-user")
        described = asyncio.run(send(other, Describe(users=[Describe.UserName(name="zk-user")]), 0))
        assert [(i.mechanism, i.iterations) for i in described.results[0].credential_infos] == [(1, 4096)]
        deleted = asyncio.run(send(controller, Alter(deletions=[Alter.ScramCredentialDeletion(
            name="zk-user", mechanism=1)], upsertions=[]), 0))
        assert deleted.results[0].error_code == 0
        for broker_id in cluster.brokers:
            wait_until(lambda: not asyncio.run(authenticates(broker_id)), 20,
                       message=f"broker {broker_id} forgot zk-user")
    finally:
        cluster.stop()


def test_cluster_replicates_over_a_sasl_ssl_inter_broker_listener(tmp_path, certs):
    """Two brokers whose inter-broker listener is SASL_SSL with PLAIN: the controller's requests,
    replica fetches and AlterPartition authenticate as User:broker over TLS; clients use PLAINTEXT
    (the first listener), whose Metadata gives the PLAINTEXT endpoints."""
    if certs is None:
        pytest.skip("TLS support is not available")
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from conformance.cluster_harness import wait_for_isr, wait_until
    from kafkapy.devcluster.brokers import LocalCluster
    from kafkapy.devcluster.zookeeper import JavaZooKeeper

    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available, cluster tests cannot run: {reason}")
    broker_pw = "broker-Pw-31aa07"
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="broker" password="{broker_pw}" user_broker="{broker_pw}";')
    internal = {1: free_port(), 2: free_port()}
    cluster = LocalCluster(tmp_path, brokers=2, overrides={
        "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem)})
    for broker_id, node in cluster.brokers.items():
        listeners = f"PLAINTEXT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{internal[broker_id]}"
        node.overrides.update({"listeners": listeners, "advertised.listeners": listeners,
                               "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL"})
    try:
        cluster.start(90)
        topic = f"sasl-inter-broker-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_until(lambda: admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30) is None, 60,
                   ignore=(Exception,), message="topic created")
        wait_for_isr(cluster, topic, 2)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(COUNT):
            producer.produce(topic, value=f"{topic}-{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: list[bytes] = []
        try:
            wait_until(lambda: got.extend(m.value() for m in consumer.consume(100, 0.5) if not m.error())
                       or len(got) >= COUNT, 60, message="records consumed")
        finally:
            consumer.close()
        assert sorted(got) == sorted(f"{topic}-{i}".encode() for i in range(COUNT))
        for node in cluster.brokers.values():
            tail = node.log_tail(400)
            assert broker_pw not in tail
            assert "Authentication failed" not in tail and "SASL_AUTHENTICATION_FAILED" not in tail
    finally:
        cluster.stop()
