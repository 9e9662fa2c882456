"""The state of one share-partition (KIP-932): which records are in flight and with whom.

Kafka's SharePartition, kept per (group, topic, partition) by the partition's leader. The window
runs from the share-partition start offset (SPSO: everything before it is done with) to the end
offset (SPEO: the next offset never delivered yet). Every offset in the window has a state:

- AVAILABLE: may be delivered (again) to any member;
- ACQUIRED: delivered to one member, locked until its acquisition lock expires;
- ACKNOWLEDGED: accepted, never delivered again;
- ARCHIVED: rejected, a gap, aborted, or delivered group.share.delivery.count.limit times.

Nothing here reads the log or the clock: callers pass the batches they read (offset ranges,
never record bodies) and the time, so the state machine is tested on its own.
"""
from __future__ import annotations

from ...protocol.errors import ErrorCode

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED"

# AcknowledgeTypes of ShareFetch/ShareAcknowledge (Kafka's AcknowledgeType; 0 is a gap)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4


class InFlight:
    """One offset of the window that is not done with yet."""

    __slots__ = ("state", "delivery_count", "member", "deadline")

    def __init__(self, state: str, delivery_count: int, member: str | None, deadline: float) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member = member
        self.deadline = deadline

    def __repr__(self) -> str:
        return f"InFlight({self.state}, {self.delivery_count}, {self.member!r})"


class AckBatch:
    """One acknowledgement batch of a request: offsets first..last (inclusive) and their types
    (one type for the whole range, or one per offset)."""

    __slots__ = ("first", "last", "types")

    def __init__(self, first: int, last: int, types) -> None:
        self.first, self.last, self.types = first, last, list(types)


def validate_ack_batches(batches: list[AckBatch], allow_renew: bool = False,
                         max_offsets: int = 1 << 20) -> int:
    """Kafka's checks of one partition's acknowledgement batches before any is applied:
    INVALID_REQUEST for an empty or reversed range, ranges out of order or overlapping, a types
    array of the wrong length or an unknown type, or more offsets than anyone could hold."""
    previous_last = -1
    total = 0
    for batch in batches:
        if batch.first < 0 or batch.last < batch.first or batch.first <= previous_last:
            return ErrorCode.INVALID_REQUEST
        span = batch.last - batch.first + 1
        total += span
        if total > max_offsets:
            return ErrorCode.INVALID_REQUEST
        if len(batch.types) not in (1, span):
            return ErrorCode.INVALID_REQUEST
        top = RENEW if allow_renew else REJECT
        if any(not GAP <= t <= top for t in batch.types):
            return ErrorCode.INVALID_REQUEST
        previous_last = batch.last
    return ErrorCode.NONE


class SharePartition:
    """In-flight state of one share-partition (see the module docstring)."""

    def __init__(self, start_offset: int, delivery_limit: int = 5, max_in_flight: int = 2000) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.records: dict[int, InFlight] = {}
        # the leadership term of the partition's replica this state belongs to (set by the broker on
        # first use; a new term, i.e. another leader in between, means the state must be read again)
        self.leader_term: int | None = None
        # the state epoch of the stored state this one was loaded from: the share coordinator
        # refuses a write with an older one (FENCED_STATE_EPOCH) after AlterShareGroupOffsets,
        # DeleteShareGroupOffsets or DeleteGroups gave the share-partition a new state
        self.state_epoch = 0
        # the earliest acquisition lock deadline, so expiry checks are cheap when nothing is due
        self._next_deadline = float("inf")

    # -- queries -------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        out = {AVAILABLE: 0, ACQUIRED: 0, ACKNOWLEDGED: 0, ARCHIVED: 0}
        for rec in self.records.values():
            out[rec.state] += 1
        return out

    def next_deadline(self) -> float:
        return self._next_deadline

    def fetch_offset(self) -> int:
        """Where the next read should start: the first AVAILABLE offset, else the end offset."""
        for offset in sorted(self.records):
            if self.records[offset].state == AVAILABLE:
                return offset
        return self.end_offset

    def has_available(self, high_watermark: int) -> bool:
        return self.end_offset < high_watermark or any(
            r.state == AVAILABLE for r in self.records.values())

    # -- durable state (__share_group_state, state_records.py) ----------------------------
    def to_state(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """(start offset, state batches) as the share coordinator keeps them: ACQUIRED is not a
        durable state, so a held record is written as AVAILABLE with its delivery count (after a
        restart it is delivered again, counted)."""
        from .state_records import STATE_ACKNOWLEDGED, STATE_ARCHIVED, STATE_AVAILABLE, runs

        codes = {AVAILABLE: STATE_AVAILABLE, ACQUIRED: STATE_AVAILABLE, ACKNOWLEDGED: STATE_ACKNOWLEDGED,
                 ARCHIVED: STATE_ARCHIVED}
        return self.start_offset, runs({o: (codes[r.state], r.delivery_count) for o, r in self.records.items()})

    @classmethod
    def from_state(cls, start_offset: int, batches, delivery_limit: int = 5,
                   max_in_flight: int = 2000) -> "SharePartition":
        """The share-partition a stored state describes; records delivered delivery_limit times
        already are archived (their last lock may have expired while the broker was down)."""
        from .state_records import STATE_ACKNOWLEDGED, STATE_AVAILABLE

        sp = cls(start_offset, delivery_limit, max_in_flight)
        for first, last, state, count in batches:
            for offset in range(max(first, start_offset), last + 1):
                if state == STATE_AVAILABLE and count < delivery_limit:
                    sp.records[offset] = InFlight(AVAILABLE, count, None, 0.0)
                elif state == STATE_ACKNOWLEDGED:
                    sp.records[offset] = InFlight(ACKNOWLEDGED, count, None, 0.0)
                else:
                    sp.records[offset] = InFlight(ARCHIVED, count, None, 0.0)
                sp.end_offset = max(sp.end_offset, offset + 1)
        sp._advance()
        return sp

    # -- changes -------------------------------------------------------------------------
    def reset_start(self, offset: int) -> None:
        """Move an empty window (nothing in flight) to `offset` (share.auto.offset.reset, or the
        log start having moved past it)."""
        self.records = {o: r for o, r in self.records.items() if o >= offset}
        if offset > self.start_offset:
            self.start_offset = offset
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset
        self._advance()

    def expire_locks(self, now: float) -> bool:
        """Acquisition locks past their deadline: the records become AVAILABLE again, or ARCHIVED
        once delivered delivery_limit times. True when anything became deliverable."""
        if now < self._next_deadline:
            return False
        released = False
        next_deadline = float("inf")
        for rec in self.records.values():
            if rec.state != ACQUIRED:
                continue
            if rec.deadline <= now:
                released |= self._release(rec)
            else:
                next_deadline = min(next_deadline, rec.deadline)
        self._next_deadline = next_deadline
        self._advance()
        return released

    def acquire(self, batches, member: str, max_records: int, lock_s: float, now: float,
                strict: bool = False, batch_size: int = 0) -> list:
        """Acquire for `member` the deliverable offsets of the batches read from the log, in order:
        `batches` are (first, last, deliverable) where deliverable is False for control batches
        and aborted transactions' batches (archived, never delivered). Stops after max_records
        (a whole batch is taken once started, as Kafka does, unless `strict`: ShareAcquireMode
        record_limit, KIP-1206) or when the window is full.
        Returns [(first, last, delivery_count)], contiguous runs of one delivery count; records
        delivered for the first time are cut into runs of at least `batch_size` at a log batch's
        first offset (ShareFetch's BatchSize: Kafka's SharePartition.createBatches, batch_optimized
        mode only; 0 or less does not cut)."""
        acquired: list[list[int]] = []
        taken = 0
        deadline = now + lock_s
        for first, last, deliverable in batches:
            if taken >= max_records:
                break
            for offset in range(max(first, self.start_offset), last + 1):
                if strict and taken >= max_records:
                    break
                rec = self.records.get(offset)
                if offset >= self.end_offset:
                    if offset - self.start_offset >= self.max_in_flight:
                        break  # group.share.partition.max.record.locks
                    # offsets skipped by compaction between end_offset and here are done with
                    for gap in range(self.end_offset, offset):
                        self.records[gap] = InFlight(ARCHIVED, 0, None, 0.0)
                    self.end_offset = offset + 1
                    if not deliverable:
                        self.records[offset] = InFlight(ARCHIVED, 0, None, 0.0)
                        continue
                    rec = self.records[offset] = InFlight(AVAILABLE, 0, None, 0.0)
                    fresh = True
                elif rec is None or rec.state != AVAILABLE:
                    continue
                else:
                    fresh = False
                rec.state = ACQUIRED
                rec.delivery_count += 1
                rec.member = member
                rec.deadline = deadline
                taken += 1
                cut = (fresh and offset == first and batch_size > 0 and not strict and acquired
                       and offset - acquired[-1][0] >= batch_size)
                if acquired and acquired[-1][1] == offset - 1 and acquired[-1][2] == rec.delivery_count \
                        and not cut:
                    acquired[-1][1] = offset
                else:
                    acquired.append([offset, offset, rec.delivery_count])
        if taken:
            self._next_deadline = min(self._next_deadline, deadline)
        self._advance()
        return [tuple(run) for run in acquired]

    def acknowledge(self, member: str, batches: list[AckBatch], lock_s: float, now: float) -> int:
        """Apply one partition's acknowledgements from `member`: all or nothing. The batches must
        have passed validate_ack_batches. INVALID_RECORD_STATE when any offset is not ACQUIRED by
        this member (Kafka's answer for records the member does not hold or whose lock expired)."""
        for batch in batches:
            if batch.first < self.start_offset or batch.last >= self.end_offset:
                # outside the in-flight window (so never looped over: a range is at most the
                # window, group.share.partition.max.record.locks, long)
                return ErrorCode.INVALID_RECORD_STATE
            for offset in range(batch.first, batch.last + 1):
                rec = self.records.get(offset)
                if rec is None or rec.state != ACQUIRED or rec.member != member:
                    return ErrorCode.INVALID_RECORD_STATE
        for batch in batches:
            single = batch.types[0] if len(batch.types) == 1 else None
            for i, offset in enumerate(range(batch.first, batch.last + 1)):
                kind = single if single is not None else batch.types[i]
                rec = self.records[offset]
                if kind == ACCEPT:
                    rec.state, rec.member = ACKNOWLEDGED, None
                elif kind == RELEASE:
                    self._release(rec)
                elif kind == RENEW:
                    rec.deadline = now + lock_s
                else:  # REJECT, GAP
                    rec.state, rec.member = ARCHIVED, None
        self._advance()
        return ErrorCode.NONE

    def release_member(self, member: str) -> bool:
        """A member left or closed its share session: what it holds is released (Kafka keeps the
        delivery counts). True when anything became deliverable."""
        released = False
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.member == member:
                released |= self._release(rec)
        self._advance()
        return released

    def undo_acquire(self, member: str, runs) -> None:
        """Give back what acquire() just returned (its state could not be stored): the offsets
        become AVAILABLE again with the delivery count they had before."""
        for first, last, _ in runs:
            for offset in range(first, last + 1):
                rec = self.records.get(offset)
                if rec is not None and rec.state == ACQUIRED and rec.member == member:
                    rec.state, rec.member = AVAILABLE, None
                    rec.delivery_count -= 1

    def _release(self, rec: InFlight) -> bool:
        rec.member = None
        if rec.delivery_count >= self.delivery_limit:
            rec.state = ARCHIVED
            return False
        rec.state = AVAILABLE
        return True

    def _advance(self) -> None:
        """Move the start offset over every offset that is done with."""
        records = self.records
        start = self.start_offset
        while start < self.end_offset:
            rec = records.get(start)
            if rec is not None and rec.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            records.pop(start, None)
            start += 1
        self.start_offset = start
