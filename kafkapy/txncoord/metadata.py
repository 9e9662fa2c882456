"""One transactional id's state and its legal transitions (Kafka's TransactionMetadata).

A change is prepared first (`prepare_*` returns the target `TxnTransitMetadata` and sets
`pending_state`, which blocks any other change), written to __transaction_state, and only then
applied with `complete_transition_to` -- or dropped with `abort_pending` if the write failed.

    Empty ----AddPartitions/AddOffsets----> Ongoing ---EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
      ^                                       |  \\---EndTxn(abort)---> PrepareAbort  --markers--> CompleteAbort
      |                                       \\---InitProducerId/timeout: PrepareEpochFence -> PrepareAbort
      +---InitProducerId (epoch bump)--- Empty / CompleteCommit / CompleteAbort;  expiry -> Dead (tombstone)
"""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767

TopicPartition = tuple[str, int]

__all__ = ["TransactionMetadata", "TransactionState", "TxnTransitMetadata", "IllegalTransition",
           "is_epoch_exhausted"]


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client error."""


class TransactionState(enum.Enum):
    """Kafka's transaction states: (id stored in the log, name DescribeTransactions shows)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def display_name(self) -> str:
        return self.value[1]

    @property
    def expiration_allowed(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                        TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for state in cls:
            if state.display_name == name:
                return state
        return None


S = TransactionState
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch (32767) free so the coordinator can always fence a producer."""
    return epoch >= MAX_EPOCH - 1


@dataclass(slots=True, frozen=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what gets written to __transaction_state."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(slots=True)
class TransactionMetadata:
    """The coordinator's view of one transactional id."""

    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TransactionState | None = None
    # An epoch fence whose log write failed already bumped the epoch; don't bump it twice.
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    # -- preparing transitions --------------------------------------------------------------
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the current producer before aborting its transaction."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransition(f"cannot fence producer of {self.transactional_id}: epoch would overflow")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata | None:
        """InitProducerId's epoch bump; None when `expected_epoch` shows a fenced producer."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransition(f"no producer epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump whose response the producer never got
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            log.info("expected producer epoch %d of %s matches neither the current %d nor the last %d",
                     expected_epoch, self.transactional_id, self.producer_epoch, self.last_producer_epoch)
            return None
        return self._prepare(S.EMPTY, self.producer_id, epoch, last_epoch, new_timeout_ms, frozenset(), -1,
                             now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """A new producer id once the epochs of the current one are exhausted."""
        if self.has_pending_transaction:
            raise IllegalTransition("cannot rotate producer ids while a transaction is pending")
        return self._prepare(S.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             new_timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int) -> TxnTransitMetadata:
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) \
            else self.txn_start_timestamp
        return self._prepare(S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions | added), start, now_ms)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int) -> TxnTransitMetadata:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_timestamp, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def _prepare(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int,
                 timeout_ms: int, partitions: frozenset[TopicPartition], start: int,
                 now_ms: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: preparing {state.display_name} while "
                                    f"{self.pending_state.display_name} is pending")
        if producer_id < 0:
            raise IllegalTransition(f"illegal producer id {producer_id}")
        if state != S.DEAD and epoch < 0:
            raise IllegalTransition(f"illegal producer epoch {epoch}")
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.display_name} cannot move to "
                                    f"{state.display_name}")
        self.pending_state = state
        return TxnTransitMetadata(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state,
                                  partitions, start, now_ms)

    # -- completing -------------------------------------------------------------------------
    def complete_transition_to(self, target: TxnTransitMetadata) -> None:
        """Apply a prepared transition once it is in __transaction_state (Kafka's checks)."""
        state = self.pending_state
        if state is None or state != target.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {target.state.display_name} but "
                                    f"the pending state is {state.display_name if state else None}")
        same_producer = target.producer_epoch == self.producer_epoch and target.producer_id == self.producer_id
        if state == S.EMPTY:
            valid_bump = target.producer_epoch == self.producer_epoch + 1 or (
                target.producer_epoch == 0 and target.producer_id != self.producer_id)
            if (self.producer_epoch != target.producer_epoch and not valid_bump) or target.partitions \
                    or target.txn_start_timestamp != -1:
                self._failed(target)
            self.txn_timeout_ms = target.txn_timeout_ms
            self.producer_epoch = target.producer_epoch
            self.last_producer_epoch = target.last_producer_epoch
            self.producer_id = target.producer_id
            self.last_producer_id = target.last_producer_id
        elif state == S.ONGOING:
            if not same_producer or not self.partitions <= target.partitions \
                    or self.txn_timeout_ms != target.txn_timeout_ms:
                self._failed(target)
            self.txn_start_timestamp = target.txn_start_timestamp
            self.partitions |= target.partitions
        elif state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            if not same_producer or self.partitions != target.partitions \
                    or self.txn_timeout_ms != target.txn_timeout_ms \
                    or self.txn_start_timestamp != target.txn_start_timestamp:
                self._failed(target)
        elif state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            if not same_producer or self.txn_timeout_ms != target.txn_timeout_ms \
                    or target.txn_start_timestamp == -1:
                self._failed(target)
            self.txn_start_timestamp = target.txn_start_timestamp
            self.partitions.clear()
        else:
            # PrepareEpochFence becomes PrepareAbort before anything is written; Dead removes
            # the metadata instead of completing.
            self._failed(target)
        self.txn_last_update_timestamp = target.txn_last_update_timestamp
        self.pending_state = None
        self.state = state

    def abort_pending(self) -> None:
        """The prepared transition was not written: forget it."""
        self.pending_state = None

    def _failed(self, target: TxnTransitMetadata) -> None:
        raise IllegalTransition(f"{self!r} cannot complete the transition to {target!r}")
