"""The admin CLI's pure parts: partitioning, kcat's offset and format syntax, Kafka's duration and
config-list syntax, consumer assignments, tables, bootstrap and client properties."""
from __future__ import annotations

import io
import struct
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.admin.client import SecurityOptions, parse_bootstrap
from kafkapy.admin.configs import split_config_list
from kafkapy.admin.consume import Formatter, OffsetSpec, parse_offset_spec
from kafkapy.admin.errors import CliError, KafkaApiError
from kafkapy.admin.groups import decode_assignment, parse_datetime, parse_duration
from kafkapy.admin.output import Progress, print_table
from kafkapy.admin.produce import default_partition, murmur2


@settings(deadline=None, max_examples=200)  # a loaded CI machine must not fail it
@given(st.binary(max_size=64))
def test_murmur2_is_kafkas(key):
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

    assert murmur2(key) & 0x7FFFFFFF == kafka_python_murmur2(key) & 0x7FFFFFFF


def test_default_partition_known_values():
    # Kafka's Java client: Utils.toPositive(Utils.murmur2("a".getBytes())) % 3
    assert [default_partition(k, 1000) for k in (b"", b"a", b"key1")] == [
        (murmur2(k) & 0x7FFFFFFF) % 1000 for k in (b"", b"a", b"key1")]
    assert murmur2(b"21") == -973932308  # from Kafka's UtilsTest.testMurmur2


@pytest.mark.parametrize("values,expected", [
    (None, OffsetSpec("beginning", 0, None)),
    (["end"], OffsetSpec("end", 0, None)),
    (["stored"], OffsetSpec("stored", 0, None)),
    (["42"], OffsetSpec("absolute", 42, None)),
    (["-5"], OffsetSpec("relative", 5, None)),
    (["s@1700000000000"], OffsetSpec("timestamp", 1700000000000, None)),
    (["s@1", "e@2"], OffsetSpec("timestamp", 1, 2)),
])
def test_offset_spec(values, expected):
    assert parse_offset_spec(values) == expected


@pytest.mark.parametrize("bad", ["start", "s@", "e@x", "1.5", "@3"])
def test_offset_spec_rejects(bad):
    with pytest.raises(CliError) as info:
        parse_offset_spec([bad])
    assert info.value.exit_code == 2


def test_formatter_tokens():
    record = SimpleNamespace(offset=7, timestamp=99, key=b"k", value=b"hello", headers=[("a", b"1"), ("b", None)])
    text = Formatter("%t/%p/%o %k=%s (%K,%S) [%h] %T %%\\t\\n").format("orders", 2, record)
    assert text == b"orders/2/7 k=hello (1,5) [a=1,b=] 99 %\t\n"
    null = SimpleNamespace(offset=0, timestamp=0, key=None, value=None, headers=[])
    assert Formatter("%k|%s|%K|%S").format("t", 0, null) == b"||-1|-1"


@pytest.mark.parametrize("text,ms", [("PT1H", 3_600_000), ("P1DT2H3M4S", 93_784_000), ("PT0.5S", 500),
                                     ("-PT1M", -60_000), ("P2D", 172_800_000)])
def test_duration(text, ms):
    assert parse_duration(text) == ms


@pytest.mark.parametrize("bad", ["1h", "P", "PT", "PT1X", ""])
def test_duration_rejects(bad):
    with pytest.raises(CliError):
        parse_duration(bad)


def test_datetime():
    assert parse_datetime("2024-01-01T00:00:00.000Z") == 1704067200000
    assert parse_datetime("2024-01-01T01:00:00+01:00") == 1704067200000
    with pytest.raises(CliError):
        parse_datetime("yesterday")


def test_config_list():
    assert split_config_list("a=1,b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}
    with pytest.raises(CliError):
        split_config_list("novalue")


def _assignment(version: int, topics: dict[str, list[int]], user_data: bytes | None = b"") -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for topic, parts in topics.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return out + (struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data)


def test_decode_assignment():
    topics = {"orders": [0, 2], "events": [1]}
    assert decode_assignment(_assignment(0, topics)) == topics
    assert decode_assignment(_assignment(3, topics, None)) == topics
    assert decode_assignment(b"") == {}
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x05\x00") == {}  # truncated: nothing, no exception


def test_table_is_aligned():
    out = io.StringIO()
    print_table(["GROUP", "TOPIC", "LAG"], [["g", "orders", 5], ["longer-group", None, 10]], out)
    assert out.getvalue().splitlines() == ["GROUP        TOPIC  LAG", "g            orders 5",
                                           "longer-group -      10"]


def test_progress_only_on_a_terminal():
    quiet = io.StringIO()
    bar = Progress(10, "x", stream=quiet)
    bar.advance(10)
    bar.close()
    assert quiet.getvalue() == ""


def test_bootstrap_parsing():
    assert [str(a) for a in parse_bootstrap("PLAINTEXT://h1:9092, h2:9093")] == ["h1:9092", "h2:9093"]
    for bad in ("h1", "h1:x", ""):
        with pytest.raises(CliError):
            parse_bootstrap(bad)


def test_command_config_properties():
    options = SecurityOptions.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="s3cr\\"et";'})
    assert (options.protocol, options.sasl_mechanism, options.username) == ("SASL_SSL", "SCRAM-SHA-256", "alice")
    with pytest.raises(CliError):
        SecurityOptions.from_properties({"security.protocol": "CARRIER_PIGEON"})


def test_kafka_error_line():
    assert str(KafkaApiError(3, "topic 'x' does not exist")) == (
        "topic 'x' does not exist (UNKNOWN_TOPIC_OR_PARTITION); list topics with `kafkapy topics list`")


def test_serve_does_not_import_the_admin_client():
    code = ("import sys, kafkapy.cli as c; c._parser(); "
            "print(any(m.startswith(('kafkapy.admin.client', 'kafkapy.protocol')) for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "False", done.stderr


def test_serve_parser_leaves_out_the_admin_nouns():
    from kafkapy.cli import _command_word, _parser

    assert _command_word(["--log-level", "DEBUG", "serve", "--ephemeral"]) == "serve"
    assert _command_word(["topics", "create", "serve"]) == "topics"
    assert _parser(with_admin=False).parse_args(["serve", "--ephemeral"]).ephemeral
    assert _parser().parse_args(["topics", "list"]).admin_target == "topics:list_topics"


def test_progress_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    bar = Progress(4, "reset g", stream=screen, min_interval_s=0)
    for _ in range(4):
        bar.advance()
    bar.close()
    assert screen.getvalue().endswith("\rreset g [" + "#" * 30 + "] 4/4 100%\n")


def test_replica_assignment():
    from kafkapy.admin.topics import parse_replica_assignment

    assert parse_replica_assignment("1:2,2:3,3:1") == [[1, 2], [2, 3], [3, 1]]
    for bad in ("1:2,3", "1:1", "a:b", ""):
        with pytest.raises(CliError):
            parse_replica_assignment(bad)


def test_range_assignor_is_kafkas():
    from kafkapy.admin.membership import range_assign

    plan = range_assign({"c": ["t", "u"], "a": ["t"], "b": ["t", "u"]}, {"t": 7, "u": 2, "v": 3})
    assert plan == {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4], "u": [0]}, "c": {"t": [5, 6], "u": [1]}}
    assert range_assign({"a": ["t"], "b": ["t"]}, {"t": 1}) == {"a": {"t": [0]}, "b": {}}


def test_consumer_protocol_round_trip():
    from kafkapy.admin.membership import decode_subscription, encode_assignment, encode_subscription

    assert decode_subscription(encode_subscription(["orders", "events"])) == ["orders", "events"]
    assert decode_assignment(encode_assignment({"orders": [0, 2], "events": []})) == {"orders": [0, 2], "events": []}
    assert decode_subscription(b"\x00") == []
