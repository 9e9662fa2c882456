"""KafkaZkClient: every ZooKeeper read and write a kafkapy broker or controller makes, as Kafka 3.7 does it.

A blocking, thread-safe layer over one kazoo session. kafkapy calls it from worker threads
(`asyncio.to_thread`); watch and state callbacks arrive on kazoo's threads and must only hand the
event over (e.g. `loop.call_soon_threadsafe`), never block.

Semantics that callers rely on:
- A call made while the connection is down waits until kazoo reconnects (as Kafka's
  ZooKeeperClient does); `close()` releases such waiters with ZkConnectionError. A request that
  was in flight when the connection dropped is sent again, so it may have been applied already:
  every method below copes with meeting its own earlier write (NODEEXISTS, BADVERSION re-checks).
- Controller writes are *fenced*: they take the znode version of /controller_epoch that
  `try_elect_controller` returned and run as one multi whose first op checks it. A failed check
  raises ControllerMovedError and nothing is written.
- Watches are armed at once and also fire once right away, so a caller that reacts to the
  callback cannot miss a change that happened before the watch existed. They survive session
  loss (kazoo re-arms them). Each returns a WatchHandle to stop it.
- zookeeper.set.acl is not supported: znodes get the open ACL.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from .errors import (BadVersionError, BrokerIdInUseError, ControllerMovedError, NodeExistsError, NoNodeError,
                     TopicExistsError, ZkConnectionError, ZkError)
from .paths import LOG_DIR_EVENT_PATH, LOG_DIR_EVENT_PREFIX, decode_log_dir_event, encode_log_dir_event
from .paths import (ACL_CHANGE_PREFIX, BROKER_IDS_PATH, CONFIG_CHANGE_PREFIX, CONFIG_CHANGES_PATH,
                    CONTROLLER_EPOCH_PATH, CONTROLLER_PATH, CLUSTER_ID_PATH, DELETE_TOPICS_PATH,
                    EXTENDED_ACL_CHANGES_PATH, FEATURE_PATH, LITERAL_ACL_CHANGES_PATH, PERSISTENT_PATHS,
                    PREFERRED_REPLICA_ELECTION_PATH, PRODUCER_ID_BLOCK_PATH, PRODUCER_ID_BLOCK_SIZE,
                    REASSIGN_PARTITIONS_PATH, TOPICS_PATH,
                    BrokerRegistration,
                    FinalizedFeatures, LeaderIsr, ProducerIdBlock, TopicAssignment, ZnodeDecodeError,
                    acl_change_path, acl_path, acl_persistent_paths, acl_resource_type_enum_name, acl_root_path,
                    broker_path,
                    config_entity_path, config_entity_type_path, decode_acl_change, decode_acls, decode_broker,
                    decode_cluster_id, decode_config, decode_config_change, decode_controller,
                    decode_controller_epoch, decode_feature, decode_partition_state, decode_producer_id_block,
                    decode_preferred_replica_election, decode_reassignment, decode_topic, delete_topic_path, encode_acl_change, encode_acls, encode_broker,
                    encode_cluster_id, encode_config, encode_config_change, encode_controller,
                    encode_controller_epoch, encode_feature, encode_partition_state, encode_producer_id_block,
                    encode_reassignment, encode_topic, partition_state_path, sequence_number, topic_partition_path,
                    topic_partitions_path, topic_path)

__all__ = ["BadVersionError", "BrokerIdInUseError", "ControllerMovedError", "KafkaZkClient", "NoNodeError",
           "NodeExistsError", "TopicExistsError", "UNKNOWN_VERSION", "WatchHandle", "ZkConnectionError", "ZkError"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Kafka's ZkVersion.UnknownVersion: the "version" of a znode that does not exist (ZooKeeper itself
# uses -1 for "any version", so a different sentinel is needed).
UNKNOWN_VERSION = -2
CONFIG_CHANGE_EXPIRY_MS = 15 * 60 * 1000  # Kafka's changeExpirationMs for notification purging
_RECONNECT_POLL_S = 0.05


def _on_event_loop() -> bool:
    """Whether this thread is running an asyncio event loop right now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _split_chroot(connect: str) -> tuple[str, str | None]:
    """"h1:2181,h2:2181/kafka" -> ("h1:2181,h2:2181", "/kafka")."""
    hosts, slash, rest = connect.partition("/")
    chroot = "/" + rest.strip("/") if slash else None
    return hosts, (chroot if chroot not in (None, "/") else None)


@dataclass(slots=True)
class _Op:
    """One operation of a ZooKeeper multi."""

    kind: str  # "check" | "create" | "set" | "delete"
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False


class _OpFailed(Exception):
    """A multi was rolled back because `op` (index `index`) failed with the kazoo `error`."""

    def __init__(self, index: int, op: _Op, error: Exception):
        super().__init__(f"{op.kind} {op.path}: {type(error).__name__}")
        self.index = index
        self.op = op
        self.error = error


def _translate(error: Exception, path: str) -> ZkError:
    """Our exception for a kazoo error on `path`."""
    if isinstance(error, kz.BadVersionError):
        return BadVersionError(f"{path}: znode version changed (compare-and-set lost)")
    if isinstance(error, kz.NodeExistsError):
        return NodeExistsError(f"{path} already exists")
    if isinstance(error, kz.NoNodeError):
        return NoNodeError(f"{path} does not exist")
    return ZkError(f"{path}: {type(error).__name__} {error}")


class WatchHandle:
    """Stops a watch: after cancel() the callback is never called again."""

    __slots__ = ("_cancelled",)

    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        # kazoo cannot remove a ZooKeeper watch; the wrapper drops the watch at its next event.
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled


class KafkaZkClient:
    """One broker's ZooKeeper session and the Kafka 3.7 operations on it (see the module docstring)."""

    def __init__(self, connect: str, *, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None):
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        self._hosts, self.chroot = _split_chroot(connect)
        self._zk: KazooClient | None = None
        self._closed = False
        self._listeners: list[Callable[[str], None]] = []
        self._listeners_lock = threading.Lock()

    # -- session ---------------------------------------------------------------------------------------

    def _new_kazoo(self, hosts: str) -> KazooClient:
        # kazoo's default retry policies back off to an hour (connection) and also never give up;
        # a broker wants to be back within seconds of ZooKeeper returning.
        def retry() -> KazooRetry:
            return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0)

        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000, connection_retry=retry(),
                           command_retry=retry())

    def _connect_or_raise(self, client: KazooClient) -> None:
        timeout_s = self.connection_timeout_ms / 1000
        try:
            client.start(timeout=timeout_s)
        except client.handler.timeout_exception:
            # kazoo has already stopped and closed the client.
            raise ZkConnectionError(
                f"Timed out waiting for a ZooKeeper session (zookeeper.connect={self.connect!r}, "
                f"zookeeper.connection.timeout.ms={self.connection_timeout_ms})") from None

    def start(self) -> None:
        """Opens the session; creates the chroot first (as Kafka does) if the connect string has one."""
        if self._zk is not None or self._closed:
            raise ZkError("KafkaZkClient.start() may be called once")
        if self.chroot is not None:
            # kazoo cannot use a chroot that does not exist yet, so make it through a plain session.
            bootstrap = self._new_kazoo(self._hosts)
            self._connect_or_raise(bootstrap)
            try:
                bootstrap.ensure_path(self.chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        client = self._new_kazoo(self.connect)
        client.add_listener(self._on_state)
        self._zk = client
        try:
            self._connect_or_raise(client)
        except ZkConnectionError:
            self._zk = None
            raise
        log.info("connected to ZooKeeper %s (session 0x%x, timeout %d ms)", self.connect, self.session_id or 0,
                 self.session_timeout_ms)

    def close(self) -> None:
        """Ends the session: our ephemeral znodes (registration, /controller) vanish at once."""
        if self._closed:
            return
        self._closed = True
        client, self._zk = self._zk, None
        if client is not None:
            client.stop()
            client.close()

    def __enter__(self) -> KafkaZkClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def session_id(self) -> int | None:
        client = self._zk
        client_id = client.client_id if client is not None else None
        return client_id[0] if client_id else None

    @property
    def connected(self) -> bool:
        client = self._zk
        return client is not None and client.connected

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        """callback("CONNECTED" | "SUSPENDED" | "EXPIRED") on kazoo's connection thread.

        EXPIRED: the session is gone with its ephemeral znodes and watches' guarantees; kazoo is
        already opening a new one, announced by the next CONNECTED (then re-register and re-elect).
        """
        with self._listeners_lock:
            self._listeners.append(callback)

    def _on_state(self, state: str) -> None:
        if self._closed:
            return  # kazoo reports LOST on close(); that is not an expiry
        if state == KazooState.CONNECTED:
            name = "CONNECTED"
        elif state == KazooState.SUSPENDED:
            name = "SUSPENDED"
            log.warning("ZooKeeper connection to %s lost; reconnecting within the session timeout", self.connect)
        else:
            name = "EXPIRED"
            log.warning("ZooKeeper session on %s expired; opening a new session", self.connect)
        with self._listeners_lock:
            listeners = list(self._listeners)
        for callback in listeners:
            try:
                callback(name)
            except Exception:
                log.exception("ZooKeeper state listener %r failed on %s", callback, name)

    # -- plumbing --------------------------------------------------------------------------------------

    def _client(self) -> KazooClient:
        client = self._zk
        if client is None:
            raise ZkConnectionError(f"the ZooKeeper client for {self.connect} is "
                                    f"{'closed' if self._closed else 'not started'}")
        return client

    def _retry(self, operation: Callable[[KazooClient], T]) -> T:
        """Runs `operation` until it gets an answer, across connection losses and session changes.

        Called on an event loop's thread (request handlers that write metadata, e.g. CreateTopics)
        it does not wait for a lost connection to come back: that wait would freeze every
        partition the broker serves while ZooKeeper is away (Kafka blocks one request handler
        thread of several, not the broker). It raises ZkConnectionError, a retriable Kafka error,
        instead."""
        on_loop = _on_event_loop()
        while True:
            client = self._client()
            if on_loop and not client.connected:
                raise ZkConnectionError(f"ZooKeeper at {self.connect} is not connected")
            try:
                return operation(client)
            except kz.ConnectionClosedError as exc:
                raise ZkConnectionError(f"the ZooKeeper client for {self.connect} is closed") from exc
            except (kz.ConnectionLoss, kz.SessionExpiredError, kz.OperationTimeoutError):
                if self._closed:
                    raise ZkConnectionError(f"the ZooKeeper client for {self.connect} is closed") from None
                if on_loop:
                    raise ZkConnectionError(f"ZooKeeper at {self.connect} lost the connection") from None
                # The next attempt queues inside kazoo until it has a connection again.
                time.sleep(_RECONNECT_POLL_S)

    def _get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        def get(client: KazooClient) -> tuple[bytes, ZnodeStat] | None:
            try:
                return client.get(path)
            except kz.NoNodeError:
                return None
        return self._retry(get)

    def _exists(self, path: str) -> ZnodeStat | None:
        return self._retry(lambda client: client.exists(path))

    def _children(self, path: str) -> list[str]:
        def children(client: KazooClient) -> list[str]:
            try:
                return client.get_children(path)
            except kz.NoNodeError:
                return []
        return self._retry(children)

    def _get_many(self, paths: list[str]) -> dict[str, tuple[bytes, ZnodeStat]]:
        """Pipelined reads (one round trip for all); absent znodes are left out."""
        return self._pipelined(paths, lambda client: client.get_async)

    def _children_many(self, paths: list[str]) -> dict[str, list[str]]:
        """Pipelined get_children; absent znodes are left out."""
        return self._pipelined(paths, lambda client: client.get_children_async)

    def _pipelined(self, paths: list[str], call: Callable[[KazooClient], Callable[[str], Any]]) -> dict[str, Any]:
        """`call(client)(path)` for every path at once, then the results; NoNode ones left out."""
        def run_all(client: KazooClient) -> dict[str, Any]:
            start = call(client)
            pending = [(path, start(path)) for path in paths]
            found = {}
            for path, result in pending:
                try:
                    found[path] = result.get()
                except kz.NoNodeError:
                    pass
            return found
        return self._retry(run_all) if paths else {}

    def _ensure_path(self, path: str) -> None:
        self._retry(lambda client: client.ensure_path(path))

    def _create(self, path: str, data: bytes, *, sequence: bool = False) -> str:
        """A persistent znode, parents created as needed; raises kazoo's NodeExistsError."""
        return self._retry(lambda client: client.create(path, data, makepath=True, sequence=sequence))

    def _set_or_create(self, path: str, data: bytes) -> None:
        while True:
            try:
                self._retry(lambda client: client.set(path, data))
                return
            except kz.NoNodeError:
                pass
            try:
                self._create(path, data)
                return
            except kz.NodeExistsError:
                continue  # created concurrently: overwrite it

    def _commit(self, ops: list[_Op]) -> list[Any]:
        """Runs `ops` as one ZooKeeper multi; raises _OpFailed naming the op that failed."""
        def commit(client: KazooClient) -> list[Any]:
            tx = client.transaction()
            for op in ops:
                if op.kind == "check":
                    tx.check(op.path, op.version)
                elif op.kind == "create":
                    tx.create(op.path, op.data, ephemeral=op.ephemeral)
                elif op.kind == "set":
                    tx.set_data(op.path, op.data, op.version)
                else:
                    tx.delete(op.path, op.version)
            return tx.commit()

        results = self._retry(commit)
        for index, result in enumerate(results):
            # The op at fault carries the real error; the others report "rolled back".
            if isinstance(result, Exception) and not isinstance(result, (kz.RolledBackError, kz.RuntimeInconsistency)):
                raise _OpFailed(index, ops[index], result)
        if any(isinstance(result, Exception) for result in results):
            raise ZkError(f"ZooKeeper multi {[(op.kind, op.path) for op in ops]} failed: {results}")
        return results

    def _fenced(self, epoch_zk_version: int, ops: list[_Op]) -> list[Any]:
        """`ops` as a multi that first checks /controller_epoch is still at `epoch_zk_version`."""
        try:
            return self._commit([_Op("check", CONTROLLER_EPOCH_PATH, version=epoch_zk_version), *ops])[1:]
        except _OpFailed as failed:
            if failed.index == 0:
                raise ControllerMovedError(
                    f"/controller_epoch is no longer at znode version {epoch_zk_version}: another broker has "
                    f"become controller (write to {ops[0].path if ops else '-'} not made)") from None
            raise _OpFailed(failed.index - 1, failed.op, failed.error) from None

    # -- watches ---------------------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> WatchHandle:
        """callback(children) now and on every change of `path`'s children (the path is created if missing)."""
        return self._watch_children(path, callback, WatchHandle())

    def _watch_children(self, path: str, callback: Callable[[list[str]], None], handle: WatchHandle) -> WatchHandle:
        self._ensure_path(path)  # kazoo's ChildrenWatch gives up for good on a missing path

        def on_children(children: list[str]) -> bool | None:
            if handle.cancelled:
                return False
            try:
                callback(children)
            except Exception:
                if not self._closed:  # a callback racing close() fails for no interesting reason
                    log.exception("children watch callback for %s failed", path)
            return None

        ChildrenWatch(self._client(), path, on_children)
        return handle

    def watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]) -> WatchHandle:
        """callback(data, stat) now and whenever `path` is created, changed or deleted (None, None if absent)."""
        handle = WatchHandle()

        def on_data(data: bytes | None, stat: ZnodeStat | None, event: Any = None) -> bool | None:
            if handle.cancelled:
                return False
            try:
                callback(data if stat is not None else None, stat)
            except Exception:
                # Catching everything also keeps kazoo from retrying the call with two arguments
                # when a TypeError escapes.
                if not self._closed:
                    log.exception("data watch callback for %s failed", path)
            return None

        DataWatch(self._client(), path, on_data)
        return handle

    # -- startup ---------------------------------------------------------------------------------------

    def ensure_persistent_paths(self) -> None:
        for path in PERSISTENT_PATHS:
            self._ensure_path(path)

    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster id in /cluster/id, which the first broker to get here sets to `proposed`."""
        try:
            self._create(CLUSTER_ID_PATH, encode_cluster_id(proposed))
        except kz.NodeExistsError:
            pass
        found = self._get(CLUSTER_ID_PATH)
        if found is None:
            raise NoNodeError(f"{CLUSTER_ID_PATH} vanished right after it was created")
        return decode_cluster_id(found[0])

    # -- brokers ---------------------------------------------------------------------------------------

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Creates the ephemeral /brokers/ids/<id> and returns its czxid, the broker epoch."""
        path = broker_path(registration.broker_id)
        data = encode_broker(registration)
        for _ in range(10):
            try:
                # Create-then-set in one multi, as Kafka does: the set's stat carries the new
                # node's czxid, so no second read is needed to learn the epoch.
                results = self._commit([_Op("create", path, ephemeral=True), _Op("set", path, data, version=0)])
                epoch = results[1].czxid
                log.info("registered broker %d in ZooKeeper at %s with broker epoch %d", registration.broker_id,
                         path, epoch)
                return epoch
            except _OpFailed as failed:
                if isinstance(failed.error, kz.NoNodeError):
                    self._ensure_path(BROKER_IDS_PATH)
                    continue
                if not isinstance(failed.error, kz.NodeExistsError):
                    raise _translate(failed.error, path) from None
            found = self._get(path)
            if found is None:
                continue  # the previous owner's session ended meanwhile
            _, stat = found
            if stat.ephemeralOwner == self.session_id:
                # Ours: an earlier attempt went through before the connection dropped.
                self._retry(lambda client: client.set(path, data))
                return stat.czxid
            raise BrokerIdInUseError(f"broker.id {registration.broker_id} is already registered in ZooKeeper "
                                     f"by another live broker")
        raise ZkError(f"could not register {path}: it kept appearing and disappearing")

    def get_broker(self, broker_id: int) -> tuple[BrokerRegistration, int] | None:
        """(registration, broker epoch) of a live broker, None if not registered."""
        found = self._get(broker_path(broker_id))
        if found is None:
            return None
        data, stat = found
        return decode_broker(broker_id, data), stat.czxid

    def get_all_brokers(self) -> dict[int, tuple[BrokerRegistration, int]]:
        ids = sorted(int(child) for child in self._children(BROKER_IDS_PATH) if child.lstrip("-").isdigit())
        found = self._get_many([broker_path(broker_id) for broker_id in ids])
        brokers = {}
        for broker_id in ids:
            got = found.get(broker_path(broker_id))
            if got is None:
                continue  # went away between the listing and the read
            try:
                brokers[broker_id] = (decode_broker(broker_id, got[0]), got[1].czxid)
            except ZnodeDecodeError as exc:
                log.error("ignoring broker %d: unreadable registration: %s", broker_id, exc)
        return brokers

    def watch_broker_ids(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_children(BROKER_IDS_PATH, lambda _children: callback())

    # -- controller election ---------------------------------------------------------------------------

    def get_controller_id(self) -> int | None:
        found = self._get(CONTROLLER_PATH)
        return decode_controller(found[0]) if found is not None else None

    def watch_controller(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_data(CONTROLLER_PATH, lambda _data, _stat: callback())

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version of /controller_epoch), None before the first election."""
        found = self._get(CONTROLLER_EPOCH_PATH)
        if found is None:
            return None
        data, stat = found
        return decode_controller_epoch(data), stat.version

    def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Tries to become controller; (new epoch, its znode version) on success, None if another won."""
        current = self.get_controller_epoch()
        if current is None:
            try:
                self._create(CONTROLLER_EPOCH_PATH, encode_controller_epoch(0))
            except kz.NodeExistsError:
                pass
            current = self.get_controller_epoch()
            if current is None:
                raise NoNodeError(f"{CONTROLLER_EPOCH_PATH} vanished right after it was created")
        epoch, version = current
        new_epoch = epoch + 1
        try:
            # Claiming /controller and bumping the epoch in one multi makes the epoch's znode
            # version the fencing token: it moves exactly when someone wins.
            results = self._commit([
                _Op("create", CONTROLLER_PATH, encode_controller(broker_id), ephemeral=True),
                _Op("set", CONTROLLER_EPOCH_PATH, encode_controller_epoch(new_epoch), version=version)])
        except _OpFailed as failed:
            if not isinstance(failed.error, (kz.NodeExistsError, kz.BadVersionError)):
                raise _translate(failed.error, failed.op.path) from None
            # Lost, unless it is our own earlier attempt that went through before a reconnect.
            return self._own_election(broker_id, new_epoch)
        new_version = results[1].version
        log.info("broker %d won the controller election: epoch %d (znode version %d)", broker_id, new_epoch,
                 new_version)
        return new_epoch, new_version

    def delete_controller_if_mine(self, broker_id: int) -> bool:
        """Deletes /controller if this session created it for `broker_id`; True if it did.

        For giving up the role after an unexpected failure, when the epoch token may already be
        stale: ownership (and the znode version, so a newer controller's node is never touched)
        is the guard instead.
        """
        found = self._get(CONTROLLER_PATH)
        if found is None:
            return False
        data, stat = found
        if decode_controller(data) != broker_id or stat.ephemeralOwner != self.session_id:
            return False
        try:
            self._retry(lambda client: client.delete(CONTROLLER_PATH, version=stat.version))
        except (kz.NoNodeError, kz.BadVersionError):
            return False
        log.info("broker %d deleted /controller to give up the controller role", broker_id)
        return True

    def _own_election(self, broker_id: int, new_epoch: int) -> tuple[int, int] | None:
        controller = self._get(CONTROLLER_PATH)
        current = self.get_controller_epoch()
        if controller is None or current is None:
            return None
        data, stat = controller
        if decode_controller(data) == broker_id and stat.ephemeralOwner == self.session_id and current[0] == new_epoch:
            return current
        return None

    # -- fenced controller writes ----------------------------------------------------------------------

    def create_partition_state(self, topic: str, partition: int, state: LeaderIsr, epoch_zk_version: int) -> int:
        """Creates the state znode of a new partition (and its parents); returns its version, 0."""
        state_path = partition_state_path(topic, partition)
        data = encode_partition_state(state)
        for _ in range(5):
            parents = [path for path in (topic_partitions_path(topic), topic_partition_path(topic, partition))
                       if self._exists(path) is None]
            try:
                self._fenced(epoch_zk_version, [*(_Op("create", path) for path in parents),
                                                _Op("create", state_path, data)])
                return 0
            except _OpFailed as failed:
                if failed.index < len(parents) and isinstance(failed.error, kz.NodeExistsError):
                    continue  # a parent appeared concurrently; look again
                raise _translate(failed.error, failed.op.path) from None
        raise ZkError(f"could not create {state_path}: its parents kept changing")

    def update_partition_state(self, topic: str, partition: int, state: LeaderIsr, expected_version: int,
                               epoch_zk_version: int) -> int:
        """Compare-and-set of a partition state; returns the new znode version (the partition epoch)."""
        path = partition_state_path(topic, partition)
        try:
            results = self._fenced(epoch_zk_version,
                                   [_Op("set", path, encode_partition_state(state), version=expected_version)])
        except _OpFailed as failed:
            raise _translate(failed.error, path) from None
        return results[0].version

    def set_topic_assignment(self, assignment: TopicAssignment, epoch_zk_version: int,
                             expected_version: int = -1) -> int:
        """Rewrites /brokers/topics/<t> as controller; returns the new znode version."""
        path = topic_path(assignment.name)
        try:
            results = self._fenced(epoch_zk_version,
                                   [_Op("set", path, encode_topic(assignment), version=expected_version)])
        except _OpFailed as failed:
            raise _translate(failed.error, path) from None
        return results[0].version

    def set_topic_assignment_unfenced(self, assignment: TopicAssignment, expected_version: int = -1) -> int:
        """Rewrites /brokers/topics/<t> outside the controller (Kafka's AdminZkClient, e.g. CreatePartitions)."""
        path = topic_path(assignment.name)
        try:
            stat = self._retry(lambda client: client.set(path, encode_topic(assignment), version=expected_version))
        except (kz.BadVersionError, kz.NoNodeError) as exc:
            raise _translate(exc, path) from None
        return stat.version

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """Removes a deleted topic's znodes: its subtree, its config and its deletion marker, atomically."""
        for _ in range(10):
            ops = [_Op("delete", path) for path in self._subtree(topic_path(topic))]
            for path in (config_entity_path("topics", topic), delete_topic_path(topic)):
                if self._exists(path) is not None:
                    ops.append(_Op("delete", path))
            if not ops:
                return
            try:
                self._fenced(epoch_zk_version, ops)
                log.info("deleted the znodes of topic %s", topic)
                return
            except _OpFailed as failed:
                if isinstance(failed.error, (kz.NoNodeError, kz.NotEmptyError)):
                    continue  # the tree changed since we listed it
                raise _translate(failed.error, failed.op.path) from None
        raise ZkError(f"could not delete the znodes of topic {topic}: they kept changing")

    def _subtree(self, root: str) -> list[str]:
        """`root` and everything under it, children before parents (the order deletes need)."""
        order: list[str] = []

        def visit(path: str) -> None:
            for child in self._children(path):
                visit(f"{path}/{child}")
            order.append(path)

        if self._exists(root) is None:
            return []
        visit(root)
        return order

    def delete_admin_path(self, path: str, epoch_zk_version: int) -> None:
        """Deletes one processed admin or notification znode as controller; a missing one is fine."""
        try:
            self._fenced(epoch_zk_version, [_Op("delete", path)])
        except _OpFailed as failed:
            if not isinstance(failed.error, kz.NoNodeError):
                raise _translate(failed.error, path) from None

    def ensure_feature_znode(self, epoch_zk_version: int) -> int:
        """/feature as a 3.7 controller leaves it: status 1 (enabled), finalized features empty."""
        wanted = encode_feature(FinalizedFeatures())
        for _ in range(10):
            found = self._get(FEATURE_PATH)
            try:
                if found is None:
                    self._fenced(epoch_zk_version, [_Op("create", FEATURE_PATH, wanted)])
                    return 0
                data, stat = found
                if decode_feature(data).status == 1:
                    return stat.version  # enabled already; finalized features are left as they are
                results = self._fenced(epoch_zk_version, [_Op("set", FEATURE_PATH, wanted, version=stat.version)])
                return results[0].version
            except _OpFailed as failed:
                if not isinstance(failed.error, (kz.NodeExistsError, kz.BadVersionError, kz.NoNodeError)):
                    raise _translate(failed.error, FEATURE_PATH) from None
        raise ZkError(f"could not settle {FEATURE_PATH}: it kept changing")

    def get_feature(self) -> tuple[FinalizedFeatures | None, int]:
        """/feature and its znode version (None, -1 when absent)."""
        found = self._get(FEATURE_PATH)
        if found is None:
            return None, -1
        return decode_feature(found[0]), found[1].version

    def update_feature(self, changes: Mapping[str, int]) -> None:
        """UpdateFeatures: set (level > 0) or remove finalized levels in /feature, compare-and-set."""
        for _ in range(10):
            state, version = self.get_feature()
            state = state if state is not None else FinalizedFeatures()
            features = dict(state.features)
            features.update(changes)  # 0 kept: a feature turned off stays off over a new default
            data = encode_feature(FinalizedFeatures(1, features, 2))
            try:
                if version < 0:
                    self._create(FEATURE_PATH, data)
                else:
                    self._retry(lambda client: client.set(FEATURE_PATH, data, version=version))
                return
            except (kz.NodeExistsError, kz.BadVersionError, kz.NoNodeError):
                continue
        raise ZkError(f"could not update {FEATURE_PATH}: it kept changing")

    def allocate_producer_id_block(self, broker_id: int, epoch_zk_version: int) -> tuple[int, int]:
        """Claims the next 1000 producer ids for `broker_id`: (first id, count)."""
        while True:
            found = self._get(PRODUCER_ID_BLOCK_PATH)
            first = 0
            if found is not None and found[0]:
                first = decode_producer_id_block(found[0]).last_id + 1
            if first > 2**63 - 1 - PRODUCER_ID_BLOCK_SIZE:
                raise ZkError("all producer ids have been handed out")
            data = encode_producer_id_block(ProducerIdBlock(broker_id, first, first + PRODUCER_ID_BLOCK_SIZE - 1))
            op = (_Op("create", PRODUCER_ID_BLOCK_PATH, data) if found is None
                  else _Op("set", PRODUCER_ID_BLOCK_PATH, data, version=found[1].version))
            try:
                self._fenced(epoch_zk_version, [op])
            except _OpFailed as failed:
                if isinstance(failed.error, (kz.BadVersionError, kz.NodeExistsError, kz.NoNodeError)):
                    continue  # someone else moved the block meanwhile (a pre-3.0 broker); read again
                raise _translate(failed.error, PRODUCER_ID_BLOCK_PATH) from None
            log.info("allocated producer ids %d-%d to broker %d", first, first + PRODUCER_ID_BLOCK_SIZE - 1,
                     broker_id)
            return first, PRODUCER_ID_BLOCK_SIZE

    # -- topics ----------------------------------------------------------------------------------------

    def get_all_topics(self) -> list[str]:
        return sorted(self._children(TOPICS_PATH))

    def watch_topics(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_children(TOPICS_PATH, lambda _children: callback())

    def get_topic(self, name: str) -> tuple[TopicAssignment, int] | None:
        """(assignment, znode version) of a topic, None if it does not exist."""
        found = self._get(topic_path(name))
        if found is None:
            return None
        return decode_topic(name, found[0]), found[1].version

    def watch_topic(self, name: str, callback: Callable[[TopicAssignment | None], None]) -> WatchHandle:
        """callback(assignment) on every change of /brokers/topics/<t>, callback(None) once it is gone."""
        return self.watch_data(topic_path(name),
                               lambda data, _stat: callback(decode_topic(name, data) if data is not None else None))

    def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """Kafka's AdminZkClient order: the config znode first, then the topic znode the controller watches."""
        # No config_change notification: brokers read a new topic's config when it appears.
        self._set_or_create(config_entity_path("topics", assignment.name), encode_config(configs))
        try:
            self._create(topic_path(assignment.name), encode_topic(assignment))
        except kz.NodeExistsError:
            raise TopicExistsError(f"Topic '{assignment.name}' already exists.") from None

    def get_partition_state(self, topic: str, partition: int) -> tuple[LeaderIsr, int] | None:
        """(state, znode version = partition epoch), None before the controller created it."""
        path = partition_state_path(topic, partition)
        found = self._get(path)
        if found is None:
            return None
        return decode_partition_state(found[0], path), found[1].version

    def get_all_partition_states(self, topic: str) -> dict[int, tuple[LeaderIsr, int]]:
        partitions = sorted(int(child) for child in self._children(topic_partitions_path(topic)) if child.isdigit())
        found = self._get_many([partition_state_path(topic, p) for p in partitions])
        states = {}
        for p in partitions:
            path = partition_state_path(topic, p)
            if path in found:
                data, stat = found[path]
                states[p] = (decode_partition_state(data, path), stat.version)
        return states

    def mark_topic_for_deletion(self, name: str) -> bool:
        """Creates /admin/delete_topics/<t>; False if it was already marked."""
        try:
            self._create(delete_topic_path(name), b"")
            return True
        except kz.NodeExistsError:
            return False

    def get_topics_pending_deletion(self) -> list[str]:
        return sorted(self._children(DELETE_TOPICS_PATH))

    def watch_topic_deletions(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_children(DELETE_TOPICS_PATH, lambda _children: callback())

    # -- legacy reassignment znode ---------------------------------------------------------------------

    def get_reassignment(self) -> dict[tuple[str, int], list[int]] | None:
        """The targets in /admin/reassign_partitions (kafka-reassign-partitions before 2.4), None if absent."""
        found = self._get(REASSIGN_PARTITIONS_PATH)
        if found is None:
            return None
        try:
            return decode_reassignment(found[0])
        except ZnodeDecodeError as exc:  # as Kafka: ignored (and left in place), with a warning
            log.warning("Ignoring partition reassignment due to invalid json: %s", exc)
            return {}

    def watch_reassignment(self, callback: Callable[[], None]) -> WatchHandle:
        """callback() when /admin/reassign_partitions is created, changed or deleted (and once now)."""
        return self.watch_data(REASSIGN_PARTITIONS_PATH, lambda _data, _stat: callback())

    def set_or_delete_reassignment(self, targets: Mapping[tuple[str, int], Iterable[int]],
                                   epoch_zk_version: int) -> None:
        """Rewrites /admin/reassign_partitions as controller with what is left of it, or deletes it
        when nothing is."""
        path = REASSIGN_PARTITIONS_PATH
        if not targets:
            self.delete_admin_path(path, epoch_zk_version)
            return
        op = "set" if self._exists(path) is not None else "create"
        try:
            self._fenced(epoch_zk_version, [_Op(op, path, encode_reassignment(targets))])
        except _OpFailed as failed:
            raise _translate(failed.error, path) from None

    def get_preferred_replica_election(self) -> set[tuple[str, int]] | None:
        """The partitions in /admin/preferred_replica_election (kafka-preferred-replica-election
        before 2.4), None if absent; an unreadable znode counts as empty."""
        found = self._get(PREFERRED_REPLICA_ELECTION_PATH)
        if found is None:
            return None
        try:
            return decode_preferred_replica_election(found[0])
        except ZnodeDecodeError as exc:
            log.warning("Ignoring preferred replica election due to invalid json: %s", exc)
            return set()

    def watch_preferred_replica_election(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_data(PREFERRED_REPLICA_ELECTION_PATH, lambda _data, _stat: callback())

    # -- generic reads (admin znodes, notifications) ---------------------------------------------------

    def get_data(self, path: str) -> tuple[bytes, int] | None:
        """(data, znode version) of any znode, None if absent; decode with the paths module."""
        found = self._get(path)
        return (found[0], found[1].version) if found is not None else None

    def get_children(self, path: str) -> list[str]:
        """Children of any znode ([] if it does not exist), e.g. pending ISR-change notifications."""
        return sorted(self._children(path))

    # -- log dir events (Kafka's LogDirEventNotification) ------------------------------------------------

    def create_log_dir_event(self, broker_id: int) -> None:
        """Tell the controller that a log dir of `broker_id` changed (Kafka writes one on a failure;
        kafkapy also when a full dir is back): /log_dir_event_notification/log_dir_event_<seq>."""
        self._ensure_path(LOG_DIR_EVENT_PATH)
        self._create(f"{LOG_DIR_EVENT_PATH}/{LOG_DIR_EVENT_PREFIX}", encode_log_dir_event(broker_id), sequence=True)

    def watch_log_dir_events(self, callback: Callable[[], None]) -> WatchHandle:
        return self.watch_children(LOG_DIR_EVENT_PATH, lambda _children: callback())

    def take_log_dir_events(self) -> set[int]:
        """The brokers named by the pending log dir events, which are deleted (the controller's
        read-and-delete, as Kafka's LogDirEventNotification handling)."""
        names = self._children(LOG_DIR_EVENT_PATH)
        paths = [f"{LOG_DIR_EVENT_PATH}/{name}" for name in names]
        found = self._get_many(paths)
        brokers = set()
        for path in paths:
            if path in found:
                try:
                    brokers.add(decode_log_dir_event(found[path][0]))
                except ZnodeDecodeError as exc:
                    log.warning("ignoring unreadable log dir event %s: %s", path, exc)
            try:
                self._retry(lambda client, path=path: client.delete(path))
            except kz.NoNodeError:
                pass
        return brokers

    # -- configs ---------------------------------------------------------------------------------------

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """The overrides in /config/<type>/<name> ({} if none); `name` as the znode spells it."""
        found = self._get(config_entity_path(entity_type, name))
        return decode_config(found[0]) if found is not None else {}

    def set_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """Replaces the overrides, then tells every broker through a config_change_ notification."""
        self._set_or_create(config_entity_path(entity_type, name), encode_config(configs))
        self._create(f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}",
                     encode_config_change(f"{entity_type}/{name}"), sequence=True)

    def get_all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        names = self._children(config_entity_type_path(entity_type))
        found = self._get_many([config_entity_path(entity_type, name) for name in names])
        return {name: decode_config(found[config_entity_path(entity_type, name)][0])
                for name in sorted(names) if config_entity_path(entity_type, name) in found}

    def get_quota_entity_configs(self) -> dict[str, dict[str, str]]:
        """The client quota znodes by entity path ("users/<u>", "users/<u>/clients/<c>", "clients/<c>";
        names sanitized as in ZooKeeper, `<default>` for defaults), in two pipelined rounds."""
        users = self._children(config_entity_type_path("users"))
        clients = self._children(config_entity_type_path("clients"))
        user_clients = self._children_many([f"{config_entity_path('users', u)}/clients" for u in users])
        entity_paths = ([f"users/{u}" for u in users] + [f"clients/{c}" for c in clients]
                        + [f"users/{u}/clients/{c}" for u in users
                           for c in user_clients.get(f"{config_entity_path('users', u)}/clients", [])])
        znodes = {p: config_entity_path(*p.split("/", 1)) for p in entity_paths}
        found = self._get_many(list(znodes.values()))
        return {p: decode_config(found[z][0]) for p, z in znodes.items() if z in found}

    def watch_config_changes(self, callback: Callable[[list[str]], None], *,
                             purge_after_ms: int = CONFIG_CHANGE_EXPIRY_MS) -> WatchHandle:
        """callback(entity paths such as "topics/foo") for each batch of new config_change_ nodes.

        Like Kafka, the first batch covers every notification already present. Notifications
        older than `purge_after_ms` are deleted after they have been handed over.
        """
        follower = _NotificationFollower(self, CONFIG_CHANGES_PATH, CONFIG_CHANGE_PREFIX, decode_config_change,
                                         callback, purge_after_ms)
        return self.watch_children(CONFIG_CHANGES_PATH, follower.on_children)

    # -- ACLs ------------------------------------------------------------------------------------------

    def ensure_acl_paths(self) -> None:
        """The znodes Kafka's AclAuthorizer creates before it loads (KafkaZkClient.createAclPaths)."""
        for path in acl_persistent_paths():
            self._ensure_path(path)

    def get_acls(self, resource_type: Any, name: str, pattern: Any = "literal") -> tuple[list[dict[str, str]], int]:
        """(ACL entries, znode version) of one resource pattern; ([], UNKNOWN_VERSION) if it has none."""
        found = self._get(acl_path(resource_type, name, pattern))
        if found is None:
            return [], UNKNOWN_VERSION
        return decode_acls(found[0]), found[1].version

    def set_acls(self, resource_type: Any, name: str, acls: Iterable[Mapping[str, str]], expected_version: int,
                 pattern: Any = "literal", *, notify: bool = True) -> int:
        """Compare-and-set of a resource's ACLs (empty list deletes the znode), then a change notification.

        `expected_version` is what get_acls returned (UNKNOWN_VERSION to create); returns the new
        version (UNKNOWN_VERSION once deleted). Raises BadVersionError when another writer got there first.
        With notify=False the caller writes the notification (AclAuthorizer writes one only when the
        ACLs really changed).
        """
        path = acl_path(resource_type, name, pattern)
        entries = list(acls)
        try:
            if not entries:
                if expected_version != UNKNOWN_VERSION:
                    self._retry(lambda client: client.delete(path, version=expected_version))
                new_version = UNKNOWN_VERSION
            elif expected_version == UNKNOWN_VERSION:
                self._create(path, encode_acls(entries))
                new_version = 0
            else:
                stat = self._retry(lambda client: client.set(path, encode_acls(entries), version=expected_version))
                new_version = stat.version
        except (kz.BadVersionError, kz.NodeExistsError, kz.NoNodeError):
            raise BadVersionError(f"{path}: ACLs changed since they were read") from None
        if notify:
            self.create_acl_change_notification(resource_type, name, pattern)
        return new_version

    def create_acl_change_notification(self, resource_type: Any, name: str, pattern: Any = "literal") -> None:
        """Tells every broker to re-read this resource pattern's ACLs (an acl_changes_ node)."""
        self._create(f"{acl_change_path(pattern)}/{ACL_CHANGE_PREFIX}", encode_acl_change(resource_type, name, pattern),
                     sequence=True)

    def get_all_acls(self) -> dict[tuple[str, str, str], tuple[list[dict[str, str]], int]]:
        """Every stored ACL: (RESOURCE_TYPE, name, LITERAL|PREFIXED) -> (entries, znode version).

        A znode whose JSON cannot be read is left out with a warning rather than failing the load.
        """
        result = {}
        for pattern in ("LITERAL", "PREFIXED"):
            root = acl_root_path(pattern)
            for type_name in self._children(root):
                names = self._children(f"{root}/{type_name}")
                found = self._get_many([f"{root}/{type_name}/{name}" for name in names])
                resource_type = acl_resource_type_enum_name(type_name)
                for name in names:
                    got = found.get(f"{root}/{type_name}/{name}")
                    if got is None:
                        continue
                    try:
                        result[(resource_type, name, pattern)] = (decode_acls(got[0]), got[1].version)
                    except ZnodeDecodeError as exc:
                        log.warning("ignoring unreadable ACL znode %s/%s/%s: %s", root, type_name, name, exc)
        return result

    def watch_acl_changes(self, callback: Callable[[list[tuple[str, str, str]]], None], *,
                          purge_after_ms: int = CONFIG_CHANGE_EXPIRY_MS) -> WatchHandle:
        """callback([(RESOURCE_TYPE, name, PATTERN_TYPE), ...]) for new literal and extended ACL changes."""
        handle = WatchHandle()
        for pattern, parent in (("literal", LITERAL_ACL_CHANGES_PATH), ("prefixed", EXTENDED_ACL_CHANGES_PATH)):
            follower = _NotificationFollower(self, parent, ACL_CHANGE_PREFIX,
                                             lambda data, pattern=pattern: decode_acl_change(data, pattern),
                                             callback, purge_after_ms)
            self._watch_children(parent, follower.on_children, handle)  # one handle stops both
        return handle


class _NotificationFollower:
    """Kafka's ZkNodeChangeNotificationListener over one parent of persistent-sequential change nodes.

    Hands each node's decoded content to `deliver` exactly once, in sequence order (batched per
    children event), and deletes processed nodes older than `purge_after_ms` so that the parent
    stays small. Runs on kazoo's callback thread, one event at a time.
    """

    def __init__(self, client: KafkaZkClient, parent: str, prefix: str, decode: Callable[[bytes], Any],
                 deliver: Callable[[list[Any]], None], purge_after_ms: int):
        self._client = client
        self._parent = parent
        self._prefix = prefix
        self._decode = decode
        self._deliver = deliver
        self._purge_after_ms = purge_after_ms
        self._last_sequence = -1
        self._created_ms: dict[str, int] = {}  # processed node name -> its ctime, for purging
        self._lock = threading.Lock()

    def on_children(self, children: list[str]) -> None:
        with self._lock:
            numbered = []
            for name in children:
                try:
                    numbered.append((sequence_number(name, self._prefix), name))
                except ZnodeDecodeError:
                    continue  # not a notification; Kafka ignores stray children too
            numbered.sort()
            fresh = [(seq, name) for seq, name in numbered if seq > self._last_sequence]
            found = self._client._get_many([f"{self._parent}/{name}" for _, name in fresh])
            items: list[Any] = []
            for seq, name in fresh:
                self._last_sequence = seq
                got = found.get(f"{self._parent}/{name}")
                if got is None:
                    continue  # purged by another broker before we read it
                data, stat = got
                self._created_ms[name] = stat.ctime
                try:
                    item = self._decode(data)
                except ZnodeDecodeError as exc:
                    log.warning("ignoring unreadable change notification %s/%s: %s", self._parent, name, exc)
                    continue
                if item not in items:
                    items.append(item)
            if items:
                self._deliver(items)
            self._purge({name for _, name in numbered})

    def _purge(self, present: set[str]) -> None:
        cutoff = time.time() * 1000 - self._purge_after_ms
        for name in list(self._created_ms):
            if name not in present:
                del self._created_ms[name]
            elif self._created_ms[name] < cutoff:
                try:
                    self._client._retry(lambda client, name=name: client.delete(f"{self._parent}/{name}"))
                except kz.NoNodeError:
                    pass  # another broker purged it first
                del self._created_ms[name]
