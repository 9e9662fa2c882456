"""The broker: wires config, metadata store, partition logs and the network server together."""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from ..log.manager import LogManager
from ..log.producer_ids import ProducerIdAllocator
from ..protocol.api_versions import SUPPORTED_VERSIONS
from . import handlers  # noqa: F401  (registers every handler)
from .connection import KafkaConnection
from .dispatch import HANDLERS
from .fetch_sessions import FetchSessionCache
from .partitions import PartitionManager
from .purgatory import Purgatory

log = logging.getLogger(__name__)


class Broker:
    """One kafkapy broker process: owns the listener, the partitions it leads and their logs."""

    def __init__(self, config):
        self.config = config
        self.node_id: int = config.node_id
        self.bind_host, self.port = config.listener_address()
        self.advertised_host, self.advertised_port = config.advertised_address()
        self.log_dirs: list[str] = config.log_dirs
        self.data_dir = Path(self.log_dirs[0])
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.connections: set[KafkaConnection] = set()
        self.purgatory = Purgatory()
        self.fetch_sessions = FetchSessionCache(
            max_sessions=config.get("max.incremental.fetch.session.cache.slots"))
        self.advertised_versions = {key: rng for key, rng in SUPPORTED_VERSIONS.items() if key in HANDLERS}
        self.metadata = self._open_metadata_store()
        self.logs = LogManager(self.log_dirs, config.default_log_config())
        self.partitions = PartitionManager(self)
        self.producer_ids = ProducerIdAllocator(self.data_dir / "kafkapy-producer-ids")
        self.group_coordinator = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task] = []
        self.started_at = time.monotonic()

    def _open_metadata_store(self):
        from .config import open_metadata_store

        store = open_metadata_store(self.config)
        store.register_broker(self.node_id, self.advertised_host, self.advertised_port,
                              self.config.get("broker.rack"))
        return store

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    async def start(self) -> None:
        """Load logs, open the listener, start the periodic tasks."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self), self.bind_host, self.port, reuse_address=True,
            backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.advertised_port == 0:
            self.advertised_port = self.port
            self.metadata.register_broker(self.node_id, self.advertised_host, self.port,
                                          self.config.get("broker.rack"))
        self.logs.load()
        self.partitions.sync_with_metadata()
        self._tasks.append(loop.create_task(self._periodic(
            self.logs.run_retention, self.config.get("log.retention.check.interval.ms") / 1000)))
        self._tasks.append(loop.create_task(self._periodic(self.logs.flush_dirty, 1.0)))
        log.info("kafkapy broker %d listening on %s:%d (advertised %s:%d), cluster id %s, data in %s,"
                 " started in %.3f s", self.node_id, self.bind_host, self.port, self.advertised_host,
                 self.advertised_port, self.cluster_id, ",".join(self.log_dirs),
                 time.monotonic() - self.started_at)

    async def _periodic(self, fn, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                fn()
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish, flush logs and write checkpoints."""
        log.info("kafkapy broker %d shutting down", self.node_id)
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        self.purgatory.wake_all()
        deadline = time.monotonic() + 5
        while any(c._worker is not None for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        if self.group_coordinator is not None:
            self.group_coordinator.close()
        self.logs.close()
        self.metadata.close()
        log.info("kafkapy broker %d stopped", self.node_id)


async def serve(config, stop_event: asyncio.Event | None = None) -> None:
    """Run a broker until `stop_event` is set (or forever)."""
    broker = Broker(config)
    await broker.start()
    try:
        await (stop_event.wait() if stop_event is not None else asyncio.Event().wait())
    finally:
        await broker.stop()

