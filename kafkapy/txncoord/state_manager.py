"""Transaction metadata storage: the transactional ids this broker coordinates, backed by
__transaction_state (Kafka's TransactionStateManager).

Owns which __transaction_state partitions are loaded here (with the coordinator epoch each was
loaded at), writes every state transition as a record before applying it, rebuilds the cache
from the log when a partition is taken over, and finds timed-out and expired transactions.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..groupcoord.metadata_manager import LOAD_SLICE_S, CollectorPause
from ..groupcoord.offsets_topic import OffsetsTopicStore, partition_for
from ..metadata.topic_rules import TRANSACTION_STATE_TOPIC
from ..protocol.errors import ErrorCode, KafkaError
from .metadata import TransactionMetadata, TransactionState, TxnTransitMetadata
from .records import TransactionLogValue, decode_key, decode_value, encode_key, encode_value

log = logging.getLogger(__name__)


__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionStateManager", "transaction_state_topic_configs"]

# How a failed write of a transition shows to the client (Kafka's appendTransactionToLog).
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def transaction_state_topic_configs(segment_bytes: int, min_isr: int) -> dict[str, str]:
    """Topic configs Kafka gives __transaction_state when it creates it."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(min_isr),
        "segment.bytes": str(segment_bytes),
    }


@dataclass(slots=True)
class PartitionCache:
    """The transactional ids of one loaded __transaction_state partition."""

    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


def to_log_value(target: TxnTransitMetadata) -> bytes:
    partitions: dict[str, list[int]] = {}
    for topic, partition in target.partitions:
        partitions.setdefault(topic, []).append(partition)
    value = TransactionLogValue(target.producer_id, target.producer_epoch, target.txn_timeout_ms,
                                target.state.id, partitions, target.txn_last_update_timestamp,
                                target.txn_start_timestamp)
    return encode_value(value, partitions_null=target.state == TransactionState.EMPTY)


def from_log_value(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    state = TransactionState.from_id(value.state_id)
    metadata = TransactionMetadata(
        transactional_id, value.producer_id, producer_epoch=value.producer_epoch,
        txn_timeout_ms=value.transaction_timeout_ms, state=state,
        txn_start_timestamp=value.start_timestamp_ms, txn_last_update_timestamp=value.last_update_timestamp_ms)
    if state != TransactionState.EMPTY:
        metadata.partitions = {(topic, p) for topic, ids in value.partitions.items() for p in ids}
    return metadata


class TransactionStateManager:
    """Transaction metadata by transactional id, for the __transaction_state partitions led here."""

    def __init__(self, store: OffsetsTopicStore, num_partitions: int, clock_ms: Callable[[], int]):
        self.store = store
        self.num_partitions = num_partitions
        self.clock_ms = clock_ms
        self.partitions: dict[int, PartitionCache] = {}
        self.loading_partitions: set[int] = set()
        self._load_tasks: dict[int, asyncio.Task] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    # -- lookups ----------------------------------------------------------------------------
    def get(self, transactional_id: str) -> tuple[int, PartitionCache | None, TransactionMetadata | None]:
        """(error, partition cache, metadata or None): NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS when the id's partition is not served here."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None, None
        cache = self.partitions.get(partition)
        if cache is None:
            return ErrorCode.NOT_COORDINATOR, None, None
        return ErrorCode.NONE, cache, cache.transactions.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> tuple[int, PartitionCache | None,
                                                                    TransactionMetadata | None]:
        error, cache, existing = self.get(metadata.transactional_id)
        if error != ErrorCode.NONE or existing is not None:
            return error, cache, existing
        cache.transactions[metadata.transactional_id] = metadata
        return error, cache, metadata

    def all_transactions(self) -> Iterator[TransactionMetadata]:
        for cache in self.partitions.values():
            yield from cache.transactions.values()

    # -- writes -----------------------------------------------------------------------------
    def append_transition(self, transactional_id: str, coordinator_epoch: int,
                          target: TxnTransitMetadata, keep_pending_on_error: bool = False) -> int:
        """Write a prepared transition to __transaction_state and, once written, apply it.

        Returns Kafka's error code for the client. On failure the pending state is dropped
        unless `keep_pending_on_error` (the caller retries the same transition).
        """
        error, cache, metadata = self.get(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if metadata is None or cache.coordinator_epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        record = (encode_key(transactional_id), to_log_value(target))
        try:
            self.store.append(self.partition_for(transactional_id), [record], self.clock_ms())
        except KafkaError as exc:
            code = _APPEND_ERRORS.get(exc.code, exc.code)
            log.info("writing %s of transactional id %s failed: %s (returning %s)", target.state.display_name,
                     transactional_id, exc, ErrorCode(code).name)
            if not keep_pending_on_error:
                metadata.abort_pending()
            return code
        error, cache, current = self.get(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if current is not metadata or cache.coordinator_epoch != coordinator_epoch:
            # the partition was unloaded and loaded again meanwhile
            return ErrorCode.NOT_COORDINATOR
        metadata.complete_transition_to(target)
        return ErrorCode.NONE

    def remove_expired(self, expiration_ms: int) -> int:
        """Write tombstones for transactional ids idle longer than transactional.id.expiration.ms
        (in state Empty or Complete*) and forget them; returns how many went."""
        now = self.clock_ms()
        removed = 0
        for partition, cache in list(self.partitions.items()):
            expired = []
            for metadata in cache.transactions.values():
                if metadata.pending_state is None and metadata.state.expiration_allowed \
                        and metadata.txn_last_update_timestamp <= now - expiration_ms:
                    metadata.prepare_dead()
                    expired.append(metadata)
            if not expired:
                continue
            try:
                self.store.append(partition, [(encode_key(m.transactional_id), None) for m in expired], now)
            except KafkaError as exc:
                log.warning("writing %d tombstones of expired transactional ids to %s-%d failed: %s",
                            len(expired), TRANSACTION_STATE_TOPIC, partition, exc)
                for metadata in expired:
                    metadata.abort_pending()
                continue
            for metadata in expired:
                if cache.transactions.get(metadata.transactional_id) is metadata:
                    del cache.transactions[metadata.transactional_id]
            removed += len(expired)
            log.info("expired %d transactional ids of %s-%d", len(expired), TRANSACTION_STATE_TOPIC, partition)
        return removed

    # -- loading ----------------------------------------------------------------------------
    def load_partition(self, partition: int, coordinator_epoch: int) -> list[TransactionMetadata]:
        """Rebuild the transactional ids of one partition from its log, at once; returns them."""
        steps = self._load_steps(partition, coordinator_epoch)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def start_loading(self, partition: int, coordinator_epoch: int, scheduler: Any,
                      on_loaded: Callable[[list[TransactionMetadata]], None]) -> None:
        """Load a partition this broker now leads, then call `on_loaded(transactions)`.

        On an asyncio loop the read and decode run as a task that yields to the loop every
        LOAD_SLICE_S of work; the partition's ids answer COORDINATOR_LOAD_IN_PROGRESS until
        the loaded cache replaces the partition's, in one step. Without a loop it loads at once.
        """
        if not isinstance(scheduler, asyncio.AbstractEventLoop):
            on_loaded(self.load_partition(partition, coordinator_epoch))
            return
        self._cancel_load(partition)
        steps = self._load_steps(partition, coordinator_epoch)
        try:
            next(steps)  # the first slice runs at once: a small partition needs no task
        except StopIteration as done:
            on_loaded(done.value)
            return
        # an empty cache holds the partition's place (sync_leadership sees it as led) until loaded
        self.partitions[partition] = PartitionCache(coordinator_epoch)
        self._load_tasks[partition] = scheduler.create_task(
            self._load_async(partition, coordinator_epoch, on_loaded, steps))

    def _cancel_load(self, partition: int) -> None:
        task = self._load_tasks.pop(partition, None)
        if task is not None:
            task.cancel()

    async def _load_async(self, partition: int, coordinator_epoch: int,
                          on_loaded: Callable[[list[TransactionMetadata]], None],
                          steps: Generator[None, None, list[TransactionMetadata]]) -> None:
        started = time.monotonic()
        CollectorPause.begin()
        try:
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    loaded = done.value
                    break
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            steps.close()
            raise
        except Exception:
            log.exception("%s-%d: loading failed", TRANSACTION_STATE_TOPIC, partition)
            self.loading_partitions.discard(partition)
            return
        finally:
            CollectorPause.end()
            if self._load_tasks.get(partition) is asyncio.current_task():
                del self._load_tasks[partition]
        log.info("%s-%d: loaded in %.3f s", TRANSACTION_STATE_TOPIC, partition, time.monotonic() - started)
        on_loaded(loaded)

    def _load_steps(self, partition: int, coordinator_epoch: int
                    ) -> Generator[None, None, list[TransactionMetadata]]:
        """The load as steps, yielding every LOAD_SLICE_S of work; reading the last part
        and replacing the partition's cache happen in one step."""
        self.loading_partitions.add(partition)
        loaded: dict[str, TransactionMetadata] = {}
        records = 0
        clock = time.monotonic
        slice_end = clock() + LOAD_SLICE_S
        try:
            for key, value in self.store.read(partition):
                records += 1
                if not records & 63 and clock() >= slice_end:
                    yield
                    slice_end = clock() + LOAD_SLICE_S
                if key is None:
                    log.warning("%s-%d: record without a key; skipped", TRANSACTION_STATE_TOPIC, partition)
                    continue
                transactional_id = decode_key(key)
                if transactional_id is None:
                    log.warning("%s-%d: unknown key version; skipped", TRANSACTION_STATE_TOPIC, partition)
                    continue
                if value is None:
                    loaded.pop(transactional_id, None)
                else:
                    loaded[transactional_id] = from_log_value(transactional_id, decode_value(value))
        except (KafkaError, ValueError) as exc:
            log.error("%s-%d: stopped loading after %d records: %s", TRANSACTION_STATE_TOPIC, partition,
                      records, exc)
        self.loading_partitions.discard(partition)
        self.partitions[partition] = PartitionCache(coordinator_epoch, loaded)
        if records:
            log.info("loaded %d transactional ids from %s-%d (%d records) at coordinator epoch %d",
                     len(loaded), TRANSACTION_STATE_TOPIC, partition, records, coordinator_epoch)
        return list(loaded.values())

    def unload_partition(self, partition: int) -> None:
        self._cancel_load(partition)
        self.loading_partitions.discard(partition)
        cache = self.partitions.pop(partition, None)
        if cache is not None:
            log.info("unloaded %d transactional ids of %s-%d", len(cache.transactions), TRANSACTION_STATE_TOPIC,
                     partition)
