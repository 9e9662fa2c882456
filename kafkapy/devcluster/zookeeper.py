"""A standalone ZooKeeper server as a child process, for `kafkapy cluster` and the cluster tests.

Runs Debian's ZooKeeper (package `zookeeper`, jars in /usr/share/java) directly through
`ZooKeeperServerMain`, with a generated zoo.cfg: no init scripts, no system config, loopback only.
"""
from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

__all__ = ["JavaZooKeeper", "ZooKeeperStartError"]

log = logging.getLogger(__name__)

JAVA_DIR = Path("/usr/share/java")
_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# What ZooKeeperServerMain needs at runtime (standalone, no admin server, slf4j-simple logging to
# stderr). Debian names each jar without its version as a symlink to the current one.
_CLASSPATH_JARS = (
    "zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar",
    "netty-handler.jar", "netty-common.jar", "netty-buffer.jar", "netty-transport.jar", "netty-codec.jar",
    "netty-resolver.jar", "netty-transport-native-unix-common.jar",
    "commons-cli.jar", "commons-io.jar", "metrics-core.jar", "snappy-java.jar",
)
# Small heap and C1 only: the server holds a few hundred znodes and must start fast in tests.
_JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false")
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
_STOP_GRACE_S = 5.0
_LOG_TAIL_LINES = 40

# Servers started by this process and not yet stopped; killed at exit so that a crashed test run
# never leaves a ZooKeeper behind (they run in their own session, so no signal reaches them).
_running: set[JavaZooKeeper] = set()
_running_lock = threading.Lock()


@atexit.register
def _kill_leftovers() -> None:
    with _running_lock:
        leftovers = list(_running)
    for server in leftovers:
        try:
            server.kill9()
        except Exception:  # exiting anyway; nothing useful to do but say so
            log.exception("could not kill ZooKeeper pid %s at exit", server.pid)


class ZooKeeperStartError(RuntimeError):
    """ZooKeeper exited or did not serve within the start timeout; the message ends with its log."""


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _four_letter_word(host: str, port: int, word: bytes, timeout: float = 1.0) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word)
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


class JavaZooKeeper:
    """One standalone ZooKeeper on 127.0.0.1, data and log under `data_dir`.

    Port 0 picks a free port at the first start; restart() keeps the port and the data, so
    clients reconnect to the same server with their sessions intact (if within their timeout).
    """

    def __init__(self, data_dir: Path, port: int = 0, host: str = "127.0.0.1", netns: str | None = None):
        # Inside a network namespace a test made (devcluster/netns.py) it listens on that
        # namespace's address instead; anywhere else on loopback only.
        if host not in _LOOPBACK_HOSTS and netns is None:
            raise ValueError(f"JavaZooKeeper listens on loopback only, not {host!r}")
        self.data_dir = Path(data_dir).resolve()  # ZooKeeper runs with cwd=data_dir
        self.netns = netns
        self.host = "127.0.0.1" if netns is None else host
        self.port = port
        self._auto_port = port == 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    # -- environment -----------------------------------------------------------------------------------

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") when java and Debian's ZooKeeper jars are installed, else (False, why not)."""
        if shutil.which("java") is None:
            return False, "java is not installed (apt-get install zookeeper pulls in default-jre)"
        if not (JAVA_DIR / "zookeeper.jar").exists():
            return False, f"{JAVA_DIR / 'zookeeper.jar'} is missing (apt-get install zookeeper)"
        return True, ""

    @staticmethod
    def classpath() -> str:
        return ":".join(str(JAVA_DIR / jar) for jar in _CLASSPATH_JARS if (JAVA_DIR / jar).exists())

    # -- properties ------------------------------------------------------------------------------------

    @property
    def connect(self) -> str:
        """The zookeeper.connect string for this server."""
        return f"{self.host}:{self.port}"

    @property
    def connect_string(self) -> str:
        """The same, under the name the in-memory ZooKeeper gives it (launcher.ZooKeeper)."""
        return self.connect

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, timeout: float = 30) -> None:
        """Starts the server and returns once it serves requests; raises ZooKeeperStartError otherwise."""
        if self.running:
            raise RuntimeError(f"ZooKeeper is already running (pid {self.pid})")
        ok, reason = self.available()
        if not ok:
            raise ZooKeeperStartError(reason)
        deadline = time.monotonic() + timeout
        # A port picked as free can be taken before Java binds it; pick another and try again.
        for attempt in range(3):
            if self._auto_port and (self.port == 0 or attempt > 0):
                self.port = _free_port(self.host)
            try:
                self._launch()
                self._wait_until_serving(deadline)
                log.info("ZooKeeper serving on %s (pid %d, data %s)", self.connect, self.pid, self.data_dir)
                return
            except ZooKeeperStartError as exc:
                self.kill9()
                if not (self._auto_port and "Address already in use" in str(exc) and time.monotonic() < deadline):
                    raise
        raise ZooKeeperStartError(f"no free port for ZooKeeper after 3 attempts\n{self._log_tail()}")

    def _launch(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("\n".join([
            "tickTime=2000",  # session timeouts between 4 s and 40 s
            f"dataDir={self.data_dir.resolve()}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
            "",
        ]))
        self._log_file = open(self.log_path, "ab")
        self._log_file.write(f"--- kafkapy: starting ZooKeeper on {self.connect} at {time.ctime()}\n".encode())
        self._log_file.flush()
        self._process = subprocess.Popen(
            [*(["ip", "netns", "exec", self.netns] if self.netns else []),
             "java", *_JVM_OPTIONS, "-cp", self.classpath(), _MAIN_CLASS, str(self.config_path)],
            stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, cwd=self.data_dir,
            start_new_session=True)
        with _running_lock:
            _running.add(self)

    def _wait_until_serving(self, deadline: float) -> None:
        assert self._process is not None
        while True:
            if self._process.poll() is not None:
                raise ZooKeeperStartError(f"ZooKeeper exited with status {self._process.returncode} while "
                                          f"starting on {self.connect}\n{self._log_tail()}")
            try:
                # ruok answers as soon as the port is open; srvr only once the database is loaded
                # and requests are served.
                if (_four_letter_word(self.host, self.port, b"ruok") == b"imok"
                        and _four_letter_word(self.host, self.port, b"srvr").startswith(b"Zookeeper version")):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise ZooKeeperStartError(f"ZooKeeper did not serve on {self.connect} in time\n{self._log_tail()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it is still running after 5 s."""
        self._terminate(signal.SIGTERM, _STOP_GRACE_S)

    def kill9(self) -> None:
        """SIGKILL at once: a crash, as far as clients and the data dir can tell."""
        self._terminate(signal.SIGKILL, 0)

    def restart(self, timeout: float = 30) -> None:
        self.stop()
        self.start(timeout)

    def _terminate(self, sig: signal.Signals, grace_s: float) -> None:
        process = self._process
        if process is not None:
            if process.poll() is None:
                self._signal(process, sig)
                try:
                    process.wait(timeout=grace_s if grace_s > 0 else None)
                except subprocess.TimeoutExpired:
                    log.warning("ZooKeeper pid %d ignored SIGTERM for %.0f s; killing it", process.pid, grace_s)
                    self._signal(process, signal.SIGKILL)
                    process.wait()
            self._process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        with _running_lock:
            _running.discard(self)

    @staticmethod
    def _signal(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        # The JVM is the leader of its own session (start_new_session), so its process group is ours
        # alone to signal.
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no ZooKeeper log)"
        return f"--- last lines of {self.log_path}:\n" + "\n".join(lines[-_LOG_TAIL_LINES:])

    def __enter__(self) -> JavaZooKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"JavaZooKeeper({self.connect}, pid={self.pid}, data_dir={str(self.data_dir)!r})"
