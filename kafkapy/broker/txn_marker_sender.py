"""Transaction markers in cluster mode: sent to leaders on other brokers, and replicated.

Kafka's TransactionMarkerChannelManager sends each marker to the partition's current leader over
the inter-broker listener (WriteTxnMarkers v1, with the coordinator epoch), and a leader answers
only once its ISR has the marker (acks=all); the transaction completes after every marker is
answered. The transaction coordinator here asks for markers synchronously and retries after a
back-off whatever is not done yet, so this keeps one delivery in flight per (producer, partition)
and answers "not yet" (REQUEST_TIMED_OUT, retried) until it is done: for a remote leader until it
answered, for a partition led here until the high watermark passed the marker. The outcome is then
given to the coordinator's next attempt, which `on_done` triggers as soon as a delivery finishes
(the back-off is the fallback).

An outcome is keyed by the coordinator epoch as well as by producer, epoch, result and partition,
and is forgotten when the producer's transaction completes or its __transaction_state partition is
unloaded (Kafka's removeMarkersForTxnId / removeMarkersForTxnTopicPartition): under
transaction.version 1 the next transaction of a producer has the same producer epoch, and must not
be answered by an earlier transaction's, or an earlier coordinator's, outcome.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..net.client import BrokerConnectionError
from ..net.peers import PeerConnections
from ..protocol.errors import ErrorCode
from ..protocol.messages import WriteTxnMarkersRequest
from ..security.inter_broker import inter_broker_options

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore
    from ..replication.replica_manager import ReplicaManager
    from .broker_config import BrokerConfig

__all__ = ["RemoteMarkers"]

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
# producer id, producer epoch, coordinator epoch, commit, topic, partition
MarkerKey = tuple[int, int, int, bool, str, int]


class RemoteMarkers:
    """Marker deliveries: WriteTxnMarkers to other brokers, replication waits for local ones."""

    def __init__(self, node_id: int, config: BrokerConfig, metadata: MetadataStore, replicas: ReplicaManager,
                 on_done: Callable[[int], None] | None = None):
        """Built by TransactionCoordination with what it uses: the broker's node id, config and
        metadata (the leaders' endpoints), and the replica manager (the ISR waits for markers
        appended here)."""
        self._config = config
        self._replicas = replicas
        # told the producer id when a delivery finishes, so that the coordinator looks again at
        # once instead of after its retry back-off
        self._on_done = on_done
        self._results: dict[MarkerKey, int] = {}
        self._in_flight: set[MarkerKey] = set()
        # in flight when their producer was forgotten: their outcome is dropped on arrival
        self._abandoned: set[MarkerKey] = set()
        # Kafka's TransactionMarkerChannelManager: a network client of its own, to every leader
        self._peers = PeerConnections(
            "txn-markers", metadata.broker_endpoint,
            client_id=f"kafkapy-txn-markers-{node_id}", **inter_broker_options(config))

    def outcome(self, key: MarkerKey) -> int | None:
        """A finished delivery's result (taken), REQUEST_TIMED_OUT while one is in flight, else None."""
        done = self._results.pop(key, None)
        if done is not None:
            return done
        return ErrorCode.REQUEST_TIMED_OUT if key in self._in_flight else None

    def forget(self, producer_ids) -> None:
        """Drop the outcomes of `producer_ids` (their transaction completed, or their coordinator
        moved); outcomes of deliveries still in flight are dropped when they arrive."""
        producer_ids = set(producer_ids)
        if not producer_ids:
            return
        for key in [k for k in self._results if k[0] in producer_ids]:
            del self._results[key]
        self._abandoned.update(k for k in self._in_flight if k[0] in producer_ids)

    def _finish(self, key: MarkerKey, code: int | None) -> None:
        """A delivery ended: keep its outcome (None: none, retried) unless it was abandoned."""
        self._in_flight.discard(key)
        if key in self._abandoned:
            self._abandoned.discard(key)
        elif code is not None:
            self._results[key] = code

    def await_local(self, key: MarkerKey, topic: str, partition: int, end_offset: int) -> None:
        """A marker was appended here: it is delivered once the ISR has it."""
        self._in_flight.add(key)
        asyncio.get_running_loop().create_task(self._replicate(key, topic, partition, end_offset))

    async def _replicate(self, key: MarkerKey, topic: str, partition: int, end_offset: int) -> None:
        timeout_s = self._config.get("request.timeout.ms") / 1000
        code = None
        try:
            code = await self._replicas.wait_appended(topic, partition, timeout_s, end_offset=end_offset)
        finally:
            self._finish(key, code)
            self._done(key[0])

    def write(self, leader: int, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
              partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Results known so far for `partitions` led by `leader`; sends what is not yet in flight."""
        results = {}
        to_send = []
        for topic, partition in partitions:
            key = (producer_id, producer_epoch, coordinator_epoch, commit, topic, partition)
            done = self._results.pop(key, None)
            if done is not None:
                results[(topic, partition)] = done
            else:
                results[(topic, partition)] = ErrorCode.REQUEST_TIMED_OUT
                if key not in self._in_flight:
                    self._in_flight.add(key)
                    to_send.append((topic, partition))
        if to_send:
            asyncio.get_running_loop().create_task(
                self._send(leader, producer_id, producer_epoch, coordinator_epoch, commit, to_send))
        return results

    async def _send(self, leader: int, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                    partitions: list[tuple[str, int]]) -> None:
        keys = [(producer_id, producer_epoch, coordinator_epoch, commit, t, p) for t, p in partitions]
        codes: dict[MarkerKey, int] = {}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])])
        try:
            response = await self._peers.send(leader, request, WRITE_TXN_MARKERS_VERSION)
            for marker in response.markers:
                for topic in marker.topics:
                    for part in topic.partitions:
                        codes[(producer_id, producer_epoch, coordinator_epoch, commit, topic.name,
                               part.partition_index)] = part.error_code
        except BrokerConnectionError as exc:
            log.info("transaction markers of producer %d to broker %d failed: %s; the coordinator retries",
                     producer_id, leader, exc)
        finally:
            for key in set(keys) | set(codes):
                self._finish(key, codes.get(key))
            self._done(producer_id)

    def _done(self, producer_id: int) -> None:
        if self._on_done is not None:
            try:
                self._on_done(producer_id)
            except Exception:
                log.exception("completing the transaction of producer %d failed", producer_id)

    def close(self) -> None:
        self._peers.close()
