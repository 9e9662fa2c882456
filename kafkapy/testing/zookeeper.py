"""An in-memory ZooKeeper server for tests: enough of ZooKeeper's wire protocol (jute) for kazoo, and
so for kafkapy's KafkaZkClient, with no Java and no ZooKeeper installation.

    from kafkapy.testing.zookeeper import InMemoryZooKeeper

    with InMemoryZooKeeper() as zk:                   # 127.0.0.1, a free port, its own thread
        client = kazoo.client.KazooClient(hosts=zk.connect_string)

What it does as ZooKeeper 3.x does: sessions (negotiated timeout, resumed on reconnect, expired when
no request or ping arrives within the timeout, closed by closeSession), ephemeral znodes removed with
their session, persistent/ephemeral/sequential create (create and create2), delete, exists, getData,
setData, getChildren(2), getACL/setACL (stored, not enforced), sync, multi (check/create/delete/setData,
all or nothing, per-op results as ZooKeeper returns them), one-shot data/exist/child watches,
setWatches after a reconnect, a global zxid and the stat fields. What it does not: persistence, a
quorum, ACL enforcement or authentication (auth packets are accepted), SASL, TTL and container
znodes, persistent/recursive watches, reconfig. Everything runs on one asyncio loop on a daemon
thread, so requests are applied one at a time in arrival order. The znodes, sessions and the
operations on the tree are in zk_state.py; this module is the server: connections, sessions'
life cycle, request dispatch, and the hooks tests use to look inside and make sessions fail.
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from .jute import (NO_NODE, BAD_VERSION, OK, MARSHALLING_ERROR, UNIMPLEMENTED, OP_MULTI, OP_CREATE2, OP_AUTH,
                   OP_SET_WATCHES, OP_CLOSE, OP_GET_ACL, OP_SET_ACL, OP_GET_CHILDREN, OP_SYNC, OP_PING,
                   OP_GET_CHILDREN2, OP_CREATE, OP_DELETE, OP_EXISTS, OP_GET_DATA, OP_SET_DATA, INVALID_ACL,
                   STATE_SYNC_CONNECTED, WATCH_XID, INT, LONG, REPLY_HEADER, JuteReader, jute_buffer,
                   jute_string)
from .zk_state import _CHILD, _DATA, KeeperError, ZnodeStat, ZnodeTree, _Session, _Znode, _validate_path

__all__ = ["InMemoryZooKeeper", "ZnodeStat"]

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
MAX_FRAME = 16 * 1024 * 1024  # far above ZooKeeper's 1 MB jute.maxbuffer; only a guard against garbage


class _Connection:
    """One client socket: frames in, replies and watch events out."""

    def __init__(self, server: InMemoryZooKeeper, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.server = server
        self.reader = reader
        self.writer = writer
        self.session: _Session | None = None
        self.closed = False

    def send(self, payload: bytes) -> None:
        if not self.closed:
            self.writer.write(INT.pack(len(payload)) + payload)

    def reply(self, xid: int, err: int = OK, body: bytes = b"") -> None:
        self.send(REPLY_HEADER.pack(xid, self.server.zxid, err) + body)

    def event(self, kind: int, path: str) -> None:
        # notifications carry zxid -1, as ZooKeeper's do
        self.send(REPLY_HEADER.pack(WATCH_XID, -1, OK) + INT.pack(kind) + INT.pack(STATE_SYNC_CONNECTED)
                  + jute_string(path))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()

    async def read_frame(self) -> bytes:
        length = INT.unpack(await self.reader.readexactly(4))[0]
        if not 0 <= length <= MAX_FRAME:
            raise ValueError(f"frame of {length} bytes")
        return await self.reader.readexactly(length)


class InMemoryZooKeeper(ZnodeTree):
    """A single in-memory ZooKeeper server on 127.0.0.1; a context manager that starts and stops it.

    `tick_ms` is ZooKeeper's tickTime: negotiated session timeouts are kept within
    [`2 * tick_ms`, `20 * tick_ms`] (ZooKeeper's default bounds). `port` 0 picks a free port.
    """

    def __init__(self, *, port: int = 0, tick_ms: int = 2000, min_session_timeout_ms: int | None = None,
                 max_session_timeout_ms: int | None = None):
        self._requested_port = port
        self.min_session_timeout_ms = min_session_timeout_ms if min_session_timeout_ms is not None else 2 * tick_ms
        self.max_session_timeout_ms = max_session_timeout_ms if max_session_timeout_ms is not None else 20 * tick_ms
        self.port: int | None = None
        self.zxid = 0
        now = self._now_ms()
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", [], 0, now)}
        self._sessions: dict[int, _Session] = {}
        # ZooKeeper's session ids: the server id in the top byte, a time-based counter below
        self._next_session_id = (1 << 56) | ((now << 24) & ((1 << 56) - 1))
        self._watches: dict[str, dict[str, set[_Session]]] = {_DATA: {}, _CHILD: {}}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[_Connection] = set()
        self._stopping: asyncio.Event | None = None
        # the znodes every ZooKeeper has
        self._apply_create("/zookeeper", b"", [], 0)
        self._apply_create("/zookeeper/quota", b"", [], 0)

    # -- life cycle --------------------------------------------------------------------------------
    @property
    def connect_string(self) -> str:
        """host:port for zookeeper.connect or KazooClient(hosts=...)."""
        if self.port is None:
            raise RuntimeError("the ZooKeeper server is not running")
        return f"{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> InMemoryZooKeeper:
        """Start serving (on a daemon thread); returns once the port accepts connections."""
        if self.running:
            return self
        ready = threading.Event()
        errors: list[BaseException] = []

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopping = asyncio.Event()
            try:
                self._server = await asyncio.start_server(self._serve, HOST, self._requested_port)
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                return
            self.port = self._server.sockets[0].getsockname()[1]
            expiry = asyncio.create_task(self._expire_sessions())
            ready.set()
            log.info("in-memory ZooKeeper serving on %s:%d", HOST, self.port)
            await self._stopping.wait()
            expiry.cancel()
            self._server.close()
            for connection in list(self._connections):
                connection.close()
            await self._server.wait_closed()

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), name="kafkapy-zookeeper", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or errors:
            self.stop()
            raise RuntimeError(f"the in-memory ZooKeeper did not start: {errors[0] if errors else 'timed out'}")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and drop every connection (the data goes with the object)."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None:
            return
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
            except RuntimeError:
                pass
        thread.join(timeout)
        self._thread = self._loop = self._stopping = self._server = None
        log.info("in-memory ZooKeeper on port %s stopped", self.port)

    def __enter__(self) -> InMemoryZooKeeper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- for tests: look inside, make sessions fail --------------------------------------------------
    def _call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Run `fn` on the server's loop (where all state lives) and return its result."""
        loop = self._loop
        if loop is None or self._thread is None:
            raise RuntimeError("the ZooKeeper server is not running")

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """A znode's data and stat, or None."""
        def read() -> tuple[bytes, ZnodeStat] | None:
            node = self._nodes.get(path)
            return None if node is None else (node.data, node.stat())
        return self._call(read)

    def get_children(self, path: str) -> list[str] | None:
        """A znode's children (sorted), or None if it does not exist."""
        def read() -> list[str] | None:
            node = self._nodes.get(path)
            return None if node is None else sorted(node.children)
        return self._call(read)

    def sessions(self) -> dict[int, int]:
        """Open sessions: id -> negotiated timeout in ms."""
        return self._call(lambda: {s.session_id: s.timeout_ms for s in self._sessions.values()})

    def expire_session(self, session_id: int) -> bool:
        """Expire a session now, as ZooKeeper would after its timeout; False if there is none."""
        def expire() -> bool:
            session = self._sessions.get(session_id)
            if session is None:
                return False
            self._end_session(session, "expired (on request)")
            return True
        return self._call(expire)

    def drop_connections(self) -> int:
        """Close every client connection, as a network blip would; sessions live on (clients
        reconnect and resume them within their timeout). Returns how many were closed."""
        def drop() -> int:
            connections = list(self._connections)
            for connection in connections:
                connection.close()
            return len(connections)
        return self._call(drop)

    def sever_session(self, session_id: int) -> bool:
        """Make a session's client look dead: its connection is dropped, later requests and
        reconnects with that session id are not answered, and the session expires after its
        timeout with its ephemeral znodes, as for a killed process. False if there is no session."""
        def sever() -> bool:
            session = self._sessions.get(session_id)
            if session is None:
                return False
            session.severed = True
            if session.connection is not None:
                session.connection.close()
                session.connection = None
            log.info("ZooKeeper session 0x%x severed; it expires in %d ms", session_id, session.timeout_ms)
            return True
        return self._call(sever)

    # -- connections and sessions ------------------------------------------------------------------
    @staticmethod
    def _now_ms() -> int:
        return int(time.time() * 1000)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(self, reader, writer)
        self._connections.add(connection)
        try:
            if not self._connect(connection, await connection.read_frame()):
                return
            while not connection.closed:
                frame = await connection.read_frame()
                if connection.closed:
                    return
                self._handle(connection, frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, struct.error, OSError):
            pass
        except Exception:  # a bug here: say so, and drop only this connection
            log.exception("in-memory ZooKeeper failed on a request; closing the connection")
        finally:
            self._connections.discard(connection)
            session = connection.session
            if session is not None and session.connection is connection:
                # the session lives on until its deadline; its watches go with the connection (the
                # client re-registers them with setWatches)
                session.connection = None
                self._drop_watches(session)
            connection.close()

    def _connect(self, connection: _Connection, frame: bytes) -> bool:
        """The ConnectRequest: a new session or the resumption of one; False if refused."""
        request = JuteReader(frame)
        protocol_version = request.int()
        last_zxid_seen = request.long()
        timeout_ms = request.int()
        session_id = request.long()
        password = request.buffer() or b""
        try:
            read_only = request.bool()
        except struct.error:
            read_only = False
        del protocol_version, read_only
        if last_zxid_seen > self.zxid:
            # ZooKeeper refuses a client that has seen a newer state than this server has
            log.info("refused a ZooKeeper client that has seen zxid 0x%x (this server is at 0x%x)",
                     last_zxid_seen, self.zxid)
            connection.close()
            return False
        if session_id:
            session = self._sessions.get(session_id)
            if session is not None and session.severed:
                connection.close()
                return False
            if session is None or session.password != password:
                # what ZooKeeper answers for an expired or unknown session: timeout 0, then close
                connection.send(INT.pack(0) + INT.pack(0) + LONG.pack(0) + jute_buffer(bytes(16)) + b"\x00")
                connection.close()
                return False
            if session.connection is not None:
                session.connection.close()
                self._drop_watches(session)
        else:
            timeout_ms = min(max(timeout_ms, self.min_session_timeout_ms), self.max_session_timeout_ms)
            session = _Session(self._next_session_id, os.urandom(16), timeout_ms, 0.0)
            self._next_session_id += 1
            self._sessions[session.session_id] = session
            log.info("ZooKeeper session 0x%x opened (timeout %d ms)", session.session_id, timeout_ms)
        session.touch()
        session.connection = connection
        connection.session = session
        connection.send(INT.pack(0) + INT.pack(session.timeout_ms) + LONG.pack(session.session_id)
                        + jute_buffer(session.password) + b"\x00")
        return True

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            for session in [s for s in self._sessions.values() if s.deadline < now]:
                self._end_session(session, "expired")

    def _end_session(self, session: _Session, how: str) -> None:
        """Close a session: its ephemeral znodes are deleted (firing watches) and its connection closed."""
        self._sessions.pop(session.session_id, None)
        self._drop_watches(session)
        if session.ephemerals:
            self.zxid += 1
            events: list[tuple[int, str, str]] = []
            # children before parents cannot happen (ephemerals have no children), but sort for a stable order
            for path in sorted(session.ephemerals, reverse=True):
                if path in self._nodes:
                    self._apply_delete(path, self.zxid, events)
            session.ephemerals.clear()
            self._fire(events)
        if session.connection is not None:
            session.connection.close()
            session.connection = None
        log.info("ZooKeeper session 0x%x %s", session.session_id, how)

    # -- requests ------------------------------------------------------------------------------------
    def _handle(self, connection: _Connection, frame: bytes) -> None:
        session = connection.session
        assert session is not None
        if session.severed:
            return
        request = JuteReader(frame)
        xid = request.int()
        op = request.int()
        session.touch()
        if op == OP_PING:
            connection.reply(xid)
            return
        if op == OP_CLOSE:
            # reply first (kazoo waits for it), then end the session, which closes the socket
            connection.reply(xid)
            self._end_session(session, "closed by its client")
            return
        if op == OP_AUTH:
            # no ACLs are enforced, so any credential is accepted
            connection.reply(xid)
            return
        events: list[tuple[int, str, str]] = []
        try:
            body = self._dispatch(session, op, request, events)
        except KeeperError as error:
            connection.reply(xid, error.code)
        except (struct.error, UnicodeDecodeError):
            connection.reply(xid, MARSHALLING_ERROR)
        else:
            # ZooKeeper delivers a change's notifications before the reply of the request that made it
            self._fire(events)
            connection.reply(xid, OK, body)
            return
        self._fire(events)

    def _dispatch(self, session: _Session, op: int, request: JuteReader, events: list) -> bytes:
        if op in (OP_CREATE, OP_CREATE2):
            path, stat = self._create(session, request, events)
            return jute_string(path) + (stat.pack() if op == OP_CREATE2 else b"")
        if op == OP_DELETE:
            self._delete(request, events)
            return b""
        if op == OP_SET_DATA:
            return self._set_data(request, events).pack()
        if op == OP_EXISTS:
            path = request.string()
            _validate_path(path)
            watch = request.bool()
            node = self._nodes.get(path)
            if watch:
                # exists registers its watch whether or not the znode is there (then it fires on create)
                self._watch(_DATA, path, session)
            if node is None:
                raise KeeperError(NO_NODE)
            return node.stat().pack()
        if op == OP_GET_DATA:
            path = request.string()
            node = self._node(path)
            if request.bool():
                self._watch(_DATA, path, session)
            return jute_buffer(node.data) + node.stat().pack()
        if op in (OP_GET_CHILDREN, OP_GET_CHILDREN2):
            path = request.string()
            node = self._node(path)
            if request.bool():
                self._watch(_CHILD, path, session)
            body = INT.pack(len(node.children)) + b"".join(jute_string(c) for c in sorted(node.children))
            return body + (node.stat().pack() if op == OP_GET_CHILDREN2 else b"")
        if op == OP_GET_ACL:
            node = self._node(request.string())
            acl = node.acl
            return (INT.pack(len(acl)) + b"".join(INT.pack(p) + jute_string(s) + jute_string(i) for p, s, i in acl)
                    + node.stat().pack())
        if op == OP_SET_ACL:
            path = request.string()
            acl = request.acl()
            version = request.int()
            node = self._node(path)
            if version not in (-1, node.aversion):
                raise KeeperError(BAD_VERSION)
            if not acl:
                raise KeeperError(INVALID_ACL)
            self.zxid += 1
            node.acl = acl
            node.aversion += 1
            return node.stat().pack()
        if op == OP_SYNC:
            return jute_string(request.string())
        if op == OP_MULTI:
            return self._multi(session, request, events)
        if op == OP_SET_WATCHES:
            self._set_watches(session, request, events)
            return b""
        raise KeeperError(UNIMPLEMENTED)


# Deprecated: the name docs/testing.md gave this class before it was renamed (a Java ZooKeeper
# process had the same name, see kafkapy.devcluster.zookeeper.JavaZooKeeper). Kept so that user
# code written against the old docs keeps working; new code says InMemoryZooKeeper.
ZooKeeperServer = InMemoryZooKeeper
