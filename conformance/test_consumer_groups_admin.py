"""Describing and administering KIP-848 consumer groups, against a real kafkapy process.

- The Java AdminClient (kafka-clients 3.9.1, ConsumerGroupAdminCheck.java) on a group of
  group.protocol=consumer members: listConsumerGroups with type and state filters,
  describeConsumerGroups (type CONSUMER, epochs' effects, members, assignment and target),
  listConsumerGroupOffsets with the lag computable, the changes refused while members remain,
  and alter/delete offsets and deleteConsumerGroups once it is empty.
- Raw requests (kafkapy's own protocol layer) for the rules and error cases: OffsetCommit and
  OffsetFetch member-epoch checks (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION
  below v9), TxnOffsetCommit's ILLEGAL_GENERATION, ListGroups v5 types filter, DescribeGroups on a
  consumer group (Dead, as Kafka 4.0 up to v5), ConsumerGroupDescribe v0/v1, OffsetDelete
  (GROUP_SUBSCRIBED_TO_TOPIC), DeleteGroups (NON_EMPTY_GROUP, then gone after a restart).
- `kafkapy groups list/describe` and the console's group page on the same group.
- confluent-kafka's AdminClient (librdkafka) on a consumer-protocol group: list with a type
  filter, describe with type and target assignment, offsets, delete.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from conformance.consumer_group_clients import CONSUMER_PROTOCOL_OVERRIDES
from conformance.java.test_java_clients import JavaPrograms, java_programs  # noqa: F401  (fixture)
from conformance.test_groups_tools import create_topic, produce, wait_until

STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION = 113, 25, 35
ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC = 22, 69, 68, 86


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return dict(CONSUMER_PROTOCOL_OVERRIDES)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def send(bootstrap: str, request, version: int):
    """One request through kafkapy's client connection; the decoded response."""
    from kafkapy.net.client import BrokerConnection

    async def ask():
        host, port = bootstrap.rsplit(":", 1)
        connection = BrokerConnection(host, int(port), client_id="kafkapy-admin-test", request_timeout_s=10)
        try:
            return await connection.send(request, version)
        finally:
            connection.close()

    return asyncio.run(ask())


def heartbeat(bootstrap: str, group: str, member_id: str, epoch: int, topics: list[str] | None,
              owned: list | None = None):
    from kafkapy.protocol.messages import ConsumerGroupHeartbeatRequest

    request = ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=30_000,
        subscribed_topic_names=topics, topic_partitions=owned)
    return send(bootstrap, request, 1)


def find_coordinator(bootstrap: str, group: str) -> None:
    """FindCoordinator until it answers (the first one creates __consumer_offsets)."""
    from kafkapy.protocol.messages import FindCoordinatorRequest

    wait_until(lambda: send(bootstrap, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
               .coordinators[0].error_code == 0, 15, "FindCoordinator")


def join_and_reconcile(bootstrap: str, group: str, topic: str) -> tuple[str, int, list[int]]:
    """A raw consumer-protocol member joins, takes its assignment and acknowledges it: (id, epoch, partitions)."""
    from kafkapy.protocol.messages import ConsumerGroupHeartbeatRequest

    find_coordinator(bootstrap, group)
    member_id = str(uuid.uuid4())
    response = heartbeat(bootstrap, group, member_id, 0, [topic], [])
    assert response.error_code == 0, response
    epoch = response.member_epoch
    deadline = time.monotonic() + 15
    partitions: list[int] = []
    while time.monotonic() < deadline:
        if response.assignment is not None:
            owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t.topic_id, partitions=t.partitions)
                     for t in response.assignment.topic_partitions]
            partitions = sorted(p for t in response.assignment.topic_partitions for p in t.partitions)
        else:
            owned = None
        response = heartbeat(bootstrap, group, member_id, epoch, None, owned)
        assert response.error_code == 0, response
        epoch = response.member_epoch
        if partitions and response.assignment is None:
            return member_id, epoch, partitions
        time.sleep(0.1)
    raise AssertionError(f"member {member_id} never got a stable assignment")


def commit(bootstrap: str, group: str, member_id: str, epoch: int, topic: str, offsets: dict[int, int],
           version: int = 9) -> dict[int, int]:
    from kafkapy.protocol.messages import OffsetCommitRequest

    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
            for p, o in offsets.items()])])
    response = send(bootstrap, request, version)
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


def fetch(bootstrap: str, group: str, member_id: str | None, epoch: int, topic: str, partitions: list[int]):
    from kafkapy.protocol.messages import OffsetFetchRequest

    request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=group, member_id=member_id, member_epoch=epoch,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=partitions)])])
    group_result = send(bootstrap, request, 9).groups[0]
    return group_result.error_code, {p.partition_index: p.committed_offset
                                     for t in group_result.topics for p in t.partitions}


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkapy", *args, "-b", bootstrap], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def test_consumer_group_rules_on_the_wire(broker_factory) -> None:
    from kafkapy.protocol.messages import (
        ConsumerGroupDescribeRequest,
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        ListGroupsRequest,
        OffsetDeleteRequest,
        TxnOffsetCommitRequest,
    )

    console_port = _free_port()
    # without KIP-890 verification the group's checks answer a TxnOffsetCommit of an unknown transaction
    broker = broker_factory({**CONSUMER_PROTOCOL_OVERRIDES, "transaction.partition.verification.enable": "false",
                             "kafkapy.console.listener": f"http://127.0.0.1:{console_port}"})
    bs = broker.bootstrap
    topic, other, group, classic = unique("adm-t"), unique("adm-o"), unique("adm-g"), unique("adm-classic")
    create_topic(bs, topic, 3)
    create_topic(bs, other, 1)
    for p in range(3):
        produce(bs, topic, 10, start=10 * p, partition=p)
    member_id, epoch, partitions = join_and_reconcile(bs, group, topic)
    assert partitions == [0, 1, 2] and epoch >= 1

    # OffsetCommit: the member at its epoch commits; other epochs, unknown ids and old versions do not
    assert commit(bs, group, member_id, epoch, topic, {0: 5, 1: 7}) == {0: 0, 1: 0}
    assert commit(bs, group, member_id, epoch - 1, topic, {0: 6}) == {0: STALE_MEMBER_EPOCH}
    assert commit(bs, group, member_id, epoch + 1, topic, {0: 6}) == {0: STALE_MEMBER_EPOCH}
    assert commit(bs, group, "not-a-member", epoch, topic, {0: 6}) == {0: UNKNOWN_MEMBER_ID}
    assert commit(bs, group, member_id, epoch, topic, {0: 6}, version=8) == {0: UNSUPPORTED_VERSION}
    assert commit(bs, group, "", -1, topic, {0: 6}) == {0: UNKNOWN_MEMBER_ID}  # admin: only when empty
    assert commit(bs, unique("missing"), "m", 3, topic, {0: 1}) == {0: GROUP_ID_NOT_FOUND}  # v9, Kafka 4.0
    assert commit(bs, unique("missing"), "m", 3, topic, {0: 1}, version=8) == {0: ILLEGAL_GENERATION}

    # OffsetFetch v9: the member at its epoch or an admin (no member id); nothing else
    assert fetch(bs, group, member_id, epoch, topic, [0, 1, 2]) == (0, {0: 5, 1: 7, 2: -1})
    assert fetch(bs, group, None, -1, topic, [0]) == (0, {0: 5})
    assert fetch(bs, group, member_id, epoch - 1, topic, [0])[0] == STALE_MEMBER_EPOCH
    assert fetch(bs, group, "not-a-member", epoch, topic, [0])[0] == UNKNOWN_MEMBER_ID

    # TxnOffsetCommit: a wrong member epoch is ILLEGAL_GENERATION
    txn = TxnOffsetCommitRequest(transactional_id="tx", group_id=group, producer_id=1, producer_epoch=0,
                                 generation_id=epoch + 3, member_id=member_id, topics=[
                                     TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                                         TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                             partition_index=0, committed_offset=9)])])
    txn_errors = {p.error_code for t in send(bs, txn, 3).topics for p in t.partitions}
    assert txn_errors == {ILLEGAL_GENERATION}

    # a classic group beside it (simple commits)
    assert commit(bs, classic, "", -1, topic, {0: 1}, version=2) == {0: 0}

    # ListGroups v5: the type filter and field; v4 state filter with consumer-group states
    listed = {g.group_id: (g.group_type, g.group_state, g.protocol_type)
              for g in send(bs, ListGroupsRequest(), 5).groups}
    assert listed[group] == ("consumer", "Stable", "consumer") and listed[classic][0] == "classic"
    only_consumer = {g.group_id for g in send(bs, ListGroupsRequest(types_filter=["Consumer"]), 5).groups}
    assert group in only_consumer and classic not in only_consumer
    only_classic = {g.group_id for g in send(bs, ListGroupsRequest(types_filter=["classic"]), 5).groups}
    assert classic in only_classic and group not in only_classic
    assert not send(bs, ListGroupsRequest(types_filter=["share"]), 5).groups
    stable = {g.group_id for g in send(bs, ListGroupsRequest(states_filter=["stable"]), 4).groups}
    assert group in stable and classic not in stable

    # DescribeGroups on a consumer group: Dead and no error (Kafka 4.0 up to v5)
    described = send(bs, DescribeGroupsRequest(groups=[group]), 5).groups[0]
    assert (described.error_code, described.group_state, described.members) == (0, "Dead", [])

    # ConsumerGroupDescribe v0 and v1; classic and unknown groups are GROUP_ID_NOT_FOUND
    for version in (0, 1):
        d = send(bs, ConsumerGroupDescribeRequest(group_ids=[group, classic, "never-seen"],
                                                  include_authorized_operations=True), version).groups
        live = d[0]
        assert (live.error_code, live.group_state, live.assignor_name) == (0, "Stable", "uniform")
        assert live.group_epoch >= 1 and live.assignment_epoch == live.group_epoch
        assert live.authorized_operations != -2147483648
        (m,) = live.members
        assert (m.member_id, m.member_epoch, m.subscribed_topic_names) == (member_id, epoch, [topic])
        assert [(t.topic_name, sorted(t.partitions)) for t in m.assignment.topic_partitions] == [(topic, [0, 1, 2])]
        assert [(t.topic_name, sorted(t.partitions)) for t in m.target_assignment.topic_partitions] == \
            [(topic, [0, 1, 2])]
        assert m.member_type == (1 if version >= 1 else -1)
        assert [(g.error_code, g.error_message) for g in d[1:]] == [
            (GROUP_ID_NOT_FOUND, f"Group {classic} is not a consumer group."),
            (GROUP_ID_NOT_FOUND, "Group never-seen not found.")]

    # OffsetDelete: a subscribed topic keeps its offsets; another topic's go
    assert commit(bs, group, member_id, epoch, other, {0: 3}) == {0: 0}
    deleted = send(bs, OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=n, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]) for n in (topic, other)]), 0)
    assert deleted.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in deleted.topics} == {topic: GROUP_SUBSCRIBED_TO_TOPIC, other: 0}
    assert fetch(bs, group, None, -1, other, [0]) == (0, {0: -1})

    # the CLI: type and epochs
    listed_cli = json.loads(cli(bs, "groups", "list", "--type", "--format", "json").stdout)
    assert {"group": group, "protocol_type": "consumer", "state": "Stable", "type": "consumer"} in listed_cli
    table = cli(bs, "groups", "list", "--type", "consumer").stdout
    assert group in table and classic not in table
    state = cli(bs, "groups", "describe", group, "--state", "--verbose").stdout
    assert "TARGET-ASSIGNMENT-EPOCH" in state and "uniform" in state and "Stable" in state
    members = json.loads(cli(bs, "groups", "describe", group, "--members", "--verbose", "--format", "json").stdout)
    (row,) = members[0]["members"]
    assert (members[0]["type"], row["consumer_id"], row["member_epoch"], row["member_type"]) == (
        "consumer", member_id, epoch, "consumer")
    assert row["assignment"] == row["target_assignment"] == {topic: [0, 1, 2]}
    verbose = cli(bs, "groups", "describe", group, "--members", "--verbose").stdout
    assert "TARGET-ASSIGNMENT" in verbose and f"{topic}(0,1,2)" in verbose
    lag = json.loads(cli(bs, "groups", "describe", group, "--format", "json").stdout)[0]["partitions"]
    assert {r["partition"]: (r["current_offset"], r["lag"], r["consumer_id"]) for r in lag} == {
        0: (5, 5, member_id), 1: (7, 3, member_id), 2: (None, None, member_id)}

    # the console's group pages
    page = urllib.request.urlopen(f"http://127.0.0.1:{console_port}/groups/{group}", timeout=10).read().decode()
    assert 'id="group-type">consumer' in page and 'id="assignment-epoch"' in page and member_id in page
    assert "consumer" in urllib.request.urlopen(f"http://127.0.0.1:{console_port}/groups", timeout=10).read().decode()

    # DeleteGroups: not while a member remains; after it leaves (epoch -1), the group and its offsets go
    def delete() -> int:
        return send(bs, DeleteGroupsRequest(groups_names=[group]), 2).results[0].error_code

    assert delete() == NON_EMPTY_GROUP
    assert heartbeat(bs, group, member_id, -1, None).error_code == 0
    assert commit(bs, group, "", -1, topic, {2: 4}) == {2: 0}  # an admin commits to the empty group
    assert delete() == 0
    assert fetch(bs, group, None, -1, topic, [0, 2]) == (0, {0: -1, 2: -1})
    assert group not in {g.group_id for g in send(bs, ListGroupsRequest(), 5).groups}

    # ... and stays gone after a restart (its records have tombstones)
    broker.restart()
    wait_until(lambda: send(bs, ListGroupsRequest(), 5).error_code == 0, 30, "coordinator loaded")
    after = {g.group_id for g in send(bs, ListGroupsRequest(), 5).groups}
    assert group not in after and classic in after


def test_confluent_admin_client_on_a_consumer_protocol_group(broker) -> None:
    """librdkafka's admin API on a group whose member uses group.protocol=consumer: list with a type
    filter, describe (type CONSUMER, target assignment), offsets, refusals while live, delete."""
    from confluent_kafka import (
        Consumer,
        ConsumerGroupState,
        ConsumerGroupTopicPartitions,
        ConsumerGroupType,
        KafkaException,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient

    bs = broker.bootstrap
    topic, group = unique("cka848-t"), unique("cka848-g")
    create_topic(bs, topic, 2)
    for p in range(2):
        produce(bs, topic, 10, start=10 * p, partition=p)
    admin = AdminClient({"bootstrap.servers": bs})
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                         "client.id": "cka848", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        got = 0
        deadline = time.monotonic() + 30
        while got < 20:
            assert time.monotonic() < deadline, f"read {got} of 20"
            got += sum(1 for m in consumer.consume(20, timeout=0.2) if m.error() is None)
        consumer.commit(asynchronous=False)

        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}, request_timeout=10).result(timeout=20)
        found = {g.group_id: (g.type, g.state) for g in listed.valid}
        assert found.get(group) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE), found
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}, request_timeout=10).result(timeout=20)
        assert group not in {g.group_id for g in classic.valid}

        described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=20)
        assert (described.type, described.state, described.partition_assignor) == (
            ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, "uniform")
        (member,) = described.members
        assert member.client_id == "cka848"
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        assert {tp.partition for tp in member.target_assignment.topic_partitions} == {0, 1}

        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])]
        offsets = admin.list_consumer_group_offsets(request)[group].result(timeout=20)
        assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 10), (1, 10)]
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP|not empty"):
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=20)
    finally:
        consumer.close()

    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 1)])])[group].result(timeout=20)
    assert [(tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions] == [(0, 1, None)]
    assert admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=20) is None
    listed = admin.list_consumer_groups(request_timeout=10).result(timeout=20)
    assert group not in {g.group_id for g in listed.valid}


def test_java_admin_client_on_a_consumer_protocol_group(broker, java_programs: JavaPrograms) -> None:
    java_programs.run("ConsumerGroupAdminCheck", broker.bootstrap, unique("jadm"), timeout=90)


def _free_port() -> int:
    from conformance.broker_process import free_port
    return free_port()
