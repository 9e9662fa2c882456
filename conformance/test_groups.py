"""Consumer groups with the Python clients (kafka-python, confluent-kafka, aiokafka) against kafkapy.

Every client runs unchanged: group membership, rebalances (eager and cooperative), committed
offsets and their metadata, static membership, the admin calls that inspect groups, and the
error codes Kafka gives to bad group requests (sent with kafka-python's protocol classes,
not kafkapy's codec). The broker-restart test kills the broker with SIGKILL mid-group.
"""
from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path

import pytest

from conformance.kafka_wire import RawConnection
from conformance.test_groups_tools import (
    GROUP_BROKER_OVERRIDES,
    Consumption,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    python_consumer,
    wait_until,
)

# kafka-python's error names for the codes these tests expect
NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE = 0, 3, 12
NOT_COORDINATOR, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL = 16, 22, 23
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, GROUP_ID_NOT_FOUND = 25, 27, 69
NON_EMPTY_GROUP, MEMBER_ID_REQUIRED = 68, 79


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return dict(GROUP_BROKER_OVERRIDES)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- kafka-python ---------------------------------------------------------------------------
def test_kafka_python_commit_with_metadata_and_resume(broker) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, group = unique("kp-topic"), unique("kp-group")
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 300)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10_000)
    seen = set()
    for record in consumer:
        seen.add((record.partition, record.offset))
        if len(seen) == 300:
            break
    assert len(seen) == 300
    positions = {tp: OffsetAndMetadata(consumer.position(tp), f"meta-{tp.partition}", -1)
                 for tp in consumer.assignment()}
    consumer.commit(positions)
    assert {tp: consumer.committed(tp) for tp in positions} == {tp: o.offset for tp, o in positions.items()}
    consumer.close()

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        stored = admin.list_group_offsets(group)[group]
        assert {tp.partition: (o.offset, o.metadata) for tp, o in stored.items()} == \
            {tp.partition: (o.offset, o.metadata) for tp, o in positions.items()}
    finally:
        admin.close()

    # a new member of the same group starts at the committed offsets: only new records arrive
    produce(broker.bootstrap, topic, 10, start=300)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=5_000)
    values = sorted(r.value for r in consumer)
    consumer.close()
    assert values == sorted(f"v{i}".encode() for i in range(300, 310))
    assert TopicPartition(topic, 0) in positions


# -- confluent-kafka ------------------------------------------------------------------------
def test_confluent_members_split_partitions_and_commit(broker) -> None:
    from confluent_kafka import Consumer

    topic, group = unique("ck-topic"), unique("ck-group")
    create_topic(broker.bootstrap, topic, 6)
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000, "fetch.wait.max.ms": 100}
    consumers = [Consumer(config), Consumer(config)]
    for c in consumers:
        c.subscribe([topic])
    try:
        def both_assigned() -> bool:
            for c in consumers:
                c.poll(0.1)
            parts = [{tp.partition for tp in c.assignment()} for c in consumers]
            return all(parts) and parts[0].isdisjoint(parts[1]) and len(parts[0] | parts[1]) == 6
        wait_until(both_assigned, 30, "both confluent members to own partitions")
        produce(broker.bootstrap, topic, 600)
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(seen) < 600 and time.monotonic() < deadline:
            for c in consumers:
                for msg in c.consume(500, timeout=0.1):
                    assert msg.error() is None, msg.error()
                    seen.append((msg.partition(), msg.offset()))
        assert len(seen) == len(set(seen)) == 600
        for c in consumers:
            c.commit(asynchronous=False)
        assert committed_offsets(broker.bootstrap, group, topic, 6) == end_offsets(broker.bootstrap, topic, 6)
    finally:
        for c in consumers:
            c.close()


# -- aiokafka ---------------------------------------------------------------------------------
def test_aiokafka_member_leaves_and_the_other_takes_over(broker) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    topic, group = unique("aio-topic"), unique("aio-group")
    create_topic(broker.bootstrap, topic, 4)

    async def scenario() -> None:
        def make() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=500)
        a, b = make(), make()
        await a.start()
        await b.start()
        try:
            for _ in range(100):
                await asyncio.gather(a.getmany(timeout_ms=100), b.getmany(timeout_ms=100))
                pa, pb = a.assignment(), b.assignment()
                if pa and pb and not (pa & pb) and len(pa | pb) == 4:
                    break
            else:
                raise AssertionError(f"no split of the partitions: {a.assignment()} / {b.assignment()}")
            await asyncio.to_thread(produce, broker.bootstrap, topic, 400)
            await b.stop()  # LeaveGroup: a owns every partition after the next rebalance
            seen = set()
            deadline = time.monotonic() + 30
            while len(a.assignment()) < 4 or len(seen) < 400:
                assert time.monotonic() < deadline, (a.assignment(), len(seen))
                for tp, records in (await a.getmany(timeout_ms=200)).items():
                    seen.update((tp.partition, r.offset) for r in records)
            assert len(seen) == 400
            await a.commit()
            committed = {tp.partition: await a.committed(tp) for tp in a.assignment()}
            assert committed == await asyncio.to_thread(end_offsets, broker.bootstrap, topic, 4)
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))


# -- all three Python clients in one group ---------------------------------------------------
def test_three_python_clients_share_a_group(broker, tmp_path: Path) -> None:
    topic, group = unique("mix-topic"), unique("mix-group")
    create_topic(broker.bootstrap, topic, 6)
    consumers = [python_consumer(client, broker.bootstrap, group, topic, tmp_path).start()
                 for client in ("kafka-python", "confluent", "aiokafka")]
    try:
        def split() -> bool:
            owned = [c.assigned() for c in consumers]
            return all(owned) and sum(len(o) for o in owned) == 6 and len(set().union(*owned)) == 6
        wait_until(split, 60, "the three clients to split the six partitions")
        produce(broker.bootstrap, topic, 3000)
        ends = end_offsets(broker.bootstrap, topic, 6)
        wait_until(lambda: committed_offsets(broker.bootstrap, group, topic, 6) == ends, 60,
                   "committed offsets to reach the log end")
    finally:
        for c in consumers:
            c.stop()
        for c in consumers:
            c.wait(30)
    seen = Consumption()
    for c in consumers:
        seen.add(c)
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == []


def test_cooperative_rebalancing_python_clients(broker, tmp_path: Path) -> None:
    """kafka-python and librdkafka incremental (cooperative-sticky) members join and leave."""
    topic, group = unique("coop-topic"), unique("coop-group")
    create_topic(broker.bootstrap, topic, 6)
    first = python_consumer("confluent", broker.bootstrap, group, topic, tmp_path, name="coop-c1",
                            assignor="cooperative-sticky").start()
    wait_until(lambda: len(first.assigned()) == 6, 30, "the first member to own every partition")
    produce(broker.bootstrap, topic, 2000)
    second = python_consumer("kafka-python", broker.bootstrap, group, topic, tmp_path, name="coop-kp",
                             assignor="cooperative-sticky").start()
    third = python_consumer("confluent", broker.bootstrap, group, topic, tmp_path, name="coop-c2",
                            assignor="cooperative-sticky").start()
    consumers = [first, second, third]
    try:
        wait_until(lambda: all(c.assigned() for c in consumers), 60, "all three members to own partitions")
        # incremental: the first member only ever gave partitions away, it never had its
        # partitions revoked and handed back as an eager rebalance does
        events = first.events()
        assigned = [e for e in events if e[0] == "A"]
        revoked = [e for e in events if e[0] == "V"]
        assert len(assigned) == 6 and len(revoked) == 6 - len(first.assigned()), events[:40]
        produce(broker.bootstrap, topic, 2000, start=2000)
        second.stop()
        second.wait(30)
        ends = end_offsets(broker.bootstrap, topic, 6)
        wait_until(lambda: committed_offsets(broker.bootstrap, group, topic, 6) == ends, 60,
                   "committed offsets to reach the log end")
    finally:
        for c in consumers:
            c.stop()
        for c in consumers:
            c.wait(30)
    seen = Consumption()
    for c in consumers:
        seen.add(c)
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == []


# -- static membership ------------------------------------------------------------------------
def test_static_member_restart_causes_no_rebalance(broker, tmp_path: Path) -> None:
    topic, group = unique("static-topic"), unique("static-group")
    create_topic(broker.bootstrap, topic, 4)
    watcher = python_consumer("confluent", broker.bootstrap, group, topic, tmp_path, name="watcher").start()
    static = python_consumer("confluent", broker.bootstrap, group, topic, tmp_path, name="static-1",
                             instance_id="static-1", session_timeout_ms=30_000).start()
    try:
        wait_until(lambda: watcher.assigned() and static.assigned()
                   and len(watcher.assigned() | static.assigned()) == 4, 30, "a stable two-member group")
        time.sleep(1)
        before = watcher.events()
        owned = static.assigned()
        static.stop()  # a static member's close sends no LeaveGroup
        static.wait(30)
        restarted = python_consumer("confluent", broker.bootstrap, group, topic, tmp_path, name="static-1b",
                                    instance_id="static-1", session_timeout_ms=30_000).start()
        try:
            wait_until(lambda: restarted.assigned(), 30, "the restarted static member's assignment")
            assert restarted.assigned() == owned
            time.sleep(2)
            # the other member saw no revocation or assignment at all
            assert watcher.events() == before
        finally:
            restarted.stop()
            restarted.wait(30)
    finally:
        watcher.stop()
        watcher.wait(30)


# -- bad group requests, on the wire --------------------------------------------------------
def call(bootstrap: str, request, response_cls, version: int):
    request.with_header(correlation_id=7, client_id="kafkapy-groups")
    with RawConnection(bootstrap) as conn:
        body = conn.roundtrip(bytes(request.encode(version=version, header=True, framed=True)))
    return response_cls.decode(body, version=version, header=True)


def test_group_errors_on_the_wire(broker) -> None:
    from kafka.protocol.admin.groups import (
        DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
        ListGroupsRequest, ListGroupsResponse)
    from kafka.protocol.consumer.group import (
        HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, OffsetCommitRequest,
        OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse)
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

    bs = broker.bootstrap
    topic, group = unique("wire-topic"), unique("wire-group")
    create_topic(bs, topic, 2)

    # FindCoordinator v4 (batched keys): every key answered, pointing at this broker
    found = call(bs, FindCoordinatorRequest(key_type=0, coordinator_keys=[group, "other-group"]),
                 FindCoordinatorResponse, 4)
    assert [(c.key, c.error_code, c.port) for c in found.coordinators] == \
        [(group, 0, broker.port), ("other-group", 0, broker.port)]
    # ... which created __consumer_offsets: compacted, internal in Metadata
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        [offsets_topic] = admin.describe_topics(["__consumer_offsets"])
        assert offsets_topic["is_internal"] and len(offsets_topic["partitions"]) == 10
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "__consumer_offsets",
                                                         ["cleanup.policy"])])
        assert configs["topic"]["__consumer_offsets"]["cleanup.policy"]["value"] == "compact"
    finally:
        admin.close()

    def join(member_id: str = "", protocol_type: str = "consumer", version: int = 5):
        proto = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00")
        return call(bs, JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                         member_id=member_id, protocol_type=protocol_type, protocols=[proto]),
                    JoinGroupResponse, version)

    first = join()
    assert first.error_code == MEMBER_ID_REQUIRED and first.member_id
    joined = join(first.member_id)
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, first.member_id)
    member, generation = joined.member_id, joined.generation_id
    sync = call(bs, SyncGroupRequest(group_id=group, generation_id=generation, member_id=member, assignments=[
        SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"asg")]), SyncGroupResponse, 3)
    assert (sync.error_code, sync.assignment) == (0, b"asg")

    # a different protocol type is refused and the group stays as it was
    assert join(protocol_type="connect").error_code == INCONSISTENT_GROUP_PROTOCOL
    # a stale generation cannot sync; an unknown member cannot heartbeat
    stale = call(bs, SyncGroupRequest(group_id=group, generation_id=generation - 1, member_id=member,
                                      assignments=[]), SyncGroupResponse, 3)
    assert stale.error_code == ILLEGAL_GENERATION
    assert call(bs, HeartbeatRequest(group_id=group, generation_id=generation, member_id="nobody"),
                HeartbeatResponse, 3).error_code == UNKNOWN_MEMBER_ID
    assert call(bs, HeartbeatRequest(group_id=group, generation_id=generation, member_id=member),
                HeartbeatResponse, 3).error_code == NONE

    def commit(partitions, metadata="m", gen=generation, member_id=member):
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=gen, member_id=member_id,
                                      topics=[T(name=t, partitions=[P(partition_index=p, committed_offset=5,
                                                                      committed_metadata=metadata)])
                                              for t, p in partitions])
        response = call(bs, request, OffsetCommitResponse, 8)
        return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]

    # as KafkaApis' OffsetCommitResponse.Builder: the request layer's errors first, one entry per topic, the
    # coordinator's results merged into them
    assert commit([(topic, 0), (topic, 9), ("no-such-topic", 0)]) == [
        (topic, 9, UNKNOWN_TOPIC_OR_PARTITION), (topic, 0, NONE), ("no-such-topic", 0, UNKNOWN_TOPIC_OR_PARTITION)]
    assert commit([(topic, 1)], metadata="x" * 5000) == [(topic, 1, OFFSET_METADATA_TOO_LARGE)]
    assert commit([(topic, 1)], gen=generation + 5) == [(topic, 1, ILLEGAL_GENERATION)]
    assert commit([(topic, 1)], gen=-1, member_id="") == [(topic, 1, UNKNOWN_MEMBER_ID)]  # group has members

    # OffsetFetch v8: several groups at once; an unknown group answers -1 with no error
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    fetched = call(bs, OffsetFetchRequest(require_stable=True, groups=[
        G(group_id=group, topics=[T(name=topic, partition_indexes=[0, 1])]),
        G(group_id="never-seen", topics=[T(name=topic, partition_indexes=[0])])]), OffsetFetchResponse, 8)
    by_group = {g.group_id: (g.error_code, [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                                            for t in g.topics for p in t.partitions]) for g in fetched.groups}
    assert by_group == {group: (0, [(0, 5, "m", 0), (1, -1, "", 0)]), "never-seen": (0, [(0, -1, "", 0)])}

    # ListGroups with a state filter, DescribeGroups, DeleteGroups of a live group
    listed = call(bs, ListGroupsRequest(states_filter=["Stable"]), ListGroupsResponse, 4)
    assert group in {g.group_id for g in listed.groups}
    assert group not in {g.group_id for g in call(bs, ListGroupsRequest(states_filter=["Empty"]),
                                                  ListGroupsResponse, 4).groups}
    described = call(bs, DescribeGroupsRequest(groups=[group, "never-seen"]), DescribeGroupsResponse, 4)
    states = {g.group_id: (g.error_code, g.group_state, g.protocol_data, len(g.members)) for g in described.groups}
    assert states == {group: (0, "Stable", "range", 1), "never-seen": (0, "Dead", "", 0)}
    deleted = call(bs, DeleteGroupsRequest(groups_names=[group, "never-seen"]), DeleteGroupsResponse, 2)
    assert {r.group_id: r.error_code for r in deleted.results} == {group: NON_EMPTY_GROUP,
                                                                   "never-seen": GROUP_ID_NOT_FOUND}

    # ConsumerGroupDescribe (KIP-848): classic groups are not found there, so admin clients
    # fall back to DescribeGroups (hand-built: flexible v0, compact strings)
    name = group.encode()
    body = struct.pack(">hhi", 69, 0, 8) + struct.pack(">h", 3) + b"cgd" + b"\x00"
    body += b"\x02" + bytes([len(name) + 1]) + name + b"\x00" + b"\x00"
    with RawConnection(bs) as conn:
        conn.send(struct.pack(">i", len(body)) + body)
        response = conn.receive()
    # correlation id, header tags, throttle, groups(1): error code first
    assert struct.unpack_from(">ib", response, 0) == (8, 0)
    assert response[9] == 2 and struct.unpack_from(">h", response, 10)[0] == GROUP_ID_NOT_FOUND


# -- the broker dies (SIGKILL) in the middle of a group's life -------------------------------
def test_broker_sigkill_keeps_committed_offsets(broker_factory) -> None:
    from confluent_kafka import Consumer, TopicPartition

    broker = broker_factory(GROUP_BROKER_OVERRIDES)
    topic, group = unique("kill-topic"), unique("kill-group")
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, 4000)
    ends = end_offsets(broker.bootstrap, topic, 4)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 30_000, "fetch.wait.max.ms": 100,
                         "socket.connection.setup.timeout.ms": 5000, "reconnect.backoff.max.ms": 500})
    consumer.subscribe([topic])
    seen: list[tuple[int, int]] = []
    committed: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 30
        while len(seen) < 2000:
            assert time.monotonic() < deadline, f"consumed only {len(seen)} records before the kill"
            msgs = consumer.consume(100, timeout=0.2)
            for msg in msgs:
                assert msg.error() is None, msg.error()
                seen.append((msg.partition(), msg.offset()))
            if msgs:
                for tp in consumer.commit(asynchronous=False):
                    assert tp.error is None, tp.error
                    if tp.offset >= 0:
                        committed[tp.partition] = tp.offset
        # an uncommitted tail: consumed, never committed
        tail = [(m.partition(), m.offset()) for m in consumer.consume(100, timeout=1.0) if m.error() is None]
        seen += tail

        broker.kill9()
        broker.start()

        # every acknowledged commit survived
        assert {p: o for p, o in committed_offsets(broker.bootstrap, group, topic, 4).items() if o >= 0} == committed

        # the same consumer carries on; a restarted group re-reads at most the uncommitted tail
        first_after: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while len(set(seen)) < sum(ends.values()):
            assert time.monotonic() < deadline, f"consumed {len(set(seen))} of {sum(ends.values())} after restart"
            msgs = consumer.consume(500, timeout=0.2)
            for msg in msgs:
                if msg.error() is not None:
                    continue
                first_after.setdefault(msg.partition(), msg.offset())
                seen.append((msg.partition(), msg.offset()))
            if msgs:
                consumer.commit(asynchronous=False)
        for partition, offset in first_after.items():
            assert offset >= committed.get(partition, 0), (partition, offset, committed)
        duplicates = len(seen) - len(set(seen))
        assert duplicates <= len(tail), (duplicates, len(tail))
        final = consumer.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
        assert {tp.partition: tp.offset for tp in final} == ends
    finally:
        consumer.close()


# -- one group lifecycle at every advertised version ----------------------------------------
@pytest.mark.parametrize("level", range(10))
def test_group_lifecycle_at_every_version(broker, level: int) -> None:
    """Find, join, sync, heartbeat, commit, fetch, list, describe, leave, delete at version `level`
    of each API (capped at its maximum), with kafka-python's protocol classes."""
    from kafka.protocol.admin.groups import (
        DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
        ListGroupsRequest, ListGroupsResponse)
    from kafka.protocol.consumer.group import (
        HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
        LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
        SyncGroupRequest, SyncGroupResponse)
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

    bs = broker.bootstrap
    topic, group = unique(f"v{level}-topic"), unique(f"v{level}-group")
    create_topic(bs, topic, 1)
    v = lambda low, high: max(low, min(level, high))  # noqa: E731

    if v(0, 6) >= 4:
        found = call(bs, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), FindCoordinatorResponse, v(0, 6))
        assert found.coordinators[0].error_code == 0
    else:
        found = call(bs, FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse, v(0, 6))
        assert (found.error_code, found.port) == (0, broker.port)

    proto = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"sub")
    join_version = v(0, 9)

    def join(member_id: str):
        return call(bs, JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                         member_id=member_id, protocol_type="consumer", protocols=[proto]),
                    JoinGroupResponse, join_version)

    joined = join("")
    if join_version >= 4:
        assert joined.error_code == MEMBER_ID_REQUIRED
        joined = join(joined.member_id)
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, joined.member_id)
    assert joined.protocol_name == "range" and len(joined.members) == 1
    member = joined.member_id

    sync = call(bs, SyncGroupRequest(group_id=group, generation_id=1, member_id=member, protocol_type="consumer",
                                     protocol_name="range", assignments=[
                                         SyncGroupRequest.SyncGroupRequestAssignment(member_id=member,
                                                                                     assignment=b"asg")]),
                SyncGroupResponse, v(0, 5))
    assert (sync.error_code, sync.assignment) == (0, b"asg")
    assert call(bs, HeartbeatRequest(group_id=group, generation_id=1, member_id=member), HeartbeatResponse,
                v(0, 4)).error_code == 0

    T = OffsetCommitRequest.OffsetCommitRequestTopic
    committed = call(bs, OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=1, member_id=member,
                                             retention_time_ms=-1, topics=[T(name=topic, partitions=[
                                                 T.OffsetCommitRequestPartition(partition_index=0, committed_offset=3,
                                                                                committed_metadata="md")])]),
                     OffsetCommitResponse, v(2, 9))
    assert committed.topics[0].partitions[0].error_code == 0

    fetch_version = v(1, 9)
    if fetch_version >= 8:
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        fetched = call(bs, OffsetFetchRequest(groups=[G(group_id=group, topics=[
            G.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])]), OffsetFetchResponse, fetch_version)
        partition = fetched.groups[0].topics[0].partitions[0]
    else:
        fetched = call(bs, OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=topic, partition_indexes=[0])]), OffsetFetchResponse, fetch_version)
        partition = fetched.topics[0].partitions[0]
    assert (partition.committed_offset, partition.metadata, partition.error_code) == (3, "md", 0)

    listed = call(bs, ListGroupsRequest(), ListGroupsResponse, v(0, 5))
    assert group in {g.group_id for g in listed.groups}
    described = call(bs, DescribeGroupsRequest(groups=[group]), DescribeGroupsResponse, v(0, 5)).groups[0]
    assert (described.error_code, described.group_state, described.members[0].member_assignment) == (0, "Stable", b"asg")

    if v(0, 5) >= 3:
        left = call(bs, LeaveGroupRequest(group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=member)]),
                    LeaveGroupResponse, v(0, 5))
        assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])
    else:
        left = call(bs, LeaveGroupRequest(group_id=group, member_id=member), LeaveGroupResponse, v(0, 5))
        assert left.error_code == 0
    deleted = call(bs, DeleteGroupsRequest(groups_names=[group]), DeleteGroupsResponse, v(0, 2))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, 0)]


def test_confluent_admin_group_calls(broker) -> None:
    """librdkafka's admin API: list, describe (ConsumerGroupDescribe, then DescribeGroups), offsets, delete."""
    from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    bs = broker.bootstrap
    topic, group = unique("cka-topic"), unique("cka-group")
    create_topic(bs, topic, 2)
    produce(bs, topic, 20)
    admin = AdminClient({"bootstrap.servers": bs})
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        got = 0
        deadline = time.monotonic() + 30
        while got < 20:
            assert time.monotonic() < deadline
            got += sum(1 for m in consumer.consume(20, timeout=0.2) if m.error() is None)
        consumer.commit(asynchronous=False)

        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=20)
        states = {g.group_id: g.state for g in listed.valid}
        assert states.get(group) == ConsumerGroupState.STABLE, states
        described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=20)
        assert described.state == ConsumerGroupState.STABLE and described.partition_assignor == "range"
        assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == {0, 1}

        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])]
        offsets = admin.list_consumer_group_offsets(request)[group].result(timeout=20)
        assert sum(tp.offset for tp in offsets.topic_partitions) == 20
    finally:
        consumer.close()

    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 1)])])[group].result(timeout=20)
    assert [(tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions] == [(0, 1, None)]
    assert admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=20) is None
    listed = admin.list_consumer_groups(request_timeout=10).result(timeout=20)
    assert group not in {g.group_id for g in listed.valid}


def test_killed_member_expires_after_its_session_timeout(broker, tmp_path: Path) -> None:
    """A consumer killed with SIGKILL sends nothing; its session times out and the rest take over."""
    topic, group = unique("expire-topic"), unique("expire-group")
    create_topic(broker.bootstrap, topic, 4)
    survivor = python_consumer("confluent", broker.bootstrap, group, topic, tmp_path, name="survivor",
                               session_timeout_ms=3000).start()
    victim = python_consumer("kafka-python", broker.bootstrap, group, topic, tmp_path, name="victim",
                             session_timeout_ms=3000).start()
    try:
        wait_until(lambda: survivor.assigned() and victim.assigned()
                   and len(survivor.assigned() | victim.assigned()) == 4, 60, "a two-member group")
        victim.kill()
        killed_at = time.monotonic()
        wait_until(lambda: len(survivor.assigned()) == 4, 30, "the survivor to take every partition")
        took = time.monotonic() - killed_at
        assert 1.5 < took < 15, took  # not before the 3 s session could expire (minus polling), not much after
    finally:
        survivor.stop()
        survivor.wait(30)
