"""ZkAclCache against a real ZooKeeper: ACLs stored exactly as Kafka 3.7's AclAuthorizer stores them.

Checks the znode JSON and paths byte for byte where Kafka fixes them (literal and prefixed
patterns, both kinds of change notification), that caches on two ZooKeeper sessions (two brokers)
see each other's writes through the notifications, delete filters, and compare-and-set retries.
Each test works under its own chroot on one shared ZooKeeper server.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kafkapy.metadata.acls import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
                                     ResourceType)
from kafkapy.metadata.store import ChangeKind
from kafkapy.metadata.zk.acl_store import ZkAclCache, decode_entry, encode_entry
from kafkapy.metadata.zk.client import UNKNOWN_VERSION, BadVersionError, KafkaZkClient
from kafkapy.metadata.zk.store import ZkMetadataStore
from kafkapy.devcluster.zookeeper import JavaZooKeeper
from kafkapy.protocol.errors import KafkaError

SESSION_TIMEOUT_MS = 6000

T, G, C, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(rtype=T, name="orders", ptype=LIT, principal="User:alice", host="*", op=Op.READ, perm=ALLOW) -> AclBinding:
    return AclBinding(rtype, name, ptype, principal, host, op, perm)


def flt(rtype=ResourceType.ANY, name=None, ptype=PatternType.ANY, principal=None, host=None, op=Op.ANY,
        perm=AclPermissionType.ANY) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, ptype, principal, host, op, perm)


EVERYTHING = flt()


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory) -> Iterator[JavaZooKeeper]:
    ok, reason = JavaZooKeeper.available()
    if not ok:
        pytest.skip(f"!!! ZooKeeper ACL tests skipped: {reason}")
    server = JavaZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def new_client(zk_server) -> Iterator[Callable[[], KafkaZkClient]]:
    """ZooKeeper sessions (one per simulated broker) on a fresh chroot for this test."""
    connect = f"{zk_server.connect}/acls-{uuid.uuid4().hex[:12]}"
    clients: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        client = KafkaZkClient(connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        client.start()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def new_cache(new_client) -> Iterator[Callable[..., tuple[ZkAclCache, KafkaZkClient]]]:
    caches: list[ZkAclCache] = []

    def make(start: bool = True, **kwargs) -> tuple[ZkAclCache, KafkaZkClient]:
        client = new_client()
        cache = ZkAclCache(client, **kwargs)
        if start:
            cache.start()
        caches.append(cache)
        return cache, client

    yield make
    for cache in caches:
        cache.stop()


def znode_json(client: KafkaZkClient, path: str) -> dict | None:
    found = client.get_data(path)
    return json.loads(found[0]) if found is not None else None


def change_nodes(client: KafkaZkClient, parent: str) -> list[bytes]:
    return [client.get_data(f"{parent}/{name}")[0] for name in client.get_children(parent)]


# -- the JSON Kafka reads ----------------------------------------------------------------------------

def test_entry_names_are_kafkas_pascal_case():
    expected = {Op.ALL: "All", Op.READ: "Read", Op.WRITE: "Write", Op.CREATE: "Create", Op.DELETE: "Delete",
                Op.ALTER: "Alter", Op.DESCRIBE: "Describe", Op.CLUSTER_ACTION: "ClusterAction",
                Op.DESCRIBE_CONFIGS: "DescribeConfigs", Op.ALTER_CONFIGS: "AlterConfigs",
                Op.IDEMPOTENT_WRITE: "IdempotentWrite", Op.CREATE_TOKENS: "CreateTokens",
                Op.DESCRIBE_TOKENS: "DescribeTokens"}
    for operation, name in expected.items():
        assert encode_entry(acl(op=operation)) == {"principal": "User:alice", "permissionType": "Allow",
                                                   "operation": name, "host": "*"}
    assert encode_entry(acl(perm=DENY, host="10.0.0.1"))["permissionType"] == "Deny"
    key = (T, "orders", LIT)
    # Kafka's readers also take the upper-cased Pascal name (SecurityUtils.valueFromMap).
    assert decode_entry(key, {"principal": "User:alice", "permissionType": "ALLOW", "operation": "DESCRIBECONFIGS",
                              "host": "*"}) == acl(op=Op.DESCRIBE_CONFIGS)
    assert decode_entry(key, {"principal": "User:alice", "permissionType": "Allow", "operation": "Frobnicate",
                              "host": "*"}) is None
    no_colon = {"principal": "alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    assert decode_entry(key, no_colon) is None


def test_znodes_and_change_notifications_are_kafkas(new_cache):
    cache, client = new_cache()
    bindings = [acl(), acl(op=Op.WRITE, perm=DENY, host="10.0.0.1"), acl(G, "app-", PRE, op=Op.DESCRIBE),
                acl(TX, "tx-1", principal="User:bob", op=Op.WRITE), acl(C, "kafka-cluster", op=Op.IDEMPOTENT_WRITE),
                acl(ResourceType.DELEGATION_TOKEN, "token", op=Op.DESCRIBE),
                acl(ResourceType.USER, "carol", op=Op.CREATE_TOKENS)]
    assert cache.create(bindings) == sorted(bindings, key=AclBinding.sort_key)
    # A local write shows at once, without waiting for its notification.
    assert cache.describe(EVERYTHING) == sorted(bindings, key=AclBinding.sort_key)

    topic = znode_json(client, "/kafka-acl/Topic/orders")
    assert topic["version"] == 1
    assert sorted(topic["acls"], key=lambda e: e["operation"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:alice", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.1"}]
    assert znode_json(client, "/kafka-acl-extended/prefixed/Group/app-") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"}]}
    assert znode_json(client, "/kafka-acl/TransactionalId/tx-1")["acls"][0]["principal"] == "User:bob"
    assert znode_json(client, "/kafka-acl/Cluster/kafka-cluster")["acls"][0]["operation"] == "IdempotentWrite"
    assert znode_json(client, "/kafka-acl/DelegationToken/token") is not None
    assert znode_json(client, "/kafka-acl/User/carol")["acls"][0]["operation"] == "CreateTokens"
    assert client.get_children("/kafka-acl-extended") == ["prefixed"]
    # createAclPaths: one child per resource type under both roots, even without ACLs.
    for root in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
        assert set(client.get_children(root)) == {"Topic", "Group", "Cluster", "TransactionalId", "DelegationToken",
                                                  "User"}

    # One notification per changed resource pattern: text with the Java enum name for literal
    # patterns (LiteralAclChangeStore), JSON for prefixed ones (ExtendedAclChangeStore).
    assert client.get_children("/kafka-acl-changes")[0] == "acl_changes_0000000000"
    assert sorted(change_nodes(client, "/kafka-acl-changes")) == [
        b"CLUSTER:kafka-cluster", b"DELEGATION_TOKEN:token", b"TOPIC:orders", b"TRANSACTIONAL_ID:tx-1", b"USER:carol"]
    extended = change_nodes(client, "/kafka-acl-extended-changes")
    assert [json.loads(data) for data in extended] == [
        {"version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}]


def test_reads_what_kafka_wrote_and_keeps_entries_it_cannot_read(new_cache, new_client):
    writer = new_client()
    foreign = {"principal": "User:x", "permissionType": "Allow", "operation": "TwoPhaseCommitPlus", "host": "*"}
    # Kafka writes through Jackson: key order and upper-cased names are not ours to choose.
    kafka_entry = {"host": "*", "operation": "READ", "principal": "User:alice", "permissionType": "ALLOW"}
    writer.set_acls("TOPIC", "orders", [kafka_entry, foreign], UNKNOWN_VERSION)
    writer.set_acls("TOPIC", "pay", [kafka_entry], UNKNOWN_VERSION, pattern="prefixed")
    cache, client = new_cache()
    assert cache.describe(EVERYTHING) == [acl(), acl(name="pay", ptype=PRE)]
    cache.create([acl(op=Op.WRITE)])
    stored = znode_json(client, "/kafka-acl/Topic/orders")["acls"]
    assert foreign in stored and len(stored) == 3
    cache.delete([flt(T, "orders", LIT)])
    assert znode_json(client, "/kafka-acl/Topic/orders") == {"version": 1, "acls": [foreign]}


def test_an_acl_already_present_is_kept_once(new_cache):
    cache, client = new_cache()
    assert cache.create([acl(), acl()]) == [acl()]
    version = client.get_acls("TOPIC", "orders")[1]
    assert cache.create([acl()]) == []
    assert client.get_acls("TOPIC", "orders") == ([encode_entry(acl())], version)  # no write at all
    assert len(client.get_children("/kafka-acl-changes")) == 1  # and no second notification
    assert cache.describe(EVERYTHING) == [acl()]


# -- two brokers -------------------------------------------------------------------------------------

def test_two_caches_see_each_others_changes(new_cache):
    a, _ = new_cache()
    b, _ = new_cache()
    a.create([acl(), acl(G, "app-", PRE)])
    wait_for(lambda: b.describe(EVERYTHING) == [acl(), acl(G, "app-", PRE)])
    assert b.delete([flt(T)]) == [[acl()]]
    wait_for(lambda: a.describe(EVERYTHING) == [acl(G, "app-", PRE)])
    b.create([acl(G, "app-", PRE, principal="User:bob")])
    wait_for(lambda: len(a.describe(flt(G, "app-", PRE))) == 2)
    # A broker that starts later loads everything at start.
    c, _ = new_cache()
    assert c.describe(EVERYTHING) == [acl(G, "app-", PRE), acl(G, "app-", PRE, principal="User:bob")]
    # Deleting the last ACL of a resource deletes its znode, everywhere.
    assert a.delete([flt(G)]) == [[acl(G, "app-", PRE), acl(G, "app-", PRE, principal="User:bob")]]
    wait_for(lambda: b.describe(EVERYTHING) == [] and c.describe(EVERYTHING) == [])


def test_store_serves_acls_from_zookeeper_and_tells_listeners(new_client):
    stores = []
    for node_id in (1, 2):
        store = ZkMetadataStore(new_client(), "cluster", node_id=node_id, listener_name="PLAINTEXT")
        store.watch_acl_changes()
        stores.append(store)
    one, two = stores
    changes: list[ChangeKind] = []
    two.add_listener(lambda change: changes.append(change.kind))
    one.create_acls([acl()])
    wait_for(lambda: two.describe_acls(EVERYTHING) == [acl()])
    wait_for(lambda: ChangeKind.ACLS_CHANGED in changes)
    assert two.delete_acls([flt(principal="User:alice")]) == [[acl()]]
    assert two.describe_acls(EVERYTHING) == []
    wait_for(lambda: one.describe_acls(EVERYTHING) == [])


# -- delete filters ----------------------------------------------------------------------------------

def test_delete_returns_each_filters_matches_and_keeps_the_rest(new_cache):
    cache, client = new_cache()
    orders_read, orders_write = acl(), acl(op=Op.WRITE)
    bob = acl(principal="User:bob")
    prefixed = acl(T, "ord", PRE)
    wildcard = acl(T, "*", LIT, op=Op.DESCRIBE)
    group = acl(G, "g")
    cache.create([orders_read, orders_write, bob, prefixed, wildcard, group])
    result = cache.delete([
        flt(T, "orders", PatternType.MATCH, principal="User:alice"),  # literal, wildcard and prefixed
        flt(op=Op.WRITE),                                             # overlaps the first filter
        flt(G, "nothing-here", LIT),                                  # matches nothing
    ])
    assert result == [sorted([orders_read, orders_write, prefixed, wildcard], key=AclBinding.sort_key),
                      [orders_write], []]
    assert cache.describe(EVERYTHING) == sorted([bob, group], key=AclBinding.sort_key)
    assert znode_json(client, "/kafka-acl/Topic/orders")["acls"] == [encode_entry(bob)]
    assert client.get_data("/kafka-acl-extended/prefixed/Topic/ord") is None
    assert client.get_data("/kafka-acl/Topic/*") is None


def test_delete_of_a_named_resource_reaches_acls_the_cache_has_not_seen(new_cache, new_client):
    cache, _ = new_cache(start=False)
    cache.load()  # loaded but not watching: it cannot know what others write from now on
    new_client().set_acls("GROUP", "g", [encode_entry(acl(G, "g"))], UNKNOWN_VERSION)
    assert cache.describe(EVERYTHING) == []
    assert cache.delete([flt(G, "g", LIT)]) == [[acl(G, "g")]]
    assert cache.delete([flt(G, "g", LIT)]) == [[]]


# -- compare-and-set ---------------------------------------------------------------------------------

def test_create_retries_after_losing_a_compare_and_set_race(new_cache, new_client):
    cache, client = new_cache(start=False, retry_backoff_ms=1, retry_backoff_jitter_ms=1)
    cache.create([acl()])  # loads, then caches the znode at version 0
    other = new_client()
    entries, version = other.get_acls("TOPIC", "orders")
    other.set_acls("TOPIC", "orders", [*entries, encode_entry(acl(principal="User:bob"))], version)
    # The cache still has version 0; the CAS fails, it re-reads and applies the change again.
    assert cache.create([acl(op=Op.WRITE)]) == [acl(op=Op.WRITE)]
    stored, version = client.get_acls("TOPIC", "orders")
    assert version == 2
    assert sorted(stored, key=lambda e: (e["principal"], e["operation"])) == [
        encode_entry(acl()), encode_entry(acl(op=Op.WRITE)), encode_entry(acl(principal="User:bob"))]
    assert len(cache.describe(EVERYTHING)) == 3


def test_delete_sees_what_it_lost_the_race_to(new_cache, new_client):
    cache, client = new_cache(start=False, retry_backoff_ms=1, retry_backoff_jitter_ms=1)
    cache.create([acl()])
    other = new_client()
    entries, version = other.get_acls("TOPIC", "orders")
    other.set_acls("TOPIC", "orders", [*entries, encode_entry(acl(op=Op.WRITE))], version)
    # The filter is applied again to what the re-read shows, and the answer says so.
    assert cache.delete([flt(T, "orders", LIT)]) == [[acl(), acl(op=Op.WRITE)]]
    assert client.get_data("/kafka-acl/Topic/orders") is None


def test_concurrent_writers_on_two_brokers_lose_nothing(new_cache):
    a, _ = new_cache(retry_backoff_ms=1, retry_backoff_jitter_ms=5)
    b, client = new_cache(retry_backoff_ms=1, retry_backoff_jitter_ms=5)
    errors: list[BaseException] = []

    def add(cache: ZkAclCache, principal: str) -> None:
        try:
            for i in range(10):
                cache.create([acl(principal=f"User:{principal}-{i}")])
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(a, "a")), threading.Thread(target=add, args=(b, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(client.get_acls("TOPIC", "orders")[0]) == 20
    wait_for(lambda: len(a.describe(EVERYTHING)) == 20 and len(b.describe(EVERYTHING)) == 20)


def test_gives_up_after_kafkas_retry_limit(new_cache):
    cache, client = new_cache(start=False, max_update_retries=2, retry_backoff_ms=1, retry_backoff_jitter_ms=1)
    attempts = []

    def always_conflicting(*args, **kwargs):
        attempts.append(args)
        raise BadVersionError("lost again")

    client.set_acls = always_conflicting  # type: ignore[method-assign]
    with pytest.raises(KafkaError, match="after trying a maximum of 2 times"):
        cache.create([acl()])
    assert len(attempts) == 3
    assert cache.describe(EVERYTHING) == []
