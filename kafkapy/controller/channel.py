"""The controller's requests to brokers: one sender per live broker, and request batches.

As Kafka's ControllerChannelManager: each broker gets its own queue and one request in flight,
network errors are retried (100 ms apart) until the broker is removed, and versions are fixed
(LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4, IBP 3.7), sent without ApiVersions.
`RequestBatch` collects one controller event's partition states per broker and sends them as one
LeaderAndIsr, one UpdateMetadata and one StopReplica per broker, in that order.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..net.client import BrokerConnection, BrokerConnectionError
from ..protocol.messages import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from ..metadata.zk.paths import BrokerRegistration, LeaderIsr

__all__ = ["ControllerChannel", "RequestBatch", "LEADER_AND_ISR_VERSION", "UPDATE_METADATA_VERSION",
           "STOP_REPLICA_VERSION"]

log = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
_RETRY_BACKOFF_S = 0.1
_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

ResponseCallback = Callable[[object], None]


class _BrokerSender:
    """One broker's queue and its sending task (one request in flight)."""

    def __init__(self, broker_id: int, host: str, port: int, socket_timeout_s: float,
                 connection_options: dict | None = None):
        self.broker_id = broker_id
        self.connection = BrokerConnection(host, port, client_id=f"kafkapy-controller-to-{broker_id}",
                                           request_timeout_s=socket_timeout_s, **(connection_options or {}))
        self.queue: asyncio.Queue = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-sender-{broker_id}")

    async def _run(self) -> None:
        while True:
            request, version, callback = await self.queue.get()
            while True:
                try:
                    response = await self.connection.send(request, version)
                    break
                except BrokerConnectionError as exc:
                    log.debug("controller request %s to broker %d failed (%s); retrying",
                              type(request).__name__, self.broker_id, exc)
                    await asyncio.sleep(_RETRY_BACKOFF_S)
            if callback is not None:
                try:
                    callback(response)
                except Exception:
                    log.exception("controller callback for %s from broker %d failed",
                                  type(request).__name__, self.broker_id)

    def close(self) -> None:
        self.task.cancel()
        self.connection.close()


class ControllerChannel:
    """Senders to the live brokers, keyed by broker id."""

    def __init__(self, listener_name: str, socket_timeout_s: float = 30.0, connection_options: dict | None = None):
        self.listener_name = listener_name
        self.socket_timeout_s = socket_timeout_s
        # BrokerConnection arguments of the inter-broker listener (ssl_context, sasl)
        self.connection_options = connection_options or {}
        self._senders: dict[int, _BrokerSender] = {}

    def add_broker(self, registration: BrokerRegistration) -> None:
        endpoint = registration.endpoint(self.listener_name)
        if endpoint is None:
            log.error("broker %d has no endpoint for the inter-broker listener %s; the controller cannot reach it",
                      registration.broker_id, self.listener_name)
            return
        old = self._senders.get(registration.broker_id)
        if old is not None:
            if (old.connection.host, old.connection.port) == (endpoint.host, endpoint.port):
                return
            old.close()
        self._senders[registration.broker_id] = _BrokerSender(registration.broker_id, endpoint.host, endpoint.port,
                                                              self.socket_timeout_s, self.connection_options)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.close()

    def send(self, broker_id: int, request, version: int, callback: ResponseCallback | None = None) -> None:
        sender = self._senders.get(broker_id)
        if sender is None:
            log.debug("not sending %s to broker %d: no sender", type(request).__name__, broker_id)
            return
        sender.queue.put_nowait((request, version, callback))

    def close(self) -> None:
        for sender in self._senders.values():
            sender.close()
        self._senders.clear()


@dataclass(slots=True)
class PartitionInfo:
    """What a request batch needs of one partition besides its leader/ISR state."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


class RequestBatch:
    """One controller event's LeaderAndIsr, UpdateMetadata and StopReplica requests, per broker."""

    def __init__(self, controller_id: int, controller_epoch: int):
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self._leader_and_isr: dict[int, dict[tuple[str, int], tuple]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata: dict[tuple[str, int], tuple] = {}
        self._stop_replica: dict[int, dict[tuple[str, int], tuple[int, bool]]] = {}

    def add_leader_and_isr(self, broker_ids: Iterable[int], info: PartitionInfo, state: LeaderIsr,
                           zk_version: int, is_new: bool = False) -> None:
        for broker_id in broker_ids:
            self._leader_and_isr.setdefault(broker_id, {})[(info.topic, info.partition)] = \
                (info, state, zk_version, is_new)

    def add_update_metadata(self, broker_ids: Iterable[int], partitions: Iterable[tuple] = ()) -> None:
        """`partitions`: (PartitionInfo, LeaderIsr, zk_version, offline_replicas) tuples, sent to every
        broker in the batch (UpdateMetadata's partition list is a delta)."""
        self._update_metadata_brokers.update(broker_ids)
        for entry in partitions:
            info = entry[0]
            self._update_metadata[(info.topic, info.partition)] = entry

    def add_stop_replica(self, broker_id: int, topic: str, partition: int, delete: bool,
                         leader_epoch: int) -> None:
        self._stop_replica.setdefault(broker_id, {})[(topic, partition)] = (leader_epoch, delete)

    def send(self, channel: ControllerChannel, live: dict[int, tuple[BrokerRegistration, int]],
             leader_and_isr_callback: Callable[[int, object], None] | None = None,
             stop_replica_callback: Callable[[int, object], None] | None = None) -> None:
        """Send everything collected, LeaderAndIsr before UpdateMetadata before StopReplica; the
        callbacks get (broker id, response) of each LeaderAndIsr and StopReplica."""
        live_leaders = self._live_leaders(live, channel.listener_name)
        for broker_id, partitions in self._leader_and_isr.items():
            if broker_id not in live:
                continue
            topics: dict[str, LeaderAndIsrRequest.LeaderAndIsrTopicState] = {}
            leaders = set()
            for info, state, zk_version, is_new in partitions.values():
                topic = topics.get(info.topic)
                if topic is None:
                    topic = topics[info.topic] = LeaderAndIsrRequest.LeaderAndIsrTopicState(
                        topic_name=info.topic, topic_id=info.topic_id, partition_states=[])
                topic.partition_states.append(LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                    topic_name=info.topic, partition_index=info.partition, controller_epoch=state.controller_epoch,
                    leader=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                    partition_epoch=zk_version, replicas=list(info.replicas), adding_replicas=list(info.adding),
                    removing_replicas=list(info.removing), is_new=is_new,
                    leader_recovery_state=state.leader_recovery_state))
                leaders.add(state.leader)
            request = LeaderAndIsrRequest(
                controller_id=self.controller_id, is_k_raft_controller=False, controller_epoch=self.controller_epoch,
                broker_epoch=live[broker_id][1], type=0, topic_states=list(topics.values()),
                live_leaders=[leader for leader in live_leaders if leader.broker_id in leaders])
            callback = None
            if leader_and_isr_callback is not None:
                callback = (lambda bid: lambda resp: leader_and_isr_callback(bid, resp))(broker_id)
            channel.send(broker_id, request, LEADER_AND_ISR_VERSION, callback)
        if self._update_metadata_brokers:
            brokers = _update_metadata_brokers(live)
            topics_um: dict[str, UpdateMetadataRequest.UpdateMetadataTopicState] = {}
            for info, state, zk_version, offline in self._update_metadata.values():
                topic = topics_um.get(info.topic)
                if topic is None:
                    topic = topics_um[info.topic] = UpdateMetadataRequest.UpdateMetadataTopicState(
                        topic_name=info.topic, topic_id=info.topic_id, partition_states=[])
                topic.partition_states.append(UpdateMetadataRequest.UpdateMetadataPartitionState(
                    topic_name=info.topic, partition_index=info.partition, controller_epoch=state.controller_epoch,
                    leader=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                    zk_version=zk_version, replicas=list(info.replicas), offline_replicas=list(offline)))
            for broker_id in sorted(self._update_metadata_brokers):
                if broker_id not in live:
                    continue
                request = UpdateMetadataRequest(
                    controller_id=self.controller_id, is_k_raft_controller=False, type=0,
                    controller_epoch=self.controller_epoch, broker_epoch=live[broker_id][1],
                    topic_states=list(topics_um.values()), live_brokers=brokers)
                channel.send(broker_id, request, UPDATE_METADATA_VERSION)
        for broker_id, partitions in self._stop_replica.items():
            if broker_id not in live:
                continue
            by_topic: dict[str, StopReplicaRequest.StopReplicaTopicState] = {}
            for (topic_name, partition), (leader_epoch, delete) in partitions.items():
                topic = by_topic.get(topic_name)
                if topic is None:
                    topic = by_topic[topic_name] = StopReplicaRequest.StopReplicaTopicState(
                        topic_name=topic_name, partition_states=[])
                topic.partition_states.append(StopReplicaRequest.StopReplicaPartitionState(
                    partition_index=partition, leader_epoch=leader_epoch, delete_partition=delete))
            request = StopReplicaRequest(
                controller_id=self.controller_id, is_k_raft_controller=False, controller_epoch=self.controller_epoch,
                broker_epoch=live[broker_id][1], topic_states=list(by_topic.values()))
            callback = None
            if stop_replica_callback is not None:
                callback = (lambda bid: lambda resp: stop_replica_callback(bid, resp))(broker_id)
            channel.send(broker_id, request, STOP_REPLICA_VERSION, callback)
        self._leader_and_isr.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata.clear()
        self._stop_replica.clear()

    @staticmethod
    def _live_leaders(live: dict[int, tuple[BrokerRegistration, int]], listener: str) -> list:
        leaders = []
        for broker_id, (registration, _) in sorted(live.items()):
            endpoint = registration.endpoint(listener)
            if endpoint is not None:
                leaders.append(LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                    broker_id=broker_id, host_name=endpoint.host, port=endpoint.port))
        return leaders


def _update_metadata_brokers(live: dict[int, tuple[BrokerRegistration, int]]) -> list:
    brokers = []
    for broker_id, (registration, _) in sorted(live.items()):
        endpoints = [UpdateMetadataRequest.UpdateMetadataEndpoint(
            port=ep.port, host=ep.host, listener=ep.listener,
            security_protocol=_SECURITY_PROTOCOL_IDS.get(ep.security_protocol, 0))
            for ep in registration.endpoints]
        brokers.append(UpdateMetadataRequest.UpdateMetadataBroker(
            id=broker_id, endpoints=endpoints, rack=registration.rack))
    return brokers
