"""The Java cells of the client matrix: Matrix.java against pinned kafka-clients versions, 2.0 to 4.4.

Each cell is kafka-clients:VERSION plus slf4j-simple (the binding of the slf4j-api major that
client depends on; every kafka-clients up to 4.4 uses slf4j-api 1.7.x) from Maven Central through
conformance.maven, with WARN-level logging on stderr. Matrix.java is compiled once per (source
hash, javac, classpath) into the temp dir.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from conformance.matrix.cells import Cell, CellUnavailable
from conformance.maven import MavenUnavailable, classpath

__all__ = ["CELLS", "JAVA_VERSIONS", "JVM_OPTIONS", "expected_unsupported", "java_cell"]

SOURCE = Path(__file__).resolve().parent / "Matrix.java"
# Every kafka-clients release line the matrix pins (the newest patch of each), with the slf4j-simple
# binding matching that client's slf4j-api major (1.7.x for all of them: checked in the resolved poms).
JAVA_VERSIONS: dict[str, str] = {
    "2.0.1": "1.7.36",
    "2.8.2": "1.7.36",
    "3.3.2": "1.7.36",   # 3.3.2 and 3.8.1 bound issue 30 (3.3-3.8 died on kafkapy's first ApiVersions answer)
    "3.4.1": "1.7.36",
    "3.7.2": "1.7.36",
    "3.8.1": "1.7.36",
    "3.9.1": "1.7.36",
    "4.0.1": "1.7.36",
    "4.2.1": "1.7.36",
    "4.4.0": "1.7.36",
}
CLIENT = "kafka-clients (Java)"
# Fast JVM start for short programs (as conformance/java/test_java_clients.py): C1 only, serial GC.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xshare:auto",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err"]
# 16 scenarios of at most 20 s each, plus JVM start and client closes.
PROGRAM_TIMEOUT_S = 360.0


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3])


def expected_unsupported(version: str, scenario: str) -> str | None:
    """Why `scenario` is legitimately unsupported by kafka-clients `version`, or None if it must pass."""
    v = _version_tuple(version)
    if scenario == "produce_zstd" and v < (2, 1):
        return "zstd needs kafka-clients >= 2.1 (KIP-110)"
    if scenario == "group_consume_commit_kip848" and v < (4, 0):
        return "KIP-848 consumer GA in kafka-clients 4.0"
    if scenario in ("share_consume", "share_consume_explicit") and v < (4, 2):
        return "KafkaShareConsumer (KIP-932) GA in kafka-clients 4.2"
    return None


class _JavaCell:
    """Resolves and compiles on prepare(); command() then runs the compiled Matrix."""

    def __init__(self, version: str, slf4j: str) -> None:
        self.version = version
        self.artifacts = [f"org.apache.kafka:kafka-clients:{version}", f"org.slf4j:slf4j-simple:{slf4j}"]
        self.classpath: str | None = None
        self.classes_dir: Path | None = None
        self.java: str | None = None

    def prepare(self) -> None:
        if self.classes_dir is not None:
            return
        java, javac = shutil.which("java"), shutil.which("javac")
        if not java or not javac:
            raise CellUnavailable("java/javac not found on PATH (Debian: apt-get install -y default-jdk-headless)")
        try:
            cp = classpath(self.artifacts)
        except MavenUnavailable as exc:
            raise CellUnavailable(f"kafka-clients {self.version} not resolved from Maven: {exc}") from None
        self.classes_dir = _compile(javac, cp)
        self.classpath, self.java = cp, java

    def command(self, bootstrap: str, prefix: str) -> list[str]:
        if self.classes_dir is None:
            self.prepare()
        assert self.java is not None and self.classpath is not None
        return [self.java, *JVM_OPTIONS, "-cp", f"{self.classes_dir}{os.pathsep}{self.classpath}",
                "Matrix", bootstrap, prefix]


def _compile(javac: str, cp: str) -> Path:
    digest = hashlib.sha256()
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60)
    digest.update((version.stdout + version.stderr).encode())
    digest.update(cp.encode())
    digest.update(SOURCE.read_bytes())
    classes_dir = Path(tempfile.gettempdir()) / f"kafkapy-matrix-java-{digest.hexdigest()[:16]}"
    if (classes_dir / ".complete").is_file():
        return classes_dir
    staging = Path(tempfile.mkdtemp(prefix="kafkapy-matrix-java-build-"))
    try:
        done = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-d", str(staging), "-cp", cp, str(SOURCE)],
                              capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError("javac did not finish Matrix.java within 180 s") from None
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        # Not CellUnavailable: Matrix.java must compile against every pinned version.
        raise RuntimeError(f"javac failed on Matrix.java against {cp}:\n{done.stdout}\n{done.stderr}")
    (staging / ".complete").write_text("ok\n")
    try:
        staging.rename(classes_dir)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another process compiled the same thing first
    return classes_dir


def java_cell(version: str, slf4j: str = "1.7.36") -> Cell:
    """A cell for kafka-clients `version` (any release, pinned or not)."""
    impl = _JavaCell(version, slf4j)
    return Cell(client=CLIENT, version=version, command=impl.command, prepare=impl.prepare,
                timeout_s=PROGRAM_TIMEOUT_S)


CELLS: list[Cell] = [java_cell(v, s) for v, s in JAVA_VERSIONS.items()]
