"""A real Apache Kafka broker (jars from Maven Central) as a child process, for differential runs.

Two pinned references, each a single broker with node/broker id 1 on 127.0.0.1 free ports only:

    kafka-3.9.1-zk       Kafka 3.9.1 in ZooKeeper mode, on Debian's ZooKeeper (JavaZooKeeper, the
                         same server the kafkapy cluster tests run)
    kafka-4.4.0-kraft    Kafka 4.4.0 in KRaft combined mode (process.roles=broker,controller), its
                         log dir formatted first with kafka.tools.StorageTool --standalone

    with RealKafka(REFERENCES["kafka-4.4.0-kraft"], work_dir, {"min.insync.replicas": "2"}) as kafka:
        print(kafka.bootstrap)          # "127.0.0.1:<port>", answering ApiVersions

`start()` returns once the broker answers ApiVersions (Kafka enables its request processors last in
start-up, so an answer means a serving broker). `stop()` (and leaving the `with`) always ends the
JVM, and ZooKeeper for the ZK reference, even after a failed start; JVMs left at interpreter exit are
killed. The JVM's output, GC log and server.properties stay in `work_dir` for a failure's report.

Raises RealKafkaUnavailable when java or the Maven artifacts cannot be had (tests skip loudly, or
fail under KAFKAPY_REQUIRE_JAVA=1), RealKafkaStartError when the broker does not come up.
"""
from __future__ import annotations

import atexit
import base64
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Mapping

from conformance.maven import MavenUnavailable, classpath
from kafkapy.devcluster.launcher import answers_api_versions, free_ports

__all__ = ["REFERENCES", "RealKafka", "RealKafkaStartError", "RealKafkaUnavailable", "Reference", "base_properties"]

HOST = "127.0.0.1"
# Small and quick to start: C1 only, serial GC; 512 MiB is enough for one broker with a few topics.
JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Djava.net.preferIPv4Stack=true", "-Djava.awt.headless=true")
START_TIMEOUT_S = 90.0
STOP_GRACE_S = 15.0
LOG_TAIL_LINES = 60

# Authorizers as each reference names them; ACLs checked, everything allowed where no ACL matches.
ZK_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
KRAFT_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_running: set["RealKafka"] = set()
_running_lock = threading.Lock()


@atexit.register
def _kill_leftovers() -> None:
    with _running_lock:
        leftovers = list(_running)
    for kafka in leftovers:
        kafka.stop(grace_s=0)


class RealKafkaUnavailable(RuntimeError):
    """java, the Maven artifacts or Debian's ZooKeeper cannot be had on this machine."""


class RealKafkaStartError(RuntimeError):
    """The broker (or its ZooKeeper, or the storage format) failed; the message ends with its log."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A pinned Apache Kafka release and the mode it runs in."""

    name: str                     # as written into build/differential.json
    version: str
    mode: str                     # "zk" or "kraft"
    artifacts: tuple[str, ...]    # Maven coordinates: the broker plus an slf4j binding

    def classpath(self) -> str:
        try:
            return classpath(self.artifacts)
        except MavenUnavailable as exc:
            raise RealKafkaUnavailable(str(exc)) from None


REFERENCES: dict[str, Reference] = {
    ref.name: ref for ref in (
        Reference("kafka-3.9.1-zk", "3.9.1", "zk",
                  ("org.apache.kafka:kafka_2.13:3.9.1", "org.slf4j:slf4j-reload4j:1.7.36")),
        # Kafka 4.x logs through log4j2, but the slf4j-api Maven picks here is 1.7: slf4j-simple to
        # stderr (the log file); log4j-core stays for the broker's logger-level controller.
        Reference("kafka-4.4.0-kraft", "4.4.0", "kraft",
                  ("org.apache.kafka:kafka_2.13:4.4.0", "org.apache.logging.log4j:log4j-core:2.24.3",
                   "org.slf4j:slf4j-simple:1.7.36")),
    )
}


def base_properties(mode: str, *, authorizer: bool = True) -> dict[str, str]:
    """The broker properties every differential run gives both kafkapy and the reference."""
    props = {
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        # Kafka 4.x's share coordinator state topic defaults to RF 3: a single node could not create it,
        # and share consumers would get no records (Kafka's single-node server.properties sets these too).
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.partitions": "1",
        "default.replication.factor": "1",
    }
    if authorizer:
        props["authorizer.class.name"] = ZK_AUTHORIZER if mode == "zk" else KRAFT_AUTHORIZER
        props["allow.everyone.if.no.acl.found"] = "true"
    return props


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class RealKafka:
    """One Apache Kafka broker (and, in ZK mode, its ZooKeeper) under `work_dir`."""

    def __init__(self, reference: Reference, work_dir: Path, overrides: Mapping[str, str | None] | None = None,
                 *, authorizer: bool = True):
        self.reference = reference
        self.work_dir = Path(work_dir).resolve()
        self.overrides = dict(overrides or {})
        self.authorizer = authorizer
        self.port = 0
        self.controller_port = 0
        self.zookeeper = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self.started_in_s: float | None = None

    # -- properties ------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.reference.name

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "kafka.log"

    @property
    def properties_path(self) -> Path:
        return self.work_dir / "server.properties"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def properties(self) -> dict[str, str]:
        """server.properties as written: the reference's mode, base_properties(), then the overrides."""
        props = {
            "broker.id" if self.reference.mode == "zk" else "node.id": "1",
            "log.dirs": str(self.work_dir / "data"),
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.cleaner.dedupe.buffer.size": str(4 << 20),
            "log.cleaner.threads": "1",
        }
        if self.reference.mode == "zk":
            props.update({
                "listeners": f"PLAINTEXT://{HOST}:{self.port}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
                "zookeeper.connect": self.zookeeper.connect if self.zookeeper else "",
                "zookeeper.connection.timeout.ms": "18000",
            })
        else:
            props.update({
                "process.roles": "broker,controller",
                "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "controller.quorum.bootstrap.servers": f"{HOST}:{self.controller_port}",
            })
        props.update(base_properties(self.reference.mode, authorizer=self.authorizer))
        for key, value in self.overrides.items():
            if value is None:
                props.pop(key, None)
            else:
                props[key] = str(value)
        return props

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start (ZooKeeper and) the broker; return once it answers ApiVersions. Stops all on failure."""
        java = shutil.which("java")
        if java is None:
            raise RealKafkaUnavailable("java not found on PATH (Debian: apt-get install default-jdk-headless)")
        cp = self.reference.classpath()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        begin = time.monotonic()
        try:
            if self.reference.mode == "zk":
                self._start_zookeeper()
            self.port, self.controller_port = free_ports(2)
            self._write_properties()
            if self.reference.mode == "kraft":
                self._format_storage(java, cp)
            self._launch(java, cp)
            self._wait_until_serving(begin + timeout)
        except BaseException:
            self.stop(grace_s=0)
            raise
        self.started_in_s = time.monotonic() - begin

    def _start_zookeeper(self) -> None:
        from kafkapy.devcluster.zookeeper import JavaZooKeeper, ZooKeeperStartError

        ok, reason = JavaZooKeeper.available()
        if not ok:
            raise RealKafkaUnavailable(f"ZooKeeper: {reason}")
        self.zookeeper = JavaZooKeeper(self.work_dir / "zookeeper")
        try:
            self.zookeeper.start()
        except ZooKeeperStartError as exc:
            raise RealKafkaStartError(str(exc)) from None

    def _write_properties(self) -> None:
        text = "".join(f"{key}={value}\n" for key, value in sorted(self.properties().items()))
        self.properties_path.write_text(text)
        # Kafka 3.9 logs through reload4j: everything at INFO to the log file (stdout of the JVM).
        (self.work_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\n"
            "log4j.logger.org.apache.zookeeper=WARN\n")

    def _jvm_argv(self, java: str, cp: str) -> list[str]:
        return [java, *JVM_OPTIONS,
                f"-Xlog:gc*:file={self.work_dir / 'gc.log'}:time,tags:filecount=2,filesize=10M",
                f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                f"-Dkafka.logs.dir={self.work_dir / 'logs'}",
                "-cp", cp]

    def _format_storage(self, java: str, cp: str) -> None:
        argv = [*self._jvm_argv(java, cp), "kafka.tools.StorageTool", "format",
                f"--cluster-id={_cluster_id()}", "--config", str(self.properties_path), "--standalone"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                                cwd=self.work_dir)
        (self.work_dir / "format.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0:
            raise RealKafkaStartError(f"{self.name}: kafka-storage format exited {result.returncode}\n"
                                      f"{(result.stdout + result.stderr)[-3000:]}")

    def _launch(self, java: str, cp: str) -> None:
        self._log_file = open(self.log_path, "ab")
        self._process = subprocess.Popen(
            [*self._jvm_argv(java, cp), "kafka.Kafka", str(self.properties_path)],
            stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, cwd=self.work_dir,
            start_new_session=True)
        with _running_lock:
            _running.add(self)

    def _wait_until_serving(self, deadline: float) -> None:
        assert self._process is not None
        while not answers_api_versions(self.port, HOST):
            if self._process.poll() is not None:
                raise RealKafkaStartError(f"{self.name} exited with status {self._process.returncode} while "
                                          f"starting\n{self.log_tail()}")
            if time.monotonic() >= deadline:
                raise RealKafkaStartError(f"{self.name} did not answer ApiVersions on {self.bootstrap} in time\n"
                                          f"{self.log_tail()}")
            time.sleep(0.2)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM (SIGKILL after `grace_s`, at once with 0) the broker, then stop its ZooKeeper."""
        process = self._process
        if process is not None:
            if process.poll() is None:
                _signal(process, signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
                try:
                    process.wait(timeout=grace_s if grace_s > 0 else 30)
                except subprocess.TimeoutExpired:
                    _signal(process, signal.SIGKILL)
                    process.wait()
            self._process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        with _running_lock:
            _running.discard(self)
        if self.zookeeper is not None:
            if grace_s > 0:
                self.zookeeper.stop()
            else:
                self.zookeeper.kill9()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no broker log)"
        return f"--- last lines of {self.log_path}:\n" + "\n".join(text[-lines:])

    def __enter__(self) -> "RealKafka":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RealKafka({self.name}, {self.bootstrap}, pid={self.pid})"


def _signal(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # The JVM leads its own session (start_new_session): its process group is ours alone to signal.
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    import sys
    import tempfile

    name = sys.argv[1] if len(sys.argv) > 1 else "kafka-4.4.0-kraft"
    with RealKafka(REFERENCES[name], Path(tempfile.mkdtemp(prefix="real-kafka-"))) as kafka:
        print(f"{kafka.name} serving on {kafka.bootstrap} after {kafka.started_in_s:.1f} s "
              f"(log {kafka.log_path}); Ctrl-C stops it", flush=True)
        try:
            while kafka._process is not None and kafka._process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
