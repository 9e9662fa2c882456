"""The admin CLI (`kafkapy <noun> <verb>`) against a real kafkapy process, checked with kafka-python.

Most calls run main() in-process (fast); a few run `python -m kafkapy` as a subprocess to check
the real entry point, exit codes and that no traceback reaches stderr.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from conformance.broker_process import free_port
from kafkapy.cli import main

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


def _text_stream(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")


def cli(broker, *argv: str, stdin: bytes = b"") -> Result:
    """Run `kafkapy argv...` in this process against `broker`."""
    out, err, inp = _text_stream(), _text_stream(), _text_stream(stdin)
    saved = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr, sys.stdin = out, err, inp
    try:
        try:
            code = main([argv[0], *argv[1:], "--bootstrap-server", broker.bootstrap]
                        if broker is not None else list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out.flush()
        err.flush()
        return Result(code, out.buffer.getvalue().decode(), err.buffer.getvalue().decode())
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved


def cli_process(*argv: str, env: dict | None = None, stdin: bytes = b"") -> Result:
    done = subprocess.run([sys.executable, "-m", "kafkapy", *argv], input=stdin, capture_output=True, timeout=30,
                          env={**os.environ, **(env or {})})
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


def ok(result: Result) -> Result:
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    return result


def one_line_error(result: Result, code: int, *words: str) -> None:
    assert result.code == code, (result.code, result.out, result.err)
    assert "Traceback" not in result.err
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    for word in words:
        assert word in lines[0], lines[0]


@contextmanager
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        yield client
    finally:
        client.close()


# -- cluster and topics -------------------------------------------------------------------------

def test_cluster_describe(broker):
    table = ok(cli(broker, "cluster", "describe"))
    assert "Cluster ID:" in table.out and "BROKER" in table.out
    described = ok(cli(broker, "cluster", "describe", "--format", "json")).json()
    with admin(broker) as client:
        cluster = client.describe_cluster()
    assert described["cluster_id"] == cluster["cluster_id"]
    assert described["controller"] == cluster["controller_id"]
    assert [b["id"] for b in described["brokers"]] == sorted(b.get("node_id", b.get("broker_id")) for b in cluster["brokers"])


def test_topics_create_list_describe_alter_delete(broker, topic_name):
    created = ok(cli(broker, "topics", "create", "--topic", topic_name, "--partitions", "2",
                     "--replication-factor", "1", "--config", "retention.ms=123456"))
    assert created.out.strip() == f"Created topic {topic_name}."
    assert topic_name in ok(cli(broker, "topics", "list")).out.split()
    assert topic_name in ok(cli(broker, "topics", "list", "--format", "json")).json()
    described = ok(cli(broker, "topics", "describe", topic_name, "--format", "json")).json()
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1]
    with admin(broker) as client:
        seen = client.describe_topics([topic_name])[0]
    assert sorted(p["partition_index"] for p in seen["partitions"]) == [0, 1]
    assert {p["partition_index"]: p["leader_id"] for p in seen["partitions"]} == {
        p["partition"]: p["leader"] for p in described[0]["partitions"]}
    table = ok(cli(broker, "topics", "describe", "--topic", topic_name)).out.splitlines()
    assert table[0].split() == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
    assert len(table) == 3
    # alter: more partitions, a config
    ok(cli(broker, "topics", "alter", topic_name, "--partitions", "4"))
    ok(cli(broker, "topics", "alter", topic_name, "--config", "cleanup.policy=compact"))
    described = ok(cli(broker, "topics", "describe", topic_name, "--format", "json")).json()
    assert described[0]["partition_count"] == 4
    configs = {c["name"]: c for c in ok(cli(broker, "configs", "describe", "--topic", topic_name,
                                             "--format", "json")).json()}
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["retention.ms"]["value"] == "123456"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    # a smaller count is Kafka's INVALID_PARTITIONS
    one_line_error(cli(broker, "topics", "alter", topic_name, "--partitions", "1"), 1, "INVALID_PARTITIONS")
    # create again: TOPIC_ALREADY_EXISTS, unless --if-not-exists
    one_line_error(cli(broker, "topics", "create", topic_name), 1, "TOPIC_ALREADY_EXISTS")
    ok(cli(broker, "topics", "create", topic_name, "--if-not-exists"))
    assert ok(cli(broker, "topics", "delete", topic_name)).out.strip() == f"Deleted topic {topic_name}."
    with admin(broker) as client:
        assert topic_name not in client.list_topics()
    one_line_error(cli(broker, "topics", "delete", topic_name), 1, "UNKNOWN_TOPIC_OR_PARTITION")
    ok(cli(broker, "topics", "delete", topic_name, "--if-exists"))


def test_topics_bad_input(broker, topic_name):
    one_line_error(cli(broker, "topics", "describe", "no-such-topic"), 1, "'no-such-topic' does not exist",
                   "UNKNOWN_TOPIC_OR_PARTITION", "kafkapy topics list")
    one_line_error(cli(broker, "topics", "create", topic_name, "--partitions", "x"), 2, "invalid int value")
    one_line_error(cli(broker, "topics", "create", topic_name, "--no-such-flag"), 2, "--no-such-flag")
    one_line_error(cli(broker, "topics", "create", topic_name, "--config", "retention.ms=abc"), 1, "INVALID_CONFIG")
    one_line_error(cli(broker, "topics", "create", "bad/name"), 1, "INVALID_TOPIC_EXCEPTION")
    one_line_error(cli(broker, "topics", "delete"), 2, "which topics")
    one_line_error(cli(broker, "groups", "delete-offsets", "--group", "g", "--topic", "t:x"), 2, "TOPIC:P")


# -- configs ------------------------------------------------------------------------------------

def test_configs_describe_and_alter(broker, topic_name):
    ok(cli(broker, "topics", "create", topic_name, "--partitions", "1"))
    ok(cli(broker, "configs", "alter", "--entity-type", "topics", "--entity-name", topic_name,
           "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]"))
    configs = {c["name"]: c["value"] for c in ok(cli(broker, "configs", "describe", "--entity-type", "topics",
                                                     "--entity-name", topic_name, "--format", "json")).json()}
    assert configs == {"retention.ms": "5000", "cleanup.policy": "compact,delete"}
    ok(cli(broker, "configs", "alter", "--topic", topic_name, "--delete-config", "retention.ms"))
    table = ok(cli(broker, "configs", "describe", "--topic", topic_name)).out.splitlines()
    assert table[0].split() == ["NAME", "VALUE", "SOURCE"]
    assert [line.split()[0] for line in table[1:]] == ["cleanup.policy"]
    everything = ok(cli(broker, "configs", "describe", "--topic", topic_name, "--all", "--format", "json")).json()
    assert {"retention.ms", "segment.bytes"} <= {c["name"] for c in everything}
    brokers = ok(cli(broker, "configs", "describe", "--broker", "1", "--all", "--format", "json")).json()
    assert any(c["name"] == "num.partitions" for c in brokers)
    one_line_error(cli(broker, "configs", "alter", "--topic", topic_name, "--add-config", "retention.ms=abc"),
                   1, "INVALID_CONFIG")
    one_line_error(cli(broker, "configs", "describe", "--topic", "no-such-topic"), 1, "UNKNOWN_TOPIC_OR_PARTITION")
    one_line_error(cli(broker, "configs", "describe"), 2, "--topic")
    one_line_error(cli(broker, "configs", "alter", "--topic", topic_name), 2, "--add-config")


# -- produce and consume ------------------------------------------------------------------------

def test_produce_consume_round_trip(broker, topic_name):
    ok(cli(broker, "topics", "create", topic_name, "--partitions", "3"))
    lines = b"".join(b"key%d:value%d\n" % (i, i) for i in range(30))
    ok(cli(broker, "produce", "-t", topic_name, "-K", ":", "-H", "h1=a", "-H", "h2=b", "--timestamp", "1700000000000",
           "-z", "gzip", stdin=lines))
    ok(cli(broker, "produce", "-t", topic_name, "-p", "1", "--timestamp", "1800000000000", stdin=b"late\n"))
    # what kafka-python sees: the same keys, values, headers, timestamps; keys on the Java client's partitions
    consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000)
    seen = list(consumer)
    consumer.close()
    assert len(seen) == 31
    from kafka.partitioner.default import murmur2

    for record in seen:
        if record.key is None:
            assert (record.value, record.partition, record.timestamp) == (b"late", 1, 1800000000000)
            continue
        assert record.value == record.key.replace(b"key", b"value")
        assert record.headers == [("h1", b"a"), ("h2", b"b")]
        assert record.timestamp == 1700000000000
        assert record.partition == (murmur2(record.key) & 0x7FFFFFFF) % 3  # the Java client's partition
    by_offset = {(r.partition, r.offset): r for r in seen}
    # kcat's format tokens
    out = ok(cli(broker, "consume", "-t", topic_name, "-e", "-f", "%t|%p|%o|%k|%s|%h|%T|%S|%K\\n")).out
    rows = [line.split("|") for line in out.splitlines()]
    assert len(rows) == 31
    for topic, p, o, k, s, h, ts, size, key_size in rows:
        record = by_offset[(int(p), int(o))]
        assert topic == topic_name and s == record.value.decode() and int(ts) == record.timestamp
        assert k == (record.key or b"").decode() and int(size) == len(record.value)
        assert int(key_size) == (-1 if record.key is None else len(record.key))
        assert h == ("h1=a,h2=b" if record.key else "")
    # JSON envelope (kcat -J)
    envelopes = [json.loads(line) for line in ok(cli(broker, "consume", "-t", topic_name, "-e", "-J")).out.splitlines()]
    assert len(envelopes) == 31
    first = next(e for e in envelopes if e["key"] == "key0")
    assert first["headers"] == ["h1", "a", "h2", "b"] and first["payload"] == "value0" and first["tstype"] == "create"
    # the default: values, one per line; -K prints keys
    values = ok(cli(broker, "consume", "-t", topic_name, "-e")).out.splitlines()
    assert sorted(values) == sorted(r.value.decode() for r in seen)
    keyed = ok(cli(broker, "consume", "-t", topic_name, "-p", "1", "-e", "-K", "=")).out.splitlines()
    assert "=late" in keyed
    # -c, -o end / -N / absolute / s@ts / e@ts
    assert len(ok(cli(broker, "consume", "-t", topic_name, "-c", "5")).out.splitlines()) == 5
    assert ok(cli(broker, "consume", "-t", topic_name, "-o", "end", "-e")).out == ""
    last_two = ok(cli(broker, "consume", "-t", topic_name, "-p", "1", "-o", "-2", "-e", "-f", "%o\\n")).out.split()
    end1 = max(o for p, o in by_offset if p == 1) + 1
    assert last_two == [str(end1 - 2), str(end1 - 1)]
    assert ok(cli(broker, "consume", "-t", topic_name, "-p", "1", "-o", str(end1 - 1), "-e")).out == "late\n"
    assert ok(cli(broker, "consume", "-t", topic_name, "-o", "s@1750000000000", "-e")).out == "late\n"
    before = ok(cli(broker, "consume", "-t", topic_name, "-o", "e@1750000000000", "-e")).out.splitlines()
    assert len(before) == 30 and "late" not in before


def test_consume_with_group_commits_positions(broker, topic_name):
    ok(cli(broker, "topics", "create", topic_name, "--partitions", "1"))
    ok(cli(broker, "produce", "-t", topic_name, stdin=b"a\nb\nc\n"))
    group = f"{topic_name}-g"
    assert ok(cli(broker, "consume", "-t", topic_name, "-G", group, "-c", "2")).out == "a\nb\n"
    assert ok(cli(broker, "consume", "-t", topic_name, "-G", group, "-e")).out == "c\n"
    rows = ok(cli(broker, "groups", "describe", group, "--format", "json")).json()[0]["partitions"]
    assert [(r["current_offset"], r["lag"]) for r in rows] == [(3, 0)]


def test_consume_group_member_shares_partitions(broker, topic_name):
    import threading

    ok(cli(broker, "topics", "create", topic_name, "--partitions", "4"))
    for p in range(4):
        ok(cli(broker, "produce", "-t", topic_name, "-p", str(p), stdin=b"".join(b"p%d-%d\n" % (p, i) for i in range(5))))
    group = f"{topic_name}-g"
    other = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group, client_id="other",
                          enable_auto_commit=False, heartbeat_interval_ms=300, session_timeout_ms=10000)
    stop = threading.Event()
    polled: list = []

    def keep_polling():
        while not stop.is_set():
            for records in other.poll(100).values():
                polled.extend(records)

    while not other.assignment():
        other.poll(100)
    other.pause(*other.assignment())  # a member that holds its partitions without reading them
    poller = threading.Thread(target=keep_polling, daemon=True)
    poller.start()
    try:
        out = ok(cli(broker, "consume", "-t", topic_name, "-G", group, "-e", "-f", "%p %s\n")).out.splitlines()
    finally:
        stop.set()
        poller.join(10)
        other.close()
    mine = sorted({int(line.split()[0]) for line in out})
    assert len(mine) == 2 and len(out) == 10  # range: two of the four partitions each
    assert sorted(line.split()[1] for line in out) == sorted(f"p{p}-{i}" for p in mine for i in range(5))
    committed = _committed(broker, group, topic_name, 4)
    assert {p: committed[p] for p in mine} == {p: 5 for p in mine}


def test_consume_read_committed(broker, topic_name):
    from confluent_kafka import Producer

    ok(cli(broker, "topics", "create", topic_name, "--partitions", "1"))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-tx"})
    producer.init_transactions(20)
    for values, commit in ((["c1", "c2"], True), (["a1", "a2"], False), (["c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic_name, value.encode(), partition=0)
        producer.flush(10)
        producer.commit_transaction(20) if commit else producer.abort_transaction(20)
    del producer
    ok(cli(broker, "produce", "-t", topic_name, stdin=b"plain\n"))  # outside any transaction
    committed = ok(cli(broker, "consume", "-t", topic_name, "-e", "--isolation-level", "read_committed")).out
    assert committed.split() == ["c1", "c2", "c3", "plain"]
    everything = ok(cli(broker, "consume", "-t", topic_name, "-e")).out
    assert everything.split() == ["c1", "c2", "a1", "a2", "c3", "plain"]


def test_produce_consume_bad_input(broker, topic_name):
    one_line_error(cli(broker, "produce", "-t", "no-such-topic", stdin=b"x\n"), 1, "UNKNOWN_TOPIC_OR_PARTITION")
    one_line_error(cli(broker, "consume", "-t", "no-such-topic", "-e"), 1, "UNKNOWN_TOPIC_OR_PARTITION")
    ok(cli(broker, "topics", "create", topic_name, "--partitions", "1"))
    one_line_error(cli(broker, "consume", "-t", topic_name, "-o", "yesterday"), 2, "bad offset")
    one_line_error(cli(broker, "produce", "-t", topic_name, "-z", "brotli", stdin=b"x\n"), 2, "--compression")
    one_line_error(cli(broker, "produce", "-t", topic_name, "-p", "7", stdin=b"x\n"), 1, "partition 7")
    one_line_error(cli(broker, "produce", "-t", topic_name, "-H", "novalue", stdin=b"x\n"), 2, "NAME=VALUE")


# -- groups -------------------------------------------------------------------------------------

def _committed(broker, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


def test_groups_describe_reset_delete(broker, topic_name, tmp_path):
    ok(cli(broker, "topics", "create", topic_name, "--partitions", "2"))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(20):
        producer.send(topic_name, value=b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    group = f"{topic_name}-g"
    committer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    committer.commit({TopicPartition(topic_name, 0): OffsetAndMetadata(4, "", -1),
                      TopicPartition(topic_name, 1): OffsetAndMetadata(7, "", -1)})  # before anyone joins
    committer.close()
    consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group, client_id="cli-test",
                             enable_auto_commit=False, session_timeout_ms=30000, heartbeat_interval_ms=1000)
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(200)
    try:
        table = ok(cli(broker, "groups", "describe", group)).out.strip().splitlines()
        assert table[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                    "CONSUMER-ID", "HOST", "CLIENT-ID"]
        rows = ok(cli(broker, "groups", "describe", "--group", group, "--format", "json")).json()[0]
        assert rows["state"] == "Stable"
        lag = {r["partition"]: (r["current_offset"], r["log_end_offset"], r["lag"], r["client_id"])
               for r in rows["partitions"]}
        assert lag == {0: (4, 10, 6, "cli-test"), 1: (7, 10, 3, "cli-test")}
        assert all(r["consumer_id"] for r in rows["partitions"])
        members = ok(cli(broker, "groups", "describe", group, "--members", "--verbose", "--format", "json")).json()
        assert members[0]["members"][0]["partitions"] == 2
        assert members[0]["members"][0]["assignment"] == {topic_name: [0, 1]}
        state = ok(cli(broker, "groups", "describe", group, "--state")).out
        assert "Stable" in state and "#MEMBERS" in state
        listed = ok(cli(broker, "groups", "list", "--format", "json")).json()
        assert {"group": group, "protocol_type": "consumer", "state": "Stable", "type": "classic"} in listed
        assert group in ok(cli(broker, "groups", "list")).out.split()
        every = ok(cli(broker, "groups", "describe", "--all-groups", "--format", "json")).json()
        assert group in {g["group"] for g in every}
        # an active group's offsets stay as they are (Kafka's rule)
        one_line_error(cli(broker, "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute"),
                       1, "inactive", "Stable")
        one_line_error(cli(broker, "groups", "delete", group), 1, "NON_EMPTY_GROUP")
    finally:
        consumer.close()
    # a preview changes nothing
    preview = ok(cli(broker, "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--format", "json"))
    assert [(r["partition"], r["new_offset"]) for r in preview.json()] == [(0, 0), (1, 0)]
    assert _committed(broker, group, topic_name, 2) == {0: 4, 1: 7}
    table = ok(cli(broker, "groups", "reset-offsets", group, "--topic", topic_name, "--shift-by", "-2")).out
    assert table.split()[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert _committed(broker, group, topic_name, 2) == {0: 4, 1: 7}
    # --execute does
    ok(cli(broker, "groups", "reset-offsets", group, "--topic", f"{topic_name}:1", "--to-offset", "2", "--execute"))
    assert _committed(broker, group, topic_name, 2) == {0: 4, 1: 2}
    ok(cli(broker, "groups", "reset-offsets", group, "--all-topics", "--to-latest", "--execute"))
    assert _committed(broker, group, topic_name, 2) == {0: 10, 1: 10}
    ok(cli(broker, "groups", "reset-offsets", group, "--all-topics", "--by-duration", "PT1H", "--execute"))
    assert _committed(broker, group, topic_name, 2) == {0: 0, 1: 0}
    ok(cli(broker, "groups", "reset-offsets", group, "--all-topics", "--to-datetime", "2100-01-01T00:00:00.000",
           "--execute"))
    assert _committed(broker, group, topic_name, 2) == {0: 10, 1: 10}
    # --export writes Kafka's CSV plan, --from-file applies it
    plan = ok(cli(broker, "groups", "reset-offsets", group, "--all-topics", "--shift-by", "-3", "--export")).out
    assert plan.splitlines() == [f"{topic_name},0,7", f"{topic_name},1,7"]
    plan_file = tmp_path / "plan.csv"
    plan_file.write_text(plan.replace(f"{topic_name},1,7", f"{topic_name},1,5"))
    ok(cli(broker, "groups", "reset-offsets", group, "--from-file", str(plan_file), "--execute"))
    assert _committed(broker, group, topic_name, 2) == {0: 7, 1: 5}
    one_line_error(cli(broker, "groups", "reset-offsets", group, "--from-file", str(tmp_path / "none.csv")), 2,
                   "cannot read")
    one_line_error(cli(broker, "groups", "reset-offsets", group, "--all-topics"), 2, "--to-earliest")
    one_line_error(cli(broker, "groups", "reset-offsets", group, "--all-topics", "--by-duration", "1h"), 2,
                   "bad duration")
    # delete-offsets, then delete the group
    deleted = ok(cli(broker, "groups", "delete-offsets", "--group", group, "--topic", f"{topic_name}:0",
                     "--format", "json")).json()
    assert deleted == [{"topic": topic_name, "partition": 0, "status": "Successful"}]
    assert _committed(broker, group, topic_name, 2) == {0: None, 1: 5}
    assert ok(cli(broker, "groups", "delete", group)).out.strip() == f"Deleted consumer group '{group}'."
    one_line_error(cli(broker, "groups", "describe", group), 1, "GROUP_ID_NOT_FOUND", "kafkapy groups list")


# -- acls ---------------------------------------------------------------------------------------

def test_acls_without_authorizer(broker):
    one_line_error(cli(broker, "acls", "list"), 1, "SECURITY_DISABLED")


def test_acls_list_create_delete(broker_factory):
    secured = broker_factory({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                              "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "true"})
    created = ok(cli(secured, "acls", "create", "--allow-principal", "User:alice", "--operation", "read",
                     "--operation", "describe", "--topic", "orders", "--format", "json")).json()
    assert {r["operation"] for r in created} == {"READ", "DESCRIBE"}
    listed = ok(cli(secured, "acls", "list", "--format", "json")).json()
    assert sorted((r["resource_type"], r["name"], r["principal"], r["operation"], r["permission"]) for r in listed) \
        == [("TOPIC", "orders", "User:alice", "DESCRIBE", "ALLOW"), ("TOPIC", "orders", "User:alice", "READ", "ALLOW")]
    table = ok(cli(secured, "acls", "list", "--topic", "orders")).out.splitlines()
    assert table[0].split()[0] == "RESOURCE-TYPE" and len(table) == 3
    ok(cli(secured, "acls", "create", "--deny-principal", "User:bob", "--group", "g", "--operation", "read"))
    deleted = ok(cli(secured, "acls", "delete", "--topic", "orders", "--format", "json")).json()
    assert len(deleted) == 2
    remaining = ok(cli(secured, "acls", "list", "--format", "json")).json()
    assert [(r["resource_type"], r["principal"], r["permission"]) for r in remaining] == [("GROUP", "User:bob", "DENY")]
    one_line_error(cli(secured, "acls", "create", "--topic", "t"), 2, "--allow-principal")
    one_line_error(cli(secured, "acls", "create", "--allow-principal", "alice", "--topic", "t"), 2, "TYPE:NAME")
    one_line_error(cli(secured, "acls", "create", "--allow-principal", "User:a", "--topic", "t", "--operation", "fly"),
                   2, "unknown operation")


# -- SASL through --command-config ---------------------------------------------------------------

def test_sasl_plain_command_config(tmp_path):
    from conformance.broker_process import start_broker

    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    secured = start_broker({
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="alice-pw" user_alice="alice-pw";'},
        work_dir=tmp_path, port=ports["PLAINTEXT"])
    try:
        good = tmp_path / "client.properties"
        good.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                        'username="alice" password="alice-pw";\n')
        bad = tmp_path / "bad.properties"
        bad.write_text("security.protocol=SASL_PLAINTEXT\nsasl.username=alice\nsasl.password=wrong-pw\n")
        address = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
        ok(cli(None, "topics", "create", "sasl-topic", "--partitions", "1", "-b", address, "--command-config",
               str(good)))
        ok(cli(None, "produce", "-t", "sasl-topic", "-b", address, "--command-config", str(good), stdin=b"x\n"))
        assert ok(cli(None, "consume", "-t", "sasl-topic", "-e", "-b", address, "--command-config",
                      str(good))).out == "x\n"
        failed = cli(None, "topics", "list", "-b", address, "--command-config", str(bad))
        one_line_error(failed, 1, "authentication as alice failed", "SASL_AUTHENTICATION_FAILED")
        assert "wrong-pw" not in failed.err
    finally:
        secured.close()


# -- the real entry point -----------------------------------------------------------------------

def test_unreachable_broker_subprocess():
    port = free_port()
    result = cli_process("topics", "list", "--bootstrap-server", f"127.0.0.1:{port}")
    one_line_error(result, 3, f"cannot reach 127.0.0.1:{port}", "connection refused", "KAFKAPY_BOOTSTRAP")


def test_bootstrap_from_environment_subprocess(broker, topic_name):
    ok(cli(broker, "topics", "create", topic_name, "--partitions", "1"))
    env = {"KAFKAPY_BOOTSTRAP": broker.bootstrap, "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    ok(cli_process("produce", "-t", topic_name, env=env, stdin=b"one\ntwo\n"))
    env = {"KAFKAPY_BOOTSTRAP": "", "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap}
    assert ok(cli_process("consume", "-t", topic_name, "-e", env=env)).out == "one\ntwo\n"


def test_bad_flag_and_serve_still_parse():
    one_line_error(cli(None, "topics", "list", "--frobnicate"), 2, "unrecognized arguments: --frobnicate")
    one_line_error(cli(None, "groups"), 2, "VERB")
    one_line_error(cli(None, "consume"), 2, "--topic")
    result = cli(None, "cluster", "--brokers", "0")  # the dev cluster launcher keeps its flags
    one_line_error(result, 2, "--brokers")
    debug = cli(None, "topics", "list", "-b", f"127.0.0.1:{free_port()}", "--debug")
    assert debug.code == 3 and "Traceback" in debug.err and debug.err.rstrip().splitlines()[-1].startswith("error:")


# -- an old broker: every API capped at the versions Kafka 1.1 spoke -------------------------------

KAFKA_1_1 = {0: 5, 1: 7, 2: 2, 3: 5, 8: 3, 9: 3, 10: 1, 11: 2, 12: 1, 13: 1, 14: 1, 15: 1, 16: 1, 17: 1, 18: 1,
             19: 2, 20: 1, 29: 0, 30: 0, 31: 0, 32: 1, 33: 0, 37: 0, 42: 0}


def test_old_broker_versions(broker, topic_name, monkeypatch):
    from kafkapy.admin import client as admin_client

    real = admin_client.Connection._api_versions

    def capped(self):
        real(self)
        self.versions = {k: (lo, min(hi, KAFKA_1_1[k])) for k, (lo, hi) in self.versions.items() if k in KAFKA_1_1}

    monkeypatch.setattr(admin_client.Connection, "_api_versions", capped)
    ok(cli(broker, "topics", "create", topic_name, "--partitions", "2"))  # CreateTopics v2 (counts required)
    assert ok(cli(broker, "topics", "describe", topic_name, "--format", "json")).json()[0]["partition_count"] == 2
    ok(cli(broker, "topics", "alter", topic_name, "--config", "retention.ms=7777"))  # AlterConfigs (no incremental)
    configs = {c["name"]: c["value"] for c in ok(cli(broker, "configs", "describe", "--topic", topic_name,
                                                     "--format", "json")).json()}
    assert configs["retention.ms"] == "7777"
    ok(cli(broker, "produce", "-t", topic_name, "-p", "0", "-K", ":", stdin=b"a:1\nb:2\n"))  # Produce v5
    assert ok(cli(broker, "consume", "-t", topic_name, "-e", "-K", ":")).out == "a:1\nb:2\n"  # Fetch v7
    group = f"{topic_name}-g"
    ok(cli(broker, "consume", "-t", topic_name, "-G", group, "-c", "1"))  # FindCoordinator v1, OffsetCommit v3
    rows = ok(cli(broker, "groups", "describe", group, "--format", "json")).json()[0]["partitions"]
    assert [(r["partition"], r["current_offset"], r["lag"]) for r in rows] == [(0, 1, 1), (1, 0, 0)]  # OffsetFetch v3
    assert "Empty" in ok(cli(broker, "groups", "list", "--state")).out  # ListGroups v1: states from DescribeGroups
    described = ok(cli(broker, "cluster", "describe", "--format", "json")).json()  # Metadata, no DescribeCluster
    assert described["controller"] >= 0 and described["brokers"]
    ok(cli(broker, "topics", "delete", topic_name))  # DeleteTopics v1


# -- three brokers: requests go to leaders, coordinators and the controller ------------------------

def test_three_broker_cluster_routing():
    from kafkapy.testing import KafkaCluster

    with KafkaCluster(3, **{"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
                            "group.initial.rebalance.delay.ms": "0"}) as cluster:
        described = ok(cli(None, "cluster", "describe", "--format", "json", "-b", cluster.bootstrap_servers)).json()
        assert [b["id"] for b in described["brokers"]] == [1, 2, 3]
        # bootstrap from a broker that is not the controller: topic admin still reaches the controller
        other = next(b for b in described["brokers"] if b["id"] != described["controller"])
        address = f"{other['host']}:{other['port']}"
        ok(cli(None, "topics", "create", "spread", "--partitions", "6", "--replication-factor", "3", "-b", address))
        topic = ok(cli(None, "topics", "describe", "spread", "--format", "json", "-b", address)).json()[0]
        assert {p["leader"] for p in topic["partitions"]} == {1, 2, 3}
        assert all(len(p["replicas"]) == 3 for p in topic["partitions"])
        lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(60))
        ok(cli(None, "produce", "-t", "spread", "-K", ":", "-b", address, stdin=lines))
        values = ok(cli(None, "consume", "-t", "spread", "-e", "-b", address)).out.split()
        assert sorted(values) == sorted(f"v{i}" for i in range(60))
        ok(cli(None, "consume", "-t", "spread", "-G", "spread-g", "-c", "60", "-b", address))
        rows = ok(cli(None, "groups", "describe", "spread-g", "--format", "json", "-b", address)).json()[0]
        assert len(rows["partitions"]) == 6 and all(r["lag"] == 0 for r in rows["partitions"])
        assert sum(r["log_end_offset"] for r in rows["partitions"]) == 60
        brokers = ok(cli(None, "configs", "describe", "--broker", "3", "--all", "--format", "json", "-b", address))
        assert {"broker.id": "3"}.items() <= {c["name"]: c["value"] for c in brokers.json()}.items()
        ok(cli(None, "topics", "delete", "spread", "-b", address))
        ok(cli(None, "topics", "create", "placed", "--replica-assignment", "3:1,2:3", "-b", address))
        placed = ok(cli(None, "topics", "describe", "placed", "--format", "json", "-b", address)).json()[0]
        assert [p["replicas"] for p in placed["partitions"]] == [[3, 1], [2, 3]]
        assert [p["leader"] for p in placed["partitions"]] == [3, 2]
