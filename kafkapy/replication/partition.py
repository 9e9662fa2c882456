"""One partition replica hosted by a broker: its role, the ISR, follower progress and the
high watermark (the rules of Kafka's cluster.Partition).

No sockets, no tasks: a leader's proposals to change the ISR leave through the `submit_isr_change`
callback, and everything else is a method call, so that the rules can be tested directly. The only
side effects are on the partition's log (epoch cache entries, the high watermark).

Rules kept here:
- The committed ISR is what the controller last confirmed (LeaderAndIsr or an AlterPartition
  answer). At most one change is pending. A pending expand counts toward the high watermark at
  once; a pending shrink only once the controller confirms it (until then the leaving replicas
  still hold the high watermark back, so nothing is acknowledged that they may not have).
- Leader HW = the lowest log end offset over the "maximal ISR" (committed ISR, plus a replica of a
  pending expand, plus caught-up replicas that may join), and it never moves while the committed
  ISR is smaller than min(min.insync.replicas, replication factor).
- A partition whose only replica is this broker leaves the high watermark to the log
  (`auto_high_watermark`): every offset it holds is then committed the moment it is written, and
  appends made outside the produce path (coordinators, transaction markers) need no extra step.
"""
from __future__ import annotations

import enum
import itertools
import logging
from typing import TYPE_CHECKING, Callable

from ..log.errors import OffsetOutOfRangeError
from ..protocol.errors import ErrorCode

if TYPE_CHECKING:
    import uuid

__all__ = ["FollowerProgress", "IsrChange", "IsrChangeOutcome", "Partition", "UNKNOWN_OFFSET"]

log = logging.getLogger(__name__)

UNKNOWN_OFFSET = -1

# AlterPartition errors after which the proposal is dropped and the committed ISR stands.
# Leadership terms are unique in the process (not per Partition object), so that a term taken before
# a replica was deleted and created again never equals a later one.
_TERMS = itertools.count(1)
_REVERT_ERRORS = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})
# Errors that only a new LeaderAndIsr resolves: the proposal stays pending (no further changes).
_WAIT_ERRORS = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                          ErrorCode.INVALID_REQUEST})


class FollowerProgress:
    """What a leader knows about one follower, learnt from its fetches."""

    __slots__ = ("replica_id", "log_end_offset", "log_start_offset", "last_caught_up_ms", "last_fetch_ms",
                 "last_fetch_leader_end_offset")

    def __init__(self, replica_id: int, log_end_offset: int = UNKNOWN_OFFSET, log_start_offset: int = UNKNOWN_OFFSET,
                 last_caught_up_ms: int = 0, last_fetch_ms: int = 0,
                 last_fetch_leader_end_offset: int = UNKNOWN_OFFSET):
        self.replica_id = replica_id
        self.log_end_offset = log_end_offset
        self.log_start_offset = log_start_offset
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_ms = last_fetch_ms
        # The leader's log end offset when the previous fetch was served.
        self.last_fetch_leader_end_offset = last_fetch_leader_end_offset

    def __repr__(self) -> str:
        """The follower's offsets and when it last caught up; the last fetch's time and the leader's
        end then (last_fetch_ms, last_fetch_leader_end_offset) only serve the next caught-up check."""
        return (f"FollowerProgress(replica_id={self.replica_id}, log_end_offset={self.log_end_offset}, "
                f"log_start_offset={self.log_start_offset}, last_caught_up_ms={self.last_caught_up_ms})")

    def caught_up(self, leader_end_offset: int, now_ms: int, lag_ms: int) -> bool:
        return self.log_end_offset == leader_end_offset or now_ms - self.last_caught_up_ms <= lag_ms


class IsrChange:
    """An ISR change a leader proposed to the controller; compared by identity, so that an answer
    is only applied to the proposal it answers."""

    __slots__ = ("expand", "new_isr", "committed_isr", "leader_epoch", "partition_epoch")

    def __init__(self, expand: bool, new_isr: tuple[int, ...], committed_isr: tuple[int, ...], leader_epoch: int,
                 partition_epoch: int):
        self.expand = expand
        self.new_isr = new_isr
        self.committed_isr = committed_isr
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch

    def __repr__(self) -> str:
        return (f"IsrChange({self.kind} to {self.new_isr} from {self.committed_isr}, leader_epoch={self.leader_epoch}, "
                f"partition_epoch={self.partition_epoch})")

    @property
    def kind(self) -> str:
        return "expand" if self.expand else "shrink"


class IsrChangeOutcome(enum.Enum):
    COMMITTED = "committed"  # the controller's ISR and partition epoch were adopted
    REVERTED = "reverted"    # dropped; the committed ISR stands
    PENDING = "pending"      # stays pending until the next LeaderAndIsr
    RETRY = "retry"          # send it again
    IGNORED = "ignored"      # the answer is for a proposal that is no longer pending


def _always(_replica_id: int) -> bool:
    return True


class Partition:
    """One hosted replica: leader or follower, with the ISR and the high watermark rules."""

    __slots__ = (
        "topic", "partition", "local_id", "log", "topic_id", "lag_ms", "is_eligible", "submit_isr_change",
        "is_leader", "leader_id", "leader_epoch", "partition_epoch", "replicas", "isr", "pending_isr",
        "followers", "leader_epoch_start_offset", "leader_term",
    )

    def __init__(self, topic: str, partition: int, local_id: int, log, *, topic_id: uuid.UUID | None = None,
                 lag_ms: int = 30000, is_eligible: Callable[[int], bool] = _always,
                 submit_isr_change: Callable[[Partition, IsrChange], None] | None = None):
        self.topic = topic
        self.partition = partition
        self.local_id = local_id
        self.log = log
        self.topic_id = topic_id
        self.lag_ms = lag_ms
        # Whether a replica may join the ISR (alive in the metadata cache, as Kafka's ZK mode checks).
        self.is_eligible = is_eligible
        self.submit_isr_change = submit_isr_change
        self.is_leader = False
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_isr: IsrChange | None = None
        self.followers: dict[int, FollowerProgress] = {}
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        # Counts the times this replica became leader after not leading. A re-election of the
        # same leader at a newer epoch (Kafka's ZK controller bumps the epoch when it takes a dead
        # broker out of the ISR) keeps the term: the leader's log was never truncated in between,
        # so writes waiting for the ISR stay valid, as Kafka's delayed produce does; a share-partition
        # kept in memory stays this leadership's too. Unique in the process: see _TERMS.
        self.leader_term = 0

    @property
    def can_append(self) -> bool:
        """Led here with its log online: a produce may append to it."""
        return self.is_leader and not self.log.is_offline

    def __repr__(self) -> str:
        """Who leads, the epoch and the replica sets: what a log line about a partition needs; the
        log, the followers' progress, the pending ISR change and the callbacks are shown by their own
        reprs where they matter."""
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return (f"Partition({self.topic}-{self.partition}, {role}, epoch={self.leader_epoch}, "
                f"isr={list(self.isr)}, replicas={list(self.replicas)})")

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    # ------------------------------------------------------------------ ISR views
    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: a pending expand already counts, a pending shrink
        not yet."""
        pending = self.pending_isr
        if pending is not None and pending.expand:
            return pending.new_isr
        return self.isr

    @property
    def min_isr(self) -> int:
        """min(min.insync.replicas, replication factor)."""
        return min(self.log.config.min_insync_replicas, len(self.replicas))

    def under_min_isr(self) -> bool:
        return len(self.isr) < self.min_isr

    def leader_epoch_error(self, requested: int) -> int:
        """A request's current leader epoch against ours: NONE when not sent (-1) or equal."""
        if requested < 0 or requested == self.leader_epoch:
            return ErrorCode.NONE
        return ErrorCode.FENCED_LEADER_EPOCH if requested < self.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH

    # ------------------------------------------------------------------ role changes
    def make_leader(self, state, now_ms: int, record_epoch_start: bool = True) -> bool:
        """Become leader as a LeaderAndIsr partition state says (its epoch already checked newer).

        Returns False, changing nothing, when the state's partition epoch is older than ours: an
        AlterPartition answer may have taught us a newer one before this request arrived.
        `record_epoch_start` False leaves the epoch's start to its first append (a cluster of one:
        no follower asks where it starts, and creating a partition then costs no checkpoint write).
        """
        if state.partition_epoch < self.partition_epoch:
            log.info("%s: skipping become-leader at epoch %d: partition epoch %d is older than ours (%d)",
                     self.name, state.leader_epoch, state.partition_epoch, self.partition_epoch)
            return False
        was_leader = self.is_leader
        if not was_leader:
            self.leader_term = next(_TERMS)
        plog = self.log
        end = plog.log_end_offset
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)
        self.pending_isr = None
        self.leader_id = self.local_id
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.is_leader = True
        # Followers that fetched under an older leader learn where this epoch starts from here
        # (diverging epochs, OffsetForLeaderEpoch).
        if record_epoch_start:
            plog.assign_epoch(state.leader_epoch, end)
        self.leader_epoch_start_offset = end
        old = self.followers
        self.followers = {}
        for replica in self.replicas:
            if replica == self.local_id:
                continue
            in_sync = replica in self.isr
            # An ISR member gets a full lag interval to show up before it counts as lagging; a
            # non-member gets none, so that it does not hold the high watermark back.
            caught_up_ms = now_ms if in_sync else 0
            previous = old.get(replica)
            if was_leader and previous is not None:
                self.followers[replica] = FollowerProgress(
                    replica, previous.log_end_offset, previous.log_start_offset, caught_up_ms,
                    now_ms if in_sync else 0, end)
            else:
                self.followers[replica] = FollowerProgress(replica, last_caught_up_ms=caught_up_ms)
        single = self.replicas == (self.local_id,)
        plog.auto_high_watermark = single
        if single:
            plog.high_watermark = plog.log_end_offset
        else:
            self.maybe_increment_hw(now_ms)
        return True

    def make_follower(self, state) -> bool:
        """Follow `state.leader`. Returns False (no change) on an older partition epoch."""
        if state.partition_epoch < self.partition_epoch:
            log.info("%s: skipping become-follower at epoch %d: partition epoch %d is older than ours (%d)",
                     self.name, state.leader_epoch, state.partition_epoch, self.partition_epoch)
            return False
        self.replicas = tuple(state.replicas)
        # A follower never learns ISR changes (AlterPartition answers go to the leader only).
        self.isr = ()
        self.pending_isr = None
        self.followers = {}
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.is_leader = False
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.log.auto_high_watermark = False
        return True

    def stop(self) -> None:
        """StopReplica: neither lead nor follow; the epoch is kept to fence older requests."""
        self.is_leader = False
        self.leader_id = -1
        self.isr = ()
        self.pending_isr = None
        self.followers = {}
        self.log.auto_high_watermark = False

    # ------------------------------------------------------------------ leader: followers
    def update_follower_fetch(self, replica_id: int, fetch_offset: int, follower_log_start: int, now_ms: int,
                              leader_end_offset: int | None = None) -> bool:
        """A follower fetched from `fetch_offset` (its log end) while our log ended at
        `leader_end_offset`; may propose an ISR expand. Returns True if the high watermark moved."""
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_leader:
            return False
        if leader_end_offset is None:
            leader_end_offset = self.log.log_end_offset
        # Caught up now, or it has fetched everything we had at its previous fetch: it was caught
        # up then (the end measured before the read, so appends racing the fetch do not count).
        if fetch_offset >= leader_end_offset:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_end_offset:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        follower.log_start_offset = follower_log_start
        follower.last_fetch_leader_end_offset = leader_end_offset
        follower.last_fetch_ms = now_ms
        self.maybe_expand_isr(replica_id, now_ms)
        return self.maybe_increment_hw(now_ms)

    def maybe_expand_isr(self, replica_id: int, now_ms: int) -> IsrChange | None:
        """Propose adding `replica_id` once it holds everything up to the high watermark and the
        start of our epoch, and is alive."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        if replica_id in self.isr or replica_id not in self.replicas:
            return None
        follower = self.followers.get(replica_id)
        if follower is None:
            return None
        end = follower.log_end_offset
        if end < self.log.high_watermark or self.leader_epoch_start_offset < 0 \
                or end < self.leader_epoch_start_offset:
            return None
        if not self.is_eligible(replica_id):
            return None
        change = IsrChange(True, self.isr + (replica_id,), self.isr, self.leader_epoch, self.partition_epoch)
        log.info("%s: expanding ISR from %s to %s (replica %d caught up at %d, high watermark %d)",
                 self.name, list(self.isr), list(change.new_isr), replica_id, end, self.log.high_watermark)
        return self._propose(change)

    def out_of_sync_replicas(self, now_ms: int, lag_ms: int | None = None) -> list[int]:
        """Committed ISR members (not us) that have not been caught up within the lag interval;
        nothing while a change is pending."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        lag = self.lag_ms if lag_ms is None else lag_ms
        leader_end = self.log.log_end_offset
        out = []
        for replica in self.isr:
            if replica == self.local_id:
                continue
            follower = self.followers.get(replica)
            if follower is None or not follower.caught_up(leader_end, now_ms, lag):
                out.append(replica)
        return out

    def maybe_shrink_isr(self, now_ms: int) -> IsrChange | None:
        """Propose removing the out-of-sync replicas (the leader itself always stays)."""
        lagging = self.out_of_sync_replicas(now_ms)
        if not lagging:
            return None
        new_isr = tuple(r for r in self.isr if r not in lagging)
        change = IsrChange(False, new_isr, self.isr, self.leader_epoch, self.partition_epoch)
        details = ", ".join(
            f"{r} (end {self.followers[r].log_end_offset}, caught up {now_ms - self.followers[r].last_caught_up_ms}"
            f" ms ago)" if r in self.followers else str(r) for r in lagging)
        log.info("%s: shrinking ISR from %s to %s; leader end %d, high watermark %d; out of sync: %s",
                 self.name, list(self.isr), list(new_isr), self.log.log_end_offset, self.log.high_watermark, details)
        return self._propose(change)

    def _propose(self, change: IsrChange) -> IsrChange:
        self.pending_isr = change
        if self.submit_isr_change is not None:
            self.submit_isr_change(self, change)
        return change

    def apply_isr_change_result(self, change: IsrChange, error_code: int, *, isr=(), leader_epoch: int = -1,
                                partition_epoch: int = -1, now_ms: int = 0) -> IsrChangeOutcome:
        """The controller's answer to `change` (an AlterPartition partition result)."""
        if self.pending_isr is not change or not self.is_leader:
            return IsrChangeOutcome.IGNORED
        if error_code == ErrorCode.NONE:
            if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
                log.info("%s: ignoring ISR %s from the controller at leader epoch %d, partition epoch %d "
                         "(ours %d, %d)", self.name, list(isr), leader_epoch, partition_epoch,
                         self.leader_epoch, self.partition_epoch)
                return IsrChangeOutcome.PENDING
            self.isr = tuple(isr)
            self.partition_epoch = partition_epoch
            self.pending_isr = None
            log.info("%s: ISR is now %s (partition epoch %d)", self.name, list(self.isr), partition_epoch)
            self.maybe_increment_hw(now_ms)
            return IsrChangeOutcome.COMMITTED
        name = _error_name(error_code)
        if error_code in _REVERT_ERRORS:
            self.pending_isr = None
            log.info("%s: controller refused ISR %s (%s); keeping %s", self.name, list(change.new_isr), name,
                     list(self.isr))
            self.maybe_increment_hw(now_ms)
            return IsrChangeOutcome.REVERTED
        if error_code in _WAIT_ERRORS:
            log.info("%s: controller answered %s to ISR %s; waiting for the next LeaderAndIsr", self.name, name,
                     list(change.new_isr))
            return IsrChangeOutcome.PENDING
        return IsrChangeOutcome.RETRY

    # ------------------------------------------------------------------ leader: high watermark
    def maybe_increment_hw(self, now_ms: int) -> bool:
        """Move the leader's high watermark up to the lowest log end of the maximal ISR; True if
        it moved. It never moves back, and never while the ISR is below the minimum."""
        if not self.is_leader:
            return False
        plog = self.log
        if plog.auto_high_watermark:
            return False
        if len(self.isr) < self.min_isr:
            return False
        leader_end = plog.log_end_offset
        new_hw = leader_end
        maximal = self.maximal_isr
        for replica, follower in self.followers.items():
            end = follower.log_end_offset
            if end < new_hw and (replica in maximal or (follower.caught_up(leader_end, now_ms, self.lag_ms)
                                                        and self.is_eligible(replica))):
                new_hw = end
        if new_hw > plog.high_watermark:
            plog.high_watermark = new_hw
            return True
        return False

    # ------------------------------------------------------------------ leader: follower fetches
    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """Where a follower's log leaves ours: (epoch, end offset) when its last fetched epoch is
        unknown here in that form or ends before `fetch_offset`, else None.

        Raises OffsetOutOfRangeError when we have no end offset for that epoch, or the fetch offset
        is below our log start (the follower then asks ListOffsets where to go)."""
        plog = self.log
        epoch, end = plog.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or end < 0:
            raise OffsetOutOfRangeError(
                f"{self.name}: no end offset for the last fetched epoch {last_fetched_epoch}")
        if fetch_offset < plog.log_start_offset:
            raise OffsetOutOfRangeError(
                f"{self.name}: fetch offset {fetch_offset} is below the log start {plog.log_start_offset}")
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
