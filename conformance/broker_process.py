"""Start, stop, restart and kill a real kafkapy broker process for tests and benchmarks: the
conformance suite's face of the broker launcher (kafkapy/devcluster/launcher.py), which does the
starting, waiting (first ApiVersions answered), signalling and output capture.

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

import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from kafkapy.devcluster import launcher
from kafkapy.devcluster.launcher import BrokerLauncher

REPO_ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP_ENV = "KAFKAPY_TEST_BOOTSTRAP"
# Interpreter (or wrapper, e.g. one that adds coverage or a profiler) that runs the broker.
PYTHON_ENV = "KAFKAPY_TEST_PYTHON"
DEFAULT_START_TIMEOUT_S = 20.0
DEFAULT_STOP_TIMEOUT_S = 10.0
STDERR_TAIL_LINES = 60

# Brokers left running at exit or on SIGTERM are the launcher's to kill (launcher.kill_leftovers).
_stop_children_on_sigterm = launcher.stop_children_on_sigterm


class BrokerStartError(RuntimeError):
    """The broker process exited or did not accept connections in time."""


class UnsupportedOnExternalBroker(RuntimeError):
    """Stop/restart/kill was asked of a broker this process did not start."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    return launcher.free_port()


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    """True if a TCP connection to host:port succeeds now."""
    return launcher.port_accepts(port, host, timeout)


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
    broker back at the same address over the same log directory. `overrides`, `extra_args` and
    `env` may be changed between runs.
    """

    port: int
    data_dir: Path
    work_dir: Path
    overrides: dict[str, str | None] = field(default_factory=dict)
    python: str = field(default_factory=lambda: os.environ.get(PYTHON_ENV) or sys.executable)
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    _owns_work_dir: bool = False
    _launcher: BrokerLauncher | None = field(default=None, repr=False)
    _starts: int = field(default=0, repr=False)

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
    def proc(self):
        return self._launcher.proc if self._launcher is not None else None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def starts(self) -> int:
        return self._starts

    @property
    def last_stop_needed_kill(self) -> bool:
        """The last stop() had to escalate to SIGKILL after its timeout."""
        return self._launcher is not None and self._launcher.last_stop_needed_kill

    def is_running(self) -> bool:
        return self._launcher is not None and self._launcher.running

    def _new_launcher(self) -> BrokerLauncher:
        # made anew for each run: overrides, arguments and environment may have changed since
        return BrokerLauncher(self.overrides, mode="process", port=self.port, log_dir=self.data_dir,
                              log_path=self.log_path, python=self.python, env=self.env,
                              extra_args=self.extra_args, name=f"broker-{self.port}")

    def command(self) -> list[str]:
        """The exact argv used to start the broker."""
        return self._new_launcher().command()

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return (self._launcher or self._new_launcher()).log_tail(lines)

    def start(self, timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Start the process and wait until it answers ApiVersions (a TLS listener: accepts connections)."""
        if self.is_running():
            raise RuntimeError(f"broker on {self.bootstrap} is already running (pid {self.pid})")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        run = self._launcher = self._new_launcher()
        self._starts += 1
        run.starts = self._starts - 1  # the launcher numbers the runs in the log from ours
        run.launch()
        deadline = time.monotonic() + timeout
        while True:
            code = run.proc.poll()
            if code is not None:
                run.wait_stopped(0)
                raise BrokerStartError(self._start_failure_message(f"exited with code {code}"))
            if run.is_ready(timeout=0.5):
                return
            if time.monotonic() > deadline:
                accepted = port_accepts(self.host, self.port)
                run.kill9()
                what = "did not answer ApiVersions" if accepted else "did not accept connections"
                raise BrokerStartError(self._start_failure_message(f"{what} within {timeout:.0f} s"))
            time.sleep(0.05)

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

    def stop(self, sig: int = signal.SIGTERM, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> int | None:
        """Send `sig`, wait up to `timeout` s, then SIGKILL. Returns the exit code (None if never started)."""
        if self._launcher is None:
            return None
        return self._launcher.stop(sig, timeout)

    def kill9(self) -> int | None:
        """SIGKILL the broker (no graceful shutdown) and wait for it to be gone."""
        return self.stop(signal.SIGKILL, timeout=5)

    def pause(self) -> None:
        """SIGSTOP the broker (it keeps its connections but answers nothing) until resume()."""
        if self._launcher is not None:
            self._launcher.pause()

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self._launcher is not None:
            self._launcher.resume()

    def restart(self, sig: int = signal.SIGTERM, timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Stop with `sig` (if running) and start again on the same port and data dir."""
        self.stop(sig)
        if self._launcher is not None:
            self._launcher.wait_port_released()
        self.start(timeout)

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
    """Start a kafkapy broker on a free 127.0.0.1 port and return it once it answers requests.

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
    try:
        broker.start(timeout)
    except BaseException:
        broker.close()  # a broker that did not start leaves no process and no temporary directory
        raise
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
