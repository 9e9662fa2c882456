"""The state of one share-partition (KIP-932): which records are in flight and with whom.

Kafka's SharePartition, kept per (group, topic, partition) by the partition's leader. The window
runs from the share-partition start offset (SPSO: everything before it is done with) to the end
offset (SPEO: the next offset never delivered yet). Every offset in the window has a state:

- AVAILABLE: may be delivered (again) to any member;
- ACQUIRED: delivered to one member, locked until its acquisition lock expires;
- ACKNOWLEDGED: accepted, never delivered again;
- ARCHIVED: rejected, a gap, aborted, or delivered group.share.delivery.count.limit times.

The window is kept as contiguous ranges of offsets with one state, delivery count, holder and
lock deadline each (`Run`, Kafka's InFlightBatch), split only where acknowledgements, releases or
expiry differ inside a range, and joined again when neighbours become alike: a fetch and an
acknowledgement cost per range, not per record.

What changed durably (a state or a delivery count, new offsets, the start offset) is tracked as
offset ranges, so that the state written to __share_group_state after a request is a delta (a
ShareUpdate, take_delta) rather than the whole window.

Nothing here reads the log or the clock: callers pass the batches they read (offset ranges,
never record bodies) and the time, so the state machine is tested on its own.
"""
from __future__ import annotations

from bisect import bisect_right

from ...protocol.errors import ErrorCode

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED"

# AcknowledgeTypes of ShareFetch/ShareAcknowledge (Kafka's AcknowledgeType; 0 is a gap)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

# the DeliveryState codes of __share_group_state (state_records.py): ACQUIRED is not durable, a held
# record is stored AVAILABLE with its delivery count (after a restart it is delivered again, counted)
_DURABLE = {AVAILABLE: 0, ACQUIRED: 0, ACKNOWLEDGED: 2, ARCHIVED: 4}
_DONE = (ACKNOWLEDGED, ARCHIVED)

# Why an acknowledgement is refused, in Kafka 4.4's words (SharePartition, whole in-flight batches)
ACK_NOT_IN_WINDOW = "Batch record not found. The request batch offsets are not found in the cache."
ACK_FIRST_PAST_END = "Batch record not found. The first offset in request is past acquired records."
ACK_LAST_PAST_END = "Batch record not found. The last offset in request is past acquired records."
ACK_NOT_ACQUIRED = "The batch cannot be acknowledged. The batch is not in the acquired state."
ACK_NOT_OWNER = "Member is not the owner of batch record"


class InFlight:
    """One offset of the window (a view built by SharePartition.records, for tests and tools)."""

    __slots__ = ("state", "delivery_count", "member", "deadline")

    def __init__(self, state: str, delivery_count: int, member: str | None, deadline: float) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member = member
        self.deadline = deadline

    def __repr__(self) -> str:
        """Without the lock deadline: a monotonic-clock value, meaningless in a log line."""
        return f"InFlight({self.state}, {self.delivery_count}, {self.member!r})"


class Run:
    """Offsets first..last (inclusive) of the window that share one state, delivery count, holder
    and acquisition lock deadline."""

    __slots__ = ("first", "last", "state", "delivery_count", "member", "deadline")

    def __init__(self, first: int, last: int, state: str, delivery_count: int, member: str | None = None,
                 deadline: float = 0.0) -> None:
        self.first, self.last = first, last
        self.state = state
        self.delivery_count = delivery_count
        self.member = member
        self.deadline = deadline

    def alike(self, other: "Run") -> bool:
        return (self.state == other.state and self.delivery_count == other.delivery_count
                and self.member == other.member and self.deadline == other.deadline)

    def __repr__(self) -> str:
        """Without the lock deadline: a monotonic-clock value, meaningless in a log line."""
        return f"Run({self.first}-{self.last}, {self.state}, {self.delivery_count}, {self.member!r})"


def _first(run: Run) -> int:
    return run.first


class AckBatch:
    """One acknowledgement batch of a request: offsets first..last (inclusive) and their types
    (one type for the whole range, or one per offset)."""

    __slots__ = ("first", "last", "types")

    def __init__(self, first: int, last: int, types) -> None:
        self.first, self.last, self.types = first, last, list(types)


def validate_ack_batches(batches: list[AckBatch], allow_renew: bool = False,
                         max_offsets: int = 1 << 20) -> int:
    """Kafka's checks of one partition's acknowledgement batches before any is applied
    (KafkaApis.validateAcknowledgementBatches): INVALID_REQUEST for a reversed range, a batch
    starting before the last offset of the one before it, a types array of the wrong length or an
    unknown type, or more offsets than anyone could hold. A batch starting at the previous one's
    last offset passes, as in Kafka 4.4 (`first < previous last`): the share-partition then
    refuses that offset, acknowledged already (SharePartition.acknowledge: not acquired)."""
    previous_last = -1
    total = 0
    top = RENEW if allow_renew else REJECT
    for batch in batches:
        if batch.first < 0 or batch.last < batch.first or batch.first < previous_last:
            return ErrorCode.INVALID_REQUEST
        span = batch.last - batch.first + 1
        total += span
        if total > max_offsets:
            return ErrorCode.INVALID_REQUEST
        if len(batch.types) not in (1, span):
            return ErrorCode.INVALID_REQUEST
        if any(not GAP <= t <= top for t in batch.types):
            return ErrorCode.INVALID_REQUEST
        previous_last = batch.last
    return ErrorCode.NONE


def _type_segments(batch: AckBatch):
    """(first, last, type) of a batch's contiguous offsets of one acknowledgement type."""
    types = batch.types
    if len(types) == 1:
        yield batch.first, batch.last, types[0]
        return
    begin, kind = 0, types[0]
    for i in range(1, len(types)):
        if types[i] != kind:
            yield batch.first + begin, batch.first + i - 1, kind
            begin, kind = i, types[i]
    yield batch.first + begin, batch.last, kind


class SharePartition:
    """In-flight state of one share-partition (see the module docstring)."""

    def __init__(self, start_offset: int, delivery_limit: int = 5, max_in_flight: int = 2000) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        # the window [start_offset, end_offset), contiguous and in order
        self._runs: list[Run] = []
        # the leadership term of the partition's replica this state belongs to (set by the broker on
        # first use; a new term, i.e. another leader in between, means the state must be read again)
        self.leader_term: int | None = None
        # the state epoch of the stored state this one was loaded from: the share coordinator
        # refuses a write with an older one (FENCED_STATE_EPOCH) after AlterShareGroupOffsets,
        # DeleteShareGroupOffsets or DeleteGroups gave the share-partition a new state
        self.state_epoch = 0
        # the earliest acquisition lock deadline, so expiry checks are cheap when nothing is due
        self._next_deadline = float("inf")
        # durable changes not written yet (take_delta): offset ranges, and whether the next write
        # must be the whole window (nothing stored yet, or a write failed)
        self._dirty: list[tuple[int, int]] = []
        self._full = True
        self._written_start: int | None = None
        # the message of the last refused acknowledgement (acknowledge), for the response
        self.refusal: str | None = None

    # -- queries -------------------------------------------------------------------------
    @property
    def records(self) -> dict[int, InFlight]:
        """Each offset of the window and its state (built on demand: for tests and tools)."""
        return {o: InFlight(r.state, r.delivery_count, r.member, r.deadline)
                for r in self._runs for o in range(r.first, r.last + 1)}

    def runs(self) -> list[Run]:
        return list(self._runs)

    def counts(self) -> dict[str, int]:
        out = {AVAILABLE: 0, ACQUIRED: 0, ACKNOWLEDGED: 0, ARCHIVED: 0}
        for run in self._runs:
            out[run.state] += run.last - run.first + 1
        return out

    def next_deadline(self) -> float:
        return self._next_deadline

    def fetch_offset(self) -> int:
        """Where the next read should start: the first AVAILABLE offset, else the end offset."""
        for run in self._runs:
            if run.state == AVAILABLE:
                return run.first
        return self.end_offset

    # -- durable state (__share_group_state, state_records.py) ----------------------------
    def to_state(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """(start offset, state batches) as the share coordinator keeps them: ACQUIRED is not a
        durable state, so a held record is written as AVAILABLE with its delivery count (after a
        restart it is delivered again, counted)."""
        return self.start_offset, self._durable(self._runs, self.start_offset, self.end_offset - 1)

    @staticmethod
    def _durable(runs, first: int, last: int) -> list[tuple[int, int, int, int]]:
        out: list[list[int]] = []
        for run in runs:
            lo, hi = max(run.first, first), min(run.last, last)
            if lo > hi:
                continue
            code = _DURABLE[run.state]
            if out and out[-1][1] == lo - 1 and out[-1][2] == code and out[-1][3] == run.delivery_count:
                out[-1][1] = hi
            else:
                out.append([lo, hi, code, run.delivery_count])
        return [tuple(b) for b in out]

    def take_delta(self) -> tuple[int, list[tuple[int, int, int, int]]] | None:
        """What changed durably since the last take_delta, as (start offset, state batches) for a
        ShareUpdate (state_records.apply_update lays it over the stored state), or the whole window
        when nothing is stored yet or the last write failed; None when nothing changed."""
        if self._full:
            self._full, self._dirty = False, []
            self._written_start = self.start_offset
            return self.to_state()
        dirty = sorted(self._dirty)
        self._dirty = []
        if not dirty and self._written_start == self.start_offset:
            return None
        self._written_start = self.start_offset
        batches: list[tuple[int, int, int, int]] = []
        lo = hi = None
        for first, last in dirty:
            if lo is not None and first <= hi + 1:
                hi = max(hi, last)
                continue
            if lo is not None:
                batches += self._durable_range(lo, hi)
            lo, hi = first, last
        if lo is not None:
            batches += self._durable_range(lo, hi)
        return self.start_offset, batches

    def _durable_range(self, first: int, last: int) -> list[tuple[int, int, int, int]]:
        first, last = max(first, self.start_offset), min(last, self.end_offset - 1)
        if first > last:
            return []
        i = self._index(first)
        j = self._index(last) + 1
        return self._durable(self._runs[i:j], first, last)

    def write_failed(self) -> None:
        """The last delta could not be stored: the next write is the whole window."""
        self._full = True

    @classmethod
    def from_state(cls, start_offset: int, batches, delivery_limit: int = 5,
                   max_in_flight: int = 2000) -> "SharePartition":
        """The share-partition a stored state describes; records delivered delivery_limit times
        already are archived (their last lock may have expired while the broker was down).
        Offsets of the window no stored batch covers are done with (kafkapy stores every offset
        it delivers, so only a foreign state has them)."""
        from .state_records import STATE_ACKNOWLEDGED, STATE_AVAILABLE

        sp = cls(start_offset, delivery_limit, max_in_flight)
        for first, last, state, count in sorted(batches):
            first = max(first, sp.end_offset)
            if first > last:
                continue
            if state == STATE_AVAILABLE and count < delivery_limit:
                kind = AVAILABLE
            elif state == STATE_ACKNOWLEDGED:
                kind = ACKNOWLEDGED
            else:
                kind = ARCHIVED
                if state == STATE_AVAILABLE:
                    sp._dirty.append((first, last))   # archived now: the next delta says so
            if first > sp.end_offset:
                sp._dirty.append((sp.end_offset, first - 1))
                sp._append(Run(sp.end_offset, first - 1, ARCHIVED, 0))
            sp._append(Run(first, last, kind, count))
            sp.end_offset = last + 1
        sp._full = False
        sp._written_start = start_offset   # what is stored; a start moved by _advance is a change
        sp._advance()
        return sp

    # -- the window as ranges ------------------------------------------------------------
    def _index(self, offset: int) -> int:
        """The index of the run holding `offset` (which must be in the window)."""
        return bisect_right(self._runs, offset, key=_first) - 1

    def _split(self, offset: int) -> int:
        """Make `offset` the first offset of a run; the index of that run (len(runs) at the end)."""
        if offset >= self.end_offset:
            return len(self._runs)
        if offset <= self.start_offset:
            return 0
        i = self._index(offset)
        run = self._runs[i]
        if run.first == offset:
            return i
        self._runs.insert(i + 1, Run(offset, run.last, run.state, run.delivery_count, run.member, run.deadline))
        run.last = offset - 1
        return i + 1

    def _join(self, i: int, j: int) -> None:
        """Join alike neighbours among runs[i-1 .. j]."""
        runs = self._runs
        k = max(i, 1)
        stop = min(j + 1, len(runs))
        while k < stop:
            if runs[k - 1].alike(runs[k]):
                runs[k - 1].last = runs[k].last
                del runs[k]
                stop -= 1
            else:
                k += 1

    def _append(self, run: Run) -> None:
        runs = self._runs
        if runs and runs[-1].alike(run) and runs[-1].last == run.first - 1:
            runs[-1].last = run.last
        else:
            runs.append(run)

    # -- changes -------------------------------------------------------------------------
    def reset_start(self, offset: int) -> None:
        """Move an empty window (nothing in flight) to `offset` (share.auto.offset.reset, or the
        log start having moved past it)."""
        if offset > self.start_offset:
            runs = self._runs
            k = 0
            while k < len(runs) and runs[k].last < offset:
                k += 1
            del runs[:k]
            if runs and runs[0].first < offset:
                runs[0].first = offset
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
        for run in self._runs:
            if run.state != ACQUIRED:
                continue
            if run.deadline <= now:
                released |= self._release(run)
            elif run.deadline < next_deadline:
                next_deadline = run.deadline
        self._next_deadline = next_deadline
        self._join(0, len(self._runs))
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
        window_end = self.start_offset + self.max_in_flight   # group.share.partition.max.record.locks
        dirty = self._dirty
        for first, last, deliverable in batches:
            if taken >= max_records:
                break
            lo = max(first, self.start_offset)
            if lo < self.end_offset:   # offsets delivered before: the AVAILABLE ones again
                hi = min(last, self.end_offset - 1)
                if lo <= hi:
                    taken = self._acquire_again(lo, hi, member, deadline, strict, max_records, taken, acquired)
                lo = self.end_offset
            if lo > last:
                continue
            if lo >= window_end:
                break   # new offsets past the window: so are those of every later batch
            if strict and taken >= max_records:
                continue
            hi = min(last, window_end - 1)
            if lo > self.end_offset:
                # offsets skipped by compaction between end_offset and here are done with
                self._append(Run(self.end_offset, lo - 1, ARCHIVED, 0))
            dirty.append((self.end_offset, hi))
            if not deliverable:
                self._append(Run(lo, hi, ARCHIVED, 0))
                self.end_offset = hi + 1
                continue
            if strict:
                hi = min(hi, lo + (max_records - taken) - 1)
            self._append(Run(lo, hi, ACQUIRED, 1, member, deadline))
            self.end_offset = hi + 1
            taken += hi - lo + 1
            cut = lo == first and batch_size > 0 and not strict and acquired and lo - acquired[-1][0] >= batch_size
            if acquired and acquired[-1][1] == lo - 1 and acquired[-1][2] == 1 and not cut:
                acquired[-1][1] = hi
            else:
                acquired.append([lo, hi, 1])
        if taken:
            self._next_deadline = min(self._next_deadline, deadline)
        self._advance()
        return [tuple(run) for run in acquired]

    def _acquire_again(self, lo: int, hi: int, member: str, deadline: float, strict: bool, max_records: int,
                       taken: int, acquired: list) -> int:
        segments = []
        runs = self._runs
        i = self._index(lo)
        while i < len(runs) and runs[i].first <= hi:
            run = runs[i]
            i += 1
            if run.state != AVAILABLE:
                continue
            a, b = max(run.first, lo), min(run.last, hi)
            if strict:
                if taken >= max_records:
                    break
                b = min(b, a + (max_records - taken) - 1)
            taken += b - a + 1
            segments.append((a, b))
        for a, b in segments:
            i = self._split(a)
            j = self._split(b + 1)
            for run in runs[i:j]:
                run.state, run.member, run.deadline = ACQUIRED, member, deadline
                run.delivery_count += 1
                count = run.delivery_count
                if acquired and acquired[-1][1] == run.first - 1 and acquired[-1][2] == count:
                    acquired[-1][1] = run.last
                else:
                    acquired.append([run.first, run.last, count])
            self._dirty.append((a, b))
            self._join(i, j)
        return taken

    def _refused(self, member: str, batches: list[AckBatch]) -> tuple[int, str | None]:
        """Kafka 4.4's answer to the batches, checked one after the other against the state the
        earlier ones leave: the offsets below the start offset are done with and skipped (Kafka
        keeps their in-flight batches until the window empties), so is an acknowledgement of them
        again; an offset an earlier batch of the request acknowledged is no longer ACQUIRED."""
        runs = self._runs
        taken: list[tuple[int, int, int]] = []   # ranges earlier batches change, with their type
        for batch in batches:
            if not runs:
                return ErrorCode.INVALID_RECORD_STATE, ACK_NOT_IN_WINDOW
            if batch.first >= self.end_offset:
                return ErrorCode.INVALID_REQUEST, ACK_FIRST_PAST_END
            if batch.last >= self.end_offset:
                return ErrorCode.INVALID_REQUEST, ACK_LAST_PAST_END
            first = max(batch.first, self.start_offset)
            if first > batch.last:
                continue
            for lo, hi, kind in taken:
                if lo <= batch.last and first <= hi and kind != RENEW:
                    return ErrorCode.INVALID_RECORD_STATE, ACK_NOT_ACQUIRED
            i = self._index(first)
            while i < len(runs) and runs[i].first <= batch.last:
                run = runs[i]
                if run.state != ACQUIRED:
                    return ErrorCode.INVALID_RECORD_STATE, ACK_NOT_ACQUIRED
                if run.member != member:
                    return ErrorCode.INVALID_RECORD_STATE, ACK_NOT_OWNER
                i += 1
            taken.extend(_type_segments(batch))
        return ErrorCode.NONE, None

    def acknowledge(self, member: str, batches: list[AckBatch], lock_s: float, now: float) -> int:
        """Apply one partition's acknowledgements from `member`: all or nothing. The batches must
        have passed validate_ack_batches. A refusal is Kafka 4.4's code (SharePartition
        .acknowledge, batch by batch), its message left in `refusal`: INVALID_REQUEST for offsets
        past the last one ever delivered, INVALID_RECORD_STATE for offsets not in the window, or
        not ACQUIRED (never, released, lock expired, acknowledged) or held by another member."""
        error, self.refusal = self._refused(member, batches)
        if error:
            return error
        runs = self._runs
        start = self.start_offset
        for batch in batches:
            for first, last, kind in _type_segments(batch):
                first = max(first, start)
                if first > last:
                    continue   # below the start offset: done with already (Kafka skips them)
                i = self._split(first)
                j = self._split(last + 1)
                for run in runs[i:j]:
                    if kind == ACCEPT:
                        run.state, run.member = ACKNOWLEDGED, None
                    elif kind == RELEASE:
                        self._release(run)
                    elif kind == RENEW:
                        run.deadline = now + lock_s
                    else:  # REJECT, GAP
                        run.state, run.member = ARCHIVED, None
                if kind != RENEW:
                    self._dirty.append((first, last))
                self._join(i, j)
        self._advance()
        return ErrorCode.NONE

    def release_member(self, member: str) -> bool:
        """A member left or closed its share session: what it holds is released (Kafka keeps the
        delivery counts). True when anything became deliverable."""
        released = False
        for run in self._runs:
            if run.state == ACQUIRED and run.member == member:
                released |= self._release(run)
        self._join(0, len(self._runs))
        self._advance()
        return released

    def undo_acquire(self, member: str, runs) -> None:
        """Give back what acquire() just returned (its state could not be stored): the offsets
        become AVAILABLE again with the delivery count they had before."""
        for first, last, _ in runs:
            first, last = max(first, self.start_offset), min(last, self.end_offset - 1)
            if first > last:
                continue
            i = self._split(first)
            j = self._split(last + 1)
            for run in self._runs[i:j]:
                if run.state == ACQUIRED and run.member == member:
                    run.state, run.member = AVAILABLE, None
                    run.delivery_count -= 1
            self._dirty.append((first, last))
            self._join(i, j)

    def _release(self, run: Run) -> bool:
        run.member = None
        if run.delivery_count >= self.delivery_limit:
            run.state = ARCHIVED
            self._dirty.append((run.first, run.last))
            return False
        run.state = AVAILABLE
        return True

    def _advance(self) -> None:
        """Move the start offset over every offset that is done with."""
        runs = self._runs
        k = 0
        while k < len(runs) and runs[k].state in _DONE:
            k += 1
        if k:
            del runs[:k]
        self.start_offset = runs[0].first if runs else self.end_offset
