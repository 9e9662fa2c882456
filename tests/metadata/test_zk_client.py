"""KafkaZkClient against a real ZooKeeper (Debian's, started by JavaZooKeeper for this module).

Each test works under its own chroot, so tests share the server but never each other's znodes.
"""
from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from kafkapy.metadata.zk.client import (UNKNOWN_VERSION, BadVersionError, BrokerIdInUseError, ControllerMovedError,
                                          KafkaZkClient, TopicExistsError, ZkConnectionError)
from kafkapy.metadata.zk.paths import (BrokerRegistration, Endpoint, LeaderIsr, TopicAssignment, broker_path,
                                         decode_producer_id_block, partition_state_path)
from kafkapy.devcluster.zookeeper import JavaZooKeeper

SESSION_TIMEOUT_MS = 6000


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory) -> Iterator[JavaZooKeeper]:
    ok, reason = JavaZooKeeper.available()
    if not ok:
        pytest.skip(f"!!! ZooKeeper tests skipped: {reason}")
    server = JavaZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def connect(zk_server) -> str:
    """A fresh chroot on the shared server for this test."""
    return f"{zk_server.connect}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def new_client(connect) -> Iterator[Callable[..., KafkaZkClient]]:
    clients: list[KafkaZkClient] = []

    def make(connect_string: str | None = None) -> KafkaZkClient:
        client = KafkaZkClient(connect_string or connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        client.start()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id, [Endpoint("PLAINTEXT", "PLAINTEXT", "localhost", port)])


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def elected(client: KafkaZkClient, broker_id: int) -> tuple[int, int]:
    result = client.try_elect_controller(broker_id)
    assert result is not None
    return result


# -- session -----------------------------------------------------------------------------------------

def test_start_fails_with_a_message_naming_the_connect_string():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = KafkaZkClient(f"127.0.0.1:{port}", session_timeout_ms=6000, connection_timeout_ms=800)
    started = time.monotonic()
    with pytest.raises(ZkConnectionError) as info:
        client.start()
    assert time.monotonic() - started < 5
    assert f"127.0.0.1:{port}" in str(info.value) and "800" in str(info.value)


def test_chroot_is_created_and_honoured(zk_server, new_client, connect):
    client = new_client()
    client.ensure_persistent_paths()
    client.register_broker(registration(1))
    root = new_client(zk_server.connect)
    chroot = connect[len(zk_server.connect):]
    assert root.get_children(f"{chroot}/brokers/ids") == ["1"]
    assert root.get_children("/brokers/ids") == []  # nothing leaked outside the chroot


def test_cluster_id_first_writer_wins(new_client):
    a, b = new_client(), new_client()
    assert a.get_or_create_cluster_id("MkU3OEVBNTcwNTJENDM2Qk") == "MkU3OEVBNTcwNTJENDM2Qk"
    assert b.get_or_create_cluster_id("AAAAAAAAAAAAAAAAAAAAAA") == "MkU3OEVBNTcwNTJENDM2Qk"
    data, _ = a.get_data("/cluster/id")
    assert json.loads(data)["version"] == "1"


# -- registration ------------------------------------------------------------------------------------

def test_registration_epoch_and_broker_id_in_use(new_client):
    a, b = new_client(), new_client()
    a.ensure_persistent_paths()
    epoch = a.register_broker(registration(1))
    assert epoch > 0
    reg, czxid = b.get_broker(1)
    assert czxid == epoch and reg.endpoint("PLAINTEXT").port == 9092
    assert json.loads(a.get_data(broker_path(1))[0])["version"] == 5

    with pytest.raises(BrokerIdInUseError,
                       match="broker.id 1 is already registered in ZooKeeper by another live broker"):
        b.register_broker(registration(1, port=9999))
    # Our own node (same session) is reused: same epoch, new data.
    assert a.register_broker(registration(1, port=9093)) == epoch
    assert b.get_broker(1)[0].endpoint("PLAINTEXT").port == 9093

    changes = threading.Event()
    b.watch_broker_ids(changes.set)
    changes.clear()
    a.close()  # session gone: the ephemeral registration with it
    wait_for(changes.is_set)
    assert b.get_all_brokers() == {}
    new_epoch = b.register_broker(registration(1, port=9999))
    assert new_epoch > epoch  # a restarted broker is recognisable by its larger czxid
    assert set(b.get_all_brokers()) == {1}


def test_session_expiry_is_reported_and_a_new_session_follows(zk_server, new_client):
    client = new_client()
    client.ensure_persistent_paths()
    epoch = client.register_broker(registration(1))
    states: list[str] = []
    client.add_state_listener(states.append)
    old_session = client.session_id

    # Expire the session from the server side: attach to it from another connection, then close it.
    session_id, password = client._zk.client_id
    thief = KazooClient(hosts=zk_server.connect, client_id=(session_id, password))
    thief.start()
    thief.stop()
    thief.close()

    wait_for(lambda: "EXPIRED" in states and states[-1] == "CONNECTED", timeout=20)
    assert client.session_id not in (None, old_session)
    assert client.get_broker(1) is None  # the ephemeral node went with the old session
    assert client.register_broker(registration(1)) > epoch


# -- controller election and fencing -----------------------------------------------------------------

def test_election_race_has_one_winner_then_failover_bumps_the_epoch(new_client):
    a, b = new_client(), new_client()
    barrier = threading.Barrier(2)
    results: dict[int, tuple[int, int] | None] = {}

    def run(client: KafkaZkClient, broker_id: int) -> None:
        barrier.wait()
        results[broker_id] = client.try_elect_controller(broker_id)

    threads = [threading.Thread(target=run, args=(a, 1)), threading.Thread(target=run, args=(b, 2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [broker_id for broker_id, result in results.items() if result is not None]
    assert len(winners) == 1
    winner = winners[0]
    assert results[winner][0] == 1  # the first controller's epoch is 1
    assert a.get_controller_id() == winner
    assert a.get_controller_epoch() == results[winner]

    winner_client, loser_client, loser = (a, b, 2) if winner == 1 else (b, a, 1)
    controller_changed = threading.Event()
    loser_client.watch_controller(controller_changed.set)
    controller_changed.clear()
    winner_client.close()
    wait_for(controller_changed.is_set)
    assert loser_client.get_controller_id() is None
    epoch, version = elected(loser_client, loser)
    assert epoch == 2 and version == 2
    assert loser_client.get_controller_id() == loser
    assert loser_client.try_elect_controller(loser) is None  # /controller exists: no second win


def test_stale_controller_writes_are_fenced_and_write_nothing(new_client):
    old, new = new_client(), new_client()
    old.ensure_persistent_paths()
    old.create_topic(TopicAssignment("t", uuid.uuid4(), {0: [1]}), {})
    _, stale = elected(old, 1)
    assert old.delete_controller_if_mine(1)
    epoch, current = elected(new, 2)
    assert current != stale

    state = LeaderIsr(1, 0, [1], 1)
    with pytest.raises(ControllerMovedError):
        old.create_partition_state("t", 0, state, stale)
    assert new.get_partition_state("t", 0) is None
    assert old.get_children("/brokers/topics/t") == []  # not even the parents
    with pytest.raises(ControllerMovedError):
        old.allocate_producer_id_block(1, stale)
    assert new.get_controller_id() == 2

    assert new.create_partition_state("t", 0, LeaderIsr(1, 0, [1], epoch), current) == 0

    # Giving up the role without a token touches only our own /controller.
    assert old.delete_controller_if_mine(2) is False  # says 2, but another session owns it
    assert new.delete_controller_if_mine(1) is False
    assert new.delete_controller_if_mine(2) is True
    assert new.get_controller_id() is None


def test_partition_state_compare_and_set(new_client):
    client = new_client()
    client.ensure_persistent_paths()
    client.create_topic(TopicAssignment("t", uuid.uuid4(), {0: [1, 2], 1: [2, 1]}), {})
    epoch, token = elected(client, 1)
    for p in (0, 1):
        assert client.create_partition_state("t", p, LeaderIsr(1, 0, [1, 2], epoch), token) == 0
    assert client.get_partition_state("t", 0) == (LeaderIsr(1, 0, [1, 2], epoch), 0)

    shrunk = LeaderIsr(1, 1, [1], epoch)
    assert client.update_partition_state("t", 0, shrunk, 0, token) == 1
    with pytest.raises(BadVersionError):
        client.update_partition_state("t", 0, LeaderIsr(2, 1, [2], epoch), 0, token)
    assert client.get_partition_state("t", 0) == (shrunk, 1)

    recovering = LeaderIsr(2, 2, [2], epoch, leader_recovery_state=1)
    assert client.update_partition_state("t", 1, recovering, 0, token) == 1
    data, _ = client.get_data(partition_state_path("t", 1))
    assert json.loads(data)["leader_recovery_state"] == 1
    assert client.get_all_partition_states("t") == {0: (shrunk, 1), 1: (recovering, 1)}


def test_legacy_reassignment_znode_is_read_rewritten_and_deleted_by_the_controller(new_client):
    client, tool = new_client(), new_client()
    client.ensure_persistent_paths()
    fired = []
    client.watch_reassignment(lambda: fired.append(1))
    assert client.get_reassignment() is None
    tool._create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [3, 1]}, {"topic": "u", "partition": 2, "replicas": [2]}]}).encode())
    wait_for(lambda: len(fired) >= 2)
    assert client.get_reassignment() == {("t", 0): [3, 1], ("u", 2): [2]}
    _, token = elected(client, 1)
    client.set_or_delete_reassignment({("u", 2): [2]}, token)
    data, _ = client.get_data("/admin/reassign_partitions")
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "u", "partition": 2, "replicas": [2]}]}
    client.set_or_delete_reassignment({}, token)
    assert client.get_reassignment() is None
    client.set_or_delete_reassignment({}, token)  # already gone: fine


# -- topics ------------------------------------------------------------------------------------------

def test_topic_create_read_exists_and_delete(new_client):
    client, other = new_client(), new_client()
    client.ensure_persistent_paths()
    seen: list[object] = []
    other.watch_topics(lambda: seen.append("topics"))
    seen.clear()
    topic_id = uuid.uuid4()
    assignment = TopicAssignment("orders", topic_id, {0: [1, 2], 1: [2, 1]})
    client.create_topic(assignment, {"retention.ms": "1000"})
    assert client.get_topic("orders") == (assignment, 0)
    assert client.get_entity_config("topics", "orders") == {"retention.ms": "1000"}
    assert client.get_all_topics() == ["orders"]
    assert client.get_children("/config/changes") == []  # topic creation sends no config notification
    with pytest.raises(TopicExistsError):
        other.create_topic(TopicAssignment("orders", uuid.uuid4(), {0: [1]}), {})
    wait_for(lambda: bool(seen))

    updates: list[TopicAssignment | None] = []
    other.watch_topic("orders", updates.append)
    grown = TopicAssignment("orders", topic_id, {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    assert client.set_topic_assignment_unfenced(grown, expected_version=0) == 1
    with pytest.raises(BadVersionError):
        client.set_topic_assignment_unfenced(grown, expected_version=0)
    wait_for(lambda: len(updates) >= 2)
    assert updates[0] == assignment and updates[-1] == grown

    assert client.mark_topic_for_deletion("orders") is True
    assert client.mark_topic_for_deletion("orders") is False
    assert client.get_topics_pending_deletion() == ["orders"]
    epoch, token = elected(client, 1)
    client.create_partition_state("orders", 0, LeaderIsr(1, 0, [1, 2], epoch), token)
    client.delete_topic_znodes("orders", token)
    assert client.get_topic("orders") is None
    assert client.get_entity_config("topics", "orders") == {}
    assert client.get_topics_pending_deletion() == []
    wait_for(lambda: updates[-1] is None)


# -- configs, ACLs, features, producer ids -----------------------------------------------------------

def test_config_change_notifications_reach_a_watcher_and_are_purged(new_client):
    writer, reader = new_client(), new_client()
    writer.ensure_persistent_paths()
    writer.set_entity_config("topics", "early", {"retention.ms": "1"})  # before the watch: still delivered
    data, _ = writer.get_data("/config/changes/config_change_0000000000")
    assert json.loads(data) == {"version": 2, "entity_path": "topics/early"}
    batches: list[list[str]] = []
    reader.watch_config_changes(batches.append, purge_after_ms=0)
    assert batches == [["topics/early"]]
    writer.set_entity_config("brokers", "<default>", {"log.retention.ms": "5"})
    writer.set_entity_config("topics", "late", {"cleanup.policy": "compact"})
    wait_for(lambda: sum(len(b) for b in batches) >= 3)
    assert [path for batch in batches for path in batch] == ["topics/early", "brokers/<default>", "topics/late"]
    assert reader.get_entity_config("brokers", "<default>") == {"log.retention.ms": "5"}
    assert reader.get_all_entity_configs("topics") == {"early": {"retention.ms": "1"},
                                                       "late": {"cleanup.policy": "compact"}}
    # With a zero expiry every processed notification is purged; the last may await the next event.
    writer.set_entity_config("topics", "early", {"retention.ms": "2"})
    wait_for(lambda: len(writer.get_children("/config/changes")) <= 1)


def test_acls_compare_and_set_and_change_notifications(new_client):
    a, b = new_client(), new_client()
    changes: list[list[tuple[str, str, str]]] = []
    b.watch_acl_changes(changes.append)
    assert a.get_acls("TOPIC", "t") == ([], UNKNOWN_VERSION)
    entry = {"principal": "User:a", "permissionType": "Allow", "operation": "Read", "host": "*"}
    assert a.set_acls("TOPIC", "t", [entry], UNKNOWN_VERSION) == 0
    with pytest.raises(BadVersionError):
        b.set_acls("TOPIC", "t", [entry, entry], UNKNOWN_VERSION)
    assert a.set_acls("GROUP", "g-", [entry], UNKNOWN_VERSION, pattern="prefixed") == 0
    assert b.get_acls("Topic", "t") == ([entry], 0)
    assert b.get_all_acls() == {("TOPIC", "t", "LITERAL"): ([entry], 0), ("GROUP", "g-", "PREFIXED"): ([entry], 0)}
    wait_for(lambda: sum(len(c) for c in changes) >= 2)
    assert sorted(x for c in changes for x in c) == [("GROUP", "g-", "PREFIXED"), ("TOPIC", "t", "LITERAL")]
    assert a.get_data(f"/kafka-acl-changes/{a.get_children('/kafka-acl-changes')[0]}")[0] == b"TOPIC:t"
    assert a.set_acls("TOPIC", "t", [], 0) == UNKNOWN_VERSION
    assert a.get_acls("TOPIC", "t") == ([], UNKNOWN_VERSION)


def test_feature_znode_enabled_with_no_finalized_features(new_client):
    client = new_client()
    _, token = elected(client, 1)
    assert client.ensure_feature_znode(token) == 0
    assert json.loads(client.get_data("/feature")[0]) == {"version": 2, "status": 1, "features": {}}
    assert client.ensure_feature_znode(token) == 0  # already enabled: untouched
    # A disabled node (what an old-IBP controller left) is switched on.
    client._zk.set("/feature", b'{"version":2,"status":0,"features":{}}')
    assert client.ensure_feature_znode(token) == 2
    assert json.loads(client.get_data("/feature")[0])["status"] == 1


def test_producer_id_blocks_follow_each_other(new_client):
    client = new_client()
    client.ensure_persistent_paths()  # creates an empty /latest_producer_id_block, as brokers do
    _, token = elected(client, 1)
    assert client.allocate_producer_id_block(1, token) == (0, 1000)
    assert client.allocate_producer_id_block(2, token) == (1000, 1000)
    data, version = client.get_data("/latest_producer_id_block")
    assert json.loads(data) == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    assert decode_producer_id_block(data).last_id == 1999 and version == 2


def test_client_metrics_subscriptions_are_config_entities(new_client):
    """ZkMetadataStore keeps CLIENT_METRICS resources in /config/client-metrics/<name>."""
    client = new_client()
    client.set_entity_config("client-metrics", "all", {"metrics": "*", "interval.ms": "1000"})
    client.set_entity_config("client-metrics", "none", {})
    found = client.get_all_entity_configs("client-metrics")
    assert found["all"] == {"metrics": "*", "interval.ms": "1000"} and found.get("none", {}) == {}


def test_finalized_features_are_written_to_feature_znode(new_client):
    """UpdateFeatures in a ZooKeeper cluster: /feature keeps the levels, its version is the epoch;
    the controller's ensure_feature_znode leaves an enabled /feature as it is."""
    client = new_client()
    assert client.get_feature() == (None, -1)
    client.update_feature({"group.version": 0})
    state, version = client.get_feature()
    assert state.status == 1 and state.features == {"group.version": 0} and version == 0
    client.update_feature({"group.version": 1, "metadata.version": 21})
    state, version = client.get_feature()
    assert state.features == {"group.version": 1, "metadata.version": 21} and version == 1


def test_a_call_on_the_event_loop_fails_fast_while_zookeeper_is_away(zk_server, new_client):
    """On an event loop's thread a call does not wait for the connection to return (that would
    stop every partition the broker serves): ZkConnectionError, a retriable Kafka error. Off the
    loop, as before, it waits and then succeeds."""
    import asyncio

    from kafkapy.metadata.zk.client import ZkConnectionError
    from kafkapy.protocol.errors import ErrorCode, KafkaError

    client = new_client()
    client.get_all_topics()
    zk_server.stop()
    try:
        wait = time.monotonic() + 10
        while client.connected and time.monotonic() < wait:
            time.sleep(0.05)

        async def on_loop():
            began = time.monotonic()
            with pytest.raises(ZkConnectionError) as caught:
                client.get_all_topics()
            return time.monotonic() - began, caught.value

        took, error = asyncio.run(on_loop())
        assert took < 1.0
        assert isinstance(error, KafkaError) and error.code == ErrorCode.REQUEST_TIMED_OUT and error.retriable
        result: list[object] = []
        waiter = threading.Thread(target=lambda: result.append(client.get_all_topics()), daemon=True)
        waiter.start()
        time.sleep(0.5)
        assert not result  # off the loop it waits for ZooKeeper
    finally:
        zk_server.start()
    waiter.join(20)
    assert result == [[]]
