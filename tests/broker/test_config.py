"""Broker config: .properties syntax, typed values, listeners, synonyms, DescribeConfigs, validation,
dynamic configs through the metadata store, and the CLI's handling of bad configs."""
from __future__ import annotations

import logging
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.broker.config import (
    AlterConfigOp,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    alter_broker_configs,
    alter_topic_configs,
    apply_config_ops,
    describe_broker_configs,
    describe_topic_configs,
    effective_topic_properties,
    open_metadata_store,
    parse_properties,
    validate_topic_configs,
)
from kafkapy.broker.config_defs import BROKER_CONFIGS, LONG_MAX, TOPIC_CONFIGS, ConfigType, java_double_str
from kafkapy.metadata.embedded import EmbeddedMetadataStore
from kafkapy.protocol.errors import ErrorCode, KafkaError

REPO = Path(__file__).resolve().parents[2]


def cfg(**props: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in props.items()})


def error_of(fn, *args, **kwargs) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        fn(*args, **kwargs)
    return info.value


# -- .properties syntax -------------------------------------------------------------------------------------

def test_properties_separators_comments_and_blank_lines():
    text = ("# comment\n  ! also a comment\n\n"
            "a=1\nb: 2\nc 3\n  d  =  4\ne:5\nf\t6\ng\n"
            "h = x = y\n")
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "",
                                      "h": "x = y"}


def test_properties_continuations_and_escapes():
    text = ("listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT2://b:2\n"
            "even=ends with two\\\\\n"
            "next=kept\n"
            "my\\=key=v\\tw\n"
            "uni=\\u0041\\u00e9\n"
            "key\\ with\\ spaces=x\n"
            "other=\\q\n")
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://a:1,PLAINTEXT2://b:2"
    assert props["even"] == "ends with two\\" and props["next"] == "kept"
    assert props["my=key"] == "v\tw" and props["uni"] == "Aé"
    assert props["key with spaces"] == "x" and props["other"] == "q"


def test_properties_comment_lines_do_not_continue_and_crlf():
    props = parse_properties("# a comment \\\nx=1\r\ny=2\rz=3\r\n")
    assert props == {"x": "1", "y": "2", "z": "3"}


def test_properties_trailing_backslash_at_eof_and_last_value_wins():
    assert parse_properties("a=1\na=2\nb=3\\") == {"a": "2", "b": "3"}


def test_properties_value_whitespace():
    assert parse_properties("a =   spaced value   \n") == {"a": "spaced value   "}


def test_properties_malformed_unicode_escape():
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties("a=\\u12")


def _java_escape(text: str, is_key: bool) -> str:
    """Properties.store's escaping (enough of it to round-trip any text)."""
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif ch in "=:#!" or (ch == " " and (is_key or i == 0)):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",))),
                       st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",))), max_size=8))
def test_properties_round_trip(props):
    text = "".join(f"{_java_escape(k, True)}={_java_escape(v, False)}\n" for k, v in props.items())
    assert parse_properties(text) == props


# -- typed values and defaults ----------------------------------------------------------------------------------

def test_defaults_match_kafka():
    c = BrokerConfig()
    assert c.get("socket.request.max.bytes") == 104857600
    assert c.get("message.max.bytes") == 1048588
    assert c.get("offsets.topic.num.partitions") == 50
    assert c.get("offsets.retention.minutes") == 10080 and c.offsets_retention_ms == 10080 * 60000
    assert c.get("group.initial.rebalance.delay.ms") == 3000
    assert c.get("group.min.session.timeout.ms") == 6000 and c.get("group.max.session.timeout.ms") == 1800000
    assert c.get("fetch.max.bytes") == 57671680
    assert c.get("producer.id.expiration.ms") == 86400000
    assert c.get("auto.create.topics.enable") is True and c.get("delete.topic.enable") is True
    assert c.get("log.cleanup.policy") == ["delete"]
    assert c.get("zookeeper.connect") is None and c.get("zookeeper.session.timeout.ms") == 18000
    assert c.get("kafkapy.log.fsync.on.ack") is False


def test_topic_config_defaults_match_kafka_3_9():
    expected = {
        "segment.bytes": 1073741824, "segment.ms": 604800000, "retention.ms": 604800000, "retention.bytes": -1,
        "max.message.bytes": 1048588, "min.insync.replicas": 1, "cleanup.policy": ["delete"],
        "compression.type": "producer", "message.timestamp.type": "CreateTime", "flush.messages": LONG_MAX,
        "flush.ms": LONG_MAX, "segment.index.bytes": 10485760, "index.interval.bytes": 4096,
        "file.delete.delay.ms": 60000, "delete.retention.ms": 86400000, "min.cleanable.dirty.ratio": 0.5,
        "unclean.leader.election.enable": False, "preallocate": False, "local.retention.ms": -2,
        "message.downconversion.enable": True, "remote.storage.enable": False, "max.compaction.lag.ms": LONG_MAX,
    }
    for name, value in expected.items():
        assert TOPIC_CONFIGS[name].default == value, name
    # every topic config Kafka 3.9's LogConfig defines, plus kafkapy's two extensions
    assert len(TOPIC_CONFIGS) == 36 + 2
    assert TOPIC_CONFIGS["kafkapy.iceberg.mode"].default == "disabled"


def test_attribute_access():
    c = cfg(num_partitions="6")
    assert c.num_partitions == 6 and c.default_replication_factor == 1
    assert c.log_retention_check_interval_ms == 300000
    with pytest.raises(AttributeError):
        c.no_such_config


def test_from_file_with_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nlog.dirs=/tmp/a,/tmp/b\nbroker.id=7\n")
    c = BrokerConfig.from_properties_file(path, ["num.partitions=9", "auto.create.topics.enable=false"])
    assert c.num_partitions == 9 and c.get("auto.create.topics.enable") is False
    assert c.log_dirs == ["/tmp/a", "/tmp/b"] and c.node_id == 7 and c.broker_id == 7
    assert c.static_configs["num.partitions"] == "9"


def test_without_a_file_single_node_quickstart_values_apply():
    c = BrokerConfig.from_properties_file(None)
    assert c.get("offsets.topic.replication.factor") == 1 and c.get("transaction.state.log.min.isr") == 1
    assert c.get("share.coordinator.state.topic.replication.factor") == 1


def test_bad_override_syntax():
    err = error_of(BrokerConfig.from_properties_file, None, ["novalue"])
    assert "novalue" in str(err)


@pytest.mark.parametrize("key, value, reason", [
    ("num.partitions", "abc", "Not a number of type INT"),
    ("num.partitions", "0", "Value must be at least 1"),
    ("num.partitions", "2147483648", "Not a number of type INT"),
    ("log.retention.bytes", "9223372036854775808", "Not a number of type LONG"),
    ("auto.create.topics.enable", "yes", "Expected value to be either true or false"),
    ("log.message.timestamp.type", "Wallclock", "String must be one of: CreateTime, LogAppendTime"),
    ("compression.type", "brotli", "String must be one of"),
    ("log.cleanup.policy", "shred", "String must be one of: compact, delete"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "Value must be no more than 1"),
    ("log.cleaner.min.cleanable.ratio", "x", "Not a number of type DOUBLE"),
    ("offsets.topic.replication.factor", "40000", "Not a number of type SHORT"),
    ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
])
def test_invalid_values_name_the_key_and_value(key, value, reason):
    err = error_of(BrokerConfig, {key: value})
    assert err.code == ErrorCode.INVALID_CONFIG
    assert str(err).startswith(f"Invalid value {value} for configuration {key}: ")
    assert reason in str(err) and err.name == key


def test_typed_values_given_by_code():
    c = BrokerConfig({"num.partitions": 3, "auto.create.topics.enable": False, "log.cleanup.policy": ["compact"],
                      "log.cleaner.min.cleanable.ratio": 0.25})
    assert c.num_partitions == 3 and c.get("auto.create.topics.enable") is False
    assert c.static_configs["auto.create.topics.enable"] == "false" and c.get("log.cleanup.policy") == ["compact"]
    assert c.get("log.cleaner.min.cleanable.ratio") == 0.25


def test_value_parsing_is_kafka_like():
    c = cfg(num_partitions=" +4 ", log_cleanup_policy="compact , delete", log_preallocate="TRUE",
            log_cleaner_min_cleanable_ratio="0.25")
    assert c.num_partitions == 4 and c.get("log.cleanup.policy") == ["compact", "delete"]
    assert c.get("log.preallocate") is True and c.get("log.cleaner.min.cleanable.ratio") == 0.25


def test_unknown_keys_warned_once_each_and_unused_ones_flagged(caplog):
    with caplog.at_level(logging.WARNING, logger="kafkapy.broker.config"):
        BrokerConfig({"foo.bar": "1", "baz": "2", "num.io.threads": "16", "num.network.threads": "3",
                      "num.partitions": "2"})
    messages = [r.getMessage() for r in caplog.records]
    assert sum("foo.bar" in m for m in messages) == 1 and sum("baz" in m for m in messages) == 1
    assert any("num.io.threads=16" in m and "no effect" in m for m in messages)
    assert not any("num.network.threads" in m for m in messages)  # set to its default: nothing to say
    assert not any("num.partitions" in m for m in messages)


def test_passwords_are_never_logged(caplog):
    with caplog.at_level(logging.WARNING):
        BrokerConfig({"ssl.keystore.password": "s3cret"})
    assert "s3cret" not in caplog.text


def test_java_double_formatting():
    assert [java_double_str(v) for v in (0.5, 1.0, 1e10, 1.7976931348623157e308, 1e-4, 1234567.0)] == \
        ["0.5", "1.0", "1.0E10", "1.7976931348623157E308", "1.0E-4", "1234567.0"]


# -- node id, listeners, log dirs ----------------------------------------------------------------------------

def test_node_id_and_broker_id():
    assert cfg(node_id="3").node_id == 3 and cfg(node_id="3").get("broker.id") == 3
    assert cfg(broker_id="5").node_id == 5
    assert cfg().node_id == 1
    err = error_of(BrokerConfig, {"node.id": "1", "broker.id": "2"})
    assert "node.id" in str(err) and "broker.id" in str(err)


def test_default_listener_is_loopback_advertised_as_localhost():
    c = BrokerConfig()
    hosts, port = c.listener_address()
    hosts = [hosts] if isinstance(hosts, str) else hosts
    assert port == 9092 and hosts[0] == "127.0.0.1" and set(hosts) <= {"127.0.0.1", "::1"}
    assert c.advertised_address() == ("localhost", 9092)
    assert str(c.listeners[0]) == "PLAINTEXT://localhost:9092"


def test_listener_parsing():
    c = cfg(listeners="PLAINTEXT://127.0.0.1:9092, internal://[::1]:9093",
            listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            advertised_listeners="PLAINTEXT://broker.example:19092")
    assert [(l.name, l.security_protocol, l.host, l.port) for l in c.listeners] == \
        [("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092), ("INTERNAL", "PLAINTEXT", "::1", 9093)]
    assert c.advertised_address() == ("broker.example", 19092)
    assert str(c.listeners[1]) == "INTERNAL://[::1]:9093"


def test_wildcard_listener_binds_everything_and_advertises_host_name():
    c = cfg(listeners="PLAINTEXT://:9092")
    assert c.listener_address() == (None, 9092)
    host, port = c.advertised_address()
    assert host and port == 9092


@pytest.mark.parametrize("props, fragment", [
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable meta-address 0.0.0.0"),
    ({"listeners": "FOO://localhost:9092"}, "No security protocol defined for listener FOO"),
    ({"listeners": "PLAINTEXT://localhost:9092,PLAINTEXT://localhost:9093"}, "different name"),
    ({"listeners": "nonsense"}, "Unable to parse nonsense"),
    ({"listeners": "PLAINTEXT://localhost:70000"}, "out of range"),
    ({"listeners": ""}, "At least one listener"),
    ({"advertised.listeners": "SSL://localhost:9093"}, "subset"),
    ({"log.dirs": " , "}, "At least one log directory"),
    ({"log.dirs": "/tmp/x,/tmp/x"}, "Duplicate log directory"),
])
def test_bad_listeners_and_log_dirs(props, fragment):
    err = error_of(BrokerConfig, props)
    assert fragment in str(err)


def test_log_dir_fallback_and_metadata_dir():
    assert cfg(log_dir="/tmp/one").log_dirs == ["/tmp/one"]
    assert cfg(log_dir="/tmp/one").metadata_dir == "/tmp/one"
    assert cfg(log_dirs="/tmp/a,/tmp/b", metadata_log_dir="/tmp/m").metadata_dir == "/tmp/m"


# -- topic defaults from broker synonyms ---------------------------------------------------------------------

@pytest.mark.parametrize("props, topic_config, expected", [
    ({}, "retention.ms", 604800000),
    ({"log.retention.hours": "1"}, "retention.ms", 3600000),
    ({"log.retention.minutes": "5", "log.retention.hours": "1"}, "retention.ms", 300000),
    ({"log.retention.ms": "42", "log.retention.minutes": "5"}, "retention.ms", 42),
    ({"log.retention.hours": "-1"}, "retention.ms", -1),
    ({"log.roll.hours": "2"}, "segment.ms", 7200000),
    ({"log.roll.ms": "100", "log.roll.hours": "2"}, "segment.ms", 100),
    ({}, "flush.ms", LONG_MAX),
    ({"log.flush.scheduler.interval.ms": "500"}, "flush.ms", 500),
    ({"log.flush.interval.ms": "7", "log.flush.scheduler.interval.ms": "500"}, "flush.ms", 7),
    ({"message.max.bytes": "2000000"}, "max.message.bytes", 2000000),
    ({"log.segment.bytes": "1048576"}, "segment.bytes", 1048576),
    ({"log.cleanup.policy": "compact"}, "cleanup.policy", ["compact"]),
    ({"log.cleaner.min.cleanable.ratio": "0.1"}, "min.cleanable.dirty.ratio", 0.1),
    ({"log.message.timestamp.type": "LogAppendTime"}, "message.timestamp.type", "LogAppendTime"),
    ({"kafkapy.log.fsync.on.ack": "true"}, "kafkapy.log.fsync.on.ack", True),
    ({}, "leader.replication.throttled.replicas", []),
])
def test_topic_defaults_follow_broker_synonyms(props, topic_config, expected):
    assert BrokerConfig(props).topic_default(topic_config) == expected


def test_effective_topic_properties():
    c = cfg(log_retention_hours="1", log_message_timestamp_difference_max_ms="1000")
    props = effective_topic_properties({"segment.bytes": " 2097152 ", "cleanup.policy": "compact,delete"}, c)
    assert set(props) == set(TOPIC_CONFIGS)
    assert props["retention.ms"] == "3600000" and props["segment.bytes"] == "2097152"
    assert props["cleanup.policy"] == "compact,delete" and props["min.cleanable.dirty.ratio"] == "0.5"
    # the deprecated difference limit still applies where before/after keep their defaults
    assert props["message.timestamp.before.max.ms"] == "1000"
    assert props["message.timestamp.after.max.ms"] == "1000"
    assert props["kafkapy.log.fsync.on.ack"] == "false"


def test_effective_topic_properties_feed_log_config():
    log_config = pytest.importorskip("kafkapy.log.config")
    c = cfg(log_retention_minutes="10", kafkapy_log_fsync_on_ack="true")
    lc = log_config.LogConfig.from_properties(effective_topic_properties({"segment.ms": "1000"}, c))
    assert lc.retention_ms == 600000 and lc.segment_ms == 1000 and lc.fsync_on_ack is True
    assert c.default_log_config().retention_ms == 600000


# -- topic config validation --------------------------------------------------------------------------------

def test_validate_topic_configs_accepts_and_types():
    assert validate_topic_configs({"retention.ms": "-1", "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1"}) \
        == {"retention.ms": -1, "cleanup.policy": ["compact"], "min.cleanable.dirty.ratio": 1.0}


@pytest.mark.parametrize("configs, message", [
    ({"no.such": "1"}, "Unknown topic config name: no.such"),
    ({"log.retention.ms": "1"}, "Unknown topic config name: log.retention.ms"),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ({"retention.ms": "soon"}, "Not a number of type LONG"),
    ({"segment.bytes": "10"}, "Value must be at least 14"),
    ({"cleanup.policy": "zip"}, "String must be one of: compact, delete"),
    ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
    ({"leader.replication.throttled.replicas": "x"}, "must be the literal '*'"),
])
def test_validate_topic_configs_rejects_with_invalid_config(configs, message):
    err = error_of(validate_topic_configs, configs)
    assert err.code == ErrorCode.INVALID_CONFIG == 40
    assert message in str(err)


def test_throttled_replicas_forms():
    validate_topic_configs({"leader.replication.throttled.replicas": "*"})
    validate_topic_configs({"follower.replication.throttled.replicas": "0:1,1:2"})


# -- DescribeConfigs -----------------------------------------------------------------------------------------

def entries_by_name(entries):
    return {e.name: e for e in entries}


def test_describe_topic_override_default_and_static_sources():
    c = cfg(log_segment_bytes="2097152", log_retention_hours="24")
    e = entries_by_name(describe_topic_configs({"cleanup.policy": "compact"}, c, None))
    assert set(e) == set(TOPIC_CONFIGS)
    override = e["cleanup.policy"]
    assert override.source == ConfigSource.DYNAMIC_TOPIC_CONFIG == 1 and override.value == "compact"
    assert [(s.name, s.value, s.source) for s in override.synonyms] == [
        ("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)]
    static = e["segment.bytes"]
    assert static.source == ConfigSource.STATIC_BROKER_CONFIG and static.value == "2097152"
    assert [(s.name, s.source) for s in static.synonyms] == [
        ("log.segment.bytes", ConfigSource.STATIC_BROKER_CONFIG), ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG)]
    default = e["max.message.bytes"]
    assert default.source == ConfigSource.DEFAULT_CONFIG and default.is_default
    assert [(s.name, s.value) for s in default.synonyms] == [("message.max.bytes", "1048588")]
    # Kafka describes retention.ms through log.retention.ms only: a log.retention.hours setting changes the
    # value but is not listed as a synonym (ConfigHelper drops synonyms before the primary name).
    retention = e["retention.ms"]
    assert retention.value == "86400000" and retention.synonyms == [] and retention.source == ConfigSource.DEFAULT_CONFIG
    assert e["remote.storage.enable"].synonyms == [] and e["remote.storage.enable"].source == ConfigSource.DEFAULT_CONFIG
    assert e["min.cleanable.dirty.ratio"].value == "0.5" and e["min.cleanable.dirty.ratio"].config_type == ConfigType.DOUBLE
    assert all(not x.read_only and not x.is_sensitive and x.documentation is None for x in e.values())


def test_describe_topic_names_filter_docs_and_no_synonyms():
    entries = describe_topic_configs({}, cfg(), ["retention.ms", "nope"], include_synonyms=False,
                                     include_documentation=True)
    assert [e.name for e in entries] == ["retention.ms"]
    assert entries[0].synonyms == [] and "segment" in entries[0].documentation
    assert entries[0].config_type == ConfigType.LONG == 5


def test_describe_broker_configs(tmp_path):
    c = cfg(log_retention_hours="24", custom_thing="x", ssl_keystore_password="pw", num_io_threads="8")
    e = entries_by_name(describe_broker_configs(c, None))
    assert {n for n, d in BROKER_CONFIGS.items() if not d.internal} <= set(e)
    hours = e["log.retention.hours"]
    assert hours.value == "24" and hours.source == ConfigSource.STATIC_BROKER_CONFIG and hours.read_only
    assert [(s.name, s.value, s.source) for s in hours.synonyms] == [
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert e["log.retention.ms"].value is None and not e["log.retention.ms"].read_only
    password = e["ssl.keystore.password"]
    assert password.is_sensitive and password.value is None and password.config_type == ConfigType.PASSWORD
    assert all(s.value is None for s in password.synonyms)
    unknown = e["custom.thing"]  # Kafka treats configs of unknown type as sensitive
    assert unknown.is_sensitive and unknown.value is None and unknown.config_type == ConfigType.UNKNOWN
    assert e["listeners"].value == "PLAINTEXT://localhost:9092" and e["listeners"].read_only
    assert e["log.cleanup.policy"].value == "delete" and e["log.cleanup.policy"].config_type == ConfigType.LIST
    assert e["node.id"].value == "1" and e["broker.id"].value == "1"
    assert "unstable.api.versions.enable" not in e  # internal configs are not described
    assert e["num.partitions"].source == ConfigSource.DEFAULT_CONFIG and e["num.partitions"].is_default


# -- dynamic broker configs --------------------------------------------------------------------------------------

@pytest.fixture
def wired(tmp_path):
    config = cfg(log_dir=str(tmp_path), log_retention_hours="24")
    store = open_metadata_store(config)
    store.register_broker(config.node_id, "localhost", 9092)
    return config, store


def test_dynamic_config_layers_and_sources(wired):
    config, store = wired
    alter_broker_configs(config, store, "", replace={"log.retention.ms": "1000", "num.io.threads": "10"})
    alter_broker_configs(config, store, "1", ops=[("log.retention.ms", AlterConfigOp.SET, "2000")])
    assert config.get("log.retention.ms") == 2000 and config.topic_default("retention.ms") == 2000
    assert config.get("num.io.threads") == 10
    e = entries_by_name(describe_broker_configs(config, ["log.retention.ms"]))["log.retention.ms"]
    assert e.source == ConfigSource.DYNAMIC_BROKER_CONFIG and e.value == "2000"
    assert [(s.name, s.value, s.source) for s in e.synonyms] == [
        ("log.retention.ms", "2000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    topic = entries_by_name(describe_topic_configs({}, config, ["retention.ms"]))["retention.ms"]
    assert topic.source == ConfigSource.DYNAMIC_BROKER_CONFIG and topic.value == "2000"
    cluster = describe_broker_configs(config, None, per_broker=False)
    assert [(x.name, x.value) for x in cluster] == [("log.retention.ms", "1000"), ("num.io.threads", "10")]
    assert all(s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG for x in cluster for s in x.synonyms)


def test_dynamic_configs_survive_restart(tmp_path, wired):
    config, store = wired
    alter_broker_configs(config, store, "", ops=[("log.cleanup.policy", AlterConfigOp.APPEND, "compact")])
    assert config.get("log.cleanup.policy") == ["delete", "compact"]
    store.close()
    restarted = cfg(log_dir=str(tmp_path))
    open_metadata_store(restarted)
    assert restarted.get("log.cleanup.policy") == ["delete", "compact"]
    assert restarted.topic_default("cleanup.policy") == ["delete", "compact"]


@pytest.mark.parametrize("resource, props, fragment", [
    ("", {"log.dirs": "/x"}, "Cannot update these configs dynamically: Set(log.dirs)"),
    ("", {"log.retention.hours": "1"}, "Cannot update these configs dynamically"),
    ("", {"listeners": "PLAINTEXT://:1"}, "Cannot update these configs dynamically"),
    ("", {"log.retention.ms": "abc"}, "Invalid value abc for configuration log.retention.ms"),
    ("", {"num.io.threads": "17"}, "should not be greater than double the current value 8"),
    ("", {"num.io.threads": "3"}, "should be at least half the current value 8"),
    ("5", {"log.retention.ms": "1"}, "Unexpected broker id, expected 1, but received 5"),
    ("x", {"log.retention.ms": "1"}, "Node id must be an integer, but it is: x"),
    ("", {"log.retention.ms": None}, "Null value not supported"),
])
def test_dynamic_config_rejections_are_invalid_request(wired, resource, props, fragment):
    config, store = wired
    err = error_of(alter_broker_configs, config, store, resource, replace=props)
    assert err.code == ErrorCode.INVALID_REQUEST == 42 and fragment in str(err)
    assert store.get_broker_configs(resource) == {}


def test_dynamic_validate_only_and_unknown_custom_config(wired):
    config, store = wired
    alter_broker_configs(config, store, "1", replace={"log.retention.ms": "5"}, validate_only=True)
    assert store.get_broker_configs("1") == {} and config.get("log.retention.ms") is None
    alter_broker_configs(config, store, "1", replace={"my.custom": "1"})  # Kafka allows custom configs
    assert store.get_broker_configs("1") == {"my.custom": "1"}


def test_incremental_ops():
    current = {"cleanup.policy": "compact", "retention.ms": "1"}
    result = apply_config_ops(current, [("retention.ms", AlterConfigOp.DELETE, None),
                                        ("cleanup.policy", AlterConfigOp.APPEND, "delete,compact"),
                                        ("segment.ms", AlterConfigOp.SET, "5")], for_topic=True)
    assert result == {"cleanup.policy": "compact,delete", "segment.ms": "5"}
    assert apply_config_ops(result, [("cleanup.policy", AlterConfigOp.SUBTRACT, "compact")], for_topic=True) == \
        {"cleanup.policy": "delete", "segment.ms": "5"}
    assert apply_config_ops({}, [("leader.replication.throttled.replicas", AlterConfigOp.APPEND, "0:1")],
                            for_topic=True) == {"leader.replication.throttled.replicas": "0:1"}
    err = error_of(apply_config_ops, {}, [("retention.ms", AlterConfigOp.APPEND, "1")], for_topic=True)
    assert err.code == ErrorCode.INVALID_CONFIG and "because its type is not LIST" in str(err)
    err = error_of(apply_config_ops, {}, [("num.io.threads", AlterConfigOp.SUBTRACT, "1")], for_topic=False)
    assert err.code == ErrorCode.INVALID_CONFIG
    err = error_of(apply_config_ops, {}, [("a", 0, "1"), ("a", 1, None)], for_topic=True)
    assert err.code == ErrorCode.INVALID_REQUEST and "duplicate" in str(err)
    assert error_of(apply_config_ops, {}, [("a", 0, None)], for_topic=True).code == ErrorCode.INVALID_REQUEST
    assert error_of(apply_config_ops, {}, [("a", 9, "1")], for_topic=True).code == ErrorCode.INVALID_REQUEST


def test_alter_topic_configs(wired):
    config, store = wired
    store.create_topic("t", 1, 1, configs={"retention.ms": "100"})
    alter_topic_configs(store, config, "t", ops=[("cleanup.policy", AlterConfigOp.APPEND, "compact")])
    assert dict(store.get_topic("t").configs) == {"retention.ms": "100", "cleanup.policy": "delete,compact"}
    alter_topic_configs(store, config, "t", replace={"segment.ms": "10"})
    assert dict(store.get_topic("t").configs) == {"segment.ms": "10"}
    alter_topic_configs(store, config, "t", replace={"segment.ms": "20"}, validate_only=True)
    assert dict(store.get_topic("t").configs) == {"segment.ms": "10"}
    assert error_of(alter_topic_configs, store, config, "t", replace={"bogus": "1"}).code == ErrorCode.INVALID_CONFIG
    assert error_of(alter_topic_configs, store, config, "zz", replace={}).code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_open_metadata_store_validates_new_topic_configs(wired):
    config, store = wired
    assert isinstance(store, EmbeddedMetadataStore)
    err = error_of(store.create_topic, "t", 1, 1, configs={"retention.ms": "x"})
    assert err.code == ErrorCode.INVALID_CONFIG and "retention.ms" in str(err)
    assert store.create_topic("u", -1, -1).partition_count == 1


def test_open_metadata_store_cluster_id_from_config(tmp_path):
    config = cfg(log_dir=str(tmp_path), kafkapy_cluster_id="MkU3OEVBNTcwNTJENDM2Qk")
    assert open_metadata_store(config).cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
    other = cfg(log_dir=str(tmp_path), kafkapy_cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert error_of(open_metadata_store, other).code == ErrorCode.INCONSISTENT_CLUSTER_ID


# -- CLI ---------------------------------------------------------------------------------------------------

def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkapy", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_cli_bad_config_value_exits_1_naming_the_key():
    result = run_cli("serve", "--override", "num.partitions=abc")
    assert result.returncode == 1
    assert "Invalid value abc for configuration num.partitions" in result.stderr


def test_cli_bad_file_and_version(tmp_path):
    bad = tmp_path / "server.properties"
    bad.write_text("log.message.timestamp.type=Never\n")
    result = run_cli("serve", "--config", str(bad))
    assert result.returncode == 1 and "log.message.timestamp.type" in result.stderr
    result = run_cli("serve", "--config", str(tmp_path / "missing.properties"))
    assert result.returncode == 1 and "missing.properties" in result.stderr
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("kafkapy ")


def test_cli_serve_passes_parsed_config_to_server(tmp_path, monkeypatch, capsys):
    from kafkapy import cli

    seen = []
    fake = types.ModuleType("kafkapy.node")  # the composition root, which runs kafkapy.broker.server
    fake.run = seen.append
    monkeypatch.setitem(sys.modules, "kafkapy.node", fake)
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=4\n")
    assert cli.main(["serve", str(path), "--override", "node.id=2", "--log-level", "warning"]) == 0
    assert seen[0].num_partitions == 4 and seen[0].node_id == 2
    assert logging.getLogger().level == logging.WARNING
    assert cli.main(["--log-level", "DEBUG", "serve", "-c", str(path)]) == 0
    assert logging.getLogger().level == logging.DEBUG
