"""Znode paths and JSON: Kafka 3.7's exact shapes, round trips, and reading JSON in any key order."""
from __future__ import annotations

import json
import uuid

import pytest

from kafkapy.metadata.ids import uuid_to_kafka_str
from kafkapy.metadata.zk import paths
from kafkapy.metadata.zk.paths import (BrokerRegistration, Endpoint, FinalizedFeatures, LeaderIsr, ProducerIdBlock,
                                         TopicAssignment, ZnodeDecodeError)


def reordered(data: bytes) -> bytes:
    """The same JSON object with its keys in reverse order and Jackson-unlike spacing."""
    def flip(value):
        if isinstance(value, dict):
            return {k: flip(v) for k, v in reversed(list(value.items()))}
        if isinstance(value, list):
            return [flip(v) for v in value]
        return value
    return json.dumps(flip(json.loads(data)), indent=2).encode()


# -- paths -------------------------------------------------------------------------------------------

def test_paths_match_kafka_layout():
    assert paths.broker_path(3) == "/brokers/ids/3"
    assert paths.topic_path("t") == "/brokers/topics/t"
    assert paths.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert paths.delete_topic_path("t") == "/admin/delete_topics/t"
    assert paths.config_entity_path("topics", "t") == "/config/topics/t"
    assert paths.acl_path("TOPIC", "t") == "/kafka-acl/Topic/t"
    assert paths.acl_path("TRANSACTIONAL_ID", "x", "PREFIXED") == "/kafka-acl-extended/prefixed/TransactionalId/x"
    assert paths.acl_path("Group", "g", "literal") == "/kafka-acl/Group/g"
    assert paths.acl_change_path("literal") == "/kafka-acl-changes"
    assert paths.acl_change_path("prefixed") == "/kafka-acl-extended-changes"
    with pytest.raises(ValueError):
        paths.acl_path("TOPIC", "t", "MATCH")


def test_persistent_paths_are_the_sheets_list():
    assert set(paths.PERSISTENT_PATHS) == {
        "/consumers", "/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/changes", "/config/topics",
        "/config/clients", "/config/users", "/config/brokers", "/config/ips", "/admin/delete_topics",
        "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification"}


def test_sequence_number():
    assert paths.sequence_number("config_change_0000000042", paths.CONFIG_CHANGE_PREFIX) == 42
    with pytest.raises(ZnodeDecodeError):
        paths.sequence_number("something_else", paths.CONFIG_CHANGE_PREFIX)


def test_entity_name_sanitizing_matches_kafka():
    assert paths.sanitize_entity_name("User:alice@example.com") == "User%3Aalice%40example.com"
    assert paths.sanitize_entity_name("a b*~") == "a%20b%2A%7E"
    assert paths.sanitize_entity_name("client-1_x.y") == "client-1_x.y"
    assert paths.desanitize_entity_name("User%3Aalice%40example.com") == "User:alice@example.com"


# -- cluster id, controller --------------------------------------------------------------------------

def test_cluster_id_version_is_a_string():
    data = paths.encode_cluster_id("MkU3OEVBNTcwNTJENDM2Qk")
    assert json.loads(data) == {"version": "1", "id": "MkU3OEVBNTcwNTJENDM2Qk"}
    assert paths.decode_cluster_id(reordered(data)) == "MkU3OEVBNTcwNTJENDM2Qk"


def test_controller_znode_shape():
    data = paths.encode_controller(2, timestamp_ms=1700000000000)
    assert json.loads(data) == {"version": 2, "brokerid": 2, "timestamp": "1700000000000", "kraftControllerEpoch": -1}
    assert paths.decode_controller(reordered(data)) == 2
    # What an older Kafka wrote (version 1, no kraftControllerEpoch) still reads.
    assert paths.decode_controller(b'{"timestamp":"1","brokerid":7,"version":1}') == 7


def test_controller_epoch_is_decimal_text():
    assert paths.encode_controller_epoch(3) == b"3"
    assert paths.decode_controller_epoch(b"12") == 12
    with pytest.raises(ZnodeDecodeError):
        paths.decode_controller_epoch(b"{}")


# -- brokers -----------------------------------------------------------------------------------------

def registration() -> BrokerRegistration:
    endpoints = [Endpoint("INTERNAL", "SASL_SSL", "h1", 9093), Endpoint("PLAINTEXT", "PLAINTEXT", "h1", 9092)]
    return BrokerRegistration(1, endpoints, rack="r1", features={}, timestamp_ms=1700000000000)


def test_broker_json_v5_shape():
    assert json.loads(paths.encode_broker(registration())) == {
        "version": 5, "host": "h1", "port": 9092, "jmx_port": -1, "timestamp": "1700000000000",
        "endpoints": ["INTERNAL://h1:9093", "PLAINTEXT://h1:9092"],
        "listener_security_protocol_map": {"INTERNAL": "SASL_SSL", "PLAINTEXT": "PLAINTEXT"},
        "rack": "r1", "features": {}}


def test_broker_json_round_trip_any_key_order():
    reg = registration()
    reg.features = {"metadata.version": (1, 19)}
    back = paths.decode_broker(1, reordered(paths.encode_broker(reg)))
    assert back == reg
    assert back.endpoint("PLAINTEXT") == Endpoint("PLAINTEXT", "PLAINTEXT", "h1", 9092)
    assert back.endpoint("NOPE") is None


def test_broker_without_rack_or_plaintext():
    reg = BrokerRegistration(4, [Endpoint("CLIENT", "SSL", "h4", 9094)], timestamp_ms=5)
    obj = json.loads(paths.encode_broker(reg))
    assert "rack" not in obj
    assert obj["host"] is None and obj["port"] == -1  # Kafka's "no PLAINTEXT endpoint"
    assert paths.decode_broker(4, paths.encode_broker(reg)) == reg


def test_broker_host_port_come_from_first_plaintext_protocol_not_listener_name():
    reg = BrokerRegistration(2, [Endpoint("REPL", "PLAINTEXT", "r", 1), Endpoint("PLAINTEXT", "PLAINTEXT", "p", 2)])
    obj = json.loads(paths.encode_broker(reg))
    assert (obj["host"], obj["port"]) == ("r", 1)


def test_broker_ipv6_endpoint():
    reg = BrokerRegistration(3, [Endpoint("PLAINTEXT", "PLAINTEXT", "::1", 9092)], timestamp_ms=1)
    data = paths.encode_broker(reg)
    assert json.loads(data)["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert paths.decode_broker(3, data).endpoints[0].host == "::1"


def test_broker_json_v4_and_v2_as_kafka_wrote_them():
    v4 = (b'{"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
          b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"rack":"dc1","jmx_port":9999,'
          b'"host":"localhost","timestamp":"2233345666","port":9092,"version":4}')
    reg = paths.decode_broker(5, v4)
    assert reg.endpoints == [Endpoint("CLIENT", "SSL", "host1", 9092),
                             Endpoint("REPLICATION", "PLAINTEXT", "host1", 9093)]
    assert (reg.rack, reg.jmx_port, reg.features, reg.timestamp_ms) == ("dc1", 9999, {}, 2233345666)
    # v2: no protocol map, so listener names are security protocols.
    v2 = (b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1",'
          b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}')
    assert [(e.listener, e.security_protocol) for e in paths.decode_broker(6, v2).endpoints] == \
        [("PLAINTEXT", "PLAINTEXT"), ("SSL", "SSL")]


def test_broker_json_missing_required_keys_is_an_error():
    with pytest.raises(ZnodeDecodeError):
        paths.decode_broker(1, b'{"version":5,"endpoints":[]}')  # no jmx_port
    with pytest.raises(ZnodeDecodeError):
        paths.decode_broker(1, b'{"version":2,"jmx_port":-1,"endpoints":["WEIRD://h:1"]}')  # unknown protocol
    with pytest.raises(ZnodeDecodeError):
        paths.decode_broker(1, b"not json")


# -- topics and partition state ----------------------------------------------------------------------

def test_topic_json_v3_shape():
    topic_id = uuid.UUID("8f3c1c84-4b52-4f66-9c8e-6b7c5d1a2b3c")
    assignment = TopicAssignment("t", topic_id, {1: [2, 3], 0: [1, 2]}, adding={0: [3]}, removing={0: [1], 1: []})
    assert json.loads(paths.encode_topic(assignment)) == {
        "version": 3, "partitions": {"0": [1, 2], "1": [2, 3]}, "adding_replicas": {"0": [3]},
        "removing_replicas": {"0": [1]}, "topic_id": uuid_to_kafka_str(topic_id)}


def test_topic_json_round_trip_and_legacy_versions():
    assignment = TopicAssignment("t", uuid.uuid4(), {0: [1, 2], 1: [2, 1]})
    data = paths.encode_topic(assignment)
    assert json.loads(data)["adding_replicas"] == {} and json.loads(data)["removing_replicas"] == {}
    assert paths.decode_topic("t", reordered(data)) == assignment
    old = paths.decode_topic("t", b'{"version":1,"partitions":{"0":[1]}}')
    assert old == TopicAssignment("t", None, {0: [1]}, {}, {})
    assert "topic_id" not in json.loads(paths.encode_topic(old))


def test_partition_state_shape_and_recovery_flag_only_when_recovering():
    state = LeaderIsr(leader=1, leader_epoch=4, isr=[1, 2], controller_epoch=3)
    assert json.loads(paths.encode_partition_state(state)) == {
        "version": 1, "leader": 1, "leader_epoch": 4, "controller_epoch": 3, "isr": [1, 2]}
    recovering = LeaderIsr(2, 5, [2], 3, leader_recovery_state=1)
    assert json.loads(paths.encode_partition_state(recovering))["leader_recovery_state"] == 1
    assert paths.decode_partition_state(reordered(paths.encode_partition_state(recovering))) == recovering
    assert paths.decode_partition_state(reordered(paths.encode_partition_state(state))) == state


# -- admin znodes and notifications ------------------------------------------------------------------

def test_reassignment_and_preferred_election_znodes():
    data = paths.encode_reassignment({("t", 0): [4, 5, 6]})
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 5, 6]}]}
    assert paths.decode_reassignment(reordered(data)) == {("t", 0): [4, 5, 6]}
    data = paths.encode_preferred_replica_election([("t", 0), ("u", 1)])
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "t", "partition": 0},
                                                             {"topic": "u", "partition": 1}]}
    assert paths.decode_preferred_replica_election(reordered(data)) == {("t", 0), ("u", 1)}
    assert paths.decode_isr_change(paths.encode_isr_change([("t", 2)])) == {("t", 2)}
    assert json.loads(paths.encode_log_dir_event(3)) == {"version": 1, "broker": 3, "event": 1}
    assert paths.decode_log_dir_event(b'{"event":1,"broker":3,"version":1}') == 3


def test_config_znodes():
    data = paths.encode_config({"retention.ms": "1000", "cleanup.policy": "compact"})
    assert json.loads(data) == {"version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact"}}
    assert paths.decode_config(reordered(data)) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert paths.decode_config(b"") == {}
    with pytest.raises(TypeError):
        paths.encode_config({"retention.ms": 1000})  # type: ignore[dict-item]


def test_config_change_notifications_v2_and_v1():
    assert json.loads(paths.encode_config_change("topics/foo")) == {"version": 2, "entity_path": "topics/foo"}
    assert paths.decode_config_change(b'{"entity_path":"users/bob","version":2}') == "users/bob"
    assert paths.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"


def test_producer_id_block_offsets_are_strings():
    data = paths.encode_producer_id_block(ProducerIdBlock(2, 1000, 1999))
    assert json.loads(data) == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    block = paths.decode_producer_id_block(reordered(data))
    assert block == ProducerIdBlock(2, 1000, 1999) and block.size == 1000


def test_feature_znode():
    data = paths.encode_feature(FinalizedFeatures())
    assert json.loads(data) == {"version": 2, "status": 1, "features": {}}
    assert paths.decode_feature(reordered(data)) == FinalizedFeatures(1, {}, 2)
    v1 = b'{"features":{"metadata.version":{"min_version_level":1,"max_version_level":7}},"status":0,"version":1}'
    assert paths.decode_feature(v1) == FinalizedFeatures(0, {"metadata.version": 7}, 1)


def test_acl_znodes_and_change_notifications():
    acls = [{"principal": "User:a", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    data = paths.encode_acls(acls)
    assert json.loads(data) == {"version": 1, "acls": acls}
    assert paths.decode_acls(reordered(data)) == acls
    assert paths.encode_acl_change("Topic", "t") == b"TOPIC:t"
    assert paths.decode_acl_change(b"TOPIC:a:b") == ("TOPIC", "a:b", "LITERAL")
    extended = paths.encode_acl_change("TRANSACTIONAL_ID", "tx", "prefixed")
    assert json.loads(extended) == {"version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx",
                                    "patternType": "PREFIXED"}
    assert paths.decode_acl_change(reordered(extended), "prefixed") == ("TRANSACTIONAL_ID", "tx", "PREFIXED")
    assert paths.acl_resource_type_enum_name("DelegationToken") == "DELEGATION_TOKEN"
