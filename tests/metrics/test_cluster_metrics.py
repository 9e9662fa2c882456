"""Replication metrics of a cluster-mode broker (ISR shrink, under-replicated, under min ISR), in-process."""
from __future__ import annotations

import asyncio
import uuid

from kafkapy.metrics.collectors import BrokerCollector, families
from tests.log.logtools import batch
from tests.replication.cluster import Node, StubMetadata
from tests.replication.test_replica_manager import lai, ps

TOPIC_ID = uuid.UUID(int=42)


def _values(broker) -> dict:
    out = {}
    for family in families(BrokerCollector(broker, broker.metrics).read()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_isr_shrink_is_counted_and_partition_shows_under_replicated(tmp_path):
    metadata = StubMetadata()
    metadata.add_topic("t", TOPIC_ID, leader=1, replicas=[1, 2])
    metadata.endpoints[2] = ("127.0.0.1", 9)  # alive in the metadata, nothing listening
    node = Node(1, tmp_path / "b1", metadata, **{"min.insync.replicas": 2})

    async def scenario():
        await node.start()
        try:
            await node.replicas.apply_leader_and_isr(lai([ps(0, epoch=1)]), 7)
            part = node.replicas.partition("t", 0)
            part.log.append(batch(), leader_epoch=1)
            before = _values(node.broker)
            assert before[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
            assert before[("kafka_server_replicamanager_leadercount", ())] == 1
            change = part.maybe_shrink_isr(10**13)
            node.replicas._isr_change_answered(part, change, 0, type("D", (), dict(
                isr=[1], leader_epoch=1, partition_epoch=1))())
            after = _values(node.broker)
            labels = (("partition", "0"), ("topic", "t"))
            assert after[("kafka_server_replicamanager_isrshrinks_total", ())] == 1
            assert after[("kafka_server_replicamanager_isrexpands_total", ())] == 0
            assert after[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 1
            assert after[("kafka_server_replicamanager_underminisrpartitioncount", ())] == 1
            assert after[("kafka_cluster_partition_underminisr", labels)] == 1
            assert after[("kafka_topic_partition_in_sync_replica", labels)] == 1
            assert after[("kafka_log_log_logendoffset", labels)] == part.log.log_end_offset
        finally:
            await node.stop()

    asyncio.run(asyncio.wait_for(scenario(), 20))
