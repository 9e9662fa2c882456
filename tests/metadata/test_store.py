"""EmbeddedMetadataStore: persistence across reopen, Kafka's topic rules and error codes, listeners."""
from __future__ import annotations

import json
import logging
import re
import uuid

import pytest

from kafkapy.metadata import ChangeKind, EmbeddedMetadataStore
from kafkapy.metadata.embedded import METADATA_FILE
from kafkapy.metadata.errors import ConfigError
from kafkapy.metadata.ids import uuid_from_kafka_str, uuid_to_kafka_str
from kafkapy.protocol.errors import ErrorCode, KafkaError


@pytest.fixture
def store(tmp_path):
    s = EmbeddedMetadataStore(tmp_path)
    s.register_broker(0, "localhost", 9092)
    yield s
    s.close()


def reopen(tmp_path, **kwargs) -> EmbeddedMetadataStore:
    s = EmbeddedMetadataStore(tmp_path, **kwargs)
    s.register_broker(0, "localhost", 9092)
    return s


def code_of(fn, *args, **kwargs) -> int:
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value.code


# -- cluster id ---------------------------------------------------------------------------------------

def test_cluster_id_is_22_char_urlsafe_base64_and_survives_reopen(tmp_path, store):
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", store.cluster_id)
    assert not store.cluster_id.startswith("-")
    assert reopen(tmp_path).cluster_id == store.cluster_id


def test_given_cluster_id_formats_new_store_and_must_match_later(tmp_path):
    wanted = uuid_to_kafka_str(uuid.uuid4())
    assert EmbeddedMetadataStore(tmp_path, cluster_id=wanted).cluster_id == wanted
    assert code_of(EmbeddedMetadataStore, tmp_path, cluster_id="AAAAAAAAAAAAAAAAAAAAAA") == \
        ErrorCode.INCONSISTENT_CLUSTER_ID


def test_cluster_id_adopted_from_kafka_meta_properties(tmp_path):
    (tmp_path / "meta.properties").write_text("#\nversion=1\nnode.id=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n")
    assert EmbeddedMetadataStore(tmp_path).cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"


def test_kafka_uuid_string_roundtrip():
    value = uuid.uuid4()
    text = uuid_to_kafka_str(value)
    assert len(text) == 22 and uuid_from_kafka_str(text) == value
    with pytest.raises(ValueError):
        uuid_from_kafka_str("short")


# -- creating topics ------------------------------------------------------------------------------------

def test_create_topic_single_node_leader_is_local_node(store):
    topic = store.create_topic("orders", 3, 1, configs={"retention.ms": "1000"})
    assert topic.name == "orders" and topic.partition_count == 3 and not topic.internal
    assert topic.topic_id.version == 4
    for index, p in enumerate(topic.partitions):
        assert (p.partition, p.replicas, p.isr, p.leader, p.leader_epoch) == (index, (0,), (0,), 0, 0)
    assert dict(topic.configs) == {"retention.ms": "1000"}
    assert store.get_topic("orders") == topic
    assert store.topic_by_id(topic.topic_id) == topic
    assert [t.name for t in store.list_topics()] == ["orders"]


def test_topics_persist_across_reopen(tmp_path, store):
    a = store.create_topic("a", 2, 1, configs={"cleanup.policy": "compact"})
    b = store.create_topic("__consumer_offsets", 5, 1)
    store.set_partition_leader_and_isr("a", 1, 0, [0])
    store.bump_leader_epoch("a", 1)
    store.create_partitions("a", 4)
    store.set_broker_configs("", {"log.retention.ms": "5000"})
    store.close()
    again = reopen(tmp_path)
    a2 = again.get_topic("a")
    assert a2.topic_id == a.topic_id and a2.partition_count == 4
    assert dict(a2.configs) == {"cleanup.policy": "compact"}
    assert a2.partitions[1].leader_epoch == 1 and a2.partitions[1].partition_epoch == 2
    assert again.get_topic("__consumer_offsets").internal and again.topic_by_id(b.topic_id).name == b.name
    assert again.get_broker_configs("") == {"log.retention.ms": "5000"}
    assert [b.node_id for b in again.list_brokers()] == [0]


def test_default_partitions_and_replication_factor(tmp_path):
    s = EmbeddedMetadataStore(tmp_path, default_num_partitions=4, default_replication_factor=1)
    s.register_broker(0, "localhost", 9092)
    assert s.create_topic("t").partition_count == 4


def test_topic_ids_are_unique(store):
    ids = {store.create_topic(f"t{i}", 1, 1).topic_id for i in range(20)}
    assert len(ids) == 20


def test_validate_only_stores_nothing(tmp_path, store):
    topic = store.create_topic("v", 2, 1, validate_only=True)
    assert topic.partition_count == 2
    assert store.get_topic("v") is None
    assert reopen(tmp_path).get_topic("v") is None
    store.create_topic("w", 1, 1)
    assert store.create_partitions("w", 3, validate_only=True).partition_count == 3
    assert store.get_topic("w").partition_count == 1


@pytest.mark.parametrize("name, message", [
    ("", "the empty string is not allowed"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("a" * 250, "is longer than the max allowed length 249"),
    ("bad name", "contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("bäd", "contains one or more characters"),
    ("a/b", "contains one or more characters"),
])
def test_invalid_topic_names(store, name, message):
    with pytest.raises(KafkaError) as info:
        store.create_topic(name, 1, 1)
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION == 17
    assert message in str(info.value) and str(info.value).startswith("Topic name is invalid: ")


def test_legal_edge_names(store):
    for name in ("a" * 249, "...", "a-b", "A.b_C-9", "_"):
        store.create_topic(name, 1, 1)


def test_name_collision_between_dot_and_underscore(store):
    store.create_topic("metrics.cpu", 1, 1)
    with pytest.raises(KafkaError) as info:
        store.create_topic("metrics_cpu", 1, 1)
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert str(info.value) == "Topic 'metrics_cpu' collides with existing topic: metrics.cpu"


def test_topic_already_exists(store):
    store.create_topic("dup", 1, 1)
    with pytest.raises(KafkaError) as info:
        store.create_topic("dup", 2, 1)
    assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS == 36
    assert str(info.value) == "Topic 'dup' already exists."


@pytest.mark.parametrize("partitions", [0, -2, -100])
def test_invalid_partition_counts(store, partitions):
    assert code_of(store.create_topic, "p", partitions, 1) == ErrorCode.INVALID_PARTITIONS == 37


@pytest.mark.parametrize("factor", [0, -2])
def test_invalid_replication_factor_values(store, factor):
    assert code_of(store.create_topic, "r", 1, factor) == ErrorCode.INVALID_REPLICATION_FACTOR == 38


def test_replication_factor_above_live_brokers(store):
    with pytest.raises(KafkaError) as info:
        store.create_topic("r", 1, 3)
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "The target replication factor of 3 cannot be reached because only 1 broker(s) are registered" \
        in str(info.value)


def test_no_live_broker_means_invalid_replication_factor(tmp_path):
    s = EmbeddedMetadataStore(tmp_path)
    assert code_of(s.create_topic, "t", 1, 1) == ErrorCode.INVALID_REPLICATION_FACTOR


def test_manual_assignments(store):
    topic = store.create_topic("m", assignments={0: [0], 1: [0]})
    assert topic.partition_count == 2 and topic.partitions[1].replicas == (0,)
    assert code_of(store.create_topic, "m2", 2, -1, assignments={0: [0]}) == ErrorCode.INVALID_REQUEST
    assert code_of(store.create_topic, "m2", -1, 1, assignments={0: [0]}) == ErrorCode.INVALID_REQUEST
    assert code_of(store.create_topic, "m2", assignments={0: [5]}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert code_of(store.create_topic, "m2", assignments={0: [0, 0]}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert code_of(store.create_topic, "m2", assignments={0: []}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert code_of(store.create_topic, "m2", assignments={0: [0], 2: [0]}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_multi_broker_placement_spreads_leaders(tmp_path):
    s = EmbeddedMetadataStore(tmp_path)
    for node in (1, 2, 3):
        s.register_broker(node, "localhost", 9090 + node)
    topic = s.create_topic("spread", 6, 3)
    assert {p.leader for p in topic.partitions} == {1, 2, 3}
    assert all(sorted(p.replicas) == [1, 2, 3] and p.isr == p.replicas for p in topic.partitions)
    assert code_of(s.create_topic, "m", assignments={0: [1, 2], 1: [3]}) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert s.controller_id() == 1


def test_internal_topic_flag_by_name(store):
    assert store.create_topic("__transaction_state", 1, 1).internal
    assert store.create_topic("plain", 1, 1, internal=True).internal


def test_topic_config_validator_is_applied(tmp_path):
    def validator(configs, existing):
        if "bad" in configs:
            raise ConfigError("Unknown topic config name: bad", name="bad")

    s = EmbeddedMetadataStore(tmp_path, topic_config_validator=validator)
    s.register_broker(0, "localhost", 9092)
    assert code_of(s.create_topic, "t", 1, 1, configs={"bad": "1"}) == ErrorCode.INVALID_CONFIG == 40
    assert s.get_topic("t") is None


# -- deleting, growing, altering ---------------------------------------------------------------------------

def test_delete_topic_by_name_and_id(tmp_path, store):
    a = store.create_topic("a", 1, 1)
    b = store.create_topic("b", 1, 1)
    assert store.delete_topic("a").topic_id == a.topic_id
    assert store.delete_topic(b.topic_id).name == "b"
    assert store.list_topics() == [] and store.topic_by_id(a.topic_id) is None
    assert reopen(tmp_path).list_topics() == []
    assert code_of(store.delete_topic, "a") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert code_of(store.delete_topic, uuid.uuid4()) == ErrorCode.UNKNOWN_TOPIC_ID == 100


def test_recreated_topic_gets_a_new_id(store):
    first = store.create_topic("again", 1, 1)
    store.delete_topic("again")
    assert store.create_topic("again", 1, 1).topic_id != first.topic_id


def test_create_partitions(store):
    store.create_topic("g", 2, 1)
    grown = store.create_partitions("g", 5)
    assert grown.partition_count == 5 and grown.partitions[4].leader == 0
    with pytest.raises(KafkaError) as same:
        store.create_partitions("g", 5)
    assert same.value.code == ErrorCode.INVALID_PARTITIONS and str(same.value) == "Topic already has 5 partition(s)."
    with pytest.raises(KafkaError) as fewer:
        store.create_partitions("g", 3)
    assert str(fewer.value) == "The topic g currently has 5 partition(s); 3 would not be an increase."
    assert code_of(store.create_partitions, "g", 7, [[0]]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert store.create_partitions("g", 7, [[0], [0]]).partition_count == 7
    assert code_of(store.create_partitions, "nope", 2) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_topic_configs_replaces_overrides(tmp_path, store):
    store.create_topic("c", 1, 1, configs={"retention.ms": "1"})
    store.alter_topic_configs("c", {"segment.bytes": "1048576"})
    assert dict(store.get_topic("c").configs) == {"segment.bytes": "1048576"}
    assert dict(reopen(tmp_path).get_topic("c").configs) == {"segment.bytes": "1048576"}
    assert code_of(store.alter_topic_configs, "nope", {}) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_leader_and_isr_changes_and_epochs(store):
    store.create_topic("l", 1, 1)
    p = store.set_partition_leader_and_isr("l", 0, 0, [0])
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)  # same leader: no new epoch
    p = store.set_partition_leader_and_isr("l", 0, -1, [])
    assert (p.leader, p.leader_epoch, p.isr) == (-1, 1, ())
    p = store.bump_leader_epoch("l", 0)
    assert p.leader_epoch == 2 and store.get_topic("l").partitions[0] == p
    assert code_of(store.bump_leader_epoch, "l", 1) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert code_of(store.set_partition_leader_and_isr, "zz", 0, 0, [0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_snapshots_are_immutable(store):
    topic = store.create_topic("i", 1, 1, configs={"retention.ms": "1"})
    with pytest.raises(AttributeError):  # a NamedTuple's fields cannot be set
        topic.name = "x"
    with pytest.raises(TypeError):
        topic.configs["retention.ms"] = "2"
    store.bump_leader_epoch("i", 0)
    assert topic.partitions[0].leader_epoch == 0  # the old snapshot did not change


# -- brokers, broker configs, listeners ----------------------------------------------------------------------

def test_brokers_and_controller(store):
    assert [(b.node_id, b.host, b.port, b.rack) for b in store.list_brokers()] == [(0, "localhost", 9092, None)]
    assert store.controller_id() == 0
    store.register_broker(0, "localhost", 9093, "r1")
    assert store.list_brokers()[0].port == 9093 and store.list_brokers()[0].rack == "r1"
    store.unregister_broker(0)
    assert store.list_brokers() == [] and store.controller_id() == -1


def test_broker_configs_set_and_clear(store):
    store.set_broker_configs("0", {"num.io.threads": "4"})
    assert store.get_broker_configs("0") == {"num.io.threads": "4"}
    assert store.get_broker_configs("") == {}
    store.set_broker_configs("0", {})
    assert store.get_broker_configs("0") == {}


def test_listeners_see_changes_and_failures_are_logged(store, caplog):
    seen = []
    store.add_listener(lambda change: seen.append((change.kind, change.topic.name if change.topic else None,
                                                   change.partition, change.resource)))

    def broken(change):
        raise RuntimeError("boom")

    store.add_listener(broken)
    with caplog.at_level(logging.ERROR):
        store.create_topic("x", 1, 1)
        store.create_partitions("x", 2)
        store.alter_topic_configs("x", {"retention.ms": "5"})
        store.bump_leader_epoch("x", 1)
        store.set_broker_configs("", {"log.retention.ms": "1"})
        store.delete_topic("x")
    assert seen == [
        (ChangeKind.TOPIC_CREATED, "x", None, None),
        (ChangeKind.PARTITIONS_CREATED, "x", None, None),
        (ChangeKind.TOPIC_CONFIGS_CHANGED, "x", None, None),
        (ChangeKind.PARTITION_CHANGED, "x", 1, None),
        (ChangeKind.BROKER_CONFIGS_CHANGED, None, None, ""),
        (ChangeKind.TOPIC_DELETED, "x", None, None),
    ]
    assert sum("metadata listener" in r.getMessage() for r in caplog.records) == 6
    store.remove_listener(broken)
    store.create_topic("y", 1, 1)
    assert seen[-1][0] is ChangeKind.TOPIC_CREATED


# -- the file ---------------------------------------------------------------------------------------------------

def test_file_is_written_atomically_and_readable_json(tmp_path, store):
    store.create_topic("j", 1, 1)
    assert not (tmp_path / (METADATA_FILE + ".tmp")).exists()
    data = json.loads((tmp_path / METADATA_FILE).read_text())
    assert data["version"] == 1 and data["topics"][0]["name"] == "j"


def test_leftover_temp_file_is_ignored(tmp_path, store):
    store.create_topic("k", 1, 1)
    (tmp_path / (METADATA_FILE + ".tmp")).write_text("{ torn")
    assert reopen(tmp_path).get_topic("k") is not None
    assert not (tmp_path / (METADATA_FILE + ".tmp")).exists()


def test_corrupt_file_is_an_error_not_an_empty_cluster(tmp_path, store):
    store.create_topic("k", 1, 1)
    (tmp_path / METADATA_FILE).write_text("{ not json")
    with pytest.raises(RuntimeError, match="cannot read kafkapy metadata file"):
        EmbeddedMetadataStore(tmp_path)


# -- client-metrics subscriptions (KIP-714) --------------------------------------------------------

def test_client_metrics_subscriptions_persist_and_are_removed_when_empty(tmp_path, store):
    store.set_client_metrics_configs("all", {"metrics": "*", "interval.ms": "1000"})
    store.set_client_metrics_configs("gone", {"metrics": "x"})
    store.set_client_metrics_configs("gone", {})
    store.close()
    again = reopen(tmp_path)
    try:
        assert again.client_metrics_configs() == {"all": {"metrics": "*", "interval.ms": "1000"}}
    finally:
        again.close()
