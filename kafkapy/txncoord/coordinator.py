"""The transaction coordinator: transactional ids, producer epochs and two-phase commit for the
__transaction_state partitions this broker leads (Kafka's TransactionCoordinator).

Every rule of Kafka 3.9's coordinator (transaction.version 1: the epoch is bumped only by
InitProducerId and by fencing): InitProducerId bumps the epoch (fencing zombies) or rotates the
producer id when epochs run out, aborting an open transaction first; AddPartitionsToTxn and
AddOffsetsToTxn move the transaction to Ongoing; EndTxn writes PrepareCommit/PrepareAbort, then
the markers, then CompleteCommit/CompleteAbort; transactions open longer than their timeout are
aborted with a fenced epoch; idle transactional ids expire.

Markers go to the partition leaders, which are all local on a single-node cluster: the
`write_markers` callable given by the broker appends them directly (what WriteTxnMarkers does on
the partition leader) and reports an error per partition; partitions that fail with a retriable
error are retried after a back-off, the transaction staying in Prepare* meanwhile.

No asyncio: timers go through the `scheduler` given to start() (an asyncio loop, or a manual
clock in tests) and are all cancelled by close(). Not thread-safe: one event loop calls it.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..protocol.errors import ErrorCode
from .config import TransactionCoordinatorConfig
from .metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from .state_manager import TRANSACTION_STATE_TOPIC, TransactionStateManager

log = logging.getLogger(__name__)

S = TransactionState
TopicPartition = tuple[str, int]
# write_markers(producer id, producer epoch, coordinator epoch, commit, partitions) -> error per partition
MarkerWriter = Callable[[int, int, int, bool, list[TopicPartition]], dict[TopicPartition, int]]

__all__ = ["InitProducerIdResult", "TransactionCoordinator", "TransactionDescription"]

# Marker errors after which the partition no longer needs a marker (Kafka's completion handler).
_MARKER_DONE = {ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION}
# The producer or coordinator epoch moved on: this marker is obsolete (Kafka stops sending).
_MARKER_OBSOLETE = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
# The partition is gone (topic deleted): no marker is needed (Kafka drops partitions without leader).
_MARKER_NO_PARTITION = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID}


@dataclass(slots=True)
class InitProducerIdResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(slots=True)
class TransactionDescription:
    """One DescribeTransactions / ListTransactions entry."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_timestamp_ms: int
    partitions: list[TopicPartition]


class TransactionCoordinator:
    """Transactional ids and their transactions, for the __transaction_state partitions led here."""

    def __init__(self, config: TransactionCoordinatorConfig, store, allocate_producer_id: Callable[[], int],
                 write_markers: MarkerWriter, *, node_id: int = 0,
                 coordinator_epoch_for: Callable[[int], int] = lambda partition: 0,
                 state_topic_leaders: Callable[[bool], list[int] | None] | None = None,
                 after_state_replicated: Callable[[int, Callable[[], None]], None] | None = None,
                 clock_ms: Callable[[], int] | None = None,
                 forget_markers: Callable[[list[int]], None] | None = None):
        self.config = config
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.state = TransactionStateManager(store, config.transaction_state_log_num_partitions, self.clock_ms)
        self.allocate_producer_id = allocate_producer_id
        self.write_markers = write_markers
        self.node_id = node_id
        self.coordinator_epoch_for = coordinator_epoch_for
        self.state_topic_leaders = state_topic_leaders
        # cluster mode: `after_state_replicated(partition, then)` calls `then` once what was appended
        # to that __transaction_state partition is on its ISR; None calls it at once
        self.after_state_replicated = after_state_replicated
        # cluster mode: `forget_markers(producer ids)` drops the marker outcomes kept for them, once
        # their transaction is complete or their partition unloaded (Kafka's removeMarkersForTxnId
        # and removeMarkersForTxnTopicPartition), so that no later transaction is answered by them
        self.forget_markers = forget_markers
        # transactions whose markers are still being delivered, by producer id: looked at again as
        # soon as a delivery finishes (markers_delivered), the retry timer being the fallback
        self._awaiting_markers: dict[int, tuple[str, int, bool]] = {}
        # transactional ids whose Prepare record is not on the ISR yet: no markers for them, whatever
        # asks (a retry timer left from an earlier transaction of the same producer included)
        self._unreplicated: set[str] = set()
        self.scheduler: Any = None
        self._timers: set[Any] = set()
        self._leaders: list[int] | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.scheduler is not None

    def start(self, scheduler: Any) -> None:
        """Begin serving: `scheduler.call_later(delay_s, fn, *args)` runs the timers. Loads the
        __transaction_state partitions led here if the topic exists (it is created on first use)."""
        self.scheduler = scheduler
        self._repeat(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                     self.abort_timed_out_transactions)
        self._repeat(self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                     lambda: self.state.remove_expired(self.config.transactional_id_expiration_ms))
        if self.state_topic_leaders is not None:
            self.sync_leadership(self.state_topic_leaders(False))

    def close(self) -> None:
        """Stop: cancel every timer and forget the loaded partitions."""
        for timer in list(self._timers):
            timer.cancel()
        self._timers.clear()
        for partition in list(self.state.partitions):
            self._unload(partition)
        self._leaders = None
        self.scheduler = None

    def _repeat(self, interval_ms: int, fn: Callable[[], Any]) -> None:
        def run() -> None:
            self._timers.discard(handle)
            if self.scheduler is None:
                return
            try:
                fn()
            except Exception:
                log.exception("periodic transaction task %s failed", getattr(fn, "__name__", fn))
            if self.scheduler is not None:
                self._repeat(interval_ms, fn)

        handle = self.scheduler.call_later(interval_ms / 1000, run)
        self._timers.add(handle)

    def _later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> None:
        def run() -> None:
            self._timers.discard(handle)
            if self.scheduler is None:
                return
            try:
                fn(*args)
            except Exception:
                log.exception("transaction task %s failed", getattr(fn, "__name__", fn))

        handle = self.scheduler.call_later(delay_ms / 1000, run)
        self._timers.add(handle)

    # -- placement ----------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return self.state.partition_for(transactional_id)

    def find_coordinator(self, transactional_id: str) -> tuple[int, int]:
        """FindCoordinator(key_type=1): (error, node id), creating __transaction_state on first use."""
        if self.state_topic_leaders is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        leaders = self.state_topic_leaders(True)
        if not leaders:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        if leaders != self._leaders:
            self.sync_leadership(leaders)
        leader = leaders[self.partition_for(transactional_id)]
        return (ErrorCode.NONE, leader) if leader >= 0 else (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)

    def sync_leadership(self, partition_leaders: list[int] | None) -> None:
        """Load or unload __transaction_state partitions to match who leads them now.

        `partition_leaders[p]` is the leader of partition p (None: the topic does not exist).
        The topic's real partition count decides placement, as in Kafka.
        """
        self._leaders = list(partition_leaders) if partition_leaders is not None else None
        if not self.active:
            return
        if partition_leaders is None:
            led: set[int] = set()
        else:
            if partition_leaders and len(partition_leaders) != self.state.num_partitions:
                log.info("%s has %d partitions (transaction.state.log.num.partitions is %d); using %d",
                         TRANSACTION_STATE_TOPIC, len(partition_leaders),
                         self.config.transaction_state_log_num_partitions, len(partition_leaders))
                self.state.num_partitions = len(partition_leaders)
            led = {p for p, leader in enumerate(partition_leaders) if leader == self.node_id}
        for partition in sorted(set(self.state.partitions) - led):
            self._unload(partition)
        for partition in sorted(led - set(self.state.partitions)):
            self.on_elected(partition)

    def _unload(self, partition: int) -> None:
        """No longer coordinating __transaction_state-`partition`: forget its marker outcomes."""
        cache = self.state.partitions.get(partition)
        if cache is not None:
            producer_ids = [m.producer_id for m in cache.transactions.values()]
            for producer_id in producer_ids:
                self._awaiting_markers.pop(producer_id, None)
            self._forget_markers(producer_ids)
        self.state.unload_partition(partition)

    def _forget_markers(self, producer_ids: list[int]) -> None:
        if self.forget_markers is not None and producer_ids:
            try:
                self.forget_markers(producer_ids)
            except Exception:
                log.exception("forgetting the marker outcomes of producers %s failed", producer_ids)

    def on_elected(self, partition: int) -> None:
        """This broker now leads __transaction_state-`partition`: load it and finish the
        transactions that were between Prepare* and Complete*."""
        epoch = self.coordinator_epoch_for(partition)

        def loaded(transactions: list[TransactionMetadata]) -> None:
            for metadata in transactions:
                if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    self._unreplicated.discard(metadata.transactional_id)  # a wait dropped with leadership
                    log.info("completing %s of transactional id %s after loading %s-%d", metadata.state.display_name,
                             metadata.transactional_id, TRANSACTION_STATE_TOPIC, partition)
                    self._complete_transaction(metadata.transactional_id, epoch,
                                               metadata.state == S.PREPARE_COMMIT)

        # on an event loop the load does not block it (COORDINATOR_LOAD_IN_PROGRESS until loaded)
        self.state.start_loading(partition, epoch, self.scheduler, loaded)

    # -- InitProducerId -------------------------------------------------------------------------
    def handle_init_producer_id(self, transactional_id: str, timeout_ms: int,
                                producer_id: int = NO_PRODUCER_ID,
                                producer_epoch: int = NO_PRODUCER_EPOCH) -> InitProducerIdResult:
        """InitProducerId with a transactional id; `producer_id`/`producer_epoch` (v3+, KIP-360)
        are the producer's current ones when it recovers from an error."""
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        error, cache, metadata = self.state.get(transactional_id)
        if error == ErrorCode.NONE and metadata is None:
            created = TransactionMetadata(transactional_id, self.allocate_producer_id(), txn_timeout_ms=timeout_ms,
                                          txn_last_update_timestamp=self.clock_ms())
            error, cache, metadata = self.state.put_if_absent(created)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        coordinator_epoch = cache.coordinator_epoch
        result = self._prepare_init_producer_id(metadata, timeout_ms, expected)
        if isinstance(result, int):
            return InitProducerIdResult(result)
        if result.state == S.PREPARE_EPOCH_FENCE:
            # abort the open transaction first; the producer retries and gets a second bump
            error = self._end_transaction(transactional_id, result.producer_id, result.producer_epoch,
                                          commit=False, from_client=False)
            return InitProducerIdResult(error if error != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS)
        error = self.state.append_transition(transactional_id, coordinator_epoch, result)
        if error != ErrorCode.NONE:
            log.info("returning %s to InitProducerId of %s", ErrorCode(error).name, transactional_id)
            return InitProducerIdResult(error)
        log.info("initialized transactional id %s with producer id %d and epoch %d on %s-%d", transactional_id,
                 result.producer_id, result.producer_epoch, TRANSACTION_STATE_TOPIC,
                 self.partition_for(transactional_id))
        return InitProducerIdResult(ErrorCode.NONE, result.producer_id, result.producer_epoch)

    def _prepare_init_producer_id(self, metadata: TransactionMetadata, timeout_ms: int,
                                  expected: tuple[int, int] | None) -> TxnTransitMetadata | int:
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None:
            pid, epoch = expected
            # the producer's id must be the current one, or the previous one right after a
            # rotation it never heard about; an id-less fresh metadata accepts any
            valid = (metadata.producer_epoch == NO_PRODUCER_EPOCH or pid == metadata.producer_id
                     or (pid == metadata.last_producer_id and is_epoch_exhausted(epoch)))
            if not valid:
                return ErrorCode.PRODUCER_FENCED
        state = metadata.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
                return metadata.prepare_producer_id_rotation(self.allocate_producer_id(), timeout_ms,
                                                             self.clock_ms(), expected is not None)
            target = metadata.prepare_increment_producer_epoch(
                timeout_ms, expected[1] if expected is not None else None, self.clock_ms())
            return target if target is not None else ErrorCode.PRODUCER_FENCED
        if state == S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        log.error("transactional id %s is in state %s, which InitProducerId never sees", metadata.transactional_id,
                  state.display_name)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------
    def handle_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[TopicPartition]) -> int:
        """Add partitions to the producer's transaction (starting it); Kafka's error code."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        wanted = set(partitions)
        error, cache, metadata = self.state.get(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state == S.ONGOING and wanted <= metadata.partitions:
            return ErrorCode.NONE
        target = metadata.prepare_add_partitions(wanted, self.clock_ms())
        return self.state.append_transition(transactional_id, cache.coordinator_epoch, target)

    def handle_verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """KIP-890 verification (AddPartitionsToTxn v4+ verify_only, and the produce path): is
        each partition in the producer's ongoing transaction? TRANSACTION_ABORTABLE if not."""
        wanted = list(partitions)
        if not transactional_id:
            return {tp: ErrorCode.INVALID_REQUEST for tp in wanted}
        error, _, metadata = self.state.get(transactional_id)
        if error == ErrorCode.NONE:
            if metadata is None or metadata.producer_id != producer_id:
                error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            elif metadata.producer_epoch != producer_epoch:
                error = ErrorCode.PRODUCER_FENCED
            elif metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE:
            return {tp: error for tp in wanted}
        return {tp: ErrorCode.NONE if tp in metadata.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in wanted}

    # -- EndTxn ---------------------------------------------------------------------------------
    def handle_end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       commit: bool) -> int:
        """Commit or abort the producer's transaction; NONE once the decision is durable."""
        return self._end_transaction(transactional_id, producer_id, producer_epoch, commit, from_client=True)

    def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                         from_client: bool) -> int:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        error, cache, metadata = self.state.get(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # clients must name the current epoch; the coordinator itself fences with a higher one
        if (from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress and metadata.pending_state != S.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = metadata.state
        is_epoch_fence = False
        if state == S.ONGOING:
            if not commit and metadata.pending_state == S.PREPARE_EPOCH_FENCE:
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            target = metadata.prepare_abort_or_commit(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
                                                      self.clock_ms())
        elif state == S.COMPLETE_COMMIT:
            return ErrorCode.NONE if commit else self._invalid_state(transactional_id, state, commit)
        elif state == S.COMPLETE_ABORT:
            return ErrorCode.NONE if not commit else self._invalid_state(transactional_id, state, commit)
        elif state == S.PREPARE_COMMIT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if commit else self._invalid_state(transactional_id, state, commit)
        elif state == S.PREPARE_ABORT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if not commit else self._invalid_state(
                transactional_id, state, commit)
        elif state == S.EMPTY:
            return self._invalid_state(transactional_id, state, commit)
        else:
            log.error("transactional id %s is in state %s, which EndTxn never sees", transactional_id,
                      state.display_name)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        coordinator_epoch = cache.coordinator_epoch
        error = self.state.append_transition(transactional_id, coordinator_epoch, target)
        if error != ErrorCode.NONE:
            if is_epoch_fence:
                metadata.has_failed_epoch_fence = True
                log.warning("fencing the producer of %s failed (%s); epoch %d was not returned to it",
                            transactional_id, ErrorCode(error).name, producer_epoch)
            return error
        # markers only once the Prepare* record is on the ISR, as Kafka (acks=-1, then markers): a
        # coordinator lost before that leaves a successor that sees the transaction still Ongoing
        # and aborts it, which must not find COMMIT markers already on some of its partitions
        if self.after_state_replicated is None:
            self._complete_transaction(transactional_id, coordinator_epoch, commit)
        else:
            self._unreplicated.add(transactional_id)

            def replicated() -> None:
                self._unreplicated.discard(transactional_id)
                self._complete_transaction(transactional_id, coordinator_epoch, commit)

            self.after_state_replicated(self.partition_for(transactional_id), replicated)
        return ErrorCode.NONE

    def markers_delivered(self, producer_id: int) -> None:
        """A marker delivery of `producer_id` finished (cluster mode): if its transaction waits for
        markers, look at it again now rather than after the retry back-off."""
        waiting = self._awaiting_markers.pop(producer_id, None)
        if waiting is not None:
            self._complete_transaction(*waiting)

    @staticmethod
    def _invalid_state(transactional_id: str, state: TransactionState, commit: bool) -> int:
        log.debug("transactional id %s is %s; refusing EndTxn(%s)", transactional_id, state.display_name,
                  "commit" if commit else "abort")
        return ErrorCode.INVALID_TXN_STATE

    def _complete_transaction(self, transactional_id: str, coordinator_epoch: int, commit: bool) -> None:
        """Write the markers of a Prepare* transaction, then Complete*; retried after a
        back-off while some partition cannot take its marker."""
        error, cache, metadata = self.state.get(transactional_id)
        if error != ErrorCode.NONE or metadata is None or cache.coordinator_epoch != coordinator_epoch:
            log.info("no longer coordinating %s at epoch %d; its markers are not sent", transactional_id,
                     coordinator_epoch)
            return
        expected = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if metadata.state != expected or metadata.pending_transition_in_progress \
                or transactional_id in self._unreplicated:
            return
        retry = False
        back_off = False
        if metadata.partitions:
            results = self.write_markers(metadata.producer_id, metadata.producer_epoch, coordinator_epoch, commit,
                                         sorted(metadata.partitions))
            for tp, code in results.items():
                if code in _MARKER_DONE or code in _MARKER_NO_PARTITION:
                    metadata.partitions.discard(tp)
                elif code in _MARKER_OBSOLETE:
                    # Kafka's TransactionMarkerRequestCompletionHandler: removeMarkersForTxnId and
                    # abortSending. A newer coordinator (or producer epoch) exists and finishes the
                    # transaction; completing it here would leave partitions without their marker.
                    # (Outcomes are keyed by coordinator epoch and forgotten with the transaction,
                    # so this answer was given to this coordinator for this transaction.)
                    log.warning("marker of %s for %s-%d is obsolete (%s); this coordinator stops completing it",
                                transactional_id, tp[0], tp[1], ErrorCode(code).name)
                    self._awaiting_markers.pop(metadata.producer_id, None)
                    self._forget_markers([metadata.producer_id])
                    return
                else:
                    # REQUEST_TIMED_OUT is also "still being delivered" (cluster mode): not news
                    log.log(logging.DEBUG if code == ErrorCode.REQUEST_TIMED_OUT else logging.INFO,
                            "marker of %s for %s-%d failed with %s; retrying", transactional_id, tp[0], tp[1],
                            ErrorCode(code).name)
                    retry = True
                    back_off = back_off or code != ErrorCode.REQUEST_TIMED_OUT
        if retry:
            # looked at again as soon as a delivery in flight finishes, unless a marker was refused:
            # then only after the back-off (no tight loop appending a marker per attempt)
            if back_off:
                self._awaiting_markers.pop(metadata.producer_id, None)
            else:
                self._awaiting_markers[metadata.producer_id] = (transactional_id, coordinator_epoch, commit)
            self._later(self.config.marker_retry_backoff_ms, self._complete_transaction, transactional_id,
                        coordinator_epoch, commit)
            return
        self._awaiting_markers.pop(metadata.producer_id, None)
        self._forget_markers([metadata.producer_id])
        target = metadata.prepare_complete(self.clock_ms())
        error = self.state.append_transition(transactional_id, coordinator_epoch, target)
        if error != ErrorCode.NONE:
            log.warning("writing %s of %s failed with %s; retrying", target.state.display_name, transactional_id,
                        ErrorCode(error).name)
            self._later(self.config.marker_retry_backoff_ms, self._complete_transaction, transactional_id,
                        coordinator_epoch, commit)

    # -- timeouts -------------------------------------------------------------------------------
    def abort_timed_out_transactions(self) -> int:
        """Abort (with a fenced epoch) every Ongoing transaction older than its timeout."""
        now = self.clock_ms()
        timed_out = [(m.transactional_id, m.producer_id) for m in self.state.all_transactions()
                     if m.state == S.ONGOING and m.pending_state is None
                     and m.txn_start_timestamp + m.txn_timeout_ms < now]
        aborted = 0
        for transactional_id, producer_id in timed_out:
            error, _, metadata = self.state.get(transactional_id)
            if error != ErrorCode.NONE or metadata is None or metadata.producer_id != producer_id \
                    or metadata.pending_transition_in_progress:
                continue
            target = metadata.prepare_fence_producer_epoch()
            log.info("aborting transaction of %s (producer id %d): open longer than its timeout of %d ms",
                     transactional_id, producer_id, metadata.txn_timeout_ms)
            error = self._end_transaction(transactional_id, target.producer_id, target.producer_epoch, commit=False,
                                          from_client=False)
            if error == ErrorCode.NONE:
                aborted += 1
            else:
                if metadata.pending_state == S.PREPARE_EPOCH_FENCE:
                    metadata.abort_pending()
                log.info("aborting the timed-out transaction of %s failed: %s", transactional_id,
                         ErrorCode(error).name)
        return aborted

    # -- admin ----------------------------------------------------------------------------------
    def describe_transaction(self, transactional_id: str) -> tuple[int, TransactionDescription | None]:
        """DescribeTransactions of one id: (error, description)."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        error, _, metadata = self.state.get(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        if metadata is None or metadata.state == S.DEAD or metadata.pending_state == S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, self._describe(metadata)

    @staticmethod
    def _describe(metadata: TransactionMetadata) -> TransactionDescription:
        return TransactionDescription(metadata.transactional_id, metadata.producer_id, metadata.producer_epoch,
                                      metadata.state.display_name, metadata.txn_timeout_ms,
                                      metadata.txn_start_timestamp, sorted(metadata.partitions))

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1) -> tuple[int, list[str], list[TransactionDescription]]:
        """ListTransactions: (error, unknown state filters, matching transactions)."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        if self.state.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        states = list(states)
        wanted_states = set()
        unknown = []
        for name in states:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted_states.add(state)
        pids = set(producer_ids)
        now = self.clock_ms()
        found = []
        for metadata in self.state.all_transactions():
            if metadata.state == S.DEAD:
                continue
            if pids and metadata.producer_id not in pids:
                continue
            if states and metadata.state not in wanted_states:
                continue
            if duration_ms >= 0 and now - metadata.txn_start_timestamp <= duration_ms:
                continue
            found.append(self._describe(metadata))
        return ErrorCode.NONE, unknown, found
