"""ReplicaManager on one broker: LeaderAndIsr and StopReplica rules and response shapes, leadership
listeners, acks=all waits, partition.metadata topic ids."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest
from kafkapy.replication.partition_metadata import read_partition_topic_id, write_partition_topic_id
from tests.log.logtools import batch
from tests.replication.cluster import Node, StubMetadata

TOPIC_ID = uuid.UUID(int=42)
OTHER_ID = uuid.UUID(int=43)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


@pytest.fixture
def node(tmp_path):
    metadata = StubMetadata()
    metadata.add_topic("t", TOPIC_ID, leader=1, replicas=[1, 2])
    metadata.endpoints[2] = ("127.0.0.1", 9)  # alive in the metadata, nothing listening
    return Node(1, tmp_path / "b1", metadata, **{"min.insync.replicas": 2})


def ps(index=0, leader=1, epoch=1, replicas=(1, 2), isr=None, partition_epoch=0, topic_name="t"):
    return LeaderAndIsrRequest.LeaderAndIsrPartitionState(
        topic_name=topic_name, partition_index=index, controller_epoch=1, leader=leader, leader_epoch=epoch,
        isr=list(replicas if isr is None else isr), partition_epoch=partition_epoch, replicas=list(replicas))


def lai(states, version=7, topic_id=TOPIC_ID, topic="t"):
    if version < 2:
        return LeaderAndIsrRequest(controller_id=1, controller_epoch=1, ungrouped_partition_states=states)
    return LeaderAndIsrRequest(controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=[
        LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name=topic, topic_id=topic_id, partition_states=states)])


def results(response: LeaderAndIsrResponse, version: int) -> list[tuple[int, int]]:
    """(partition, error code) in response order, after an encode/decode round trip."""
    decoded = LeaderAndIsrResponse.decode(response.encode(version), version)
    if version < 5:
        return [(p.partition_index, p.error_code) for p in decoded.partition_errors]
    return [(p.partition_index, p.error_code) for t in decoded.topics for p in t.partition_errors]


def codes(response: LeaderAndIsrResponse, version: int) -> dict[int, int]:
    return dict(results(response, version))


def stop_request(entries, version=4, delete=False):
    """entries: (partition, leader epoch, delete)."""
    if version >= 3:
        return StopReplicaRequest(controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=[
            StopReplicaRequest.StopReplicaTopicState(topic_name="t", partition_states=[
                StopReplicaRequest.StopReplicaPartitionState(partition_index=p, leader_epoch=e, delete_partition=d)
                for p, e, d in entries])])
    return StopReplicaRequest(controller_id=1, controller_epoch=1, delete_partitions=delete, topics=[
        StopReplicaRequest.StopReplicaTopicV1(name="t", partition_indexes=[p for p, _, _ in entries])])


@pytest.mark.parametrize("version", [1, 4, 5, 7])
def test_leader_and_isr_rules_and_response_shapes(node, version):
    async def scenario():
        await node.start()
        try:
            calls = []
            node.replicas.leadership_listeners.append(lambda *args: calls.append(args))
            first = await node.replicas.apply_leader_and_isr(
                lai([ps(0, epoch=3), ps(1, leader=2, epoch=1), ps(2, replicas=(2, 3))], version), version)
            assert codes(first, version) == {0: 0, 1: 0, 2: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            if version >= 5:
                assert first.topics[0].topic_id == TOPIC_ID
            assert sorted(calls) == [("t", 0, True, 3), ("t", 1, False, 1)]
            leader, follower = node.replicas.partition("t", 0), node.replicas.partition("t", 1)
            assert leader.is_leader and leader.isr == (1, 2) and not follower.is_leader
            assert node.replicas.fetchers.position("t", 1).leader_id == 2
            assert node.replicas.partition("t", 2) is None
            # equal or older epochs are stale; the follower becomes leader at a newer one
            again = await node.replicas.apply_leader_and_isr(
                lai([ps(0, epoch=3), ps(0, epoch=2), ps(1, epoch=2)], version), version)
            stale = ErrorCode.STALE_CONTROLLER_EPOCH
            assert results(again, version) == [(0, stale), (0, stale), (1, 0)]
            assert follower.is_leader and node.replicas.fetchers.position("t", 1) is None
        finally:
            await node.stop()

    run(scenario())


def test_topic_id_is_recorded_and_checked(node, tmp_path):
    async def scenario():
        await node.start()
        try:
            response = await node.replicas.apply_leader_and_isr(lai([ps(0)]), 7)
            assert codes(response, 7) == {0: 0}
            plog = node.replicas.partition("t", 0).log
            assert read_partition_topic_id(plog.dir) == TOPIC_ID
            assert (plog.dir / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")
            response = await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=2)], topic_id=OTHER_ID), 7)
            assert codes(response, 7) == {0: ErrorCode.INCONSISTENT_TOPIC_ID}
            # a log on disk with another topic's id is refused before it is hosted
            other = node.broker.partitions.open_log("u", 0)
            write_partition_topic_id(other.dir, OTHER_ID)
            response = await node.replicas.apply_leader_and_isr(lai([ps(0, topic_name="u")], topic="u"), 7)
            assert codes(response, 7) == {0: ErrorCode.INCONSISTENT_TOPIC_ID}
            assert node.replicas.partition("u", 0) is None
        finally:
            await node.stop()

    run(scenario())


def test_follower_of_an_unknown_leader_waits_for_it(node):
    async def scenario():
        await node.start()
        try:
            response = await node.replicas.apply_leader_and_isr(lai([ps(0, leader=5, epoch=4, replicas=(1, 5))]), 7)
            assert codes(response, 7) == {0: 0}
            part = node.replicas.partition("t", 0)
            assert part is not None and part.leader_epoch == -1  # no change yet; the log exists
            assert node.replicas.fetchers.position("t", 0) is None
        finally:
            await node.stop()

    run(scenario())


@pytest.mark.parametrize("version", [1, 4])
def test_stop_replica(node, version):
    async def scenario():
        await node.start()
        try:
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=5), ps(1, leader=2, epoch=5)]), 7)
            calls = []
            node.replicas.leadership_listeners.append(lambda *args: calls.append(args))
            plog = node.replicas.partition("t", 0).log
            if version >= 3:
                response = await node.replicas.apply_stop_replica(stop_request([(0, 4, False), (1, 5, False)]), 4)
                assert [p.error_code for p in response.partition_errors] == [ErrorCode.FENCED_LEADER_EPOCH, 0]
                assert node.replicas.partition("t", 0).is_leader
                response = await node.replicas.apply_stop_replica(stop_request([(0, -2, True), (7, 3, True)]), 4)
                assert [p.error_code for p in response.partition_errors] == [0, 0]
            else:
                response = await node.replicas.apply_stop_replica(stop_request([(1, 0, 0)], version), version)
                assert [p.error_code for p in response.partition_errors] == [0]
                response = await node.replicas.apply_stop_replica(
                    stop_request([(0, 0, 0)], version, delete=True), version)
                assert [(p.topic_name, p.partition_index, p.error_code) for p in response.partition_errors] == \
                    [("t", 0, 0)]
            assert node.replicas.fetchers.position("t", 1) is None
            assert node.replicas.partition("t", 1) is not None  # delete=false keeps it
            assert node.replicas.partition("t", 0) is None
            assert node.broker.partitions.get_log("t", 0) is None
            assert not plog.dir.exists()
            assert ("t", 1, False, 5) in calls and ("t", 0, False, 5) in calls
        finally:
            await node.stop()

    run(scenario())


def test_acks_all_wait_outcomes(node):
    async def scenario():
        await node.start()
        try:
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=1)]), 7)
            part = node.replicas.partition("t", 0)
            plog = part.log
            plog.append(batch(), leader_epoch=1)
            code = await node.replicas.wait_for_replication("t", 0, 1, 0.05)
            assert code == ErrorCode.REQUEST_TIMED_OUT
            waiter = asyncio.ensure_future(node.replicas.wait_for_replication("t", 0, 1, 5))
            await asyncio.sleep(0.01)
            assert part.update_follower_fetch(2, 1, 0, 0)
            node.replicas.high_watermark_changed("t", 0)
            assert await waiter == ErrorCode.NONE
            # the ISR falls below min.insync.replicas=2 while waiting
            plog.append(batch(), leader_epoch=1)
            waiter = asyncio.ensure_future(node.replicas.wait_for_replication("t", 0, 2, 5))
            await asyncio.sleep(0.01)
            change = part.maybe_shrink_isr(10**13)
            node.replicas._isr_change_answered(part, change, 0, type("D", (), dict(
                isr=[1], leader_epoch=1, partition_epoch=1))())
            assert await waiter == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            # leadership moves away while waiting
            await node.replicas.apply_leader_and_isr(lai([ps(1, epoch=1)]), 7)
            node.replicas.partition("t", 1).log.append(batch(), leader_epoch=1)
            waiter = asyncio.ensure_future(node.replicas.wait_for_replication("t", 1, 1, 5))
            await asyncio.sleep(0.01)
            await node.replicas.apply_leader_and_isr(lai([ps(1, leader=2, epoch=2)]), 7)
            assert await waiter == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert await node.replicas.wait_for_replication("t", 9, 1, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            await node.stop()

    run(scenario())


def test_acks_all_wait_survives_a_reelection_of_the_same_leader(node):
    """Campaign #4, round 75: the controller took a dead broker out of the ISR, which re-elects the
    same leader at a newer epoch. A produce waiting for the ISR must then get its offset once the
    high watermark covers it (Kafka's delayed produce checks leadership, not the epoch), not
    NOT_LEADER_OR_FOLLOWER: the producer would take its batch as not written and reuse its
    sequence numbers, which the leader that has the batch rejects as out of order."""
    async def scenario():
        await node.start()
        try:
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=48, partition_epoch=1)]), 7)
            part = node.replicas.partition("t", 0)
            part.log.append(batch(), leader_epoch=48)
            waiter = asyncio.ensure_future(node.replicas.wait_for_replication("t", 0, 1, 5))
            await asyncio.sleep(0.01)
            # the follower has the batch, and the controller re-elects us at epoch 49
            assert part.update_follower_fetch(2, 1, 0, 0)
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=49, partition_epoch=2)]), 7)
            assert part.is_leader and part.leader_epoch == 49
            assert await waiter == ErrorCode.NONE
            # the same while the high watermark is still below the write when the epoch changes
            part.log.append(batch(), leader_epoch=49)
            waiter = asyncio.ensure_future(node.replicas.wait_for_replication("t", 0, 2, 5))
            await asyncio.sleep(0.01)
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=50, partition_epoch=3)]), 7)
            await asyncio.sleep(0.01)
            assert not waiter.done()
            assert part.update_follower_fetch(2, 2, 0, 0)
            node.replicas.high_watermark_changed("t", 0)
            assert await waiter == ErrorCode.NONE
        finally:
            await node.stop()

    run(scenario())


def test_acks_all_wait_ends_when_leadership_was_lost_and_regained(node):
    """Lost and won back between two wake-ups of the wait: the log may have been truncated in
    between, so the wait answers NOT_LEADER_OR_FOLLOWER even though we lead again."""
    async def scenario():
        await node.start()
        try:
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=1, partition_epoch=1)]), 7)
            part = node.replicas.partition("t", 0)
            part.log.append(batch(), leader_epoch=1)
            waiter = asyncio.ensure_future(node.replicas.wait_for_replication("t", 0, 1, 5))
            await asyncio.sleep(0.01)
            # straight on the Partition, so that the waiter does not wake in between
            part.make_follower(ps(0, leader=2, epoch=2, partition_epoch=2))
            part.make_leader(ps(0, epoch=3, partition_epoch=3), 0)
            assert part.update_follower_fetch(2, 1, 0, 0)
            node.replicas.high_watermark_changed("t", 0)
            assert await waiter == ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            await node.stop()

    run(scenario())


def test_coordinator_writes(node, monkeypatch):
    """A coordinator's writes through the replica manager: a transaction marker appended at the
    leader epoch wakes the partition's fetches; wait_appended waits for the ISR up to the log end
    (or a given end offset) and answers UNKNOWN_TOPIC_OR_PARTITION without a log; wait_synced
    fsyncs every partition it is given (fsync-on-ack) and raises what the flusher raised, which
    wait_appended answers as KAFKA_STORAGE_ERROR."""
    from kafkapy.replication import durability

    async def scenario():
        await node.start()
        try:
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=3), ps(1, epoch=3)]), 7)
            part = node.replicas.partition("t", 0)
            plog = part.log
            plog.append(batch(), leader_epoch=3)
            woken = []
            node.broker.purgatory.notify = lambda key: woken.append(key)
            node.replicas.append_txn_marker(part, 7, 0, 0, True)
            assert woken == [("t", 0)] and plog.log_end_offset == 2
            # the ISR of two has neither batch yet
            assert await node.replicas.wait_appended("t", 0, 0.05) == ErrorCode.REQUEST_TIMED_OUT
            assert part.update_follower_fetch(2, 1, 0, 0)
            assert await node.replicas.wait_appended("t", 0, 0.05, end_offset=1) == ErrorCode.NONE
            assert await node.replicas.wait_appended("t", 0, 0.05, fsync=False) == ErrorCode.REQUEST_TIMED_OUT
            assert await node.replicas.wait_appended("t", 9, 0.05) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # fsync-on-ack
            synced = []

            async def recording(*futures):
                synced.append(len(futures))

            monkeypatch.setattr(durability, "wait_durable", recording)
            monkeypatch.setattr(plog.config, "fsync_on_ack", True, raising=False)
            await node.replicas.wait_synced([("t", 0), ("t", 1), ("t", 9)])  # t-1 is empty, t-9 unknown
            assert synced == [1]

            async def failing(*futures):
                raise OSError("disk gone")

            monkeypatch.setattr(durability, "wait_durable", failing)
            with pytest.raises(OSError):
                await node.replicas.wait_synced([("t", 0)])
            assert await node.replicas.wait_appended("t", 0, 0.05) == ErrorCode.KAFKA_STORAGE_ERROR
        finally:
            await node.stop()

    run(scenario())


def test_coordinator_appends(node):
    """A coordinator store's appends through the replica manager (AppendOrigin.COORDINATOR):
    no min.insync.replicas check (an ISR of one below min.insync.replicas=2 takes them), stamped
    with the leader epoch, the partition's fetches woken, not counted as produced; a transactional batch is its producer's (from_client=False
    keeps the sequence unchecked); no log here is NOT_LEADER_OR_FOLLOWER."""
    from kafkapy.groupcoord.offsets_topic import OffsetsTopicStore
    from kafkapy.protocol.errors import KafkaError

    async def scenario():
        await node.start()
        try:
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=3, isr=(1,))]), 7)
            plog = node.replicas.partition("t", 0).log
            store = OffsetsTopicStore(lambda p: node.broker.partitions.get_log("t", p), topic="t",
                                      append_batch=node.replicas.append_coordinator_records)
            woken = []
            notify = node.broker.purgatory.notify
            node.broker.purgatory.notify = lambda key: (woken.append(key), notify(key))
            produced = []
            node.broker.metrics.produced = lambda *args: produced.append(args)
            store.append(0, [(b"k", b"v")])
            assert woken[0] == ("t", 0) and plog.log_end_offset == 1
            store.append(0, [(b"k", b"tx")], producer_id=7, producer_epoch=0)
            assert plog.log_end_offset == 2 and produced == []
            headers = [header for header, _ in store.read_batches(0)]
            assert [h.partition_leader_epoch for h in headers] == [3, 3]
            assert [(h.producer_id, h.is_transactional) for h in headers] == [(-1, False), (7, True)]
            with pytest.raises(KafkaError) as info:
                store.append(9, [(b"k", b"v")])
            assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            await node.stop()

    run(scenario())
