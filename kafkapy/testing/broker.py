"""KafkaBroker: one kafkapy broker for a test, in this process (an event-loop thread) or a child process.

Starting, stopping, killing and restarting are the broker launcher's (kafkapy.devcluster.launcher);
this adds what a test wants on top: the client helpers, fault injection, topic creation."""
from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

from ..devcluster.launcher import HOST, BrokerLauncher, BrokerStartError, free_port
from ..devcluster.storage import STORAGES, MemoryStorageUnavailable
from .clients import KafkaClients
from .faults import BrokerFaults

log = logging.getLogger(__name__)

__all__ = ["KafkaBroker", "KafkaBrokerError"]

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class KafkaBrokerError(RuntimeError):
    """The broker could not start (the message says why) or stopped unexpectedly."""


CREATE_TOPICS_VERSION = 5
SCHEMA_REGISTRY_LISTENER = "kafkapy.schema.registry.listener"


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
    daemon thread) or "process" (`python -m kafkapy serve --control` as a child process).
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
        registry = self.properties.get(SCHEMA_REGISTRY_LISTENER, "")
        if registry.rstrip("/").endswith(":0"):
            # a fixed port, so that the registry's URL is known before the start and kept by restarts
            self.properties[SCHEMA_REGISTRY_LISTENER] = f"http://{HOST}:{free_port()}"
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._launcher = BrokerLauncher(
            self.properties, mode=isolation, port=port, storage=storage,
            log_dir=self._data_dir,
            control=isolation == "process",  # inject(), recorded(): through the child's control endpoint
            on_broker=self._install_faults if isolation == "thread" else None,  # testing/faults.py
            name="testing-broker")

    # -- what tests use ----------------------------------------------------------------------
    @property
    def port(self) -> int | None:
        """The broker's port once it has been started (kept across kill/stop and restart)."""
        return self._launcher.port or None

    @property
    def bootstrap_servers(self) -> str:
        if not self._launcher.port:
            raise KafkaBrokerError("the broker is not running")
        return f"{HOST}:{self._launcher.port}"

    @property
    def schema_registry_url(self) -> str | None:
        """The built-in schema registry's URL when the broker runs with kafkapy.schema.registry.listener
        (http://127.0.0.1:0 picks a free port), else None."""
        return self.properties.get(SCHEMA_REGISTRY_LISTENER) or None

    @property
    def data_dir(self) -> Path:
        if self._data_dir is not None:
            return self._data_dir
        if self._launcher.temporary_dir is not None:  # made at start, removed by stop()
            return self._launcher.log_dir
        raise KafkaBrokerError("the broker has not been started")

    @property
    def running(self) -> bool:
        return self._launcher.running

    @property
    def _proc(self):
        """The child process (isolation="process"), for tests that want its pid."""
        return self._launcher.proc

    @property
    def _broker(self):
        """The in-process Broker while it runs (isolation="thread")."""
        return self._launcher.broker

    @property
    def _control_url(self) -> str | None:  # type: ignore[override]  # BrokerFaults reads it
        return self._launcher.control_url

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict[str, str] | None = None, timeout: float = 30.0) -> None:
        """Create a topic over the wire (CreateTopics), waiting for the answer."""
        from ..net.client import request_once

        request = create_topic_request(name, partitions, replication_factor, config, timeout)
        response = asyncio.run(request_once(HOST, self.port, request, CREATE_TOPICS_VERSION, timeout_s=timeout,
                                            client_id="kafkapy-testing"))
        check_topic_created(name, response)

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> KafkaBroker:
        if self.running:
            return self
        try:
            self._launcher.start(timeout)
        except MemoryStorageUnavailable as exc:
            raise KafkaBrokerError(str(exc)) from None
        except BrokerStartError as exc:
            self._launcher.close()
            raise KafkaBrokerError(f"the broker did not start: {exc}") from None
        except BaseException:
            self._launcher.close()
            raise
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop the broker (cleanly) and remove its temporary data directory."""
        self._launcher.stop(signal.SIGTERM, timeout)
        self._launcher.close()

    def restart(self, timeout: float = START_TIMEOUT_S) -> None:
        """Stop cleanly and start again on the same port with the same data."""
        self._launcher.stop(signal.SIGTERM, STOP_TIMEOUT_S)
        self.start(timeout)

    def kill(self) -> None:
        """Stop at once, as kill -9 would (process isolation: SIGKILL; thread: the loop stops without
        the clean shutdown). The data stays until stop(); start() or restart() brings it back."""
        self._launcher.kill9()

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> KafkaBroker:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)
