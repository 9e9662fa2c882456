"""kafkapy.testing.zookeeper.InMemoryZooKeeper against kazoo (the client KafkaZkClient uses): znode
operations and stats, sequential and ephemeral znodes, watches, multi atomicity, session close,
expiry and resumption, and setWatches from a raw client."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from kafkapy.testing.zookeeper import InMemoryZooKeeper

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server():
    # tickTime 100 ms: session timeouts between 200 ms and 2 s, so expiry tests are quick
    with InMemoryZooKeeper(tick_ms=100) as zk:
        yield zk
    assert not zk.running


@pytest.fixture
def connect(server):
    clients: list[KazooClient] = []

    def make(timeout: float = 2.0) -> KazooClient:
        client = KazooClient(hosts=server.connect_string, timeout=timeout)
        client.start(5)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.stop()
        client.close()


def wait_for(predicate, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"not reached within {timeout} s")


def test_znode_operations_and_stats(connect):
    zk = connect()
    assert zk.create("/a", b"one") == "/a"
    data, stat = zk.get("/a")
    assert data == b"one" and stat.version == 0 and stat.data_length == 3 and stat.ephemeralOwner == 0
    assert stat.czxid == stat.mzxid == stat.pzxid and stat.numChildren == 0 and stat.ctime == stat.mtime > 0
    with pytest.raises(kz.NodeExistsError):
        zk.create("/a")
    with pytest.raises(kz.NoNodeError):
        zk.create("/missing/child")
    assert zk.create("/x/y/z", makepath=True) == "/x/y/z"

    changed = zk.set("/a", b"two", version=0)
    assert changed.version == 1 and changed.mzxid > stat.mzxid and changed.czxid == stat.czxid
    with pytest.raises(kz.BadVersionError):
        zk.set("/a", b"three", version=0)
    with pytest.raises(kz.NoNodeError):
        zk.set("/nothing", b"")

    zk.create("/a/child", b"")
    parent = zk.exists("/a")
    assert parent.numChildren == 1 and parent.cversion == 1 and parent.pzxid > changed.mzxid
    assert zk.get_children("/a") == ["child"]
    children, stat2 = zk.get_children("/a", include_data=True)
    assert children == ["child"] and stat2 == parent
    with pytest.raises(kz.NotEmptyError):
        zk.delete("/a")
    with pytest.raises(kz.BadVersionError):
        zk.delete("/a/child", version=5)
    zk.delete("/a/child", version=0)
    zk.delete("/a")
    assert zk.exists("/a") is None
    with pytest.raises(kz.NoNodeError):
        zk.get("/a")
    with pytest.raises(kz.NoNodeError):
        zk.delete("/a")
    assert set(zk.get_children("/")) == {"zookeeper", "x"}
    acl, _ = zk.get_acls("/x")
    assert acl and acl[0].perms == 31
    zk.sync("/x")


def test_sequential_and_create2(connect):
    zk = connect()
    zk.create("/q")
    zk.create("/q/other")  # the parent's cversion numbers sequential znodes, as in ZooKeeper
    first = zk.create("/q/item-", b"a", sequence=True)
    second, stat = zk.create("/q/item-", b"bb", sequence=True, include_data=True)
    assert (first, second) == ("/q/item-0000000001", "/q/item-0000000002")
    assert stat.data_length == 2 and stat.version == 0
    assert zk.get(second)[1] == stat


def test_ephemeral_znodes_go_with_a_closed_session(connect):
    owner, observer = connect(), connect()
    owner.create("/e", b"mine", ephemeral=True)
    _, stat = observer.get("/e")
    assert stat.ephemeralOwner == owner.client_id[0]
    with pytest.raises(kz.NoChildrenForEphemeralsError):
        owner.create("/e/child")
    gone = threading.Event()
    observer.exists("/e", watch=lambda event: gone.set() if event.type == "DELETED" else None)
    owner.stop()
    assert gone.wait(5)
    assert observer.exists("/e") is None


def test_session_expires_when_its_client_stops_answering(server, connect):
    observer = connect()
    owner = connect(timeout=0.5)
    session_id = owner.client_id[0]
    assert server.sessions()[session_id] == 500
    owner.create("/dead-man", ephemeral=True)
    assert server.sever_session(session_id)  # the client is gone: no pings, no reconnect
    started = time.monotonic()
    wait_for(lambda: observer.exists("/dead-man") is None)
    assert 0.3 < time.monotonic() - started < 3
    assert session_id not in server.sessions()


def test_expired_session_is_reported_and_replaced(server, connect):
    zk = connect(timeout=1.0)
    states: list[str] = []
    zk.add_listener(states.append)
    old = zk.client_id[0]
    zk.create("/eph", ephemeral=True)
    assert server.expire_session(old)
    wait_for(lambda: KazooState.LOST in states and zk.connected)
    assert zk.client_id[0] != old  # kazoo opened a new session
    assert zk.exists("/eph") is None


def test_a_session_survives_a_dropped_connection(server, connect):
    zk = connect(timeout=2.0)
    session_id = zk.client_id[0]
    zk.create("/kept", ephemeral=True)
    states: list[str] = []
    zk.add_listener(states.append)
    assert server.drop_connections() >= 1
    wait_for(lambda: KazooState.SUSPENDED in states and zk.connected)
    assert zk.client_id[0] == session_id and zk.exists("/kept") is not None


def test_watches_are_one_shot_with_the_right_event_types(connect):
    zk, writer = connect(), connect()
    zk.create("/w", b"")
    events: list[tuple[str, str]] = []

    def record(event):
        events.append((event.type, event.path))

    zk.get("/w", watch=record)
    zk.get_children("/w", watch=record)
    zk.exists("/w/new", watch=record)
    writer.set("/w", b"1")
    writer.set("/w", b"2")  # the data watch has fired already: one event only
    writer.create("/w/new")
    wait_for(lambda: len(events) == 3)
    assert sorted(events) == [("CHANGED", "/w"), ("CHILD", "/w"), ("CREATED", "/w/new")]

    events.clear()
    zk.get("/w/new", watch=record)
    zk.get_children("/w/new", watch=record)
    writer.delete("/w/new")
    wait_for(lambda: events)
    time.sleep(0.1)
    # one notification; kazoo hands it to the data watcher and to the child watcher
    assert events == [("DELETED", "/w/new")] * 2

    seen: list[list[str]] = []
    values: list[bytes | None] = []
    ChildrenWatch(zk, "/w", lambda children: seen.append(sorted(children)))
    DataWatch(zk, "/w", lambda data, stat: values.append(data))
    writer.create("/w/a")
    writer.set("/w", b"3")
    wait_for(lambda: seen[-1] == ["a"] and values[-1] == b"3")


def test_multi_is_all_or_nothing(server, connect):
    zk = connect()
    zk.create("/m", b"v0")
    fired = threading.Event()
    zk.get_children("/m", watch=lambda event: fired.set())
    before = server.zxid

    tx = zk.transaction()
    tx.create("/m/a", b"")
    tx.set_data("/m", b"v1")
    tx.check("/m", 7)  # fails: /m is at version 1 inside the transaction, 0 outside
    tx.delete("/m/a")
    results = tx.commit()
    assert [type(r) for r in results] == [kz.RolledBackError, kz.RolledBackError, kz.BadVersionError,
                                          kz.RuntimeInconsistency]
    assert zk.exists("/m/a") is None and zk.get("/m")[0] == b"v0" and zk.get("/m")[1].version == 0
    assert server.zxid == before and not fired.wait(0.2)

    tx = zk.transaction()
    tx.check("/m", 0)
    tx.create("/m/b", b"x")
    tx.create("/m/c", b"y", ephemeral=True)
    tx.set_data("/m", b"v2", version=0)
    tx.delete("/m/b")
    results = tx.commit()
    assert results[0] is True and results[1:3] == ["/m/b", "/m/c"] and results[4] is True
    assert results[3].version == 1
    assert zk.get_children("/m") == ["c"] and fired.wait(2)
    assert zk.get("/m/c")[1].czxid == zk.get("/m")[1].mzxid  # one zxid for the whole multi
    assert zk.get("/m/c")[1].ephemeralOwner == zk.client_id[0]


# -- setWatches, which kazoo does not send (it re-reads on reconnect): a raw jute client ------------------

def _frame(payload: bytes) -> bytes:
    return struct.pack("!i", len(payload)) + payload


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out
    return exactly(struct.unpack("!i", exactly(4))[0])


def _strings(items: list[str]) -> bytes:
    return struct.pack("!i", len(items)) + b"".join(struct.pack("!i", len(s)) + s.encode() for s in items)


def _raw_session(server: InMemoryZooKeeper) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(_frame(struct.pack("!iqiqi", 0, 0, 2000, 0, 16) + bytes(16) + b"\x00"))
    protocol, timeout, session_id = struct.unpack_from("!iiq", _read_frame(sock))
    assert timeout == 2000 and session_id
    return sock


def _events(sock: socket.socket, count: int) -> list[tuple[int, str]]:
    events = []
    while len(events) < count:
        frame = _read_frame(sock)
        xid, _zxid, err = struct.unpack_from("!iqi", frame)
        if xid != -1:
            continue  # the setWatches reply
        kind, state, length = struct.unpack_from("!iii", frame, 16)
        assert state == 3
        events.append((kind, frame[28:28 + length].decode()))
    return events


def test_set_watches_re_registers_or_fires_what_changed(server, connect):
    zk = connect()
    zk.create("/sw", b"")
    zk.create("/sw2", b"")
    since = server.zxid
    zk.set("/sw2", b"changed after the client's last zxid")

    sock = _raw_session(server)
    try:
        body = struct.pack("!ii", 1, 101) + struct.pack("!q", since) + _strings(["/sw", "/sw2"]) \
            + _strings(["/new", "/sw"]) + _strings(["/gone"])
        sock.sendall(_frame(body))
        # at once: /sw2 changed since, /sw exists already, /gone does not exist
        assert sorted(_events(sock, 3)) == [(1, "/sw"), (2, "/gone"), (3, "/sw2")]
        zk.set("/sw", b"now")
        zk.create("/new")
        assert sorted(_events(sock, 2)) == [(1, "/new"), (3, "/sw")]
    finally:
        sock.close()


def test_stop_leaves_no_thread_or_port():
    server = InMemoryZooKeeper().start()
    port = server.port
    client = KazooClient(hosts=server.connect_string, timeout=2)
    client.start(5)
    client.stop()
    client.close()
    server.stop()
    assert not any(t.name == "kafkapy-zookeeper" for t in threading.enumerate())
    with pytest.raises(ConnectionRefusedError):  # nothing listens there any more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_a_silent_client_expires_and_is_disconnected(server):
    sock = _raw_session(server)  # asks for 2 s; it then sends nothing at all, not even pings
    try:
        sessions = server.sessions()
        assert list(sessions.values()) == [2000]
        started = time.monotonic()
        sock.settimeout(5)
        assert sock.recv(1) == b""  # the server closes the connection when the session expires
        assert 1.9 < time.monotonic() - started < 4
        assert server.sessions() == {}
    finally:
        sock.close()


def test_kafkapy_zookeeper_client_works_unchanged(server):
    from kafkapy.metadata.zk.client import BrokerIdInUseError, KafkaZkClient
    from kafkapy.metadata.zk.paths import BrokerRegistration, Endpoint

    first = KafkaZkClient(server.connect_string, session_timeout_ms=2000)
    second = KafkaZkClient(f"{server.connect_string}/chroot", session_timeout_ms=2000)
    other = KafkaZkClient(f"{server.connect_string}/chroot", session_timeout_ms=2000)
    with first, second, other:
        assert server.get("/chroot") is not None  # made through a plain session first, as Kafka does
        first.ensure_persistent_paths()
        second.ensure_persistent_paths()
        assert second.get_or_create_cluster_id("cluster-a") == "cluster-a"
        assert other.get_or_create_cluster_id("cluster-b") == "cluster-a"

        registration = BrokerRegistration(1, [Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)])
        epoch = second.register_broker(registration)
        assert epoch == server.get("/chroot/brokers/ids/1")[1].czxid
        with pytest.raises(BrokerIdInUseError):
            other.register_broker(registration)
        assert set(other.get_all_brokers()) == {1}

        assert second.try_elect_controller(1) == (1, 1)
        assert other.try_elect_controller(2) is None  # the multi fails as a whole
        assert other.get_controller_id() == 1
        changed = threading.Event()
        other.watch_controller(changed.set)
        second.close()  # ends the session: registration and /controller go at once
        assert changed.wait(5)
        wait_for(lambda: other.get_controller_id() is None)
        assert other.get_all_brokers() == {}
        assert other.try_elect_controller(2) == (2, 2)
        assert first.get_children("/") and server.get("/brokers/ids") is not None
