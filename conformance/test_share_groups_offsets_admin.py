"""The share-group offsets admin API (AlterShareGroupOffsets, DescribeShareGroupOffsets,
DeleteShareGroupOffsets; KIP-932) on share groups without members: one no member ever joined and
one whose only member left, as franz-go's share-group admin test and kafka-share-groups.sh use them.

What Apache Kafka 4.4.0 (KRaft, single node) answered, observed with this module's `observe`
(the same requests, sent with kafkapy's wire client) and written into EXPECTED:

- a group that never existed: DescribeShareGroupOffsets of named partitions is NONE with start
  offset -1 and lag -1 each; of all topics (Topics null) NONE with no topics;
  DeleteShareGroupOffsets GROUP_ID_NOT_FOUND (69) "Group <id> not found.";
  AlterShareGroupOffsets NONE (0) per partition: the group is created, Empty, type share (ListGroups).
  Describe then shows the altered partition's start offset and its lag (high watermark - start);
  describe of all topics lists only the partitions the group has state for.
- DeleteShareGroupOffsets then NONE, and describe shows start offset -1 again, no topics for all;
  deleting that topic once more: the topic's error UNKNOWN_TOPIC_OR_PARTITION (3) "There is no
  offset information to delete."
- a group whose member joined (subscribed to the topic) and left: describe of all topics lists
  every partition that was assigned (start offset -1; Kafka initializes them asynchronously after
  the join heartbeat, so the test waits until they are listed before the member leaves); alter,
  describe, delete as above.
- a group with a member: AlterShareGroupOffsets and DeleteShareGroupOffsets NON_EMPTY_GROUP (68)
  "The group is not empty." at the top level, with no per-topic results.

kafkapy answered GROUP_ID_NOT_FOUND to the alter of a group never joined (and to describe of all
topics), and NON_EMPTY_GROUP with per-partition results and another message. The differential
test runs `observe` against Kafka 4.4.0 too (skipped without Java/Maven, failing then under
KAFKAPY_REQUIRE_JAVA=1), so a change in Kafka's answers shows up here.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient as ConfluentAdmin  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from kafkapy.admin.client import AdminClient  # noqa: E402
from kafkapy.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest as Alter  # noqa: E402
from kafkapy.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest as Delete  # noqa: E402
from kafkapy.protocol.messages.describe_share_group_offsets import \
    DescribeShareGroupOffsetsRequest as Describe  # noqa: E402
from kafkapy.protocol.messages.list_groups import ListGroupsRequest  # noqa: E402
from kafkapy.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest  # noqa: E402

pytestmark = pytest.mark.timeout(90)

REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
REFERENCE = "kafka-4.4.0-kraft"
RECORDS = 5   # produced to partition 0 of the topic (2 partitions)

NOT_EMPTY = {"error": 68, "message": "The group is not empty."}
NO_OFFSETS = "There is no offset information to delete."
UNSET = [[0, -1, -1, 0], [1, -1, -1, 0]]      # [partition, start offset, lag, error]

# What Kafka 4.4.0 answered (see the module docstring); "T" is the topic, "G" the group.
EXPECTED = {
    "never.describe": {"error": 0, "topics": {"T": UNSET}},
    "never.describe_all": {"error": 0, "topics": {}},
    "never.delete": {"error": 69, "message": "Group G not found.", "topics": {}},
    "never.alter": {"error": 0, "message": None, "partitions": {"T": [[0, 0]]}},
    "never.list_groups": [["G", "Empty", "share", "share"]],
    "never.describe_after_alter": {"error": 0, "topics": {"T": [[0, 2, 3, 0], [1, -1, -1, 0]]}},
    "never.describe_all_after_alter": {"error": 0, "topics": {"T": [[0, 2, 3, 0]]}},
    "never.delete_after_alter": {"error": 0, "message": None, "topics": {"T": [0, None]}},
    "never.describe_after_delete": {"error": 0, "topics": {"T": UNSET}},
    "never.describe_all_after_delete": {"error": 0, "topics": {}},
    "never.delete_again": {"error": 0, "message": None, "topics": {"T": [3, NO_OFFSETS]}},
    "left.join_leave": [0, 0],
    "left.describe_all": {"error": 0, "topics": {"T": UNSET}},
    "left.alter": {"error": 0, "message": None, "partitions": {"T": [[0, 0]]}},
    "left.describe_after_alter": {"error": 0, "topics": {"T": [[0, 3, 2, 0], [1, -1, -1, 0]]}},
    "left.describe_all_after_alter": {"error": 0, "topics": {"T": [[0, 3, 2, 0], [1, -1, -1, 0]]}},
    "left.delete": {"error": 0, "message": None, "topics": {"T": [0, None]}},
    "left.describe_all_after_delete": {"error": 0, "topics": {}},
    "live.alter": {**NOT_EMPTY, "partitions": {}},
    "live.delete": {**NOT_EMPTY, "topics": {}},
}


def observe(bootstrap: str) -> dict:
    """Run the scenarios against the broker at `bootstrap`; answers with names made generic."""
    topic = f"share-admin-{uuid.uuid4().hex[:8]}"
    admin = ConfluentAdmin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(RECORDS):
        producer.produce(topic, b"x", partition=0)
    assert producer.flush(15) == 0
    names: dict[str, str] = {topic: "T"}

    def generic(text):
        for name, alias in names.items():
            text = text.replace(name, alias) if isinstance(text, str) else text
        return text

    out: dict = {}
    with AdminClient(bootstrap, timeout_s=20) as client:
        def coordinator(group: str):
            return client.node(client.coordinator(group))

        def alter(group: str, start: int) -> dict:
            r = coordinator(group).send(Alter(group_id=group, topics=[Alter.AlterShareGroupOffsetsRequestTopic(
                topic, [Alter.AlterShareGroupOffsetsRequestPartition(0, start)])]), 0)
            return {"error": r.error_code, "message": generic(r.error_message),
                    "partitions": {generic(t.topic_name): [[p.partition_index, p.error_code] for p in t.partitions]
                                   for t in r.responses}}

        def describe(group: str, every_topic: bool = False) -> dict:
            conn = coordinator(group)
            topics = None if every_topic else [Describe.DescribeShareGroupOffsetsRequestTopic(topic, [0, 1])]
            r = conn.send(Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(group, topics)]),
                          min(conn.version_for(Describe), 1))
            g = r.groups[0]
            return {"error": g.error_code,
                    "topics": {generic(t.topic_name): [[p.partition_index, p.start_offset, p.lag, p.error_code]
                                                       for p in t.partitions] for t in g.topics}}

        def delete(group: str) -> dict:
            r = coordinator(group).send(Delete(group_id=group, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(
                topic)]), 0)
            return {"error": r.error_code, "message": generic(r.error_message),
                    "topics": {generic(t.topic_name): [t.error_code, t.error_message] for t in r.responses}}

        def listed(group: str) -> list:
            conn = coordinator(group)
            r = conn.send(ListGroupsRequest(states_filter=[], types_filter=[]), conn.version_for(ListGroupsRequest))
            return [[generic(g.group_id), g.group_state, g.group_type, g.protocol_type]
                    for g in r.groups if g.group_id == group]

        def heartbeat(group: str, member: str, epoch: int):
            return coordinator(group).send(ShareGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=epoch,
                subscribed_topic_names=[topic] if epoch == 0 else None), 1)

        never = f"never-{uuid.uuid4().hex[:8]}"
        names[never] = "G"
        out["never.describe"] = describe(never)
        out["never.describe_all"] = describe(never, True)
        out["never.delete"] = delete(never)
        out["never.alter"] = alter(never, 2)
        out["never.list_groups"] = listed(never)
        out["never.describe_after_alter"] = describe(never)
        out["never.describe_all_after_alter"] = describe(never, True)
        out["never.delete_after_alter"] = delete(never)
        out["never.describe_after_delete"] = describe(never)
        out["never.describe_all_after_delete"] = describe(never, True)
        out["never.delete_again"] = delete(never)

        left = f"left-{uuid.uuid4().hex[:8]}"
        names[left] = "G"
        member = uuid.uuid4().hex[:22]
        joined = heartbeat(left, member, 0)
        # Kafka initializes the assigned share-partitions' state after the heartbeat, asynchronously
        # (under load a describe right after the join may not list them yet); kafkapy at once
        deadline = time.monotonic() + 15
        while not describe(left, True)["topics"] and time.monotonic() < deadline:
            time.sleep(0.2)
        gone = heartbeat(left, member, -1)
        out["left.join_leave"] = [joined.error_code, gone.error_code]
        out["left.describe_all"] = describe(left, True)
        out["left.alter"] = alter(left, 3)
        out["left.describe_after_alter"] = describe(left)
        out["left.describe_all_after_alter"] = describe(left, True)
        out["left.delete"] = delete(left)
        out["left.describe_all_after_delete"] = describe(left, True)

        live = f"live-{uuid.uuid4().hex[:8]}"
        names[live] = "G"
        heartbeat(live, uuid.uuid4().hex[:22], 0)
        out["live.alter"] = alter(live, 1)
        out["live.delete"] = delete(live)
    return out


def _assert_as_kafka(observed: dict) -> None:
    different = {k: (observed.get(k), EXPECTED[k]) for k in EXPECTED if observed.get(k) != EXPECTED[k]}
    assert not different, "\n".join(f"{k}: got {got}, Kafka 4.4.0 {want}" for k, (got, want) in different.items())


def test_offsets_of_share_groups_without_members_as_kafka_4_4(broker):
    _assert_as_kafka(observe(broker.bootstrap))


def _unavailable(reason: str) -> None:
    message = f"!!! Kafka 4.4.0 share-group offsets differential NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


@pytest.mark.timeout(120)
def test_kafka_4_4_answers_what_expected_says(tmp_path: Path):
    """The same scenarios against a real Kafka 4.4.0 broker (starts in ~3 s once the jars are cached)."""
    from conformance.real_kafka import REFERENCES, RealKafka, RealKafkaUnavailable

    kafka = RealKafka(REFERENCES[REFERENCE], tmp_path / "kafka")
    try:
        try:
            kafka.start()
        except RealKafkaUnavailable as exc:
            _unavailable(str(exc))
        _assert_as_kafka(observe(kafka.bootstrap))
    finally:
        kafka.stop()   # ends the JVM, even after a failed start
