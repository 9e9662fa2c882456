"""KafkaBroker: one kafkapy broker for a test, in this process (an event-loop thread) or a child process."""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .clients import KafkaClients
from .faults import BrokerFaults
from .storage import STORAGES, MemoryStorageUnavailable, data_directory

log = logging.getLogger(__name__)

__all__ = ["KafkaBroker", "KafkaBrokerError"]

HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
READY_PREFIX = "KAFKAPY_BOOTSTRAP="


class KafkaBrokerError(RuntimeError):
    """The broker could not start (the message says why) or stopped unexpectedly."""


CREATE_TOPICS_VERSION = 5


def create_topic_request(name: str, partitions: int, replication_factor: int, config: dict[str, str] | None,
                         timeout: float):
    """The CreateTopics request for one topic (KafkaBroker.create_topic, KafkaCluster.create_topic)."""
    from ..protocol.messages import CreateTopicsRequest

    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=str(v)) for k, v in (config or {}).items()])
    return CreateTopicsRequest(topics=[topic], timeout_ms=int(timeout * 1000), validate_only=False)


def check_topic_created(name: str, response) -> None:
    """Raise KafkaBrokerError unless the CreateTopics answer says created (or already there)."""
    from ..protocol.errors import ErrorCode

    code = response.topics[0].error_code
    if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        raise KafkaBrokerError(f"CreateTopics {name}: {error_name(code)}: {response.topics[0].error_message}")


def error_name(code: int) -> str:
    """A Kafka error code's name (the number itself if kafkapy does not know it)."""
    from ..protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class KafkaBroker(KafkaClients, BrokerFaults):
    """A kafkapy broker for tests; a context manager (sync and async) that starts and stops it.

    `isolation`: "thread" (default; the broker runs in this process, in its own event loop on a
    daemon thread) or "process" (`python -m kafkapy serve --ephemeral` as a child process).
    `storage`: "disk" (default) or "memory" (the logs on a memory file system, see storage.py).
    `data_dir`: where the logs go (default: a temporary directory on `storage`, removed on stop).
    Other keyword arguments are broker properties, e.g. `**{"num.partitions": "3"}`.
    """

    def __init__(self, *, isolation: str = "thread", storage: str = "disk", data_dir: str | os.PathLike | None = None,
                 port: int = 0, **properties: Any):
        if isolation not in ("thread", "process"):
            raise ValueError(f"isolation must be 'thread' or 'process', not {isolation!r}")
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {', '.join(STORAGES)}, not {storage!r}")
        self.isolation = isolation
        self.storage = storage
        self.properties = {key: str(value) for key, value in properties.items()}
        self._owns_dir = data_dir is None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._requested_port = port
        self.port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._broker = None
        self._proc: subprocess.Popen | None = None
        self._error: BaseException | None = None

    # -- what tests use ----------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise KafkaBrokerError("the broker is not running")
        return f"{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise KafkaBrokerError("the broker has not been started")
        return self._data_dir

    @property
    def running(self) -> bool:
        if self.isolation == "process":
            return self._proc is not None and self._proc.poll() is None
        return self._thread is not None and self._thread.is_alive()

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict[str, str] | None = None, timeout: float = 30.0) -> None:
        """Create a topic over the wire (CreateTopics), waiting for the answer."""
        from ..net.client import BrokerConnection
        request = create_topic_request(name, partitions, replication_factor, config, timeout)

        async def send():
            connection = BrokerConnection(HOST, self.port, client_id="kafkapy-testing", request_timeout_s=timeout)
            try:
                return await connection.send(request, CREATE_TOPICS_VERSION)
            finally:
                connection.close()

        check_topic_created(name, asyncio.run(send()))

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> KafkaBroker:
        if self.running:
            return self
        if self._data_dir is None:
            try:
                self._data_dir = data_directory(self.storage)
            except MemoryStorageUnavailable as exc:
                raise KafkaBrokerError(str(exc)) from None
        try:
            if self.isolation == "process":
                self._start_process(timeout)
            else:
                self._start_thread(timeout)
        except BaseException:
            self._halt(signal.SIGKILL, STOP_TIMEOUT_S)
            self._forget_files()
            raise
        return self

    def _forget_files(self) -> None:
        """Remove the temporary data directory and process log (only what this object created)."""
        if self._owns_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            log_path = getattr(self, "_log_path", None)
            if log_path is not None:
                log_path.unlink(missing_ok=True)
            self._data_dir = None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the broker (cleanly) and remove its temporary data directory."""
        self._halt(signal.SIGTERM, timeout)
        self._forget_files()

    def restart(self, timeout: float = START_TIMEOUT_S) -> None:
        """Stop cleanly and start again on the same port with the same data."""
        self._requested_port = self.port or self._requested_port
        self._halt(signal.SIGTERM, STOP_TIMEOUT_S)
        self.start(timeout)

    def kill(self) -> None:
        """Stop at once, as kill -9 would (process isolation: SIGKILL; thread: the loop stops without
        the clean shutdown). The data stays until stop(); start() or restart() brings it back."""
        self._halt(signal.SIGKILL, STOP_TIMEOUT_S)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> KafkaBroker:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    # -- in this process ------------------------------------------------------------------------
    def _settings(self, port: int) -> dict[str, str]:
        listener = f"PLAINTEXT://{HOST}:{port}"
        return {"listeners": listener, "advertised.listeners": listener, "log.dirs": str(self._data_dir),
                **self.properties}

    def _start_thread(self, timeout: float) -> None:
        from ..broker.config import BrokerConfig
        from ..broker.listener import bind_listener

        # Kafka's single-node quickstart settings (as `kafkapy serve` without a file), then ours
        config = BrokerConfig.from_properties_file(
            None, [f"{key}={value}" for key, value in self._settings(self._requested_port).items()])
        sockets = bind_listener(HOST, self._requested_port)
        self.port = sockets[0].getsockname()[1]
        ready = threading.Event()
        self._error = None

        async def main() -> None:
            from ..broker.broker import Broker

            self._loop = asyncio.get_running_loop()
            self._stop_event = asyncio.Event()
            broker = Broker(config, sockets)
            self._install_faults(broker)  # inject(), recorded(): testing/faults.py
            try:
                await broker.start()
            except BaseException as exc:
                self._error = exc
                ready.set()
                raise
            self._broker = broker
            ready.set()
            await self._stop_event.wait()
            if self._stop_event.killed:  # type: ignore[attr-defined]
                # as abrupt as a killed process can be made in-process: connections and listeners
                # go, nothing is flushed or checkpointed, no clean-shutdown marker is written
                for server in broker._servers:
                    server.close()
                for connection in list(broker.connections):
                    connection.close()
                return
            await broker.stop()

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:  # reported by start() or the next stop()
                if self._error is None:
                    self._error = exc
            finally:
                ready.set()

        self._thread = threading.Thread(target=run, name=f"kafkapy-broker-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or self._error is not None:
            error = self._error
            self._halt(signal.SIGKILL, STOP_TIMEOUT_S)
            raise KafkaBrokerError(f"the broker did not start: {error or 'timed out'}")

    # -- a child process ------------------------------------------------------------------------
    def _unblock(self, thread: threading.Thread) -> None:
        """A broker thread that did not stop in time is most likely waiting on ZooKeeper (kazoo
        retries a command for ever while the connection is down, and asyncio.run waits for such
        calls at the end; so would the interpreter at exit). Closing its session makes those calls
        fail, so the thread can finish instead of outliving the test."""
        log.warning("broker on port %s did not stop within %.0f s; closing its ZooKeeper session",
                    self.port, STOP_TIMEOUT_S)
        cluster = getattr(self._broker, "cluster", None)
        zk = getattr(cluster, "zk", None)
        if zk is not None:
            try:
                zk.close()
            except Exception:
                log.exception("closing the ZooKeeper session of the broker on port %s", self.port)
        thread.join(STOP_TIMEOUT_S)

    def _start_process(self, timeout: float) -> None:
        argv = [sys.executable, "-m", "kafkapy", "serve", "--ephemeral", "--control",
                "--port", str(self._requested_port),
                "--override", f"log.dirs={self._data_dir}"]
        for key, value in self.properties.items():
            argv += ["--override", f"{key}={value}"]
        log_path = self._data_dir.parent / f"{self._data_dir.name}.log" if self._owns_dir else self._data_dir / "broker.log"
        self._log_path = log_path
        with open(log_path, "ab") as log_file:
            self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        deadline = time.monotonic() + timeout
        line = b""
        assert self._proc.stdout is not None
        reader = threading.Thread(target=lambda: setattr(self, "_ready_line",
                                                          self._read_ready_lines(self._proc.stdout)),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        line = getattr(self, "_ready_line", b"")
        text = line.decode(errors="replace").strip()
        if not text.startswith(READY_PREFIX) or time.monotonic() > deadline:
            self._halt(signal.SIGKILL, STOP_TIMEOUT_S)
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise KafkaBrokerError(f"the broker process did not start:\n{tail}")
        self.port = int(text.rsplit(":", 1)[1])

    def _halt(self, sig: int, timeout: float) -> None:
        if self.isolation == "process":
            proc, self._proc = self._proc, None
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout)
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()
            return
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and stop_event is not None and not loop.is_closed():
            stop_event.killed = sig == signal.SIGKILL  # type: ignore[attr-defined]
            try:
                loop.call_soon_threadsafe(stop_event.set)
            except RuntimeError:
                pass
        thread.join(timeout)
        if thread.is_alive():
            self._unblock(thread)
        if sig == signal.SIGKILL and self._broker is not None:
            # what a killed process would leave: files open, nothing flushed; close the descriptors
            # so that a restart can reopen the logs (the OS keeps what was written)
            try:
                self._broker.logs.close()
            except Exception:
                pass
        self._thread = self._loop = self._stop_event = self._broker = None

