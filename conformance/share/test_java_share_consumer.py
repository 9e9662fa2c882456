"""Kafka 4.x's Java KafkaShareConsumer against kafkapy, and the same program against real Kafka 4.4.0 (issue 31).

ShareScenarios.java (next to this file) runs the share-group scenarios (members joining and leaving
with records in flight, more members than partitions, implicit and explicit acknowledgement, RENEW,
the delivery count limit, close with records held, Admin describe and offsets), each printing one
JSON line of broker-independent observations. It is compiled against kafka-clients 4.2.1 and 4.4.0
from Maven Central (once per source hash, into the temp dir) and run:

- against kafkapy with both clients: every scenario must pass (stale_epoch is unsupported: the
  client API cannot produce a stale epoch; the wire tests cover it);
- the 4.4.0 client against a real Kafka 4.4.0 broker (single node, KRaft, conformance/real_kafka.py)
  with the same broker settings: status and observations must equal kafkapy's, except the
  differences known_differences.py lists; a kafkapy defect is a strict xfail (DEFECTS);
- Kafka 4.4's kafka-share-groups (ShareGroupCommand) against kafkapy: list, describe (offsets with
  START-OFFSET and LAG, members, state), reset-offsets --to-earliest, delete-offsets, delete; the
  expected text is what the same commands print against Kafka 4.4.0.

Both brokers run with a 5 s record lock (so a lock-expiry bound fits a test) and a 1 s share
heartbeat; Kafka needs its minimums lowered for that (kafkapy ignores those two keys with a warning).
Without java/javac or the Maven artifacts the tests skip loudly (fail under KAFKAPY_REQUIRE_JAVA=1).
About 2.5 minutes on the 2-core machine: two runs against kafkapy (~35 s each), one against Kafka
(~60 s, its share consumers join more slowly) and the tool batch (~15 s).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from conformance.share.known_differences import DEFECTS, KNOWN_DIFFERENCES

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "ShareScenarios.java"
REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
VERSIONS = ("4.2.1", "4.4.0")
SLF4J = "org.slf4j:slf4j-simple:1.7.36"
SCENARIOS = ("join_leave_in_flight", "more_members_than_partitions", "implicit_ack", "explicit_ack", "renew",
             "delivery_count_limit", "close_with_records_held", "describe_and_offsets", "stale_epoch")
UNSUPPORTED = {"stale_epoch"}
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xshare:auto",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err"]
# 8 scenarios of at most ~20 s each (about 35 s in all against kafkapy, 60 s against Kafka).
PROGRAM_TIMEOUT_S = 200.0
REFERENCE = "kafka-4.4.0-kraft"
# The same on kafkapy and on Kafka: a record lock short enough for a bounded test (the program's
# LOCK_MS), membership changes seen within a second. Kafka refuses a lock duration or heartbeat below
# its group.share.min.* settings, so those are lowered too.
BROKER_SETTINGS = {
    "group.share.record.lock.duration.ms": "5000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}

pytestmark = pytest.mark.timeout(420)


def _unavailable(reason: str) -> None:
    message = f"!!! Java share consumer conformance NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


class ShareProgram:
    """ShareScenarios compiled against one kafka-clients version."""

    def __init__(self, version: str) -> None:
        from conformance.maven import MavenUnavailable, classpath

        self.version = version
        self.java, javac = shutil.which("java"), shutil.which("javac")
        if not self.java or not javac:
            _unavailable("java/javac not found on PATH (Debian: apt-get install -y default-jdk-headless)")
        try:
            self.classpath = classpath([f"org.apache.kafka:kafka-clients:{version}", SLF4J])
        except MavenUnavailable as exc:
            _unavailable(f"kafka-clients {version} not resolved from Maven: {exc}")
        self.classes = _compile(javac, self.classpath)

    def run(self, bootstrap: str, *scenarios: str) -> dict[str, dict]:
        """scenario -> its JSON line; fails the test when the program dies or prints no line for one."""
        prefix = f"share-{self.version.replace('.', '')}-{uuid.uuid4().hex[:6]}"
        argv = [self.java, *JVM_OPTIONS, "-cp", f"{self.classes}{os.pathsep}{self.classpath}", "ShareScenarios",
                bootstrap, prefix, *scenarios]
        begin = time.monotonic()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=PROGRAM_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
            out, err, rc = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as expired:
            out, err, rc = _text(expired.stdout), _text(expired.stderr), None
        lines = {}
        for line in out.splitlines():
            if line.startswith("{"):
                result = json.loads(line)
                lines[result["scenario"]] = result
        print(f"kafka-clients {self.version} against {bootstrap}: {time.monotonic() - begin:.1f} s")
        missing = [s for s in (scenarios or SCENARIOS) if s not in lines]
        if rc != 0 or missing:
            pytest.fail(f"ShareScenarios ({self.version}) {'timed out' if rc is None else f'exited {rc}'}, "
                        f"no line for {missing}\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}", pytrace=False)
        return lines


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _compile(javac: str, cp: str) -> Path:
    digest = hashlib.sha256()
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60)
    digest.update((version.stdout + version.stderr + cp).encode())
    digest.update(SOURCE.read_bytes())
    classes = Path(tempfile.gettempdir()) / f"kafkapy-share-scenarios-{digest.hexdigest()[:16]}"
    if (classes / ".complete").is_file():
        return classes
    staging = Path(tempfile.mkdtemp(prefix="kafkapy-share-scenarios-build-"))
    done = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-d", str(staging), "-cp", cp, str(SOURCE)],
                          capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.fail(f"javac failed on {SOURCE.name} against {cp}:\n{done.stdout}\n{done.stderr}", pytrace=False)
    (staging / ".complete").write_text("ok\n")
    try:
        staging.rename(classes)
    except OSError:  # another session compiled the same source first
        shutil.rmtree(staging, ignore_errors=True)
    return classes


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return dict(BROKER_SETTINGS)


@pytest.fixture(scope="module")
def programs() -> dict[str, ShareProgram]:
    return {version: ShareProgram(version) for version in VERSIONS}


@pytest.fixture(scope="module")
def kafkapy_results(broker, programs) -> dict[str, dict[str, dict]]:
    """version -> scenario -> line, each client run once against the module's kafkapy."""
    return {version: program.run(broker.bootstrap) for version, program in programs.items()}


@pytest.fixture(scope="module")
def kafka_results(programs, tmp_path_factory) -> dict[str, dict]:
    """scenario -> line of the 4.4.0 client against a real Kafka 4.4.0 broker with the same settings."""
    from conformance.real_kafka import REFERENCES, RealKafka, RealKafkaUnavailable

    kafka = RealKafka(REFERENCES[REFERENCE], tmp_path_factory.mktemp("kafka-4.4"), BROKER_SETTINGS, authorizer=False)
    try:
        kafka.start()
    except RealKafkaUnavailable as exc:
        _unavailable(f"{REFERENCE}: {exc}")
    try:
        return programs["4.4.0"].run(kafka.bootstrap)
    finally:
        kafka.stop()


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("version", VERSIONS)
def test_share_consumer_against_kafkapy(kafkapy_results, version: str, scenario: str) -> None:
    """Every scenario passes with kafka-clients 4.2.1 and 4.4.0 against kafkapy."""
    line = kafkapy_results[version][scenario]
    expected = "unsupported" if scenario in UNSUPPORTED else "pass"
    assert line["status"] == expected, f"{scenario} ({version}): {line['status']}: {line['detail']}\n{line}"


def _differences(kafkapy: dict, kafka: dict, scenario: str) -> list[str]:
    found = []
    if kafkapy["status"] != kafka["status"]:
        found.append(f"status: kafkapy {kafkapy['status']} ({kafkapy['detail']}), Kafka {kafka['status']} "
                     f"({kafka['detail']})")
    for key in sorted(set(kafkapy["observed"]) | set(kafka["observed"])):
        if (scenario, key) in KNOWN_DIFFERENCES:
            continue
        ours, theirs = kafkapy["observed"].get(key, "<absent>"), kafka["observed"].get(key, "<absent>")
        if ours != theirs:
            found.append(f"{key}: kafkapy {ours!r}, Kafka {theirs!r}")
    return found


@pytest.mark.parametrize("scenario", [
    pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=DEFECTS[s])) if s in DEFECTS else s
    for s in SCENARIOS])
def test_same_as_kafka_4_4(kafkapy_results, kafka_results, scenario: str) -> None:
    """kafka-clients 4.4.0 observes the same on kafkapy as on Kafka 4.4.0, but for known_differences.py."""
    found = _differences(kafkapy_results["4.4.0"][scenario], kafka_results[scenario], scenario)
    assert not found, f"{scenario}: kafkapy differs from {REFERENCE}:\n" + "\n".join(found)


def test_known_differences_name_real_scenarios() -> None:
    assert {s for s, _ in KNOWN_DIFFERENCES} | set(DEFECTS) <= set(SCENARIOS)
    assert all(reason and "\n" not in reason for reason in [*KNOWN_DIFFERENCES.values(), *DEFECTS.values()])


def test_kafka_share_groups_tool(broker) -> None:
    """Kafka 4.4's kafka-share-groups: list, describe (offsets, members, state), reset, delete offsets, delete.

    The expected text is what the same commands print against Kafka 4.4.0 (settled by running them
    there), but START-OFFSET after consumption, which Kafka reports trailing (known_differences.py).
    """
    from conformance.kafka_apps.kafka_jars import KafkaDist

    dist = KafkaDist.get("4.4")
    b = ("--bootstrap-server", broker.bootstrap)
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-tool-{suffix}", f"share-tool-group-{suffix}"
    gone = f"share-tool-none-{suffix}"
    runs = dist.run_tools([
        ("topics", *b, "--create", "--topic", topic, "--partitions", "1"),
        ("configs", *b, "--alter", "--entity-type", "groups", "--entity-name", group,
         "--add-config", "share.auto.offset.reset=earliest"),
        ("producer-perf-test", "--topic", topic, "--num-records", "10", "--record-size", "10", "--throughput", "-1",
         "--producer-props", f"bootstrap.servers={broker.bootstrap}"),
        ("share-consumer-perf-test", *b, "--topic", topic, "--group", group, "--messages", "10", "--timeout", "30000"),
        ("share-groups", *b, "--list"),
        ("share-groups", *b, "--list", "--state", "Empty"),
        ("share-groups", *b, "--describe", "--group", group),
        ("share-groups", *b, "--describe", "--group", group, "--offsets", "--verbose"),
        ("share-groups", *b, "--describe", "--group", group, "--members"),
        ("share-groups", *b, "--describe", "--group", group, "--state"),
        ("share-groups", *b, "--reset-offsets", "--to-earliest", "--group", group, "--topic", topic, "--dry-run"),
        ("share-groups", *b, "--reset-offsets", "--to-earliest", "--group", group, "--topic", topic, "--execute"),
        ("share-groups", *b, "--describe", "--group", group, "--offsets"),
        ("share-groups", *b, "--delete-offsets", "--group", group, "--topic", topic),
        ("share-groups", *b, "--describe", "--group", group, "--offsets"),
        ("share-groups", *b, "--delete", "--group", group),
        ("share-groups", *b, "--list"),
        ("share-groups", *b, "--describe", "--group", group),
        ("share-groups", *b, "--delete", "--group", gone),
    ], timeout=180)
    (create, config, produce, consume, listed, listed_empty, described, described_verbose, members, state,
     dry_run, reset, after_reset, delete_offsets, after_delete_offsets, delete, listed_after, described_gone,
     delete_unknown) = runs
    for run in (create, config, produce, consume):
        run.check()
    for run in runs[4:]:
        assert run.rc == 0, run.describe()  # ShareGroupCommand prints its errors and exits 0, on Kafka too
    g, t = re.escape(group), re.escape(topic)

    def row(run, pattern: str) -> None:
        assert re.search(pattern, run.out, re.M), f"no line matching {pattern!r} in\n{run.describe()}"

    assert group in listed.out.split(), listed.describe()
    row(listed_empty, r"^GROUP\s+STATE\s*$")
    row(listed_empty, rf"^{g}\s+Empty\s*$")
    row(described, r"^GROUP\s+TOPIC\s+PARTITION\s+START-OFFSET\s+LAG\s*$")
    row(described, rf"^{g}\s+{t}\s+0\s+(0|10)\s+0\s*$")  # Kafka 4.4.0: START-OFFSET 0 (it trails), kafkapy 10
    row(described_verbose, r"^GROUP\s+TOPIC\s+PARTITION\s+LEADER-EPOCH\s+START-OFFSET\s+LAG\s*$")
    row(described_verbose, rf"^{g}\s+{t}\s+0\s+0\s+(0|10)\s+0\s*$")
    assert f"Share group '{group}' has no active members." in members.err, members.describe()
    row(state, r"^GROUP\s+COORDINATOR \(ID\)\s+STATE\s+#MEMBERS\s*$")
    row(state, rf"^{g}\s+{re.escape(broker.bootstrap)}\s+\(1\)\s+Empty\s+0\s*$")
    for run in (dry_run, reset):
        row(run, r"^GROUP\s+TOPIC\s+PARTITION\s+NEW-OFFSET\s*$")
        row(run, rf"^{g}\s+{t}\s+0\s+0\s*$")
    row(after_reset, rf"^{g}\s+{t}\s+0\s+0\s+10\s*$")
    row(delete_offsets, r"^TOPIC\s+STATUS\s*$")
    row(delete_offsets, rf"^{t}\s+Successful\s*$")
    assert f"Share group '{group}' has no offset information." in after_delete_offsets.out, \
        after_delete_offsets.describe()
    assert f"Deletion of requested share groups ('{group}') was successful." in delete.out, delete.describe()
    assert group not in listed_after.out.split(), listed_after.describe()
    assert f"GroupIdNotFoundException: Group {group} not found." in described_gone.out, described_gone.describe()
    assert (f"Group '{gone}' could not be deleted due to: org.apache.kafka.common.errors.GroupIdNotFoundException: "
            f"Group '{gone}' is not a share group.") in delete_unknown.out, delete_unknown.describe()
