"""The transaction coordinator wired to this broker: its __transaction_state store, producer ids,
the marker writer, and the loading of __transaction_state partitions as their leadership moves.

The broker builds one TransactionCoordination (broker/broker.py), which builds the broker's
TransactionCoordinator; the transaction handlers (handlers/transactions.py) only handle requests.
The marker writer appends COMMIT/ABORT markers to the local partition logs (what WriteTxnMarkers
does on a partition leader), hands __consumer_offsets markers to the group coordinator, and in
cluster mode sends the markers of partitions led elsewhere (txn_marker_sender.py).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from ..groupcoord import OFFSETS_TOPIC, OffsetsTopicStore
from ..protocol.errors import ErrorCode, KafkaError
from ..txncoord import (
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinator,
    TransactionCoordinatorConfig,
    transaction_state_topic_configs,
)
from .group_coordination import CoordinationHost, on_leadership_change, partition_leaders

log = logging.getLogger(__name__)


class TransactionCoordinationHost(CoordinationHost, Protocol):
    """What the transaction coordination and the marker writer read of the broker: the group
    coordination's host, the producer id blocks, the group coordinator (markers on
    __consumer_offsets decide transactional offset commits) and the transaction coordination
    itself (the marker deliveries, from the WriteTxnMarkers handler's bundle as well)."""

    producer_ids: Any

    @property
    def group_coordinator(self) -> Any: ...

    @property
    def transaction_coordination(self) -> Any: ...

TopicPartition = tuple[str, int]


class TransactionCoordination:
    """Builds the broker's transaction coordinator and keeps it in step with the broker."""

    def __init__(self, broker: TransactionCoordinationHost) -> None:
        self._broker = broker
        # a failed creation of __transaction_state warns once, then quietly (clients retry)
        self._state_topic_warned = False
        # cluster mode: the waits for __transaction_state records to reach the ISR
        self._replication_waits: set[asyncio.Task] = set()
        self._markers = None  # RemoteMarkers, made on first use (cluster mode)
        self._verifier = None  # TxnVerifier, made on first use (cluster mode)
        self.coordinator = self._create_coordinator()

    def _create_coordinator(self) -> TransactionCoordinator:
        """The broker's transaction coordinator (not started: see start)."""
        broker = self._broker
        config = TransactionCoordinatorConfig.from_getter(broker.config.get)
        store = OffsetsTopicStore(
            log_for=lambda p: broker.partitions.get_log(TRANSACTION_STATE_TOPIC, p),
            load_buffer_size=config.transaction_state_log_load_buffer_size, topic=TRANSACTION_STATE_TOPIC,
            append_batch=broker.replicas.append_coordinator_records)
        return TransactionCoordinator(
            config, store, broker.producer_ids.allocate, lambda *args: write_txn_markers(broker, *args),
            node_id=broker.node_id,
            coordinator_epoch_for=lambda p: max(broker.partitions.leader_epoch(TRANSACTION_STATE_TOPIC, p), 0),
            state_topic_leaders=self.state_topic_leaders,
            after_state_replicated=lambda partition, then: self.after_state_replicated(partition, then),
            forget_markers=self._forget_markers)

    def _forget_markers(self, producer_ids: list[int]) -> None:
        if self._markers is not None:
            self._markers.forget(producer_ids)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the coordinator: timers on `loop`, __transaction_state partitions led here loaded
        (finishing transactions caught between Prepare* and Complete*), and reloading as the
        topic's leadership changes."""
        broker = self._broker
        self.coordinator.start(loop)

        def on_change(change) -> None:
            topic = getattr(change, "topic", None)
            if topic is not None and topic.name == TRANSACTION_STATE_TOPIC:
                loop.call_soon_threadsafe(self._resync)

        broker.metadata.add_listener(on_change)
        on_leadership_change(broker, loop, TRANSACTION_STATE_TOPIC, self._resync)

    def close(self) -> None:
        """Close the connections the marker deliveries and the verifier opened (cluster mode)."""
        if self._markers is not None:
            self._markers.close()
        if self._verifier is not None:
            self._verifier.close()

    def _resync(self) -> None:
        coordinator = self.coordinator
        if coordinator.active:
            try:
                coordinator.sync_leadership(self.state_topic_leaders(create=False))
            except Exception:
                log.exception("reloading %s leadership failed", TRANSACTION_STATE_TOPIC)

    def state_topic_leaders(self, create: bool) -> list[int] | None:
        """Leaders of the __transaction_state partitions; with `create`, the topic is created on
        first use as Kafka does. None when it does not exist (or cannot be created)."""
        broker = self._broker
        meta = broker.partitions.topic(TRANSACTION_STATE_TOPIC)
        if meta is None and create:
            config = self.coordinator.config
            try:
                meta = broker.partitions.create_topic(
                    TRANSACTION_STATE_TOPIC, config.transaction_state_log_num_partitions,
                    config.transaction_state_log_replication_factor,
                    configs=transaction_state_topic_configs(config.transaction_state_log_segment_bytes,
                                                            config.transaction_state_log_min_isr),
                    internal=True)
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    level = logging.DEBUG if self._state_topic_warned else logging.WARNING
                    self._state_topic_warned = True
                    log.log(level, "cannot create %s (transaction.state.log.num.partitions=%d, "
                            "transaction.state.log.replication.factor=%d): %s", TRANSACTION_STATE_TOPIC,
                            config.transaction_state_log_num_partitions,
                            config.transaction_state_log_replication_factor, exc)
                    return None
                meta = broker.partitions.topic(TRANSACTION_STATE_TOPIC)
        return partition_leaders(broker, meta)

    def after_state_replicated(self, partition: int, then) -> None:
        """Call `then` once the high watermark of __transaction_state-`partition`
        covers what is appended to it now (the coordinator's acks=-1 write), retrying the wait while
        this broker leads the partition; dropped once it no longer does (the next coordinator loads
        the partition and finishes what it finds)."""
        broker = self._broker
        plog = broker.partitions.get_log(TRANSACTION_STATE_TOPIC, partition)
        if plog is None:
            return
        required = plog.log_end_offset
        if plog.high_watermark >= required:  # replicated already (an ISR of one): no need to wait
            then()
            return
        timeout_s = broker.config.get("request.timeout.ms") / 1000
        backoff_s = self.coordinator.config.marker_retry_backoff_ms / 1000

        async def wait() -> None:
            while True:
                error = await broker.replicas.wait_appended(TRANSACTION_STATE_TOPIC, partition, timeout_s,
                                                            end_offset=required)
                if plog.high_watermark >= required:  # on every ISR member, even an ISR below the minimum
                    try:
                        then()
                    except Exception:
                        log.exception("completing transactions of %s-%d failed", TRANSACTION_STATE_TOPIC,
                                      partition)
                    return
                if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
                    log.info("%s-%d: leadership lost before offset %d was replicated; the next coordinator "
                             "completes its transactions", TRANSACTION_STATE_TOPIC, partition, required - 1)
                    return
                await asyncio.sleep(backoff_s)

        task = asyncio.get_running_loop().create_task(wait())
        self._replication_waits.add(task)
        task.add_done_callback(self._replication_waits.discard)

    @property
    def pending_marker_deliveries(self):
        """The marker deliveries if any marker ever had to wait for its ISR or another broker, else None."""
        return self._markers

    def marker_deliveries(self):
        """The marker deliveries to other brokers and to the ISR, made on first use."""
        if self._markers is None:
            from .txn_marker_sender import RemoteMarkers

            broker = self._broker
            self._markers = RemoteMarkers(broker.node_id, broker.config, broker.metadata, broker.replicas,
                                          on_done=self.coordinator.markers_delivered)
        return self._markers

    def verifier(self):
        """The TxnVerifier that asks another broker's coordinator (cluster mode), made on first use."""
        if self._verifier is None:
            from .txn_verification import TxnVerifier

            broker = self._broker
            self._verifier = TxnVerifier(broker.node_id, broker.config, broker.metadata, self.coordinator)
        return self._verifier


def partition_exists(broker: CoordinationHost, topic: str, partition: int) -> bool:
    meta = broker.partitions.topic(topic)
    return meta is not None and 0 <= partition < len(meta.partitions)


def marker_deliveries(broker: TransactionCoordinationHost):
    """The broker's marker deliveries (cluster mode), made on first use."""
    return broker.transaction_coordination.marker_deliveries()


def write_txn_markers(broker: TransactionCoordinationHost, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      partitions: list[TopicPartition], local_only: bool = False) -> dict[TopicPartition, int]:
    """Append a transaction marker to each local partition; an error code per partition.

    A partition whose topic no longer exists answers UNKNOWN_TOPIC_OR_PARTITION (the coordinator
    then stops waiting for it). Markers on __consumer_offsets partitions also decide the
    producer's transactional offset commits there. Partitions led by other brokers
    get their markers through WriteTxnMarkers (kafkapy.broker.txn_marker_sender) unless `local_only`
    (the WriteTxnMarkers handler itself), where they answer NOT_LEADER_OR_FOLLOWER.
    """
    results: dict[TopicPartition, int] = {}
    offsets_partitions = []
    remote: dict[int, list[TopicPartition]] = {}
    for topic, partition in partitions:
        tp = (topic, partition)
        if not partition_exists(broker, topic, partition):
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        hosted = broker.replicas.partition(topic, partition)
        if hosted is None or not hosted.is_leader:
            leader = broker.metadata.get_topic(topic).partitions[partition].leader
            if local_only or leader < 0 or leader == broker.node_id:
                results[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                remote.setdefault(leader, []).append(tp)
            continue
        plog = broker.partitions.get_log(topic, partition)
        if plog is None:
            results[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        key = (producer_id, producer_epoch, coordinator_epoch, commit, topic, partition)
        # made once a marker had to wait: until then no earlier attempt can be pending
        deliveries = broker.transaction_coordination.pending_marker_deliveries if not local_only else None
        if deliveries is not None:
            outcome = deliveries.outcome(key)
            if outcome is not None:  # appended on an earlier attempt: done, or still replicating
                results[tp] = outcome
                continue
        try:
            broker.replicas.append_txn_marker(hosted, producer_id, producer_epoch, coordinator_epoch, commit)
        except KafkaError as exc:
            log.info("transaction marker of producer %d for %s-%d failed: %s", producer_id, topic, partition, exc)
            results[tp] = exc.code
            continue
        results[tp] = ErrorCode.NONE
        if not local_only and plog.high_watermark < plog.log_end_offset:
            # done once the ISR has the marker (acks=all); at once for an ISR of one
            marker_deliveries(broker).await_local(key, topic, partition, plog.log_end_offset)
            results[tp] = ErrorCode.REQUEST_TIMED_OUT
        if topic == OFFSETS_TOPIC:
            offsets_partitions.append(partition)
    for leader, tps in remote.items():
        results.update(marker_deliveries(broker).write(leader, producer_id, producer_epoch, coordinator_epoch,
                                                       commit, tps))
    if offsets_partitions:
        try:
            broker.group_coordinator.on_transaction_completed(producer_id, offsets_partitions, commit)
        except Exception:
            log.exception("applying the transaction of producer %d to the group offsets failed", producer_id)
            results.update(((OFFSETS_TOPIC, p), ErrorCode.UNKNOWN_SERVER_ERROR) for p in offsets_partitions)
    return results
