"""Apache Kafka's own tools and apps (CLI tools, Streams, Connect, MirrorMaker 2) run from pinned jars.

Kafka's `bin/*.sh` scripts are `kafka-run-class.sh <main class> "$@"`; this module does the same with
the jars of one pinned release from Maven Central (conformance.maven, cached in ~/.m2):

    dist = KafkaDist.get("3.7")              # or "4.4"; skips loudly when Java/Maven are missing
    runs = dist.run_tools([("topics", "--bootstrap-server", b, "--list"), ...])
    runs[0].rc, runs[0].out, runs[0].err

`run_tools` runs a list of tool invocations in ONE JVM (java/ToolBatch.java: the tools' Exit.exit is
turned into an exception, their stdout/stderr captured per run), which costs one JVM start instead
of one per tool. `java_process(...)` starts a long-running Kafka app (Connect, MirrorMaker 2, a
Streams program compiled by `compile_java`) with the same small-JVM flags.

When java/javac/mvn or the artifacts cannot be had, `unavailable()` skips the test loudly, or fails
it under KAFKAPY_REQUIRE_JAVA=1 (as conformance/java does).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Sequence

import pytest

from conformance.maven import MavenUnavailable, classpath

__all__ = ["KafkaDist", "ToolRun", "JAVA_SOURCES", "JVM_OPTIONS", "compile_java", "stop_process", "unavailable"]

JAVA_SOURCES = Path(__file__).resolve().parent / "java"
REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
LOG_LEVEL_ENV = "KAFKAPY_KAFKA_APPS_LOG_LEVEL"  # e.g. INFO to see what a Connect/MM2/Streams run did
# Fast start for short programs: C1 only, serial GC, small heap (as conformance/java).
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xshare:auto"]
SLF4J_SIMPLE = "org.slf4j:slf4j-simple:1.7.36"
SLF4J_RELOAD4J = "org.slf4j:slf4j-reload4j:1.7.36"

# Tool name (the bin/kafka-<name>.sh script) -> main class, per release line. Read off the jars:
# 3.7 still has the Scala kafka.admin commands beside the ones already moved to kafka-tools.
TOOLS: dict[str, dict[str, str]] = {
    "3.7": {
        "topics": "org.apache.kafka.tools.TopicCommand",
        "configs": "kafka.admin.ConfigCommand",
        "consumer-groups": "kafka.admin.ConsumerGroupCommand",
        "acls": "kafka.admin.AclCommand",
        "features": "org.apache.kafka.tools.FeatureCommand",
        "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
        "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
        "reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    },
    "4.4": {
        "topics": "org.apache.kafka.tools.TopicCommand",
        "configs": "org.apache.kafka.tools.ConfigCommand",
        "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "acls": "org.apache.kafka.tools.AclCommand",
        "features": "org.apache.kafka.tools.FeatureCommand",
        "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
        "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
        "reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
        "share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        "share-consumer-perf-test": "org.apache.kafka.tools.ShareConsumerPerformance",
        # kafka-streams-groups.sh is `kafka-run-class.sh org.apache.kafka.tools.streams.StreamsGroupCommand`
        "streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    },
}
VERSIONS = {"3.7": "3.7.2", "4.4": "4.4.0"}

# reload4j (Kafka 3.x's logger): WARN and above on stderr, as bin/tools-log4j.properties does.
_LOG4J_PROPERTIES = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
"""


def unavailable(reason: str) -> None:
    """Skip loudly, or fail under KAFKAPY_REQUIRE_JAVA=1: the Kafka apps could not be run here."""
    message = f"!!! Kafka tools/apps conformance NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} not found on PATH (Debian: apt-get install -y default-jdk-headless maven)")
    return path


def _work_dir() -> Path:
    path = Path(tempfile.gettempdir()) / "kafkapy-kafka-apps"
    path.mkdir(parents=True, exist_ok=True)
    return path


def log_options(cp: str) -> list[str]:
    """JVM flags that make the logger on `cp` print WARN and above (or $KAFKAPY_KAFKA_APPS_LOG_LEVEL) to stderr."""
    level = os.environ.get(LOG_LEVEL_ENV, "WARN").upper()
    if "reload4j" in cp:
        config = _work_dir() / f"log4j-{level}.properties"
        if not config.exists():
            config.write_text(_LOG4J_PROPERTIES.replace("=WARN,", f"={level},"))
        return [f"-Dlog4j.configuration=file:{config}"]
    return [f"-Dorg.slf4j.simpleLogger.defaultLogLevel={level.lower()}", "-Dorg.slf4j.simpleLogger.logFile=System.err"]


def compile_java(source: str, cp: str) -> Path:
    """conformance/kafka_apps/java/<source> compiled against `cp`, once per (source, classpath, javac)."""
    javac = _tool("javac")
    path = JAVA_SOURCES / source
    digest = hashlib.sha256()
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60)
    digest.update((version.stdout + version.stderr + cp).encode())
    digest.update(path.read_bytes())
    classes = _work_dir() / f"{path.stem}-{digest.hexdigest()[:16]}"
    if (classes / ".complete").is_file():
        return classes
    staging = Path(tempfile.mkdtemp(prefix=f"{path.stem}-", dir=_work_dir()))
    result = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-d", str(staging), "-cp", cp, str(path)],
                            capture_output=True, text=True, timeout=180)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.fail(f"javac failed on {path}:\n{result.stdout}\n{result.stderr}", pytrace=False)
    (staging / ".complete").write_text("ok\n")
    try:
        staging.rename(classes)
    except OSError:  # another session compiled the same source first
        shutil.rmtree(staging, ignore_errors=True)
    return classes


@dataclass(slots=True)
class ToolRun:
    """One tool invocation's outcome: exit code and what it printed."""

    argv: tuple[str, ...]
    rc: int
    out: str
    err: str

    def describe(self) -> str:
        return (f"kafka-{self.argv[0]}.sh {' '.join(self.argv[1:])} exited {self.rc}\n"
                f"----- stdout -----\n{self.out[-4000:]}\n----- stderr -----\n{self.err[-4000:]}")

    def check(self) -> "ToolRun":
        """Fail the test (with the tool's output) unless the tool exited 0."""
        if self.rc != 0:
            pytest.fail(self.describe(), pytrace=False)
        return self


@dataclass
class KafkaDist:
    """One pinned Kafka release's tools, Streams, Connect and MirrorMaker 2 jars."""

    line: str                      # "3.7" or "4.4"
    version: str                   # the pinned release, e.g. "3.7.2"
    java: str
    _classpaths: dict[str, str] = field(default_factory=dict)
    _cache: ClassVar[dict[str, "KafkaDist"]] = {}

    @classmethod
    def get(cls, line: str) -> "KafkaDist":
        if line not in cls._cache:
            cls._cache[line] = cls(line=line, version=VERSIONS[line], java=_tool("java"))
        return cls._cache[line]

    def _classpath(self, what: str, coordinates: Sequence[str]) -> str:
        if what not in self._classpaths:
            _tool("mvn")
            try:
                self._classpaths[what] = classpath(coordinates)
            except MavenUnavailable as exc:
                unavailable(str(exc))
        return self._classpaths[what]

    def _logger(self) -> list[str]:
        # 3.x brings reload4j (tools, Connect) and wants its slf4j binding; 4.x logs through log4j2's
        # API with no slf4j binding on its own, so slf4j-simple prints its warnings.
        return [SLF4J_RELOAD4J] if self.line.startswith("3.") else [SLF4J_SIMPLE]

    def tools_classpath(self) -> str:
        v = self.version
        return self._classpath("tools", [f"org.apache.kafka:kafka_2.13:{v}", f"org.apache.kafka:kafka-tools:{v}",
                                         *self._logger()])

    def streams_classpath(self) -> str:
        return self._classpath("streams", [f"org.apache.kafka:kafka-streams:{self.version}", SLF4J_SIMPLE])

    def connect_classpath(self) -> str:
        v = self.version
        return self._classpath("connect", [f"org.apache.kafka:connect-runtime:{v}", f"org.apache.kafka:connect-file:{v}",
                                           f"org.apache.kafka:connect-json:{v}", *self._logger()])

    def mirror_classpath(self) -> str:
        v = self.version
        return self._classpath("mirror", [f"org.apache.kafka:connect-mirror:{v}", *self._logger()])

    def command(self, cp: str, main_class: str, *args: str, jvm: Sequence[str] = ()) -> list[str]:
        """The argv of `java <small-JVM flags> -cp cp main_class args`."""
        return [self.java, *JVM_OPTIONS, *log_options(cp), *jvm, "-cp", cp, main_class, *args]

    def run_tools(self, runs: Sequence[Sequence[str]], timeout: float = 120.0) -> list[ToolRun]:
        """Run tool invocations (tool name, then its arguments) in order in one JVM; their outcomes.

        A tool name is the bin/kafka-<name>.sh script's (TOOLS); the batch stops at `timeout`, failing
        the test with the output of the runs done so far.
        """
        cp = self.tools_classpath()
        classes = compile_java("ToolBatch.java", cp)
        work = Path(tempfile.mkdtemp(prefix="tool-batch-", dir=_work_dir()))
        try:
            lines = []
            for run in runs:
                name, *args = run
                assert all("\t" not in a and "\n" not in a for a in args), args
                lines.append("\t".join([TOOLS[self.line][name], *args]))
            (work / "commands.tsv").write_text("\n".join(lines) + "\n")
            argv = self.command(f"{classes}{os.pathsep}{cp}", "ToolBatch", str(work / "commands.tsv"),
                                str(work / "results"))
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
                failure = None if proc.returncode == 0 else f"ToolBatch exited {proc.returncode}:\n{proc.stderr[-4000:]}"
            except subprocess.TimeoutExpired as expired:
                failure = f"the tool batch did not finish within {timeout:.0f} s:\n{_text(expired.stderr)[-4000:]}"
            results = []
            for i, run in enumerate(runs):
                rc_file = work / "results" / f"{i}.rc"
                if not rc_file.exists():
                    break
                results.append(ToolRun(tuple(run), int(rc_file.read_text()),
                                       (work / "results" / f"{i}.out").read_text(errors="replace"),
                                       _without_exit_noise((work / "results" / f"{i}.err").read_text(errors="replace"))))
            if failure or len(results) != len(runs):
                done = "\n\n".join(r.describe() for r in results)
                pytest.fail(f"{failure or 'ToolBatch stopped early'}\nruns done:\n{done}", pytrace=False)
            return results
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def java_process(self, cp: str, main_class: str, *args: str, log_path: Path,
                     jvm: Sequence[str] = ()) -> subprocess.Popen:
        """Start a long-running Kafka app with its output in `log_path`; the caller stops it."""
        log = open(log_path, "ab")
        try:
            return subprocess.Popen(self.command(cp, main_class, *args, jvm=jvm), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()


def stop_process(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM (a Kafka app's shutdown hook runs), then SIGKILL after `timeout`."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _without_exit_noise(err: str) -> str:
    # A tool that catches Throwable around its own Exit.exit(0) prints ToolBatch's stand-in exception.
    return re.sub(r"(?m)^(exit -?\d+|ToolBatch\$ExitCalled: exit -?\d+)\n", "", err)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
