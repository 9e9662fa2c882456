"""Two in-process brokers replicating over real sockets: catch-up, the high watermark, acks=all,
divergent tails, out-of-range follower offsets and ISR changes through AlterPartition."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from kafkapy.net.client import BrokerConnection
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import FetchRequest, ProduceRequest
from tests.log.logtools import batch, read_all
from tests.replication.cluster import Node, StubMetadata, wait_until

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1122_3344_5566_7788)


def run(coro, timeout_s: float = 30.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout_s)

    return asyncio.run(bounded())


async def produce(node: Node, acks: int, n: int = 1, seed: int = 0, timeout_ms: int = 5000):
    """Produce `n` single-batch requests over the network; returns the partition responses."""
    host, port = node.metadata.broker_endpoint(node.node_id)
    conn = BrokerConnection(host, port, client_id="test-producer")
    try:
        out = []
        for i in range(n):
            request = ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[
                ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=bytes(batch(3, 20, seed=seed + i)))])])
            response = await conn.send(request, 10)
            out.append(response.responses[0].partition_responses[0])
        return out
    finally:
        conn.close()


async def consumer_fetch(node: Node, offset: int = 0):
    host, port = node.metadata.broker_endpoint(node.node_id)
    conn = BrokerConnection(host, port, client_id="test-consumer")
    try:
        request = FetchRequest(max_wait_ms=0, min_bytes=0, topics=[FetchRequest.FetchTopic(
            topic=TOPIC, partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                                 partition_max_bytes=1 << 20)])])
        response = await conn.send(request, 12)
        return response.responses[0].partitions[0]
    finally:
        conn.close()


def two_nodes(tmp_path, **props):
    metadata = StubMetadata()
    metadata.add_topic(TOPIC, TOPIC_ID, leader=1, replicas=[1, 2])
    metadata.controller = 1
    return metadata, Node(1, tmp_path / "b1", metadata, **props), Node(2, tmp_path / "b2", metadata, **props)


def test_follower_catches_up_byte_for_byte_and_the_high_watermark_waits_for_it(tmp_path):
    metadata, leader, follower = two_nodes(tmp_path)

    async def scenario():
        await leader.start()
        await follower.start()
        try:
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2])
            plog = leader.replicas.partition(TOPIC, 0).log
            answers = await produce(leader, acks=1, n=5)
            assert [a.error_code for a in answers] == [0] * 5
            assert plog.log_end_offset == 15
            assert plog.high_watermark == 0  # the follower has fetched nothing yet
            data = await consumer_fetch(leader)
            assert data.error_code == 0 and data.high_watermark == 0 and not data.records

            response = await follower.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2])
            assert response.topics[0].topic_id == TOPIC_ID
            assert [p.error_code for p in response.topics[0].partition_errors] == [0]
            flog = follower.replicas.partition(TOPIC, 0).log
            await wait_until(lambda: plog.high_watermark == 15, what="leader high watermark")
            await wait_until(lambda: flog.high_watermark == 15, what="follower high watermark")
            assert read_all(flog) == read_all(plog)
            assert flog.leader_epochs.entries() == plog.leader_epochs.entries() == [(0, 0)]

            # acks=all answers once the follower has the batch
            answers = await produce(leader, acks=-1, n=3, seed=100)
            assert [a.error_code for a in answers] == [0] * 3
            assert answers[-1].base_offset == 21
            assert plog.high_watermark == 24
            await wait_until(lambda: flog.log_end_offset == 24, what="follower catch-up")
            assert read_all(flog) == read_all(plog)

            # only the leader serves consumers
            data = await consumer_fetch(follower)
            assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert data.current_leader.leader_id == 1
            data = await consumer_fetch(leader, offset=15)
            assert data.error_code == 0 and data.high_watermark == 24 and data.records
        finally:
            await follower.stop()
            await leader.stop()

    run(scenario())


def test_acks_all_times_out_without_the_follower_and_needs_min_isr(tmp_path):
    metadata, leader, follower = two_nodes(tmp_path, **{"min.insync.replicas": 2})

    async def scenario():
        await leader.start()
        try:
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2])
            answers = await produce(leader, acks=-1, timeout_ms=200)
            assert answers[0].error_code == ErrorCode.REQUEST_TIMED_OUT
            assert answers[0].base_offset == 0  # written, not replicated
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=1, replicas=[1, 2], isr=[1])
            answers = await produce(leader, acks=-1)
            assert answers[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            assert leader.replicas.partition(TOPIC, 0).log.log_end_offset == 3  # nothing written
            answers = await produce(leader, acks=1)
            assert answers[0].error_code == 0
        finally:
            await leader.stop()

    run(scenario())


def test_divergent_tail_is_truncated_and_replaced_by_the_leaders(tmp_path):
    metadata, new_leader, old_leader = two_nodes(tmp_path)
    common = [batch(2, 30, seed=s) for s in range(3)]
    for node in (new_leader, old_leader):
        plog = node.broker.partitions.open_log(TOPIC, 0)
        for b in common:
            plog.append(bytearray(b), leader_epoch=0)
    # the old leader wrote two more batches at epoch 1 that never reached the new leader
    old_log = old_leader.broker.partitions.get_log(TOPIC, 0)
    for s in (50, 51):
        old_log.append(batch(2, 30, seed=s), leader_epoch=1)
    assert old_log.log_end_offset == 10

    async def scenario():
        await new_leader.start()
        await old_leader.start()
        try:
            await new_leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=2, replicas=[1, 2], isr=[1])
            plog = new_leader.replicas.partition(TOPIC, 0).log
            assert plog.leader_epochs.entries() == [(0, 0), (2, 6)]
            answers = await produce(new_leader, acks=1, n=3, seed=200)
            assert [a.base_offset for a in answers] == [6, 9, 12]
            await old_leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=2, replicas=[1, 2], isr=[1])
            await wait_until(lambda: old_log.log_end_offset == plog.log_end_offset == 15
                             and read_all(old_log) == read_all(plog), what="the follower to match the leader")
            assert old_log.leader_epochs.entries() == [(0, 0), (2, 6)]
            # once caught up the follower joins the ISR through AlterPartition
            part = new_leader.replicas.partition(TOPIC, 0)
            await wait_until(lambda: part.isr == (1, 2), what="ISR expansion")
            assert part.partition_epoch == 1 and new_leader.controller.requests
            sent = new_leader.controller.requests[0]
            assert sent.broker_id == 1 and sent.broker_epoch == 1001
            assert [(b.broker_id, b.broker_epoch) for b in sent.topics[0].partitions[0].new_isr_with_epochs] == \
                [(1, -1), (2, -1)]
            assert sent.topics[0].topic_id == TOPIC_ID
        finally:
            await old_leader.stop()
            await new_leader.stop()

    run(scenario())


def test_follower_behind_the_leaders_log_start_starts_over_there(tmp_path):
    metadata, leader, follower = two_nodes(tmp_path)

    async def scenario():
        await leader.start()
        await follower.start()
        try:
            # ISR [1] of replicas [1, 2]: the high watermark follows the leader alone
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2], isr=[1])
            plog = leader.replicas.partition(TOPIC, 0).log
            await produce(leader, acks=1, n=4)
            assert plog.high_watermark == 12
            plog.delete_records_before(6)
            await follower.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2], isr=[1])
            flog = follower.replicas.partition(TOPIC, 0).log
            await wait_until(lambda: flog.log_end_offset == 12, what="follower catch-up")
            assert flog.log_start_offset == 6
            assert read_all(flog) == read_all(plog)
        finally:
            await follower.stop()
            await leader.stop()

    run(scenario())


def test_lagging_follower_leaves_the_isr_and_stopped_follower_stops_fetching(tmp_path):
    metadata, leader, follower = two_nodes(tmp_path, **{"replica.lag.time.max.ms": 300})

    async def scenario():
        await leader.start()
        await follower.start()
        try:
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2])
            await follower.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2])
            answers = await produce(leader, acks=-1, n=2)
            assert [a.error_code for a in answers] == [0, 0]
            part = leader.replicas.partition(TOPIC, 0)
            # the follower stops (controlled shutdown would send this)
            from kafkapy.protocol.messages import StopReplicaRequest
            stop = StopReplicaRequest(controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=[
                StopReplicaRequest.StopReplicaTopicState(topic_name=TOPIC, partition_states=[
                    StopReplicaRequest.StopReplicaPartitionState(partition_index=0, leader_epoch=0,
                                                                 delete_partition=False)])])
            response = await follower.replicas.apply_stop_replica(stop, 4)
            assert [p.error_code for p in response.partition_errors] == [0]
            assert follower.replicas.fetchers.position(TOPIC, 0) is None
            assert follower.replicas.partition(TOPIC, 0) is not None  # kept, with its log
            await produce(leader, acks=1)
            await wait_until(lambda: part.isr == (1,), timeout_s=5, what="ISR shrink")
            assert part.partition_epoch == 1
            assert part.log.high_watermark == part.log.log_end_offset == 9
        finally:
            await follower.stop()
            await leader.stop()

    run(scenario())


@pytest.mark.parametrize("restart", [True])
def test_high_watermarks_are_checkpointed_and_restored(tmp_path, restart):
    metadata, leader, follower = two_nodes(tmp_path)

    async def scenario():
        await leader.start()
        try:
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1], isr=[1])
            await produce(leader, acks=1, n=2)
            assert leader.replicas.partition(TOPIC, 0).log.high_watermark == 6
            checkpoint = tmp_path / "b1" / "replication-offset-checkpoint"
            await wait_until(lambda: checkpoint.exists() and "t 0 6" in checkpoint.read_text(),
                             what="the high-watermark checkpoint")
            # not replicated beyond offset 6: what a restart must remember
            plog = leader.replicas.partition(TOPIC, 0).log
            plog.append(batch(1, 10, seed=9), leader_epoch=0)
            plog.high_watermark = 6
        finally:
            await leader.stop()
        again = Node(1, tmp_path / "b1", metadata)
        await again.start()
        try:
            plog = again.broker.partitions.get_log(TOPIC, 0)
            assert plog.log_end_offset == 7 and plog.high_watermark == 6
            assert not plog.auto_high_watermark
        finally:
            await again.stop()

    run(scenario())
