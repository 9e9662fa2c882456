"""The broker: wires config, metadata store, partition logs and the network server together.

Broker is the composition root: it builds every part with that part's collaborators (the
membership with plain values, then `attach`; the partition and replica managers; the fault
injector), never with itself, except for the handler-facing bundle, which is the Broker by design
(interfaces.HandlerServices: ConnectionServices.handlers, the contexts of requests, and the group
and transaction coordination built lazily from it)."""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, Sequence

from ..log.manager import LogManager
from ..protocol.api_versions import CLUSTER_VERSIONS, SUPPORTED_VERSIONS
from .connection import ConnectionServices, KafkaConnection, close_hung_up, peer_log
from .connection_quotas import ConnectionQuotas
from .dispatch import HANDLERS
from .listener import bind_listener
from .memory_pool import MemoryPool, pool_capacity
from .partitions import PartitionManager
from ..replication.purgatory import Purgatory
from ..replication.replica_manager import ReplicaManager

if TYPE_CHECKING:
    from .fetch_sessions import FetchSessionCache

log = logging.getLogger(__name__)

# How long a TLS client may take to complete its handshake before the connection is closed.
SSL_HANDSHAKE_TIMEOUT_S = 10.0


class BrokerService(Protocol):
    """A service above the broker layer (the web console, the schema registry, the tables service)
    that the composition root (kafkapy/node.py) attaches to a broker, so that the broker never
    imports it: started at its phase, stopped first when the broker stops (in reverse order).
    Phase "listeners": after the logs are loaded, before the Kafka listeners serve (a service that
    must answer as soon as the broker does); "started": once everything else has started."""

    phase: Literal["listeners", "started"]

    async def start(self, broker: Broker) -> None: ...

    async def stop(self, broker: Broker) -> None: ...


class Broker:
    """One kafkapy broker process: owns the listener, the partitions it leads and their logs.
    `services` are attached by the composition root (kafkapy/node.py, BrokerService)."""

    def __init__(self, config, sockets: dict[str, list] | list | None = None,
                 services: Sequence[BrokerService] = ()):
        self.config = config
        self._services = tuple(services)
        # pre-bound listening sockets by listener name (a bare list: the first listener's)
        if isinstance(sockets, list):
            sockets = {config.listeners[0].name: sockets}
        self._sockets = sockets or {}
        # listener name -> advertised (host, port); ports of port-0 listeners are filled in at start
        self.endpoints: dict[str, tuple[str, int]] = {
            lst.name: (lst.host, lst.port) for lst in config.advertised_listeners}
        # TLS contexts of SSL/SASL_SSL listeners, built before anything else so that bad key
        # material stops the broker before it loads logs or accepts a connection
        self._ssl_contexts = {lst.name: None for lst in config.listeners}
        if any(lst.security_protocol in ("SSL", "SASL_SSL") for lst in config.listeners):
            from ..security.tls import server_ssl_context  # ssl contexts only where a listener has TLS

            self._ssl_contexts = {lst.name: server_ssl_context(config, lst) for lst in config.listeners}
        self.node_id: int = config.node_id
        self.bind_host, self.port = config.listener_address()
        self.advertised_host, self.advertised_port = config.advertised_address()
        self.log_dirs: list[str] = config.log_dirs
        self.data_dir = Path(self.log_dirs[0])
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.connections: set[KafkaConnection] = set()
        # request and topic counters (kafkapy/metrics); the Prometheus endpoint when configured
        from ..metrics import BrokerMetrics

        self.metrics = BrokerMetrics()
        self.metrics_server = None
        # bytes of requests held in memory (queued.max.request.bytes) and the connection limits
        self.memory_pool = MemoryPool(pool_capacity(config.get("queued.max.request.bytes"),
                                                    config.get("socket.request.max.bytes")))
        self.connection_quotas = ConnectionQuotas(config, config.get("inter.broker.listener.name") or (
            config.get("security.inter.broker.protocol") if config.get("zookeeper.connect") else None))
        self.purgatory = Purgatory()
        self._fetch_sessions: FetchSessionCache | None = None  # built on the first Fetch
        self.advertised_versions = {key: rng for key, rng in SUPPORTED_VERSIONS.items() if key in HANDLERS}
        if "consumer" not in [p.lower() for p in config.get("group.coordinator.rebalance.protocols")]:
            # as Kafka: the KIP-848 APIs are not advertised while the consumer protocol is off
            for key in (68, 69):  # ConsumerGroupHeartbeat, ConsumerGroupDescribe
                self.advertised_versions.pop(key, None)
        if "streams" not in [p.lower() for p in config.get("group.coordinator.rebalance.protocols")]:
            for key in (88, 89):  # StreamsGroupHeartbeat, StreamsGroupDescribe
                self.advertised_versions.pop(key, None)
        if not config.get("group.share.enable"):
            # share.version=0 in Kafka's terms: the share group APIs are not advertised
            for key in (76, 77, 78, 79, 90, 91, 92):
                self.advertised_versions.pop(key, None)
        self._share_coordination = None  # built on the first share request (share_coordination)
        # KIP-714 client telemetry: the client instances and what they pushed (handlers/telemetry.py),
        # shown on /metrics and in the console; protobuf is imported on the first push only. As
        # Kafka without a ClientTelemetry metrics reporter: with nowhere to show pushed client
        # metrics, clients are not asked to push them (and nothing of it is imported).
        self.client_telemetry = None
        if config.get("kafkapy.metrics.listener") or config.get("kafkapy.console.listener"):
            from ..metrics.client_telemetry import ClientTelemetry

            self.client_telemetry = ClientTelemetry()
        else:
            for key in (71, 72):  # GetTelemetrySubscriptions, PushTelemetry
                self.advertised_versions.pop(key, None)
        self.broker_epoch = -1
        # The membership: a cluster of one (single node, the embedded metadata store decides where
        # partitions live) or a ZooKeeper cluster member (zookeeper.connect, docs/cluster.md) with
        # the controller object. Everything below takes the same path with either.
        self.cluster = self._join_cluster()
        self.controller = self.cluster.controller
        self.metadata = self.cluster.metadata
        # ACL enforcement (security/authorizer.py); None without authorizer.class.name: nothing is checked
        self.authorizer = None
        if (config.get("authorizer.class.name") or "").strip():
            from ..security.authorizer import create_authorizer

            self.authorizer = create_authorizer(config.get, self.metadata)
        self.readvertise()  # a stored dynamic advertised.listeners wins over the static one
        from ..log.cleaner import CleanerConfig

        self.logs = LogManager(self.log_dirs, config.default_log_config(), cleaner_config=CleanerConfig(
            enable=config.get("log.cleaner.enable"), threads=config.get("log.cleaner.threads"),
            backoff_ms=config.get("log.cleaner.backoff.ms"),
            dedupe_buffer_size=config.get("log.cleaner.dedupe.buffer.size"),
            io_buffer_load_factor=config.get("log.cleaner.io.buffer.load.factor"),
            io_max_bytes_per_second=config.get("log.cleaner.io.max.bytes.per.second")))
        self.partitions = PartitionManager(config, self.metadata, self.logs, self.purgatory, self.cluster)
        # appends, reads, leader/follower state and acks=all waits of every partition hosted here
        self.replicas = ReplicaManager(self.node_id, self.config, self.metadata, self.partitions, self.logs,
                                       self.purgatory, self.metrics, lambda: self.broker_epoch)
        self.partitions.replicas = self.replicas
        # the membership was built first (its metadata store is everyone's): it gets the rest now
        self.cluster.attach(logs=self.logs, partitions=self.partitions, replicas=self.replicas,
                            fetch_sessions=lambda: self.fetch_sessions)
        self.producer_ids = self.cluster.producer_ids()
        # The group and transaction coordinators are built on first use (the properties below):
        # a group or transaction request, or a partition of their topic to load here. A broker
        # that never sees one never imports them (start-up time, issue 21).
        self._group_coordination = None
        self._transaction_coordination = None
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start(): coordinators start on it
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: list[asyncio.Task] = []
        # set when every log dir is offline after I/O errors: serve() stops the broker (Kafka halts)
        self.fatal_error = asyncio.Event()
        self.console = None  # the web console (kafkapy/console), when kafkapy.console.listener is set
        self.schema_registry = None  # kafkapy/schemaregistry, when kafkapy.schema.registry.listener is set
        self.tables = None  # kafkapy/tables, once a topic with kafkapy.iceberg.mode set is led here
        self.faults = None  # fault injection (broker/faults.py), when a launcher turns it on: enable_faults
        self.started_at = time.monotonic()
        # client quotas (security/quotas.py) follow the stored ones; `.current` is None while there are none
        from ..security.quota_tracker import ClientQuotaTracker

        self.client_quotas = ClientQuotaTracker(self.metadata)
        # what every connection shares (one bundle: making a connection copies four references)
        self.connection_services = ConnectionServices(self, self.connections, self.memory_pool,
                                                      self.connection_quotas)

    def _join_cluster(self):
        if self.config.get("zookeeper.connect"):
            from .cluster_member import ClusterMember  # ZooKeeper and the controller load only here

            self.advertised_versions.update(CLUSTER_VERSIONS)
            return ClusterMember(self.config, self.endpoints, self.registered)
        from .cluster_of_one import ClusterOfOne

        return ClusterOfOne(self.config, self.advertised_host, self.advertised_port, self.endpoints, self.data_dir)

    @property
    def group_coordination(self):
        """The group coordinator wired to this broker (broker/group_coordination.py), built and
        started on first use."""
        if self._group_coordination is None:
            from .group_coordination import GroupCoordination

            self._group_coordination = GroupCoordination(self)
            if self._loop is not None:
                self._group_coordination.start(self._loop)
        return self._group_coordination

    @property
    def group_coordinator(self):
        return self.group_coordination.coordinator

    @property
    def loaded_group_coordinator(self):
        """The group coordinator if it was built, else None (no group has been seen): for readers
        such as metrics and the console, which must not build it."""
        return None if self._group_coordination is None else self._group_coordination.coordinator

    @property
    def transaction_coordination(self):
        """The transaction coordinator wired to this broker (broker/transaction_coordination.py),
        built and started on first use."""
        if self._transaction_coordination is None:
            from .transaction_coordination import TransactionCoordination

            self._transaction_coordination = TransactionCoordination(self)
            if self._loop is not None:
                self._transaction_coordination.start(self._loop)
        return self._transaction_coordination

    @property
    def transaction_coordinator(self):
        return self.transaction_coordination.coordinator

    def _start_coordinators(self, loop: asyncio.AbstractEventLoop) -> None:
        """Build the coordinators now if their topic exists (they have partitions to load), else
        when it appears: the metadata store's listener builds a coordinator as soon as its topic
        is created, here or (in a cluster) by another broker, before any of its partitions can be
        led here."""
        self._loop = loop
        from ..metadata.topic_rules import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

        if self.partitions.topic(OFFSETS_TOPIC) is not None:
            self.group_coordination  # noqa: B018  loads __consumer_offsets partitions led here
        # after the groups: finishing prepared transactions may complete transactional offsets
        if self.partitions.topic(TRANSACTION_STATE_TOPIC) is not None:
            self.transaction_coordination  # noqa: B018

        def on_change(change) -> None:
            topic = getattr(change, "topic", None)
            name = getattr(topic, "name", None)
            if name == OFFSETS_TOPIC and self._group_coordination is None:
                loop.call_soon_threadsafe(lambda: self.group_coordination)
            elif name == TRANSACTION_STATE_TOPIC and self._transaction_coordination is None:
                loop.call_soon_threadsafe(lambda: self.transaction_coordination)

        self.metadata.add_listener(on_change)

    @property
    def share_coordination(self):
        """Share group coordination (KIP-932, broker/share_coordination.py), imported and built on
        the first share request."""
        if self._share_coordination is None:
            from .share_coordination import ShareCoordination

            self._share_coordination = ShareCoordination(
                self.config, self.metadata, self.partitions, self.replicas, self.purgatory,
                lambda: self.group_coordinator, self.node_id)
        return self._share_coordination

    @property
    def share_groups(self):
        """The share group coordinator (kafkapy/groupcoord/share) of share_coordination."""
        return self.share_coordination.groups

    @property
    def loaded_share_groups(self):
        """The share group coordinator if a share request built it, else None: for readers such as
        metrics and the group handlers, which must not build it."""
        return None if self._share_coordination is None else self._share_coordination.groups

    def serving(self) -> bool:
        """Whether a listener still accepts connections (True before they are opened)."""
        return not self._servers or any(server.is_serving() for server in self._servers)

    def close_listeners(self) -> None:
        """Stop accepting connections (an in-process launcher's kill: nothing else is stopped)."""
        for server in self._servers:
            server.close()

    def enable_faults(self, control: str | None = None):
        """Turn fault injection on (call on the broker's loop): requests are recorded and rules may
        delay, fail or drop them; `control` (else kafkapy.control.listener) starts its endpoint."""
        if self.faults is None:
            from .faults import FaultInjector

            self.faults = FaultInjector(
                config=self.config, logs=self.logs, topic_by_id=self.partitions.topic_by_id, node_id=self.node_id,
                advertised=lambda: (self.advertised_host, self.advertised_port),
                cluster_id=lambda: self.metadata.cluster_id, serving=self.serving)
        self.faults.activate(control)
        return self.faults

    def registered(self, broker_epoch: int) -> None:
        """Cluster mode: ZooKeeper registered this broker; its broker epoch is the node's czxid."""
        self.broker_epoch = broker_epoch

    def readvertise(self) -> None:
        """Register the advertised address again after a dynamic advertised.listeners change."""
        host, port = self.config.advertised_address()
        port = port or self.port
        if (host, port) != (self.advertised_host, self.advertised_port):
            self.advertised_host, self.advertised_port = host, port
            self.metadata.register_broker(self.node_id, host, port, self.config.get("broker.rack"))
            log.info("broker %d now advertises %s:%d", self.node_id, host, port)

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        """Incremental fetch sessions (KIP-227, fetch_sessions.py), built on the first Fetch."""
        if self._fetch_sessions is None:
            from .fetch_sessions import FetchSessionCache

            self._fetch_sessions = FetchSessionCache(
                max_sessions=self.config.get("max.incremental.fetch.session.cache.slots"))
        return self._fetch_sessions

    async def start(self) -> None:
        """Load logs, open the listener, start the periodic tasks."""
        loop = asyncio.get_running_loop()
        # The sockets already listen (bound before the imports), so clients queue in the backlog
        # while logs load; requests are served only once everything below is ready.
        bound: dict[str, list] = {}
        for listener in self.config.listeners:
            sockets = self._sockets.get(listener.name) or bind_listener(listener.bind_host, listener.port)
            bound[listener.name] = sockets
            port = sockets[0].getsockname()[1]
            host, advertised_port = self.endpoints.get(listener.name, (None, None))
            if host is not None and advertised_port == 0:
                self.endpoints[listener.name] = (host, port)
        first = self.config.listeners[0]
        self.port = bound[first.name][0].getsockname()[1]
        if self.advertised_port == 0:
            self.advertised_port = self.port
            self.metadata.register_broker(self.node_id, self.advertised_host, self.port,
                                          self.config.get("broker.rack"))
        # Recovery needs each topic's own config (e.g. compacted topics may have offset gaps).
        topics = await self.cluster.topic_names()
        self.logs.load({name: self.partitions.log_config(name) for name in topics})
        self.partitions.sync_with_metadata()
        self._start_coordinators(loop)
        for service in self._services:
            if service.phase == "listeners":
                await service.start(self)
        for listener in self.config.listeners:
            context = self._ssl_contexts.get(listener.name)
            for sock in bound[listener.name]:
                self._servers.append(await loop.create_server(
                    lambda listener=listener: KafkaConnection(self.connection_services, listener), sock=sock, ssl=context,
                    ssl_handshake_timeout=SSL_HANDSHAKE_TIMEOUT_S if context is not None else None))
        await self.replicas.start()
        await self.cluster.start(self.advertised_host, self.advertised_port)
        self._tasks.append(loop.create_task(self._periodic(
            self.logs.run_retention, self.config.get("log.retention.check.interval.ms") / 1000)))
        self._tasks.append(loop.create_task(self._periodic(self.logs.flush_dirty, 1.0)))
        # log dir failures (log/dir_health.py): heard from any thread, handled on the loop; a
        # full dir is probed off the loop until it takes writes again
        self.logs.dir_listeners.append(
            lambda state: loop.call_soon_threadsafe(self._log_dir_changed, state.path, state.status))
        self._tasks.append(loop.create_task(self._recheck_full_log_dirs(
            self.config.get("kafkapy.log.dir.space.check.interval.ms") / 1000)))
        idle_ms = self.config.get("connections.max.idle.ms")
        if idle_ms >= 0:
            self._tasks.append(loop.create_task(self._periodic(
                lambda: self.connection_quotas.close_idle(self.connections, idle_ms),
                min(max(idle_ms / 4000, 0.05), 30.0))))
        self._tasks.append(loop.create_task(self._periodic(peer_log.flush_due, 5.0)))
        self._tasks.append(loop.create_task(self._periodic(lambda: close_hung_up(self.connections), 1.0)))
        if self.config.get("kafkapy.metrics.listener"):
            from ..metrics.exporter import start_exporter

            self.metrics_server = await start_exporter(self)
        for service in self._services:
            if service.phase == "started":
                await service.start(self)
        log.info("kafkapy broker %d listening on %s (advertised %s), cluster id %s, data in %s,"
                 " started in %.3f s", self.node_id,
                 ", ".join(f"{lst.name}://{lst.host}:{bound[lst.name][0].getsockname()[1]}"
                           for lst in self.config.listeners),
                 ", ".join(f"{name}://{host}:{port}" for name, (host, port) in self.endpoints.items()),
                 self.cluster_id, ",".join(self.log_dirs), time.monotonic() - self.started_at)

    def brokers_for(self, listener_name: str | None):
        """The brokers as clients connected to `listener_name` must see them (Metadata,
        DescribeCluster, FindCoordinator): each one's endpoint on that listener; brokers without it
        are left out, as Kafka does."""
        return self.cluster.brokers_for(listener_name)

    async def _recheck_full_log_dirs(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            if any(state.status == "full" for state in self.logs.dir_states.values()):
                try:
                    await asyncio.to_thread(self.logs.recheck_full_dirs)
                except Exception:
                    log.exception("probing the full log dirs failed")

    def _log_dir_changed(self, path, status: str) -> None:
        """A log dir went full or offline, or came back: the membership tells the controller
        (a cluster), and every dir offline after I/O errors stops the broker, as Kafka does."""
        try:
            self.cluster.log_dir_changed(path, status)
        except Exception:
            log.exception("reporting the change of log dir %s failed", path)
        if all(state.status == "offline" for state in self.logs.dir_states.values()) \
                and not self.fatal_error.is_set():
            log.error("broker %d: every log dir (%s) is offline after I/O errors: stopping", self.node_id,
                      ", ".join(str(d) for d in self.logs.log_dirs))
            self.fatal_error.set()

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
        for service in reversed(self._services):
            await service.stop(self)
        try:
            await self.cluster.controlled_shutdown()
        except Exception:
            log.exception("controlled shutdown of broker %d failed", self.node_id)
        self.close_listeners()
        for task in self._tasks:
            task.cancel()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        self.metrics.stop_probe()
        self.purgatory.wake_all()
        # answers parked JoinGroup/SyncGroup requests so that their connections can finish
        if self._group_coordination is not None:
            self._group_coordination.coordinator.close()
        if self._transaction_coordination is not None:
            self._transaction_coordination.coordinator.close()
        if self.loaded_share_groups is not None:
            self.loaded_share_groups.close()  # its connections to other brokers' share coordinators
        deadline = time.monotonic() + 5
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        if self._transaction_coordination is not None:
            self._transaction_coordination.close()  # its connections to other brokers
        await self.replicas.shutdown()
        await self.cluster.stop()
        self.logs.close()
        self.metadata.close()
        peer_log.flush_all()
        log.info("kafkapy broker %d stopped", self.node_id)


async def serve(config, stop_event: asyncio.Event | None = None, sockets: list | None = None,
                on_ready=None, services: Sequence[BrokerService] = ()) -> None:
    """Run a broker until `stop_event` is set (or forever); `sockets` are pre-bound listeners;
    `on_ready(broker)` is called once it serves requests; `services` as Broker's (kafkapy/node.py
    passes them)."""
    broker = Broker(config, sockets, services)
    await broker.start()
    if on_ready is not None:
        on_ready(broker)
    try:
        waits = [asyncio.ensure_future(broker.fatal_error.wait())]
        if stop_event is not None:
            waits.append(asyncio.ensure_future(stop_event.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
    finally:
        await broker.stop()
    if broker.fatal_error.is_set():
        # Kafka halts the process when its last log dir fails; the exit status says so
        raise SystemExit(1)

