"""A broker's membership of a ZooKeeper cluster (zookeeper.connect set).

Start-up, as Kafka's KafkaServer does it in ZooKeeper mode: connect to ZooKeeper (one clear line and
a non-zero exit if it cannot within zookeeper.connection.timeout.ms), create the persistent paths,
agree on the cluster id with every log dir's meta.properties, and, once the listener is up, register
`/brokers/ids/<id>` (its czxid is the broker epoch) and start the controller object, which takes part
in the election. On a ZooKeeper session expiry the broker resigns as controller, registers again
(a new epoch) and re-runs the election. On shutdown it asks the controller to move its leaderships
away (ControlledShutdown) before it stops.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..controller.kafka_controller import KafkaController
from ..metadata.errors import InconsistentClusterIdError
from ..metadata.ids import new_cluster_id
from ..metadata.zk.client import BrokerIdInUseError, KafkaZkClient, ZkConnectionError
from ..metadata.zk.paths import BrokerRegistration, Endpoint
from ..metadata.zk.store import ZkMetadataStore
from ..net.client import BrokerConnectionError
from ..net.peers import PeerConnections
from ..protocol.errors import ErrorCode
from ..protocol.messages import ControlledShutdownRequest
from ..security.inter_broker import inter_broker_options

if TYPE_CHECKING:
    from ..log.manager import LogManager
    from ..replication.replica_manager import ReplicaManager
    from .config import BrokerConfig
    from .fetch_sessions import FetchSessionCache
    from .partitions import PartitionManager
    from .producer_id_blocks import ProducerIdBlocks

__all__ = ["ClusterMember", "ClusterStartError"]

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3
META_PROPERTIES = "meta.properties"


class ClusterStartError(RuntimeError):
    """The broker cannot join the cluster; the message says why, in one line."""


class ClusterMember:
    """ZooKeeper session, registration, controller object and metadata store of one broker."""

    def __init__(self, config: BrokerConfig, endpoints: dict[str, tuple[str, int]],
                 registered: Callable[[int], None]):
        """`endpoints`: the broker's advertised (host, port) by listener name, the broker's own
        dict (ports of port-0 listeners are filled in when it starts), registered in ZooKeeper;
        `registered(broker_epoch)` is called on each registration (from a worker thread)."""
        self._endpoints = endpoints
        self._registered = registered
        self._broker_epoch = -1  # the czxid of our registration: the broker epoch
        self._producer_ids: ProducerIdBlocks | None = None
        self.config = config
        self.node_id = config.node_id
        self.connect = config.get("zookeeper.connect")
        self.listener = self._inter_broker_listener()
        session_ms = config.get("zookeeper.session.timeout.ms")
        connection_ms = config.get("zookeeper.connection.timeout.ms") or session_ms
        self.zk = KafkaZkClient(self.connect, session_timeout_ms=session_ms, connection_timeout_ms=connection_ms)
        log.info("connecting to ZooKeeper at %s (zookeeper.connect)", self.connect)
        try:
            self.zk.start()
        except ZkConnectionError as exc:
            raise ClusterStartError(str(exc)) from None
        self.zk.ensure_persistent_paths()
        self.cluster_id = self._agree_on_cluster_id()
        self.controller_epoch_seen = 0
        self._log_dir_tasks: set[asyncio.Task] = set()
        self._registered_at: tuple[str, int, str | None] | None = None
        self._session_lost = False
        self._loop: asyncio.AbstractEventLoop | None = None
        from .config import validate_topic_configs

        self.metadata = ZkMetadataStore(
            self.zk, self.cluster_id, node_id=self.node_id, listener_name=self.listener,
            topic_config_validator=lambda configs, existing: validate_topic_configs(configs, config, existing),
            default_num_partitions=config.get("num.partitions"),
            default_replication_factor=config.get("default.replication.factor"),
            delete_topic_enable=config.get("delete.topic.enable"))
        self.metadata.registration_hook = self._on_readvertise
        self.controller = KafkaController(
            self.zk, self.node_id, listener_name=self.listener,
            unclean_leader_election=self._unclean_enabled,
            delete_topic_enable=config.get("delete.topic.enable"),
            socket_timeout_s=config.get("controller.socket.timeout.ms") / 1000,
            auto_leader_rebalance=config.get("auto.leader.rebalance.enable"),
            rebalance_interval_s=config.get("leader.imbalance.check.interval.seconds"),
            imbalance_percentage=config.get("leader.imbalance.per.broker.percentage"),
            connection_options=inter_broker_options(config))
        config.load_dynamic_configs(self.metadata.get_broker_configs(""),
                                    self.metadata.get_broker_configs(str(self.node_id)))

    # -- start-up checks ------------------------------------------------------------------------
    def _inter_broker_listener(self) -> str:
        names = [listener.name for listener in self.config.listeners]
        wanted = self.config.get("inter.broker.listener.name")
        if wanted:
            wanted = wanted.upper()
        else:  # Kafka: the listener whose security protocol is security.inter.broker.protocol
            protocol = self.config.get("security.inter.broker.protocol")
            wanted = next((lst.name for lst in self.config.listeners if lst.security_protocol == protocol), None)
        if wanted not in names:
            from .config import ConfigError

            raise ConfigError.invalid_value("inter.broker.listener.name", wanted,
                                            f"inter.broker.listener.name must be a listener name defined in "
                                            f"listeners ({', '.join(names)})")
        return wanted

    def _agree_on_cluster_id(self) -> str:
        """The cluster id in ZooKeeper (created by the first broker), checked against meta.properties."""
        local = {}
        for log_dir in self.config.log_dirs:
            props = _read_meta_properties(Path(log_dir) / META_PROPERTIES)
            if props is None:
                continue
            if props.get("broker.id") not in (None, str(self.node_id)):
                raise ClusterStartError(
                    f"Stored node id {props.get('broker.id')} doesn't match previous node id {self.node_id} in "
                    f"{Path(log_dir) / META_PROPERTIES}. If you moved your data, make sure your configured node id "
                    "matches. If you intend to create a new node, you should remove all data in your data "
                    "directories.")
            if props.get("cluster.id"):
                local[log_dir] = props["cluster.id"]
        proposed = next(iter(local.values()), None) or self.config.cluster_id or new_cluster_id()
        cluster_id = self.zk.get_or_create_cluster_id(proposed)
        for log_dir, found in local.items():
            if found != cluster_id:
                raise ClusterStartError(str(InconsistentClusterIdError(
                    f"The Cluster ID {cluster_id} doesn't match stored clusterId Some({found}) in "
                    f"{Path(log_dir) / META_PROPERTIES}. The broker is trying to join the wrong cluster. "
                    "Configured zookeeper.connect may be wrong.")))
        for log_dir in self.config.log_dirs:
            path = Path(log_dir) / META_PROPERTIES
            if log_dir not in local:
                Path(log_dir).mkdir(parents=True, exist_ok=True)
                _write_meta_properties(path, {"version": "0", "broker.id": str(self.node_id),
                                              "cluster.id": cluster_id})
        return cluster_id

    def _unclean_enabled(self, topic: str) -> bool:
        override = self.metadata.topic_configs(topic).get("unclean.leader.election.enable")
        if override is not None:
            return override.strip().lower() == "true"
        return bool(self.config.get("unclean.leader.election.enable"))

    # -- running --------------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        """Register in /brokers/ids (the listener is up by now) and join the controller election."""
        self._loop = asyncio.get_running_loop()
        self._registered_at = (host, port, self.config.get("broker.rack"))
        await asyncio.to_thread(self._register)
        self.zk.add_state_listener(self._on_zk_state)
        self.zk.watch_config_changes(
            lambda paths: self._loop.call_soon_threadsafe(self._on_config_changes, list(paths)))
        await asyncio.to_thread(self.metadata.watch_acl_changes)
        await self.controller.start()

    def _registration(self) -> BrokerRegistration:
        """Our registration: every advertised listener (the first one's address as last advertised)."""
        host, port, rack = self._registered_at
        protocols = {lst.name: lst.security_protocol for lst in self.config.listeners}
        first = self.config.listeners[0].name
        endpoints = []
        for name, (ep_host, ep_port) in self._endpoints.items():
            if name == first:
                ep_host, ep_port = host, port
            endpoints.append(Endpoint(name, protocols[name], ep_host, ep_port))
        return BrokerRegistration(self.node_id, endpoints, rack, {}, int(time.time() * 1000))

    def _register(self) -> None:
        try:
            epoch = self.zk.register_broker(self._registration())
        except BrokerIdInUseError as exc:
            raise ClusterStartError(f"{exc} (broker.id={self.node_id}); refusing to start a second broker with the "
                                    "same id") from None
        self._broker_epoch = epoch
        self._registered(epoch)
        log.info("registered broker %d at path /brokers/ids/%d with addresses %s, czxid (broker epoch) %d",
                 self.node_id, self.node_id, [str(ep) for ep in self._registration().endpoints], epoch)

    def _on_readvertise(self, host: str, port: int, rack: str | None) -> None:
        if self._registered_at is None:
            return
        self._registered_at = (host, port, rack)
        self._register()

    def _on_zk_state(self, state: str) -> None:
        """kazoo's thread: a session expiry means resigning, registering again and re-electing."""
        if state == "EXPIRED":
            self._session_lost = True
            log.warning("broker %d: ZooKeeper session expired; resigning as controller and re-registering",
                        self.node_id)
            self.controller.session_expired()
        elif state == "CONNECTED" and self._session_lost:
            self._session_lost = False
            loop = self._loop
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(lambda: loop.create_task(self._reregister()))

    async def _reregister(self) -> None:
        for attempt in range(60):
            try:
                await asyncio.to_thread(self._register)
                self.controller.post("elect")
                return
            except ClusterStartError as exc:  # our old ephemeral node has not expired yet
                log.info("re-registration of broker %d not possible yet: %s", self.node_id, exc)
            except Exception as exc:
                log.warning("re-registration of broker %d failed: %s", self.node_id, exc)
            await asyncio.sleep(1)
        log.error("broker %d could not register again in ZooKeeper", self.node_id)

    def _on_config_changes(self, paths: list[str]) -> None:
        self.metadata.on_config_changes(paths)
        if any(p in ("brokers/<default>", f"brokers/{self.node_id}") for p in paths):
            try:
                self.config.load_dynamic_configs(self.metadata.get_broker_configs(""),
                                                 self.metadata.get_broker_configs(str(self.node_id)))
                log.info("broker %d applied dynamic broker configs changed in ZooKeeper", self.node_id)
            except Exception:
                log.exception("applying dynamic broker configs from ZooKeeper failed")

    def apply_update_metadata(self, request) -> None:
        self.metadata.apply_update_metadata(request)
        if request.controller_id >= 0 and self._producer_ids is not None:
            self._producer_ids.prefetch()

    # -- shutting down --------------------------------------------------------------------------
    async def controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away, as Kafka's KafkaServer.controlledShutdown does.

        `controlled.shutdown.max.retries` is the number of attempts (Kafka's count: 3 means three
        requests, `controlled.shutdown.retry.backoff.ms` apart); an attempt fails when no controller
        is known, the request fails, or the controller answers an error or partitions we still lead.
        After the last failed attempt the broker shuts down anyway.
        """
        if not self.config.get("controlled.shutdown.enable") or self._broker_epoch < 0:
            return
        log.info("broker %d: starting controlled shutdown", self.node_id)
        retries = self.config.get("controlled.shutdown.max.retries")
        backoff_s = self.config.get("controlled.shutdown.retry.backoff.ms") / 1000
        # as Kafka's KafkaServer.controlledShutdown: a network client for this alone, which follows
        # the controller from one attempt to the next and is closed at the end
        channel_timeout_s = self.config.get("request.timeout.ms") / 1000
        channel = PeerConnections(
            "controlled-shutdown", self.metadata.broker_endpoint, controller_id=self.metadata.controller_id,
            client_id=f"kafkapy-broker-{self.node_id}",
            request_timeout_s=channel_timeout_s,
            connect_timeout_s=self.config.get("controller.socket.timeout.ms") / 1000,
            **inter_broker_options(self.config))
        try:
            for attempt in range(1, retries + 1):
                outcome = await self._controlled_shutdown_attempt(channel, timeout_s=channel_timeout_s)
                if outcome is None:
                    return
                log.info("broker %d: controlled shutdown attempt %d of %d did not complete: %s", self.node_id,
                         attempt, retries, outcome)
                if attempt < retries:
                    await asyncio.sleep(backoff_s)
        finally:
            channel.close()
        log.warning("broker %d: proceeding with an unclean shutdown as all %d controlled shutdown attempts failed",
                    self.node_id, retries)

    async def _controlled_shutdown_attempt(self, channel: PeerConnections, timeout_s: float) -> str | None:
        """One ControlledShutdown to the controller: None once we may stop, else why not yet.

        The controller's own attempt is bounded like a request to another broker (Kafka's controller
        sends the request to itself over the network, with the same timeout): with ZooKeeper away its
        leader moves cannot be written, and the broker must still stop after its last attempt."""
        controller_id = self.metadata.controller_id()
        if controller_id < 0:
            return "no controller present in the metadata cache"
        endpoint = self.metadata.broker_endpoint(controller_id)
        if endpoint is None:
            return f"no registration of controller {controller_id} in the metadata cache"
        if controller_id == self.node_id:
            local = asyncio.ensure_future(self.controller.controlled_shutdown(self.node_id, self._broker_epoch))
            try:  # shielded: the controller finishes (or drops) its event itself; only our wait ends
                error, remaining = await asyncio.wait_for(asyncio.shield(local), timeout_s)
            except asyncio.TimeoutError:
                local.add_done_callback(lambda done: done.cancelled() or done.exception())
                return f"the local controller did not answer within {timeout_s:.0f} s"
        else:
            request = ControlledShutdownRequest(broker_id=self.node_id, broker_epoch=self._broker_epoch)
            try:
                response = await channel.send_to_controller(request, CONTROLLED_SHUTDOWN_VERSION)
            except BrokerConnectionError as exc:
                return f"request to controller {controller_id} failed: {exc}"
            error = response.error_code
            remaining = [(p.topic_name, p.partition_index) for p in response.remaining_partitions]
        if error:
            return f"controller {controller_id} answered {_error_name(error)}"
        if not remaining:
            log.info("broker %d: controlled shutdown succeeded", self.node_id)
            return None
        if not any(b != self.node_id for b in self.metadata.cache.brokers):
            # no other broker is live to take the partitions over: retrying cannot help
            # (Kafka retries anyway; the last broker of a cluster then waits for nothing)
            log.info("broker %d: no other live broker can lead its %d partition(s); stopping",
                     self.node_id, len(remaining))
            return None
        return f"{len(remaining)} partition(s) still led here, e.g. {_names(remaining)}"

    async def stop(self) -> None:
        await self.controller.stop()
        await asyncio.to_thread(self.zk.close)

    # -- the membership interface shared with a cluster of one (cluster_of_one.py) ---------------
    mode = "ZooKeeper cluster"

    async def topic_names(self) -> list[str]:
        return await asyncio.to_thread(self.zk.get_all_topics)

    def attach(self, *, logs: LogManager, partitions: PartitionManager, replicas: ReplicaManager,
               fetch_sessions: Callable[[], FetchSessionCache]) -> None:
        """Nothing to keep: the controller's LeaderAndIsr and StopReplica reach the partitions
        through the handlers, not through the membership."""

    def producer_ids(self):
        from .producer_id_blocks import ProducerIdBlocks

        self._producer_ids = ProducerIdBlocks(self.config, self.node_id, self.metadata, self.controller,
                                              lambda: self._broker_epoch)
        return self._producer_ids

    def brokers_for(self, listener_name: str | None):
        return self.metadata.cache.broker_infos(listener_name or self.config.listeners[0].name)

    def log_dir_changed(self, path, status: str) -> None:
        """A log dir went offline or full, or a full one is back: tell the controller with a
        /log_dir_event_notification znode, as Kafka's broker does on a failure (the controller
        then asks this broker which replicas it can still serve, controller/log_dir_events.py)."""
        log.info("broker %d: log dir %s is %s; notifying the controller", self.node_id, path, status)

        async def notify() -> None:
            for attempt in range(30):
                try:
                    await asyncio.to_thread(self.zk.create_log_dir_event, self.node_id)
                    return
                except Exception as exc:  # ZooKeeper away: keep trying, the controller must hear of it
                    log.warning("broker %d could not write a log dir event (attempt %d): %s", self.node_id,
                                attempt + 1, exc)
                    await asyncio.sleep(1)

        task = asyncio.get_running_loop().create_task(notify())
        self._log_dir_tasks.add(task)
        task.add_done_callback(self._log_dir_tasks.discard)

    def host_loaded_partitions(self, partitions) -> None:
        """The logs found on disk stay as they are until the controller's LeaderAndIsr or
        StopReplica says what to do with them."""
        partitions.adopt_loaded_logs()

    def topic_created(self, partitions, meta) -> None:
        """Recorded in ZooKeeper: the controller assigns the replicas (LeaderAndIsr)."""

    def partitions_created(self, partitions, meta) -> None:
        """Recorded in ZooKeeper: the controller assigns the replicas (LeaderAndIsr)."""

    def topic_deleted(self, partitions, meta) -> None:
        # the controller deletes the replicas (StopReplica delete=true)
        log.info("topic %s marked for deletion", meta.name)

    # -- the controller's decisions: the controller object takes them ---------------------------
    def is_active_controller(self) -> bool:
        """Whether this broker's controller object won the election (/controller in ZooKeeper)."""
        return self.controller.active

    async def elect_leaders(self, wanted, unclean: bool, timeout_ms: int):
        """(topic, [(partition, error code, message)]) grouped by topic, as ClusterOfOne.elect_leaders.

        The local controller object elects (a non-controller answers NOT_CONTROLLER per partition,
        as Kafka's ZooKeeper-mode brokers do); the answer waits, up to `timeout_ms`, until this
        broker's metadata cache shows the new leaders. With `wanted` None (every partition), those
        that needed no election are left out, and so are topics left with none."""
        from .metadata_wait import wait_for_cache

        if wanted is None:
            keys = [(t.name, p) for t in self.metadata.list_topics() for p in range(t.partition_count)]
        else:
            keys = [(topic, p) for topic, partitions in wanted for p in partitions]
        outcomes = await self.controller.elect_leaders(keys, unclean)
        elected = [key for key, (code, _) in outcomes.items() if code == ErrorCode.NONE]
        cache = self.metadata.cache

        def visible() -> bool:
            for topic, partition in elected:
                part = cache.partition(topic, partition)
                if part is None or part.leader < 0:
                    return False
                if not unclean and part.replicas and part.leader != part.replicas[0]:
                    return False
            return True

        if elected:
            await wait_for_cache(visible, timeout_ms)
        by_topic: dict[str, list] = {}
        for (topic, partition), (code, message) in outcomes.items():
            if wanted is None and code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            by_topic.setdefault(topic, []).append((partition, code, message))
        return list(by_topic.items())

    async def alter_partition_reassignments(self, targets, allow_replication_factor_change: bool = True):
        """(topic, [(partition, error code, message)]) grouped by topic, or None when this broker is
        not the active controller: only that one reassigns (the request then fails as a whole with
        NOT_CONTROLLER, as on Kafka's ZooKeeper-mode brokers). The answer does not wait for the
        data to move."""
        outcomes = await self.controller.alter_partition_reassignments(
            {(topic, p): replicas for topic, partitions in targets for p, replicas in partitions},
            allow_replication_factor_change)
        if outcomes is None:
            return None
        by_topic: dict[str, list] = {}
        for (topic, partition), (code, message) in outcomes.items():
            by_topic.setdefault(topic, []).append((partition, code, message))
        return list(by_topic.items())

    async def list_partition_reassignments(self, wanted):
        """(topic, [(partition, replicas, adding, removing)]) sorted by topic and partition, or None
        when this broker is not the active controller."""
        keys = None if wanted is None else [(topic, p) for topic, partitions in wanted for p in partitions]
        ongoing = await self.controller.list_partition_reassignments(keys)
        if ongoing is None:
            return None
        by_topic: dict[str, list] = {}
        for (topic, partition), assignment in sorted(ongoing.items()):
            by_topic.setdefault(topic, []).append((partition, list(assignment.replicas), list(assignment.adding),
                                                   list(assignment.removing)))
        return list(by_topic.items())


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _names(partitions: list[tuple[str, int]], limit: int = 3) -> str:
    shown = ", ".join(f"{topic}-{index}" for topic, index in partitions[:limit])
    return shown + (", ..." if len(partitions) > limit else "")


def _read_meta_properties(path: Path) -> dict[str, str] | None:
    try:
        text = path.read_text(encoding="latin-1")
    except FileNotFoundError:
        return None
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def _write_meta_properties(path: Path, props: dict[str, str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="latin-1") as f:
        f.write("#\n#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime()) + "\n")
        for key, value in props.items():
            f.write(f"{key}={value}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
