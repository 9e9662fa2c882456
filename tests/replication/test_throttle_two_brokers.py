"""Replication throttles between two in-process brokers over real sockets: a leader leaves a
throttled partition's records out for a follower outside the ISR once its quota is used up, and a
follower stops asking for a throttled partition once its own quota is used up; both count the
bytes of throttled partitions, and a rate change applies at once."""
from __future__ import annotations

import asyncio
from types import MappingProxyType

from kafkapy.net.client import BrokerConnection
from kafkapy.protocol.messages import FetchRequest
from kafkapy.replication.throttle import UNLIMITED
from tests.replication.cluster import Node, wait_until
from tests.replication.test_two_brokers import TOPIC, TOPIC_ID, produce, run, two_nodes


def set_topic_configs(metadata, **configs: str) -> None:
    topic = metadata.topics[TOPIC]
    metadata.topics[TOPIC] = topic._replace(
        configs=MappingProxyType({k.replace("_", "."): v for k, v in configs.items()}))


async def follower_fetch(leader: Node, offset: int, leader_epoch: int, replica_id: int = 2):
    """One Fetch v16 as follower `replica_id` would send it, asking for at most one batch."""
    host, port = leader.metadata.broker_endpoint(leader.node_id)
    conn = BrokerConnection(host, port, client_id="test-follower")
    try:
        request = FetchRequest(
            replica_id=-1, replica_state=FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=1002),
            max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=TOPIC, topic_id=TOPIC_ID, partitions=[FetchRequest.FetchPartition(
                partition=0, current_leader_epoch=leader_epoch, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=0, partition_max_bytes=1)])])
        response = await conn.send(request, 16)
        return response.responses[0].partitions[0]
    finally:
        conn.close()


def test_leader_leaves_records_out_for_a_follower_outside_the_isr_over_its_rate(tmp_path):
    metadata, leader, _ = two_nodes(tmp_path, **{"leader.replication.throttled.rate": 100})

    async def scenario():
        await leader.start()
        try:
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2], isr=[1])
            await produce(leader, acks=1, n=4)
            quota = leader.replicas.throttle.leader
            # not listed: served, and not counted
            data = await follower_fetch(leader, 0, 0)
            assert data.error_code == 0 and len(data.records) > 100
            assert quota.rate() == 0

            set_topic_configs(metadata, leader_replication_throttled_replicas="0:1")
            data = await follower_fetch(leader, 0, 0)  # the quota is not used yet: served, counted
            first = len(data.records)
            assert data.error_code == 0 and first > 100
            assert quota.rate() == first  # over one window
            data = await follower_fetch(leader, 3, 0)  # now above 100 bytes/s: left out, no error
            assert data.error_code == 0 and len(data.records) == 0
            assert data.high_watermark == 12
            # the fetch still counts as the follower's progress
            assert leader.replicas.partition(TOPIC, 0).followers[2].log_end_offset == 3

            # a follower in the ISR is never throttled (its bytes still count)
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=1, replicas=[1, 2], isr=[1, 2])
            data = await follower_fetch(leader, 3, 1)
            assert data.error_code == 0 and len(data.records) > 0
            assert quota.rate() == first + len(data.records)

            # out of the ISR again; raising the rate applies at once
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=2, replicas=[1, 2], isr=[1])
            assert len((await follower_fetch(leader, 6, 2)).records) == 0
            leader.broker.config.set_dynamic_configs(True, {"leader.replication.throttled.rate": str(UNLIMITED)})
            assert len((await follower_fetch(leader, 6, 2)).records) > 0
            # another broker's entry does not throttle this leader
            leader.broker.config.set_dynamic_configs(True, {"leader.replication.throttled.rate": "1"})
            set_topic_configs(metadata, leader_replication_throttled_replicas="0:2")
            assert len((await follower_fetch(leader, 6, 2)).records) > 0
            set_topic_configs(metadata, leader_replication_throttled_replicas="*")
            assert len((await follower_fetch(leader, 6, 2)).records) == 0
        finally:
            await leader.stop()

    run(scenario())


def test_follower_stops_fetching_a_throttled_partition_over_its_rate(tmp_path):
    # one batch per fetch, so that the first fetch uses the quota up
    metadata, leader, follower = two_nodes(tmp_path, **{"follower.replication.throttled.rate": 100,
                                                        "replica.fetch.max.bytes": 1})
    set_topic_configs(metadata, follower_replication_throttled_replicas="0:2")

    async def scenario():
        await leader.start()
        await follower.start()
        try:
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2], isr=[1])
            await produce(leader, acks=1, n=5)
            plog = leader.replicas.partition(TOPIC, 0).log
            await follower.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2], isr=[1])
            flog = follower.replicas.partition(TOPIC, 0).log
            quota = follower.replicas.throttle.follower
            await wait_until(lambda: flog.log_end_offset == 3, what="the first batch")
            assert quota.rate() > 100
            await asyncio.sleep(0.5)  # ten backoffs: the partition stays out of the requests
            assert flog.log_end_offset == 3
            follower.broker.config.set_dynamic_configs(True, {"follower.replication.throttled.rate": str(UNLIMITED)})
            await wait_until(lambda: flog.log_end_offset == plog.log_end_offset == 15, what="catch-up")
            part = leader.replicas.partition(TOPIC, 0)
            await wait_until(lambda: part.isr == (1, 2), what="ISR expansion")
        finally:
            await follower.stop()
            await leader.stop()

    run(scenario())


def test_a_caught_up_follower_is_not_throttled(tmp_path):
    metadata, leader, follower = two_nodes(tmp_path, **{"follower.replication.throttled.rate": 100})
    set_topic_configs(metadata, follower_replication_throttled_replicas="*")

    async def scenario():
        await leader.start()
        await follower.start()
        try:
            await leader.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2], isr=[1])
            await produce(leader, acks=1, n=2)
            await follower.leader_and_isr(TOPIC, TOPIC_ID, leader=1, leader_epoch=0, replicas=[1, 2], isr=[1])
            flog = follower.replicas.partition(TOPIC, 0).log
            # the first fetch brings everything (and uses the quota up): the follower is caught up
            await wait_until(lambda: flog.log_end_offset == 6, what="catch-up")
            assert follower.replicas.throttle.follower.exceeded()
            assert follower.replicas.fetchers.position(TOPIC, 0).caught_up
            await produce(leader, acks=1, n=2)
            await wait_until(lambda: flog.log_end_offset == 12, timeout_s=3, what="the new batches")
        finally:
            await follower.stop()
            await leader.stop()

    run(scenario())
