"""In-process cluster brokers for replication tests: real Broker objects (built by the broker
launcher's build_broker) with real listeners and real replica managers, talking over sockets on one
event loop; only what ZooKeeper and the controller would provide is stubbed (what the last
UpdateMetadata said, and an AlterPartition answerer that accepts every proposal)."""
from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace

from kafkapy.broker.connection import KafkaConnection
from kafkapy.broker.partitions import PartitionManager
from kafkapy.devcluster.launcher import build_broker
from kafkapy.metadata.store import PartitionMetadata, TopicMetadata
from kafkapy.protocol.api_versions import CLUSTER_VERSIONS
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import AlterPartitionResponse, LeaderAndIsrRequest
from kafkapy.replication.replica_manager import ReplicaManager

FAST_REPLICATION = {
    "replica.fetch.wait.max.ms": 50,
    "replica.fetch.backoff.ms": 50,
    "replica.lag.time.max.ms": 2000,
    "replica.high.watermark.checkpoint.interval.ms": 200,
    "replica.socket.timeout.ms": 5000,
    "request.timeout.ms": 5000,
}


class StubMetadata:
    """The metadata cache both brokers would have after UpdateMetadata: live brokers, the controller."""

    cluster_id = "replication-test"

    def __init__(self) -> None:
        self.endpoints: dict[int, tuple[str, int]] = {}
        self.controller = -1
        self.topics: dict[str, TopicMetadata] = {}

    def controller_id(self) -> int:
        return self.controller

    def broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        return self.endpoints.get(node_id)

    def is_live(self, node_id: int) -> bool:
        return node_id in self.endpoints

    def get_topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def topic_configs(self, name: str) -> dict[str, str]:
        return {}

    def list_topics(self) -> list[TopicMetadata]:
        return list(self.topics.values())

    def add_topic(self, name: str, topic_id: uuid.UUID, leader: int, replicas: list[int]) -> None:
        self.topics[name] = TopicMetadata(name, topic_id, (PartitionMetadata(0, tuple(replicas), tuple(replicas),
                                                                             leader),))


class AcceptingController:
    """Answers AlterPartition as a controller that accepts every proposal (partition epoch + 1)."""

    def __init__(self) -> None:
        self.requests: list = []

    async def alter_partition(self, request, version: int) -> AlterPartitionResponse:
        self.requests.append(request)
        topics = []
        for topic in request.topics:
            out = AlterPartitionResponse.TopicData(topic_name=topic.topic_name, topic_id=topic.topic_id, partitions=[])
            for p in topic.partitions:
                isr = [b.broker_id for b in p.new_isr_with_epochs] if version >= 3 else list(p.new_isr)
                out.partitions.append(AlterPartitionResponse.PartitionData(
                    partition_index=p.partition_index, error_code=ErrorCode.NONE, leader_id=request.broker_id,
                    leader_epoch=p.leader_epoch, isr=isr, partition_epoch=p.partition_epoch + 1))
            topics.append(out)
        return AlterPartitionResponse(error_code=0, topics=topics)


class Node:
    """One cluster broker: its logs, replica manager and listener, with stubbed cluster metadata."""

    def __init__(self, node_id: int, data_dir, metadata: StubMetadata, **props: object):
        self.node_id = node_id
        self.metadata = metadata
        self.controller = AcceptingController()
        broker = self.broker = build_broker({"broker.id": node_id, **FAST_REPLICATION, **props}, log_dir=data_dir)
        self._embedded = broker.metadata
        broker.metadata = metadata
        broker.cluster = SimpleNamespace(controller=self.controller, controller_epoch_seen=0,
                                         host_loaded_partitions=lambda partitions: partitions.adopt_loaded_logs())
        broker.advertised_versions.update(CLUSTER_VERSIONS)
        broker.broker_epoch = 1000 + node_id
        # the parts that read the metadata and the membership are built again with the stubs
        broker.partitions = PartitionManager(broker.config, metadata, broker.logs, broker.purgatory, broker.cluster)
        broker.replicas = ReplicaManager(broker.node_id, broker.config, metadata, broker.partitions, broker.logs,
                                         broker.purgatory, broker.metrics, lambda: broker.broker_epoch)
        broker.partitions.replicas = broker.replicas
        broker.logs.load()
        broker.partitions.sync_with_metadata()
        self.server = None

    @property
    def replicas(self) -> ReplicaManager:
        return self.broker.replicas

    async def start(self) -> None:
        await self.broker.replicas.start()
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: KafkaConnection(self.broker.connection_services), "127.0.0.1", 0)
        self.metadata.endpoints[self.node_id] = self.server.sockets[0].getsockname()[:2]

    async def stop(self) -> None:
        self.metadata.endpoints.pop(self.node_id, None)
        await self.broker.replicas.shutdown()
        if self.server is not None:
            self.server.close()
        for conn in list(self.broker.connections):
            conn.close()
        self.broker.purgatory.wake_all()
        await asyncio.sleep(0)
        if self.broker.loaded_group_coordinator is not None:
            self.broker.loaded_group_coordinator.close()
        self.broker.logs.close()
        self._embedded.close()

    async def leader_and_isr(self, topic: str, topic_id: uuid.UUID, leader: int, leader_epoch: int,
                             replicas: list[int], isr: list[int] | None = None, partition_epoch: int = 0,
                             version: int = 7):
        state = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
            topic_name=topic, partition_index=0, controller_epoch=1, leader=leader, leader_epoch=leader_epoch,
            isr=list(replicas if isr is None else isr), partition_epoch=partition_epoch, replicas=list(replicas))
        request = LeaderAndIsrRequest(controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name=topic, topic_id=topic_id, partition_states=[state])])
        return await self.broker.replicas.apply_leader_and_isr(request, version)


async def wait_until(predicate, timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
