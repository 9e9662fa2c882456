"""Coordinators in a three-broker cluster follow partition leadership.

A consumer group and a transactional consume-transform-produce application (confluent-kafka,
exactly-once: read_committed input, transactional producer, offsets sent to the transaction; in its
own process, conformance/transform_loop.py) keep going while the
broker hosting their group coordinator -- and then the one hosting their transaction coordinator --
is killed with SIGKILL. Afterwards the committed offsets are where the loop left them, and a
read_committed consumer sees every input record transformed exactly once.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import pytest

from conformance.cluster_harness import cluster_fixture, wait_for_isr, wait_until
from conformance.transform_loop import TransformLoopProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(420)

cluster = cluster_fixture(3, {
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "min.insync.replicas": "2",
    "controlled.shutdown.retry.backoff.ms": "500",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "group.initial.rebalance.delay.ms": "0",
})

RECORDS = 3000
PARTITIONS = 3


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def find_coordinator(cluster, key: str, key_type: int) -> int:
    """The coordinator's broker id, asked of any running broker (FindCoordinator v4)."""
    from kafkapy.net.client import BrokerConnection, BrokerConnectionError
    from kafkapy.protocol.messages import FindCoordinatorRequest

    async def ask(bootstrap: str) -> int:
        host, port = bootstrap.split(":")
        connection = BrokerConnection(host, int(port), request_timeout_s=5)
        try:
            response = await connection.send(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 4)
        finally:
            connection.close()
        found = response.coordinators[0]
        return found.node_id if found.error_code == 0 else -1

    def lookup() -> int | None:
        for node in cluster.brokers.values():
            if node.is_running():
                try:
                    node_id = asyncio.run(ask(node.bootstrap))
                except BrokerConnectionError:
                    continue
                if node_id >= 0:
                    return node_id
        return None

    return wait_until(lookup, 60, interval=0.5, message=f"coordinator of {key!r}")


def read_all(bootstrap: str, topic: str, expected: int, isolation: str = "read_committed") -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                                         "enable.auto.commit": False, "isolation.level": isolation,
                                         "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values = []
    deadline = time.monotonic() + 60
    idle_until = None
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            if len(values) >= expected:
                idle_until = idle_until or time.monotonic() + 2
                if time.monotonic() > idle_until:
                    break
            continue
        if msg.error() is None:
            values.append(msg.value())
    consumer.close()
    return values


def test_group_and_transactions_survive_coordinator_kills(cluster):
    source, sink = unique("in"), unique("out")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in (source, sink)],
                                      request_timeout=30).values():
        future.result(60)
    wait_for_isr(cluster, source, 3)
    wait_for_isr(cluster, sink, 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(source, value=f"record-{i:05d}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0

    group, transactional_id = unique("group"), unique("txn")
    loop = TransformLoopProcess(cluster.bootstrap, group, source, sink, transactional_id)
    loop.start()
    try:
        wait_until(lambda: loop.progress(0, RECORDS), 90, message="the loop's first commit")
        assert not loop.errors, loop.errors
        for key, key_type in ((group, 0), (transactional_id, 1)):
            victim = find_coordinator(cluster, key, key_type)
            before = loop.committed
            cluster.broker(victim).kill9()
            time.sleep(3)
            cluster.broker(victim).start()
            wait_until(lambda: loop.progress(before, RECORDS), 120,
                       message=f"progress after killing coordinator broker {victim}")
            assert not loop.errors, loop.errors
        wait_until(lambda: loop.progress(RECORDS, RECORDS), 180,
                   message="every input record processed")
        assert not loop.errors, loop.errors
    finally:
        loop.stop(30)
    out = read_all(cluster.bootstrap, sink, RECORDS)
    expected = sorted(f"RECORD-{i:05d}".encode() for i in range(RECORDS))
    assert len(out) == len(set(out)), "a record was transformed twice"
    assert sorted(out) == expected
    # the group's committed offsets are the end of the input
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    committed = consumer.committed([confluent_kafka.TopicPartition(source, p) for p in range(PARTITIONS)], 30)
    consumer.close()
    assert sum(tp.offset for tp in committed) == RECORDS


async def answered_only_after_resume(cluster, paused: list[int], send, while_paused=None):
    """`send()` (a request to one broker) is not answered while the brokers `paused` are stopped
    (SIGSTOP), and is once they run again; returns the answer. `while_paused()` (a coroutine
    function) is checked repeatedly meanwhile."""
    for broker_id in paused:
        os.kill(cluster.broker(broker_id).pid, signal.SIGSTOP)
    try:
        # a follower fetch already parked at the leader completes within replica.fetch.wait.max.ms
        # into the paused follower's socket; what is appended after that is not fetched
        await asyncio.sleep(1.0)
        task = asyncio.ensure_future(send())
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            if while_paused is not None:
                await while_paused()
            await asyncio.sleep(0.1)
        assert not task.done(), f"answered before the paused followers had the record: {task.result()!r}"
    finally:
        for broker_id in paused:
            os.kill(cluster.broker(broker_id).pid, signal.SIGCONT)
    return await asyncio.wait_for(task, 30)


def test_sync_group_and_txn_offset_commit_are_answered_once_the_isr_has_them(cluster):
    """The coordinator answers SyncGroup and TxnOffsetCommit only once __consumer_offsets' followers
    have the record (Kafka appends them with acks=-1). Answered earlier, a coordinator killed right
    after could lose a transactional commit whose transaction then commits without it: the group's
    offsets stay behind its output, and the input is transformed twice."""
    from kafkapy.net.client import BrokerConnection
    from kafkapy.protocol.messages import (
        AddOffsetsToTxnRequest, EndTxnRequest, InitProducerIdRequest, JoinGroupRequest, OffsetFetchRequest,
        SyncGroupRequest, TxnOffsetCommitRequest)

    topic, group = unique("isr-acks"), unique("group")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=30)[topic].result(60)
    coordinator = find_coordinator(cluster, group, 0)
    for _ in range(60):  # a transactional id coordinated by the same broker, so that no verification
        transactional_id = unique("txn")  # request goes to a paused broker
        if find_coordinator(cluster, transactional_id, 1) == coordinator:
            break
    else:
        pytest.fail("no transactional id coordinated by the group's coordinator")
    others = [b for b in cluster.brokers if b != coordinator]

    async def scenario() -> None:
        node = cluster.broker(coordinator)
        host, port = node.bootstrap.split(":")
        connection = BrokerConnection(host, int(port), request_timeout_s=60)
        try:
            init = await connection.send(InitProducerIdRequest(
                transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1), 3)
            assert init.error_code == 0
            pid, epoch = init.producer_id, init.producer_epoch
            added = await connection.send(AddOffsetsToTxnRequest(
                transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch, group_id=group), 3)
            assert added.error_code == 0
            protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")
            join = JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
                                    member_id="", protocol_type="consumer", protocols=[protocol])
            first = await connection.send(join, 5)
            assert first.error_code == 79  # MEMBER_ID_REQUIRED
            join.member_id = first.member_id
            joined = await connection.send(join, 5)
            assert joined.error_code == 0 and joined.leader == joined.member_id

            assignment = SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                     assignment=b"\x00\x00")
            synced = await answered_only_after_resume(cluster, others, lambda: connection.send(SyncGroupRequest(
                group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
                assignments=[assignment]), 3))
            assert synced.error_code == 0

            Topic, Partition = (TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic,
                                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition)
            commit = TxnOffsetCommitRequest(
                transactional_id=transactional_id, group_id=group, producer_id=pid, producer_epoch=epoch,
                generation_id=joined.generation_id, member_id=joined.member_id,
                topics=[Topic(name=topic, partitions=[Partition(partition_index=0, committed_offset=42)])])
            committed = await answered_only_after_resume(cluster, others, lambda: connection.send(commit, 3))
            assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
            ended = await connection.send(EndTxnRequest(transactional_id=transactional_id, producer_id=pid,
                                                        producer_epoch=epoch, committed=True), 3)
            assert ended.error_code == 0
            fetch = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name=topic, partition_indexes=[0])], require_stable=True)
            for _ in range(50):  # UNSTABLE_OFFSET_COMMIT until the marker is applied
                fetched = await connection.send(fetch, 7)
                [partition] = fetched.topics[0].partitions
                if partition.error_code == 0:
                    break
                await asyncio.sleep(0.2)
            assert (partition.error_code, partition.committed_offset) == (0, 42)
        finally:
            connection.close()

    asyncio.run(scenario())


def test_markers_are_written_once_the_prepare_record_is_on_the_isr(cluster):
    """EndTxn: the transaction coordinator writes its markers only once its PrepareCommit record is
    on the ISR of its __transaction_state partition, as Kafka. A coordinator lost before that leaves
    a successor that sees the transaction still Ongoing and aborts it; markers written earlier would
    have committed it on some partitions already. Seen through a partition with one replica on the
    coordinator's broker: its last stable offset must not pass the transaction while the
    __transaction_state followers are paused."""
    from kafkapy.net.client import BrokerConnection
    from kafkapy.protocol.messages import (
        AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ListOffsetsRequest, ProduceRequest)
    from kafkapy.protocol.records import build_batch

    transactional_id = unique("txn")
    coordinator = find_coordinator(cluster, transactional_id, 1)
    others = [b for b in cluster.brokers if b != coordinator]
    topic = unique("markers")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    created = admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[coordinator]])],
                                  request_timeout=30)
    created[topic].result(60)

    async def scenario() -> None:
        host, port = cluster.broker(coordinator).bootstrap.split(":")
        connection = BrokerConnection(host, int(port), request_timeout_s=60)
        # a broker answers one connection's requests in order: ListOffsets must not queue behind EndTxn
        observer = BrokerConnection(host, int(port), request_timeout_s=10)

        async def last_stable_offset() -> int:
            request = ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
            [partition] = (await observer.send(request, 5)).topics[0].partitions
            assert partition.error_code == 0
            return partition.offset

        try:
            for _ in range(100):  # the new topic's leader may need a moment
                try:
                    await last_stable_offset()
                    break
                except AssertionError:
                    await asyncio.sleep(0.2)
            init = await connection.send(InitProducerIdRequest(
                transactional_id=transactional_id, transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1), 3)
            assert init.error_code == 0
            pid, epoch = init.producer_id, init.producer_epoch
            Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
            added = await connection.send(AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch, v3_and_below_topics=[Topic(name=topic, partitions=[0])]), 3)
            assert [p.partition_error_code for t in added.results_by_topic_v3_and_below
                    for p in t.results_by_partition] == [0]
            batch = build_batch([(None, b"in a transaction")], producer_id=pid, producer_epoch=epoch,
                                base_sequence=0, is_transactional=True)
            # acks=1: one replica, and the cluster's min.insync.replicas is 2
            produced = await connection.send(ProduceRequest(
                transactional_id=transactional_id, acks=1, timeout_ms=10000, topic_data=[
                    ProduceRequest.TopicProduceData(name=topic, partition_data=[
                        ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9)
            assert produced.responses[0].partition_responses[0].error_code == 0
            assert await last_stable_offset() == 0

            async def no_marker_yet() -> None:
                assert await last_stable_offset() == 0, "a marker was written before PrepareCommit was replicated"

            ended = await answered_only_after_resume(cluster, others, lambda: connection.send(EndTxnRequest(
                transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch, committed=True), 3),
                while_paused=no_marker_yet)
            assert ended.error_code == 0
            for _ in range(100):  # the record and the commit marker
                if await last_stable_offset() == 2:
                    break
                await asyncio.sleep(0.1)
            assert await last_stable_offset() == 2
        finally:
            connection.close()
            observer.close()

    asyncio.run(scenario())
