"""ZkSession: one kazoo session as Kafka's ZooKeeperClient holds it, and the primitives on it.

A blocking, thread-safe layer: a call made while the connection is down waits until kazoo
reconnects (as Kafka's ZooKeeperClient does); `close()` releases such waiters with
ZkConnectionError. Raw reads and writes, multis (`_commit`) and the controller-fenced multi
(`_fenced`), and watches that fire once right away and survive session loss. The Kafka operations
on top are in entity_configs.py (configs, ACLs) and client.py (KafkaZkClient: everything else).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from .errors import (BadVersionError, ControllerMovedError, NodeExistsError, NoNodeError, ZkConnectionError,
                     ZkError)
from .paths import CONTROLLER_EPOCH_PATH

log = logging.getLogger(__name__)

T = TypeVar("T")

# Kafka's ZkVersion.UnknownVersion: the "version" of a znode that does not exist (ZooKeeper itself
# uses -1 for "any version", so a different sentinel is needed).
UNKNOWN_VERSION = -2
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



class ZkSession:
    """One broker's ZooKeeper session and the primitives on it (see the module docstring)."""

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

    def __enter__(self) -> ZkSession:
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


    # -- generic reads (admin znodes, notifications) ---------------------------------------------------

    def get_data(self, path: str) -> tuple[bytes, int] | None:
        """(data, znode version) of any znode, None if absent; decode with the paths module."""
        found = self._get(path)
        return (found[0], found[1].version) if found is not None else None

    def get_children(self, path: str) -> list[str]:
        """Children of any znode ([] if it does not exist), e.g. pending ISR-change notifications."""
        return sorted(self._children(path))

