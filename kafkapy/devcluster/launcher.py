"""The one way to start a kafkapy broker outside `kafkapy serve` itself: for the unit and conformance
tests, the benchmarks, the dev cluster (`kafkapy cluster`) and kafkapy.testing.

    from kafkapy.devcluster.launcher import BrokerLauncher

    with BrokerLauncher({"num.partitions": "3"}, mode="process") as broker:
        broker.start()              # returns once the broker has answered ApiVersions
        print(broker.bootstrap)     # "127.0.0.1:<port>"
        broker.pause(); broker.resume()     # SIGSTOP / SIGCONT
        broker.kill9()              # no shutdown, nothing flushed
        broker.start()              # again: same port, same log dir
    # leaving the block stops it (SIGTERM, then SIGKILL after a bound) and removes its temporary dirs

A broker runs either as a child process (`python -m kafkapy serve`, output captured in a log file,
in a session of its own so that a Ctrl-C meant for the test runner does not reach it first) or in this
process, on an event loop of its own on a daemon thread. Either way it listens on 127.0.0.1 only, on a
port picked free at the first start and kept afterwards. Its logs go to a given directory or to a
temporary one on disk or in memory (storage.py). Processes still running when this interpreter exits,
or when it gets SIGTERM, are killed, so an aborted test run leaves no broker behind.

ZooKeeper: `JavaZooKeeper` (zookeeper.py, Debian's ZooKeeper as a child process) for the dev cluster
and the cluster tests; kafkapy.testing brings its in-memory one (kafkapy.testing.zookeeper), which
has the same face (`ZooKeeper` below). Dependencies point from kafkapy.testing down to this package,
never back.

Ports and readiness probes are in ports.py, the killing of leftover children in leftovers.py; both
are re-exported here.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from .leftovers import _live, chain_sigterm, kill_leftovers, stop_children_on_sigterm, suspend_sigterm_cleanup
from .ports import HOST, answers_api_versions, free_port, free_ports, port_accepts, recv_exactly
from .storage import STORAGES, data_directory
from .zookeeper import JavaZooKeeper

__all__ = [
    "BrokerLauncher",
    "BrokerStartError",
    "HOST",
    "ZooKeeper",
    "answers_api_versions",
    "build_broker",
    "free_port",
    "chain_sigterm",
    "free_ports",
    "JavaZooKeeper",
    "kill_leftovers",
    "port_accepts",
    "recv_exactly",
    "stop_children_on_sigterm",
    "suspend_sigterm_cleanup",
]

log = logging.getLogger(__name__)

# `python -m kafkapy` run from the directory that holds this kafkapy imports this very kafkapy, a
# checkout's even without `pip install`.
PACKAGE_PARENT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 40
CONTROL_PREFIX = "KAFKAPY_CONTROL="
_SECRET_KEYS = ("password", "jaas.config", "keystore.key", "secret")


class BrokerStartError(RuntimeError):
    """The broker exited, or did not answer ApiVersions in time; the message ends with its output."""


class ZooKeeper(Protocol):
    """What a cluster needs of a ZooKeeper server: JavaZooKeeper, or kafkapy.testing's InMemoryZooKeeper."""

    @property
    def connect_string(self) -> str: ...

    @property
    def running(self) -> bool: ...

    def stop(self) -> None: ...


def _redacted(argv: list[str]) -> list[str]:
    """The command line with secret values (passwords, JAAS configs, inline keys) masked, for logs."""
    out = []
    for arg in argv:
        key, sep, _ = arg.partition("=")
        out.append(f"{key}=[hidden]" if sep and any(s in key for s in _SECRET_KEYS) else arg)
    return out


# ------------------------------------------------------------------ a broker object, not started

def build_broker(config: Mapping[str, object | None] | None = None, *, log_dir: str | os.PathLike,
                 port: int = 0) -> Any:
    """A Broker configured as the launcher configures one (a loopback listener, `log_dir` as
    log.dirs, then `config`), built but not started: for unit tests that call its handlers or drive
    its replica manager themselves. Only the given properties and kafkapy's defaults apply (not
    Kafka's quickstart settings, which a started broker gets)."""
    from ..broker.config import BrokerConfig
    from ..node import build_broker as build

    settings = {"listeners": f"PLAINTEXT://{HOST}:{port}", "log.dirs": str(log_dir),
                **{k: str(v) for k, v in (config or {}).items() if v is not None}}
    return build(BrokerConfig(settings))


# ------------------------------------------------------------------ the launcher

class BrokerLauncher:
    """One kafkapy broker: started, stopped, killed, paused and restarted on the same port and dirs.

    `config`: broker properties (Kafka's names); a value of None leaves out one the launcher would set
    (listeners, advertised.listeners, log.dirs). `mode`: "process" (`python -m kafkapy serve`) or
    "thread" (this process, an event loop on a daemon thread). `port`: 0 picks a free one at the first
    start. `log_dir`: the broker's log.dirs; None makes a temporary directory on `storage` ("disk" or
    "memory"), removed by close(). `log_path`: where a process's stdout and stderr go, appended across
    restarts (default: `<log dir>.log` beside a temporary log dir, removed with it; `log_dir`/broker.log
    in a given one).
    Process mode only: `python` (interpreter or wrapper), `env`, `extra_args` (after the overrides),
    `control` (fault injection and its HTTP endpoint, `kafkapy serve --control`; its URL is
    `control_url` once started). Thread mode only: `on_broker(broker)` is called on the broker's loop
    before it starts (kafkapy.testing installs its fault injector there). `netns` and `host`
    (process mode): run the broker inside that network namespace (`ip netns exec`, see
    devcluster/netns.py) listening on and advertising `host`, an address of that namespace; the
    port then defaults to Kafka's 9092, the namespace being the broker's own. `ready`: "api_versions"
    (ready once ApiVersions is answered; a TLS listener on our port is only waited for until it
    accepts) or "accept" (once the port accepts).
    """

    def __init__(self, config: Mapping[str, object | None] | None = None, *, mode: str = "process",
                 port: int = 0, log_dir: str | os.PathLike | None = None, storage: str = "disk",
                 log_path: str | os.PathLike | None = None, python: str | None = None,
                 env: Mapping[str, str] | None = None, extra_args: list[str] | tuple[str, ...] = (),
                 control: bool = False, on_broker: Callable[[Any], None] | None = None,
                 ready: str = "api_versions", name: str = "broker", host: str = HOST,
                 netns: str | None = None):
        if mode not in ("process", "thread"):
            raise ValueError(f"mode must be 'process' or 'thread', not {mode!r}")
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {', '.join(STORAGES)}, not {storage!r}")
        if ready not in ("api_versions", "accept"):
            raise ValueError(f"ready must be 'api_versions' or 'accept', not {ready!r}")
        self.ready = ready
        if netns is not None and mode != "process":
            raise ValueError("netns needs mode='process': a thread cannot run in another network namespace")
        self._host = host
        self.netns = netns
        if netns is not None and not port:
            port = 9092
        self.config: dict[str, str | None] = {k: None if v is None else str(v) for k, v in (config or {}).items()}
        self.mode = mode
        self.storage = storage
        self.port = port
        self.name = name
        self._root: Path | None = None  # the temporary directory this object made (removed by close())
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._log_path = Path(log_path) if log_path is not None else None
        self.python = python or sys.executable
        self.env = dict(env) if env is not None else None
        self.extra_args = list(extra_args)
        self.control = control
        self.control_url: str | None = None
        self.on_broker = on_broker
        self.proc: subprocess.Popen | None = None
        self.spawned_at = 0.0
        self.starts = 0
        # The last stop() had to escalate to SIGKILL after its timeout.
        self.last_stop_needed_kill = False
        self._output_start = 0  # where the current run's output begins in log_path
        # thread mode
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._killed = False
        self._error: BaseException | None = None
        self.broker: Any = None  # the in-process Broker while it runs (thread mode)

    # -- where things are ---------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return self._host

    @property
    def bootstrap(self) -> str:
        return f"{self._host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        """The broker's log.dirs (made on first use when none was given)."""
        if self._log_dir is None:
            self._root = self._log_dir = data_directory(self.storage, prefix=f"kafkapy-{self.name}-")
        return self._log_dir

    @property
    def temporary_dir(self) -> Path | None:
        """The temporary directory this object made for the log dir and output (None if none now)."""
        return self._root

    @property
    def log_path(self) -> Path:
        """The process's captured stdout and stderr, every run appended."""
        if self._log_path is None:
            log_dir = self.log_dir
            # beside a temporary log dir (removed with it), inside a given one
            self._log_path = log_dir.parent / f"{log_dir.name}.log" if self._root is not None else log_dir / "broker.log"
        return self._log_path

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        if self.mode == "thread":
            return self._thread is not None and self._thread.is_alive()
        return self.proc is not None and self.proc.poll() is None

    def is_running(self) -> bool:
        return self.running

    def settings(self) -> dict[str, str]:
        """The broker properties this broker starts with."""
        listener = f"PLAINTEXT://{self._host}:{self.port}"
        merged = {"listeners": listener, "advertised.listeners": listener, "log.dirs": str(self.log_dir),
                  **self.config}
        return {key: value for key, value in merged.items() if value is not None}

    def command(self) -> list[str]:
        """The argv of the child process (mode "process")."""
        argv = [self.python, "-m", "kafkapy", "serve"]
        if self.netns is not None:  # `ip netns exec` execs the broker: the pid stays the one we signal
            argv = ["ip", "netns", "exec", self.netns, *argv]
        for key, value in self.settings().items():
            argv += ["--override", f"{key}={value}"]
        if self.control:
            argv.append("--control")
        return argv + self.extra_args

    def output(self) -> str:
        """What the current (or last) run of the process has written so far."""
        try:
            with open(self.log_path, "rb") as out:
                out.seek(self._output_start)
                return out.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the captured output, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"<cannot read {self.log_path}: {exc}>"
        return "\n".join(text.splitlines()[-lines:])

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> BrokerLauncher:
        """Start the broker and return once it answers ApiVersions; raises BrokerStartError (having
        stopped whatever it started) if it exits or does not answer within `timeout` s."""
        deadline = time.monotonic() + timeout
        self.launch()
        self.wait_ready(max(0.5, deadline - time.monotonic()))
        return self

    def launch(self) -> None:
        """Start the broker without waiting for it (callers that start several at once)."""
        if self.running:
            raise RuntimeError(f"{self.name} on {self.bootstrap} is already running")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        if self.mode == "thread":
            self._launch_thread()
        else:
            self._launch_process()

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Wait until the broker answers ApiVersions (see answers_api_versions)."""
        deadline = time.monotonic() + timeout
        if self.mode == "thread":
            self._wait_thread_started(timeout)
        while True:
            if not self.running:
                code = self.proc.returncode if self.proc is not None else None
                self._reap()
                raise BrokerStartError(self._failure(f"exited (code {code})" if code is not None else "stopped"))
            if self.is_ready(timeout=min(1.0, max(0.1, deadline - time.monotonic()))):
                if self.control and self.mode == "process":
                    self._read_control_url()
                return
            if time.monotonic() > deadline:
                self.kill9()
                raise BrokerStartError(self._failure(f"did not answer ApiVersions within {timeout:.0f} s"))
            time.sleep(0.02)

    def is_ready(self, timeout: float = 1.0) -> bool:
        """Whether the broker serves now: answers ApiVersions, or accepts connections where that is
        all that can be asked (ready="accept", or a TLS listener, which a bare socket cannot speak)."""
        if self.ready == "accept" or self._listener_protocol() in ("SSL", "SASL_SSL"):
            return port_accepts(self.port, host=self._host, timeout=timeout)
        return answers_api_versions(self.port, host=self._host, timeout=timeout)

    def _listener_protocol(self) -> str:
        """The security protocol of the listener on our port (Kafka's listener.security.protocol.map)."""
        settings = self.settings()
        mapping = dict(item.strip().split(":", 1) for item in
                       settings.get("listener.security.protocol.map", "").split(",") if ":" in item)
        for listener in settings.get("listeners", "").split(","):
            name, _, address = listener.strip().partition("://")
            if address.rsplit(":", 1)[-1] == str(self.port):
                return mapping.get(name, name).upper()
        return "PLAINTEXT"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """Send `sig` (SIGTERM: a clean shutdown), wait up to `timeout` s, then SIGKILL. Returns the
        exit code (None for a broker that never ran, or one in this process)."""
        if self.mode == "thread":
            self.last_stop_needed_kill = False
            self._halt_thread(killed=sig == signal.SIGKILL, timeout=timeout)
            return None
        self.send_signal(sig)
        return self.wait_stopped(timeout)

    def send_signal(self, sig: int = signal.SIGTERM) -> None:
        """Signal the broker process if it runs (`wait_stopped` then waits for it); a paused one
        is woken up too, since it could not act on the signal otherwise."""
        proc = self.proc
        if self.mode == "thread" or proc is None or proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
            if sig not in (signal.SIGKILL, signal.SIGCONT, signal.SIGSTOP):
                os.killpg(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def wait_stopped(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """Wait up to `timeout` s for the process to exit, then SIGKILL it and whatever it started.
        Returns its exit code (None if it never ran)."""
        proc = self.proc
        if self.mode == "thread" or proc is None:
            return None
        self.last_stop_needed_kill = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.last_stop_needed_kill = True
            log.warning("%s (pid %d) still running %.0f s after it was asked to stop; killing it",
                        self.name, proc.pid, timeout)
        self._reap()
        return proc.returncode

    def kill9(self) -> int | None:
        """Stop at once, as kill -9 would: no controlled shutdown, nothing flushed. In this process:
        listeners and connections are dropped and nothing more runs on its loop."""
        return self.stop(signal.SIGKILL, timeout=5.0)

    def pause(self) -> None:
        """SIGSTOP: the broker holds its connections but answers nothing (a long GC pause, a hung VM)."""
        self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after pause()."""
        self._signal_group(signal.SIGCONT)

    def restart(self, sig: int = signal.SIGTERM, timeout: float = START_TIMEOUT_S) -> None:
        """Stop with `sig` (if running) and start again on the same port and log dir."""
        self.stop(sig)
        self.wait_port_released()
        self.start(timeout)

    def wait_port_released(self, timeout: float = 5.0) -> None:
        """Wait until nothing accepts on our port (a listener closing can linger for a moment)."""
        deadline = time.monotonic() + timeout
        while self.port and port_accepts(self.port, timeout=0.2) and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        """Stop the broker and remove the temporary directory this object made (if any);
        KAFKAPY_TEST_KEEP_DATA=1 keeps it for a look after the test."""
        try:
            self.stop()
        finally:
            if self._root is not None and not os.environ.get("KAFKAPY_TEST_KEEP_DATA"):
                shutil.rmtree(self._root, ignore_errors=True)
                if self._log_path is not None and self._log_path.parent == self._root.parent:
                    self._log_path.unlink(missing_ok=True)
                self._root = self._log_dir = self._log_path = None

    def __enter__(self) -> BrokerLauncher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BrokerLauncher({self.name}, {self.mode}, {self.bootstrap}, running={self.running})"

    # -- a child process ----------------------------------------------------------------------------
    def _launch_process(self) -> None:
        if not self.port:
            self.port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.command()
        self.control_url = None
        with open(self.log_path, "ab") as output:
            output.write(f"===== start #{self.starts} {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                         f"{shlex.join(_redacted(argv))}\n".encode())
            output.flush()
            self._output_start = output.tell()
            self.spawned_at = time.perf_counter()  # for start-up timings (bench/broker)
            self.proc = subprocess.Popen(argv, cwd=PACKAGE_PARENT, stdin=subprocess.DEVNULL, stdout=output,
                                         stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        _live.add(self)
        stop_children_on_sigterm()

    def _read_control_url(self) -> None:
        # printed (and flushed) before the broker serves, so it is in the log by now
        for line in self.output().splitlines():
            if line.startswith(CONTROL_PREFIX):
                self.control_url = line[len(CONTROL_PREFIX):].strip()

    def _reap(self) -> None:
        """SIGKILL whatever is left of the process's session (the broker and anything it started)."""
        proc = self.proc
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            log.error("%s (pid %d) survived SIGKILL for 10 s", self.name, proc.pid)
        _live.discard(self)

    def _signal_group(self, sig: int) -> None:
        if self.mode == "thread":
            raise RuntimeError("pause() and resume() need mode='process': a thread cannot be stopped alone")
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def _failure(self, what: str) -> str:
        if self.mode == "thread":
            return f"{self.name} on {self.bootstrap} {what}: {self._error!r}"
        return (f"{self.name} on {self.bootstrap} {what}.\ncommand: {shlex.join(_redacted(self.command()))}\n"
                f"log: {self.log_path}\n----- last output -----\n{self.log_tail()}\n-----------------------")

    # -- in this process ----------------------------------------------------------------------------
    def _launch_thread(self) -> None:
        from ..broker.config import BrokerConfig
        from ..broker.listener import bind_listener

        sockets = bind_listener(HOST, self.port)
        self.port = sockets[0].getsockname()[1]
        # Kafka's single-node quickstart settings (as `kafkapy serve` without a file), then ours
        try:
            config = BrokerConfig.from_properties_file(None, [f"{k}={v}" for k, v in self.settings().items()])
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        started = threading.Event()
        self._started = started
        self._error = None
        self._killed = False

        async def main() -> None:
            from ..node import build_broker

            self._loop = asyncio.get_running_loop()
            self._stop_event = asyncio.Event()
            broker = build_broker(config, sockets)
            if self.on_broker is not None:
                self.on_broker(broker)
            self.broker = broker
            try:
                await broker.start()
            finally:
                started.set()
            await self._stop_event.wait()
            if self._killed:
                # as abrupt as a killed process can be made in-process: connections and listeners
                # go, nothing is flushed or checkpointed, no clean-shutdown marker is written
                broker.close_listeners()
                for connection in list(broker.connections):
                    connection.close()
                return
            await broker.stop()

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:  # reported by wait_ready()
                self._error = exc
                log.debug("%s on port %s ended with %r", self.name, self.port, exc)
            finally:
                started.set()

        self._thread = threading.Thread(target=run, name=f"kafkapy-{self.name}-{self.port}", daemon=True)
        self._thread.start()

    def _wait_thread_started(self, timeout: float) -> None:
        if not self._started.wait(timeout) or self._error is not None:
            error = self._error
            self._halt_thread(killed=True, timeout=STOP_TIMEOUT_S)
            raise BrokerStartError(f"{self.name} on {self.bootstrap} did not start: {error or 'timed out'}")

    def _halt_thread(self, killed: bool, timeout: float) -> None:
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and stop_event is not None and not loop.is_closed():
            self._killed = killed
            try:
                loop.call_soon_threadsafe(stop_event.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        thread.join(timeout)
        if thread.is_alive():
            self._unblock(thread, timeout)
        if killed and self.broker is not None:
            # what a killed process would leave: files open, nothing flushed; close the descriptors
            # so that a restart can reopen the logs (the OS keeps what was written)
            try:
                self.broker.logs.close()
            except Exception:
                log.exception("closing the logs of killed %s", self.name)
        self._thread = self._loop = self._stop_event = self.broker = None

    def _unblock(self, thread: threading.Thread, timeout: float) -> None:
        """A broker thread that did not stop in time is most likely waiting on ZooKeeper (kazoo
        retries a command for ever while the connection is down, and asyncio.run waits for such
        calls at the end; so would the interpreter at exit). Closing its session makes those calls
        fail, so the thread can finish instead of outliving the test."""
        self.last_stop_needed_kill = True
        log.warning("%s on port %s did not stop within %.0f s; closing its ZooKeeper session",
                    self.name, self.port, timeout)
        zk = getattr(getattr(self.broker, "cluster", None), "zk", None)
        if zk is not None:
            try:
                zk.close()
            except Exception:
                log.exception("closing the ZooKeeper session of %s", self.name)
        thread.join(timeout)
