"""Kafka's own command-line tools (bin/kafka-*.sh of Kafka 3.7 and 4.4) against kafkapy.

Each test runs one scenario's tool invocations in one JVM (kafka_jars.KafkaDist.run_tools) and
checks exit codes and the text a user reads, as Kafka's own brokers make the tools print it.
Issue 30: Kafka 3.7's tools died on kafkapy's first ApiVersions answer (a supported feature with a
minimum version of 0, which clients 3.3-3.8 reject), so every 3.7 test here failed before the fix.
"""
from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from conformance.kafka_apps.kafka_jars import KafkaDist, ToolRun

pytestmark = pytest.mark.timeout(240)

LINES = ["3.7", "4.4"]
PERF_RECORDS = 20_000


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    # kafka-acls needs an authorizer; allow.everyone keeps every other tool unaffected by it.
    return {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(params=LINES)
def dist(request) -> KafkaDist:
    return KafkaDist.get(request.param)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _expect(run: ToolRun, *texts: str) -> None:
    """The tool exited 0 and printed each of `texts` on stdout."""
    run.check()
    missing = [t for t in texts if t not in run.out]
    assert not missing, f"missing {missing} in the output of\n{run.describe()}"


def test_topics_configs_features(broker, dist: KafkaDist) -> None:
    """kafka-topics create/list/describe/alter/delete, kafka-configs on a topic and the brokers, kafka-features."""
    b = ("--bootstrap-server", broker.bootstrap)
    topic = _name("cli-topic")
    runs = dist.run_tools([
        ("topics", *b, "--create", "--topic", topic, "--partitions", "3"),
        ("topics", *b, "--list"),
        ("topics", *b, "--describe", "--topic", topic),
        ("topics", *b, "--alter", "--topic", topic, "--partitions", "5"),
        ("configs", *b, "--alter", "--entity-type", "topics", "--entity-name", topic,
         "--add-config", "retention.ms=3600000,cleanup.policy=compact"),
        ("configs", *b, "--describe", "--entity-type", "topics", "--entity-name", topic),
        ("topics", *b, "--describe", "--topic", topic),
        ("configs", *b, "--alter", "--entity-type", "topics", "--entity-name", topic, "--delete-config", "retention.ms"),
        ("configs", *b, "--describe", "--entity-type", "topics", "--entity-name", topic),
        ("configs", *b, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "log.cleaner.threads=2"),
        ("configs", *b, "--describe", "--entity-type", "brokers", "--entity-name", "1"),
        ("configs", *b, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--delete-config", "log.cleaner.threads"),
        ("configs", *b, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=7200000"),
        ("configs", *b, "--describe", "--entity-type", "brokers", "--entity-default"),
        ("configs", *b, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "log.retention.ms"),
        ("configs", *b, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"),
        ("features", *b, "describe"),
        ("topics", *b, "--delete", "--topic", topic),
        ("topics", *b, "--list"),
        ("topics", *b, "--describe", "--topic", topic),
    ])
    (create, listed, described, altered, cfg_add, cfg_topic, described_after, cfg_del, cfg_topic_after,
     broker_add, broker_desc, broker_del, default_add, default_desc, default_del, broker_all, features,
     delete, listed_after, described_gone) = runs
    _expect(create, f"Created topic {topic}.")
    _expect(listed)
    assert topic in listed.out.split(), listed.describe()
    _expect(described, f"Topic: {topic}\t", "PartitionCount: 3\tReplicationFactor: 1")
    assert len(re.findall(rf"\tTopic: {re.escape(topic)}\tPartition: \d+\tLeader: 1\tReplicas: 1\tIsr: 1",
                          described.out)) == 3, described.describe()
    altered.check()
    _expect(cfg_add, f"Completed updating config for topic {topic}.")
    _expect(cfg_topic, f"Dynamic configs for topic {topic} are:",
            "cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, "
            "DEFAULT_CONFIG:log.cleanup.policy=delete}",
            "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}")
    _expect(described_after, "PartitionCount: 5", "Configs: cleanup.policy=compact,retention.ms=3600000")
    _expect(cfg_del, f"Completed updating config for topic {topic}.")
    _expect(cfg_topic_after, "cleanup.policy=compact")
    assert "retention.ms" not in cfg_topic_after.out, cfg_topic_after.describe()
    _expect(broker_add, "Completed updating config for broker 1.")
    _expect(broker_desc, "Dynamic configs for broker 1 are:",
            "log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
            "DEFAULT_CONFIG:log.cleaner.threads=1}")
    _expect(broker_del, "Completed updating config for broker 1.")
    _expect(default_add, "Completed updating default config for brokers in the cluster.")
    _expect(default_desc, "Default configs for brokers in the cluster are:",
            "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}")
    _expect(default_del, "Completed updating default config for brokers in the cluster.")
    _expect(broker_all, "All configs for broker 1 are:", "num.partitions=1 sensitive=false",
            "log.cleaner.threads=1 sensitive=false synonyms={DEFAULT_CONFIG:log.cleaner.threads=1}")
    _expect(features, "Feature: metadata.version")
    assert "SupportedMinVersion: " in features.out and "FinalizedVersionLevel: " in features.out, features.describe()
    delete.check()
    assert topic not in listed_after.check().out.split(), listed_after.describe()
    assert described_gone.rc == 1 and f"Topic '{topic}' does not exist as expected" in (
        described_gone.out + described_gone.err), described_gone.describe()


def test_acls(broker, dist: KafkaDist) -> None:
    """kafka-acls add/list/remove on a topic and a group (AclAuthorizer on the broker)."""
    b = ("--bootstrap-server", broker.bootstrap)
    topic, group = _name("cli-acl-topic"), _name("cli-acl-group")
    principal = ("--allow-principal", "User:alice")
    runs = dist.run_tools([
        ("acls", *b, "--add", *principal, "--operation", "Read", "--operation", "Describe", "--topic", topic),
        ("acls", *b, "--add", *principal, "--operation", "Read", "--group", group),
        ("acls", *b, "--list", "--topic", topic),
        ("acls", *b, "--list", "--principal", "User:alice"),
        ("acls", *b, "--remove", "--force", *principal, "--operation", "Read", "--operation", "Describe", "--topic", topic),
        ("acls", *b, "--remove", "--force", "--group", group),
        ("acls", *b, "--list", "--topic", topic),
        ("acls", *b, "--list", "--principal", "User:alice"),
    ])
    add_topic, add_group, list_topic, list_principal, remove_topic, remove_group, list_after, principal_after = runs
    topic_pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    group_pattern = f"ResourcePattern(resourceType=GROUP, name={group}, patternType=LITERAL)"
    read = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    describe = "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)"
    _expect(add_topic, f"Adding ACLs for resource `{topic_pattern}`:", read, describe)
    _expect(add_group, f"Adding ACLs for resource `{group_pattern}`:", read)
    _expect(list_topic, f"Current ACLs for resource `{topic_pattern}`:", read, describe)
    assert group not in list_topic.out, list_topic.describe()
    _expect(list_principal, topic_pattern, group_pattern)
    remove_topic.check()
    remove_group.check()
    assert topic not in list_after.check().out, list_after.describe()
    assert topic not in principal_after.check().out and group not in principal_after.out, principal_after.describe()


def test_perf_tools_and_consumer_groups(broker, dist: KafkaDist) -> None:
    """Producer/consumer perf tools (a bounded run), then kafka-consumer-groups list/describe (lag)/reset/delete."""
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="!!! confluent-kafka not installed")
    b = ("--bootstrap-server", broker.bootstrap)
    topic, group = _name("cli-perf"), _name("cli-group")
    create, produce, consume = dist.run_tools([
        ("topics", *b, "--create", "--topic", topic, "--partitions", "2"),
        ("producer-perf-test", "--topic", topic, "--num-records", str(PERF_RECORDS), "--record-size", "100",
         "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=all"),
        ("consumer-perf-test", *b, "--topic", topic, "--messages", str(PERF_RECORDS), "--timeout", "30000"),
    ])
    create.check()
    _expect(produce, f"{PERF_RECORDS} records sent")
    consume.check()
    header, row = consume.out.strip().splitlines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")]))
    assert int(stats["data.consumed.in.nMsg"]) == PERF_RECORDS, consume.describe()

    # A group that committed part of each partition and is gone (Empty), as after a consumer closed.
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        ends = [consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)]
        committed = [end // 2 for end in ends]
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, committed[p]) for p in (0, 1)],
                        asynchronous=False)
    finally:
        consumer.close()
    assert sum(ends) == PERF_RECORDS

    runs = dist.run_tools([
        ("consumer-groups", *b, "--list"),
        ("consumer-groups", *b, "--describe", "--group", group),
        ("consumer-groups", *b, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"),
        ("consumer-groups", *b, "--describe", "--group", group, "--offsets"),
        ("consumer-groups", *b, "--describe", "--group", group, "--state"),
        ("consumer-groups", *b, "--delete", "--group", group),
        ("consumer-groups", *b, "--list"),
    ])
    listed, described, reset, described_after, state, deleted, listed_after = runs
    assert group in listed.check().out.split(), listed.describe()
    # Kafka prints this notice on stderr, above the table on stdout.
    assert f"Consumer group '{group}' has no active members." in described.err, described.describe()
    assert _offsets_table(described, group) == {
        (topic, p): (committed[p], ends[p], ends[p] - committed[p]) for p in (0, 1)}, described.describe()
    _expect(reset, "NEW-OFFSET")
    assert re.search(rf"{re.escape(group)}\s+{re.escape(topic)}\s+0\s+0\b", reset.out), reset.describe()
    assert _offsets_table(described_after, group) == {
        (topic, p): (0, ends[p], ends[p]) for p in (0, 1)}, described_after.describe()
    _expect(state, "Empty")
    _expect(deleted, f"Deletion of requested consumer groups ('{group}') was successful.")
    assert group not in listed_after.check().out.split(), listed_after.describe()


def _offsets_table(run: ToolRun, group: str) -> dict[tuple[str, int], tuple[int, int, int]]:
    """kafka-consumer-groups --describe's rows: (topic, partition) -> (current offset, log end, lag)."""
    run.check()
    header = next(line for line in run.out.splitlines() if line.startswith("GROUP"))
    columns = header.split()
    rows = {}
    for line in run.out.splitlines():
        fields = line.split()
        if len(fields) == len(columns) and fields[0] == group:
            row = dict(zip(columns, fields))
            rows[(row["TOPIC"], int(row["PARTITION"]))] = (
                int(row["CURRENT-OFFSET"]), int(row["LOG-END-OFFSET"]), int(row["LAG"]))
    return rows


def test_reassign_partitions(broker, dist: KafkaDist, tmp_path: Path) -> None:
    """kafka-reassign-partitions --generate, then --execute and --verify of the (same) assignment."""
    b = ("--bootstrap-server", broker.bootstrap)
    topic = _name("cli-reassign")
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [1], "log_dirs": ["any"]} for p in (0, 1)]}))
    create, generate, execute, verify = dist.run_tools([
        ("topics", *b, "--create", "--topic", topic, "--partitions", "2"),
        ("reassign-partitions", *b, "--generate", "--topics-to-move-json-file", str(move), "--broker-list", "1"),
        ("reassign-partitions", *b, "--execute", "--reassignment-json-file", str(plan)),
        ("reassign-partitions", *b, "--verify", "--reassignment-json-file", str(plan)),
    ])
    create.check()
    _expect(generate, "Current partition replica assignment", "Proposed partition reassignment configuration")
    proposed = json.loads(generate.out.split("Proposed partition reassignment configuration")[1].strip().splitlines()[0])
    assert sorted((p["topic"], p["partition"], p["replicas"]) for p in proposed["partitions"]) == [
        (topic, 0, [1]), (topic, 1, [1])], generate.describe()
    _expect(execute, "Successfully started partition reassignments")
    _expect(verify, "Status of partition reassignment:", f"Reassignment of partition {topic}-0 is completed.",
            f"Reassignment of partition {topic}-1 is completed.")


def test_share_groups(broker) -> None:
    """Kafka 4.4's kafka-share-groups lists and describes a share group that a share consumer read to the end."""
    dist = KafkaDist.get("4.4")
    b = ("--bootstrap-server", broker.bootstrap)
    topic, group = _name("cli-share"), _name("cli-share-group")
    runs = dist.run_tools([
        ("topics", *b, "--create", "--topic", topic, "--partitions", "1"),
        # A share group starts at the log end unless told otherwise (KIP-932), as in Kafka's quickstart.
        ("configs", *b, "--alter", "--entity-type", "groups", "--entity-name", group,
         "--add-config", "share.auto.offset.reset=earliest"),
        ("producer-perf-test", "--topic", topic, "--num-records", "100", "--record-size", "10",
         "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}"),
        ("share-consumer-perf-test", *b, "--topic", topic, "--group", group, "--messages", "100", "--timeout", "30000"),
        ("share-groups", *b, "--list"),
        ("share-groups", *b, "--describe", "--group", group),
        ("share-groups", *b, "--describe", "--group", group, "--state"),
    ])
    create, config, produce, consume, listed, described, state = runs
    create.check()
    _expect(config, f"Completed updating config for group {group}.")
    _expect(produce, "100 records sent")
    consume.check()
    header, row = consume.out.strip().splitlines()[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")]))
    assert int(stats["data.consumed.in.nMsg"]) == 100, consume.describe()
    assert group in listed.check().out.split(), listed.describe()
    _expect(described, "GROUP", "START-OFFSET")
    assert re.search(rf"^{re.escape(group)}\s+{re.escape(topic)}\s+0\s+100\s+0\s*$", described.out, re.M), \
        described.describe()
    assert re.search(rf"^{re.escape(group)}\s+{re.escape(broker.bootstrap)}\s+\(1\)\s+Empty\s+0\s*$", state.check().out,
                     re.M), state.describe()
