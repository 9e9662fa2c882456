"""Start, stop, restart and kill a real kafkapy broker process for tests and benchmarks.

This module has no pytest dependency so that bench/ scripts can use it too. The pytest
fixtures built on it live in conformance/pytest_broker.py.

    from conformance.broker_process import start_broker, broker_from_env

    with start_broker(overrides={"num.partitions": "3"}) as b:
        print(b.bootstrap)          # "127.0.0.1:<port>"
        b.restart()                 # SIGTERM, wait, start again on the same port and data dir
        b.kill9()                   # SIGKILL, no restart
        b.start()                   # start again after kill9/stop

KAFKAPY_TEST_PYTHON names the interpreter (or a wrapper script) that runs the broker;
it defaults to the test's own interpreter.

If the environment variable KAFKAPY_TEST_BOOTSTRAP is set ("host:port"), `broker_from_env`
returns an `ExternalBroker` for that address instead of starting a process; such a broker
cannot be stopped or restarted (`can_restart` is False).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

REPO_ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP_ENV = "KAFKAPY_TEST_BOOTSTRAP"
# Interpreter (or wrapper, e.g. one that adds coverage or a profiler) that runs the broker.
PYTHON_ENV = "KAFKAPY_TEST_PYTHON"
DEFAULT_START_TIMEOUT_S = 20.0
DEFAULT_STOP_TIMEOUT_S = 10.0
STDERR_TAIL_LINES = 60

# Brokers started by this process; killed at interpreter exit so that an aborted test
# run never leaves a broker listening.
_live_processes: set[subprocess.Popen] = set()


class BrokerStartError(RuntimeError):
    """The broker process exited or did not accept connections in time."""


class UnsupportedOnExternalBroker(RuntimeError):
    """Stop/restart/kill was asked of a broker this process did not start."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    """True if a TCP connection to host:port succeeds now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<could not read {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class ExternalBroker:
    """A broker someone else runs (KAFKAPY_TEST_BOOTSTRAP); only its address is known."""

    bootstrap: str
    data_dir: Path | None = None
    can_restart: bool = False

    @property
    def host(self) -> str:
        return self.bootstrap.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])

    def _unsupported(self, what: str) -> UnsupportedOnExternalBroker:
        return UnsupportedOnExternalBroker(
            f"cannot {what} the external broker at {self.bootstrap} ({BOOTSTRAP_ENV} is set)"
        )

    def start(self, timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        raise self._unsupported("start")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> int | None:
        raise self._unsupported("stop")

    def restart(self, sig: int = signal.SIGTERM) -> None:
        raise self._unsupported("restart")

    def kill9(self) -> None:
        raise self._unsupported("kill")

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return "<external broker: no output captured>"

    def close(self) -> None:
        """Nothing to release: the broker belongs to someone else."""


@dataclass
class BrokerProcess:
    """A `python -m kafkapy serve` child process on 127.0.0.1 with its own data directory.

    The port and data directory are fixed at construction, so `restart()` brings the
    broker back at the same address over the same log directory.
    """

    port: int
    data_dir: Path
    work_dir: Path
    overrides: dict[str, str | None] = field(default_factory=dict)
    python: str = field(default_factory=lambda: os.environ.get(PYTHON_ENV) or sys.executable)
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    proc: subprocess.Popen | None = None
    # Set when the last stop() had to escalate to SIGKILL after the timeout.
    last_stop_needed_kill: bool = False
    starts: int = 0
    _owns_work_dir: bool = False

    host = "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """Combined stdout+stderr of every start, appended across restarts."""
        return self.work_dir / "broker.log"

    @property
    def can_restart(self) -> bool:
        return True

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        """The exact argv used to start the broker."""
        listener = f"PLAINTEXT://{self.host}:{self.port}"
        settings = {
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        argv = [self.python, "-m", "kafkapy", "serve"]
        for key, value in settings.items():
            if value is not None:  # an override of None leaves the property unset (e.g. advertised.listeners)
                argv += ["--override", f"{key}={value}"]
        return argv + list(self.extra_args)

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return _tail(self.log_path, lines)

    def start(self, timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Start the process and wait until its port accepts connections."""
        if self.is_running():
            raise RuntimeError(f"broker on {self.bootstrap} is already running (pid {self.pid})")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = self.command()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                argv,
                cwd=REPO_ROOT,  # `python -m kafkapy` works from a checkout even without pip install
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # Ctrl-C in the test runner must not hit the broker first
            )
        _live_processes.add(self.proc)
        _install_sigterm_cleanup()
        self._wait_until_ready(timeout)

    def _wait_until_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                _live_processes.discard(self.proc)
                raise BrokerStartError(self._start_failure_message(f"exited with code {code}"))
            if port_accepts(self.host, self.port):
                return
            if time.monotonic() > deadline:
                self.kill9()
                raise BrokerStartError(
                    self._start_failure_message(f"did not accept connections within {timeout:.0f} s")
                )
            time.sleep(0.1)

    def _start_failure_message(self, what: str) -> str:
        tail = self.stderr_tail()
        hint = ""
        if "No module named kafkapy.__main__" in tail or "No module named kafkapy" in tail:
            hint = (
                "\nHINT: `python -m kafkapy serve` is not runnable yet "
                "(kafkapy/__main__.py missing or kafkapy not importable from "
                f"{REPO_ROOT}). Set {BOOTSTRAP_ENV}=host:port to test an external broker."
            )
        return (
            f"kafkapy broker on {self.bootstrap} {what}.\n"
            f"command: {' '.join(self.command())}\n"
            f"log: {self.log_path}\n"
            f"----- last output -----\n{tail}\n-----------------------{hint}"
        )

    def _kill_group(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, sig: int = signal.SIGTERM, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> int | None:
        """Send `sig`, wait up to `timeout` s, then SIGKILL. Returns the exit code (None if never started)."""
        if self.proc is None:
            return None
        self.last_stop_needed_kill = False
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.last_stop_needed_kill = True
                self._kill_group(signal.SIGKILL)
                self.proc.wait(5)
        # Children the broker may have spawned go with it (the group outlives its leader).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _live_processes.discard(self.proc)
        return self.proc.returncode

    def kill9(self) -> int | None:
        """SIGKILL the broker (no graceful shutdown) and wait for it to be gone."""
        return self.stop(signal.SIGKILL, timeout=5)

    def restart(self, sig: int = signal.SIGTERM, timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Stop with `sig` (if running) and start again on the same port and data dir."""
        self.stop(sig)
        self._wait_port_released()
        self.start(timeout)

    def _wait_port_released(self, timeout: float = 5.0) -> None:
        # After the listener closes, a lingering accept socket can make the next bind
        # fail for a moment; wait until nothing is listening any more.
        deadline = time.monotonic() + timeout
        while port_accepts(self.host, self.port, timeout=0.2) and time.monotonic() < deadline:
            time.sleep(0.1)

    def close(self) -> None:
        """Stop the broker and remove the temporary directory if this object created it."""
        self.stop()
        if self._owns_work_dir and not os.environ.get("KAFKAPY_TEST_KEEP_DATA"):
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "BrokerProcess":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def start_broker(
    overrides: Mapping[str, object] | None = None,
    work_dir: Path | None = None,
    port: int | None = None,
    timeout: float = DEFAULT_START_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> BrokerProcess:
    """Start a kafkapy broker on a free 127.0.0.1 port and return it once it accepts connections.

    `overrides` are Kafka broker properties passed as `--override key=value`; a value of None
    leaves that property unset (even one the harness sets by default). `work_dir`
    holds the data directory (work_dir/data) and the process output (work_dir/broker.log);
    a temporary directory is made (and removed by close()) when it is not given.
    """
    owns = work_dir is None
    if work_dir is None:
        work_dir = Path(tempfile.mkdtemp(prefix="kafkapy-test-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(
        port=port or free_port(),
        data_dir=work_dir / "data",
        work_dir=work_dir,
        overrides={k: None if v is None else str(v) for k, v in (overrides or {}).items()},
        env=dict(env) if env is not None else None,
        _owns_work_dir=owns,
    )
    broker.start(timeout)
    return broker


def external_bootstrap() -> str | None:
    """The external broker address from KAFKAPY_TEST_BOOTSTRAP, or None."""
    value = os.environ.get(BOOTSTRAP_ENV, "").strip()
    return value or None


def broker_from_env(
    overrides: Mapping[str, object] | None = None,
    work_dir: Path | None = None,
) -> BrokerProcess | ExternalBroker:
    """An ExternalBroker if KAFKAPY_TEST_BOOTSTRAP is set, else a freshly started kafkapy."""
    address = external_bootstrap()
    if address:
        return ExternalBroker(bootstrap=address)
    return start_broker(overrides=overrides, work_dir=work_dir)


def _install_sigterm_cleanup() -> None:
    """Make SIGTERM to the test runner (e.g. a CI timeout) take the brokers down with it.

    Brokers run in their own session, so a signal to the runner's process group misses
    them, and the default SIGTERM action skips atexit handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return  # someone else handles SIGTERM (or we already did)

    def on_sigterm(signum: int, frame: object) -> None:
        _kill_leftover_brokers()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)


@atexit.register
def _kill_leftover_brokers() -> None:
    for proc in list(_live_processes):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
