"""The state of the in-memory ZooKeeper (zookeeper.py): znodes and their Stat, sessions, and the
operations that change the tree (create, delete, setData, check, multi with its undo steps) and the
watches they fire. InMemoryZooKeeper (zookeeper.py) serves them over ZooKeeper's wire protocol.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .jute import (EVENT_CREATED, EVENT_DELETED, EVENT_CHANGED, EVENT_CHILD, NO_NODE, BAD_VERSION,
                   NO_CHILDREN_FOR_EPHEMERALS, NODE_EXISTS, NOT_EMPTY, OK, RUNTIME_INCONSISTENCY,
                   UNIMPLEMENTED, BAD_ARGUMENTS, OP_CHECK, OP_CREATE2, OP_ERROR, OP_CREATE, OP_DELETE,
                   OP_SET_DATA, INVALID_ACL, INT, MULTI_HEADER, STAT, JuteReader, jute_string)


class KeeperError(Exception):
    """A request fails with ZooKeeper error `code` (a negative KeeperException.Code)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


@dataclass(slots=True)
class ZnodeStat:
    """A znode's Stat, as ZooKeeper returns it (field order is the wire order)."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int

    def pack(self) -> bytes:
        return STAT.pack(self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion,
                          self.aversion, self.ephemeral_owner, self.data_length, self.num_children, self.pzxid)


@dataclass(slots=True)
class _Znode:
    """One znode: data, ACL, children names and the counters behind its Stat."""

    data: bytes
    acl: list[tuple[int, str, str]]
    czxid: int
    ctime: int
    ephemeral_owner: int = 0
    mzxid: int = 0
    mtime: int = 0
    pzxid: int = 0
    version: int = 0
    cversion: int = 0
    aversion: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion,
                         self.aversion, self.ephemeral_owner, len(self.data), len(self.children), self.pzxid)


@dataclass(slots=True, eq=False)
class _Session:
    """A client session: it outlives connections until it is closed or not heard from in `timeout_ms`."""

    session_id: int
    password: bytes
    timeout_ms: int
    deadline: float
    connection: Any = None  # the _Connection (zookeeper.py) it is on; None between connections
    ephemerals: set[str] = field(default_factory=set)
    severed: bool = False  # the client is treated as dead: no reply, no reconnect, expiry runs its course

    def touch(self) -> None:
        self.deadline = time.monotonic() + self.timeout_ms / 1000


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _validate_path(path: str) -> None:
    """ZooKeeper's PathUtils.validatePath: absolute, no empty, '.' or '..' components, no trailing '/'."""
    if not path.startswith("/") or "\0" in path:
        raise KeeperError(BAD_ARGUMENTS)
    if path == "/":
        return
    if path.endswith("/") or any(part in ("", ".", "..") for part in path[1:].split("/")):
        raise KeeperError(BAD_ARGUMENTS)


# What a watch is registered for: ZooKeeper keeps exists-watches with data watches (both fire on
# create, change and delete of the path) and child watches apart.
_DATA, _CHILD = "data", "child"


class ZnodeTree:
    """The znode tree and watches of InMemoryZooKeeper, which holds `_nodes`, `_sessions`, `_watches` and `zxid`."""

    def _node(self, path: str) -> _Znode:
        _validate_path(path)
        node = self._nodes.get(path)
        if node is None:
            raise KeeperError(NO_NODE)
        return node

    # -- the operations that change the tree; each may add an undo step (for multi) -----------------
    def _create(self, session: _Session, request: JuteReader, events: list,
                undo: list[Callable[[], None]] | None = None, zxid: int | None = None) -> tuple[str, ZnodeStat]:
        path = request.string()
        data = request.buffer() or b""
        acl = request.acl()
        flags = request.int()
        if flags not in (0, 1, 2, 3):  # container and TTL znodes are not supported
            raise KeeperError(UNIMPLEMENTED if flags in (4, 5, 6) else BAD_ARGUMENTS)
        ephemeral, sequential = bool(flags & 1), bool(flags & 2)
        _validate_path(path + "1" if sequential else path)
        if path == "/":
            raise KeeperError(NODE_EXISTS)
        if not acl:
            raise KeeperError(INVALID_ACL)
        parent_path = _parent(path)
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise KeeperError(NO_NODE)
        if parent.ephemeral_owner:
            raise KeeperError(NO_CHILDREN_FOR_EPHEMERALS)
        if sequential:
            # ZooKeeper numbers sequential znodes with the parent's cversion
            path = f"{path}{parent.cversion:010d}"
        if path in self._nodes:
            raise KeeperError(NODE_EXISTS)
        if zxid is None:
            self.zxid += 1
            zxid = self.zxid
        saved = (parent.cversion, parent.pzxid)
        node = self._apply_create(path, data, acl, zxid, session.session_id if ephemeral else 0)
        if ephemeral:
            session.ephemerals.add(path)
        events.append((EVENT_CREATED, path, _DATA))
        events.append((EVENT_CHILD, parent_path, _CHILD))
        if undo is not None:
            def revert() -> None:
                del self._nodes[path]
                parent.children.discard(path.rsplit("/", 1)[1])
                parent.cversion, parent.pzxid = saved
                session.ephemerals.discard(path)
            undo.append(revert)
        return path, node.stat()

    def _apply_create(self, path: str, data: bytes, acl: list, zxid: int, owner: int = 0) -> _Znode:
        now = self._now_ms()
        node = _Znode(data, acl, zxid, now, owner, mzxid=zxid, mtime=now, pzxid=zxid)
        self._nodes[path] = node
        parent = self._nodes[_parent(path)]
        parent.children.add(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = zxid
        return node

    def _delete(self, request: JuteReader, events: list, undo: list | None = None, zxid: int | None = None) -> None:
        path = request.string()
        version = request.int()
        _validate_path(path)
        if path == "/" or path == "/zookeeper":
            raise KeeperError(BAD_ARGUMENTS)
        node = self._nodes.get(path)
        if node is None:
            raise KeeperError(NO_NODE)
        if version not in (-1, node.version):
            raise KeeperError(BAD_VERSION)
        if node.children:
            raise KeeperError(NOT_EMPTY)
        if zxid is None:
            self.zxid += 1
            zxid = self.zxid
        parent = self._nodes[_parent(path)]
        saved = (parent.cversion, parent.pzxid)
        self._apply_delete(path, zxid, events)
        if undo is not None:
            def revert() -> None:
                self._nodes[path] = node
                parent.children.add(path.rsplit("/", 1)[1])
                parent.cversion, parent.pzxid = saved
                if node.ephemeral_owner:
                    session = self._sessions.get(node.ephemeral_owner)
                    if session is not None:
                        session.ephemerals.add(path)
            undo.append(revert)

    def _apply_delete(self, path: str, zxid: int, events: list) -> None:
        node = self._nodes.pop(path)
        parent_path = _parent(path)
        parent = self._nodes[parent_path]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = zxid
        if node.ephemeral_owner:
            session = self._sessions.get(node.ephemeral_owner)
            if session is not None:
                session.ephemerals.discard(path)
        events.append((EVENT_DELETED, path, _DATA))
        events.append((EVENT_DELETED, path, _CHILD))
        events.append((EVENT_CHILD, parent_path, _CHILD))

    def _set_data(self, request: JuteReader, events: list, undo: list | None = None,
                  zxid: int | None = None) -> ZnodeStat:
        path = request.string()
        data = request.buffer() or b""
        version = request.int()
        node = self._node(path)
        if version not in (-1, node.version):
            raise KeeperError(BAD_VERSION)
        if zxid is None:
            self.zxid += 1
            zxid = self.zxid
        saved = (node.data, node.version, node.mzxid, node.mtime)
        node.data, node.version, node.mzxid, node.mtime = data, node.version + 1, zxid, self._now_ms()
        events.append((EVENT_CHANGED, path, _DATA))
        if undo is not None:
            def revert() -> None:
                node.data, node.version, node.mzxid, node.mtime = saved
            undo.append(revert)
        return node.stat()

    def _check(self, request: JuteReader) -> None:
        path = request.string()
        version = request.int()
        node = self._node(path)
        if version not in (-1, node.version):
            raise KeeperError(BAD_VERSION)

    def _multi(self, session: _Session, request: JuteReader, events: list) -> bytes:
        """All ops or none, under one zxid. On failure every result is an error, as in ZooKeeper: the
        ops before the failed one report OK (rolled back), the failed one its error, the rest
        RUNTIMEINCONSISTENCY."""
        ops: list[tuple[int, JuteReader]] = []
        while True:
            op, done, _err = MULTI_HEADER.unpack_from(request.buf, request.pos)
            request.pos += MULTI_HEADER.size
            if done:
                break
            # each op's body is read as the op runs; keep a reader positioned at its start and skip it
            start = JuteReader(request.buf, request.pos)
            self._skip_op(op, request)
            ops.append((op, start))
        zxid = self.zxid + 1
        undo: list[Callable[[], None]] = []
        staged: list[tuple[int, str, str]] = []
        results: list[bytes] = []
        failed_at, failure = -1, OK
        for index, (op, body) in enumerate(ops):
            try:
                if op in (OP_CREATE, OP_CREATE2):
                    path, stat = self._create(session, body, staged, undo, zxid)
                    results.append(MULTI_HEADER.pack(op, 0, 0) + jute_string(path)
                                   + (stat.pack() if op == OP_CREATE2 else b""))
                elif op == OP_DELETE:
                    self._delete(body, staged, undo, zxid)
                    results.append(MULTI_HEADER.pack(op, 0, 0))
                elif op == OP_SET_DATA:
                    results.append(MULTI_HEADER.pack(op, 0, 0) + self._set_data(body, staged, undo, zxid).pack())
                elif op == OP_CHECK:
                    self._check(body)
                    results.append(MULTI_HEADER.pack(op, 0, 0))
                else:
                    raise KeeperError(UNIMPLEMENTED)
            except KeeperError as error:
                failed_at, failure = index, error.code
                break
        if failed_at >= 0:
            for revert in reversed(undo):
                revert()
            codes = [OK] * failed_at + [failure] + [RUNTIME_INCONSISTENCY] * (len(ops) - failed_at - 1)
            return (b"".join(MULTI_HEADER.pack(OP_ERROR, 0, code) + INT.pack(code) for code in codes)
                    + MULTI_HEADER.pack(-1, 1, -1))
        if undo:
            self.zxid = zxid
        events.extend(staged)
        return b"".join(results) + MULTI_HEADER.pack(-1, 1, -1)

    @staticmethod
    def _skip_op(op: int, request: JuteReader) -> None:
        if op in (OP_CREATE, OP_CREATE2):
            request.string(), request.buffer(), request.acl(), request.int()
        elif op in (OP_DELETE, OP_CHECK):
            request.string(), request.int()
        elif op == OP_SET_DATA:
            request.string(), request.buffer(), request.int()
        else:
            raise KeeperError(UNIMPLEMENTED)

    # -- watches -------------------------------------------------------------------------------------
    def _watch(self, kind: str, path: str, session: _Session) -> None:
        self._watches[kind].setdefault(path, set()).add(session)

    def _drop_watches(self, session: _Session) -> None:
        for table in self._watches.values():
            for path in [p for p, sessions in table.items() if session in sessions]:
                table[path].discard(session)
                if not table[path]:
                    del table[path]

    def _fire(self, events: list[tuple[int, str, str]]) -> None:
        """Deliver and forget (watches are one-shot) the watches that `events` trigger."""
        told: set[tuple[int, int, str]] = set()
        for kind, path, table in events:
            for session in self._watches[table].pop(path, None) or ():
                # a deleted znode's data and child watches of one session make one event (ZooKeeper's
                # triggerWatch skips the watchers already notified)
                if session.connection is not None and (id(session), kind, path) not in told:
                    told.add((id(session), kind, path))
                    session.connection.event(kind, path)

    def _set_watches(self, session: _Session, request: JuteReader, events: list) -> None:
        """A reconnected client re-registers its watches, naming the last zxid it saw; whatever
        changed since then fires at once, as in ZooKeeper."""
        relative_zxid = request.long()
        data_paths, exist_paths, child_paths = request.strings(), request.strings(), request.strings()
        connection = session.connection
        assert connection is not None
        for path in data_paths:
            node = self._nodes.get(path)
            if node is None:
                connection.event(EVENT_DELETED, path)
            elif node.mzxid > relative_zxid:
                connection.event(EVENT_CHANGED, path)
            else:
                self._watch(_DATA, path, session)
        for path in exist_paths:
            if path in self._nodes:
                connection.event(EVENT_CREATED, path)
            else:
                self._watch(_DATA, path, session)
        for path in child_paths:
            node = self._nodes.get(path)
            if node is None:
                connection.event(EVENT_DELETED, path)
            elif node.pzxid > relative_zxid:
                connection.event(EVENT_CHILD, path)
            else:
                self._watch(_CHILD, path, session)
