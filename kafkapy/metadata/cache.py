"""A cluster broker's view of the cluster: what the controller's last UpdateMetadata requests said.

Kafka's ZkMetadataCache: the live-broker list of each UpdateMetadata replaces the cached one, its
partition states are a delta (leader -2 deletes a partition), and its controller id becomes the
controller clients are told about. Metadata, DescribeCluster, FindCoordinator and the replica
fetchers (the leader's endpoint) all read from here. Pure: no I/O, no threads.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from .store import BrokerInfo, PartitionMetadata

__all__ = ["CachedBroker", "MetadataCache", "MetadataDelta", "DELETED_LEADER"]

# UpdateMetadata's leader for a partition whose topic is being deleted.
DELETED_LEADER = -2
_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class CachedBroker:
    """A live broker with its endpoints by listener name: (host, port, security protocol)."""

    node_id: int
    endpoints: dict[str, tuple[str, int, str]]
    rack: str | None = None

    def info(self, listener: str) -> BrokerInfo | None:
        endpoint = self.endpoints.get(listener)
        if endpoint is None:
            return None
        return BrokerInfo(self.node_id, endpoint[0], endpoint[1], self.rack)


@dataclass(slots=True)
class MetadataDelta:
    """What one UpdateMetadata changed: topics whose partitions changed, topics removed, whether
    the broker list or the controller changed."""

    changed_topics: set[str] = field(default_factory=set)
    created_topics: set[str] = field(default_factory=set)
    deleted_topics: set[str] = field(default_factory=set)
    brokers_changed: bool = False
    controller_changed: bool = False


class MetadataCache:
    """Live brokers, partition states and the controller id, as the controller last sent them."""

    def __init__(self) -> None:
        self.controller_id = -1
        self.brokers: dict[int, CachedBroker] = {}
        self._partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}
        self._offline: dict[tuple[str, int], tuple[int, ...]] = {}

    # -- updates ------------------------------------------------------------------------------
    def apply(self, request) -> MetadataDelta:
        """Apply an UpdateMetadataRequest (any version; v0-4 carry ungrouped partition states)."""
        delta = MetadataDelta()
        brokers = {}
        for live in request.live_brokers:
            endpoints = {}
            for ep in live.endpoints:
                endpoints[(ep.listener or "PLAINTEXT").upper()] = (ep.host, ep.port, _protocol_name(ep))
            if not live.endpoints and getattr(live, "v0_host", None):
                endpoints["PLAINTEXT"] = (live.v0_host, live.v0_port, "PLAINTEXT")
            brokers[live.id] = CachedBroker(live.id, endpoints, live.rack)
        if brokers != self.brokers:
            delta.brokers_changed = True
        self.brokers = brokers
        if request.controller_id != self.controller_id:
            delta.controller_changed = True
        self.controller_id = request.controller_id
        for topic, topic_id, state in _partition_states(request):
            name = topic
            partitions = self._partitions.get(name)
            if state.leader == DELETED_LEADER:
                if partitions is not None:
                    partitions.pop(state.partition_index, None)
                    self._offline.pop((name, state.partition_index), None)
                    if not partitions:
                        self._drop_topic(name)
                        delta.deleted_topics.add(name)
                        delta.changed_topics.discard(name)
                        delta.created_topics.discard(name)
                continue
            if partitions is None:
                partitions = self._partitions[name] = {}
                delta.created_topics.add(name)
            if topic_id is not None and topic_id != _ZERO_UUID:
                old_id = self._topic_ids.get(name)
                if old_id is not None and old_id != topic_id:
                    self._names_by_id.pop(old_id, None)
                self._topic_ids[name] = topic_id
                self._names_by_id[topic_id] = name
            partitions[state.partition_index] = PartitionMetadata(
                state.partition_index, tuple(state.replicas), tuple(state.isr), state.leader, state.leader_epoch,
                state.zk_version)
            offline = tuple(getattr(state, "offline_replicas", ()) or ())
            if offline:
                self._offline[(name, state.partition_index)] = offline
            else:
                self._offline.pop((name, state.partition_index), None)
            delta.changed_topics.add(name)
        return delta

    def _drop_topic(self, name: str) -> None:
        self._partitions.pop(name, None)
        topic_id = self._topic_ids.pop(name, None)
        if topic_id is not None:
            self._names_by_id.pop(topic_id, None)

    # -- reads --------------------------------------------------------------------------------
    def topic_names(self) -> list[str]:
        return sorted(self._partitions)

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self._topic_ids.get(name)

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return self._names_by_id.get(topic_id)

    def partitions(self, name: str) -> tuple[PartitionMetadata, ...] | None:
        """The topic's partitions 0..n-1 (a gap ends the list), or None when the topic is unknown."""
        parts = self._partitions.get(name)
        if parts is None:
            return None
        result = []
        for index in range(len(parts)):
            part = parts.get(index)
            if part is None:
                break
            result.append(part)
        return tuple(result)

    def partition(self, name: str, index: int) -> PartitionMetadata | None:
        parts = self._partitions.get(name)
        return parts.get(index) if parts is not None else None

    def offline_replicas(self, name: str, index: int) -> tuple[int, ...]:
        return self._offline.get((name, index), ())

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        broker = self.brokers.get(node_id)
        if broker is None:
            return None
        endpoint = broker.endpoints.get(listener)
        return (endpoint[0], endpoint[1]) if endpoint is not None else None

    def broker_infos(self, listener: str) -> list[BrokerInfo]:
        """Live brokers that have `listener`, by node id (Metadata lists only those)."""
        infos = (b.info(listener) for _, b in sorted(self.brokers.items()))
        return [info for info in infos if info is not None]


def _protocol_name(endpoint) -> str:
    from_id = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
    return from_id.get(endpoint.security_protocol, "PLAINTEXT")


def _partition_states(request) -> Iterable[tuple[str, uuid.UUID | None, object]]:
    for state in request.ungrouped_partition_states:
        yield state.topic_name, None, state
    for topic in request.topic_states:
        for state in topic.partition_states:
            yield topic.topic_name, topic.topic_id, state
