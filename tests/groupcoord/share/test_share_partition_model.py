"""A model test of the share-partition state machine (kafkapy/groupcoord/share/partition.py):
hypothesis drives SharePartition and a plain reference model written here from KIP-932's rules
with the same operations, and after every step compares each offset's state, delivery count and
holder, the start and end offsets, the fetch offset and every answer.

The operations: acquire (by a member, from the batches the log holds at the fetch offset, with
max records, strict or whole-batch, a bounded in-flight window, compaction gaps, control and
aborted batches archived), acknowledge (ACCEPT / RELEASE / REJECT / RENEW / GAP, all or nothing),
time moving (acquisition locks expire), release of a member's records when its session closes,
the delivery count limit (a record released or expired after its last allowed delivery is
archived), the start offset moving (the log start passing it: reset_start) and a restart from the
durable state (to_state / from_state: held records come back AVAILABLE with their counts), that
state also as the broker stores it: a first snapshot, then after every step the step's delta
(take_delta, a ShareUpdate) laid over it (apply_update), now and then a failed write (the next
delta is the whole window); the state so stored must always be to_state()'s, and a restart from
it must be the model's restart.

The rules the model follows (Kafka's SharePartition, KIP-932):
- a record is ACQUIRED by one member at a time, only from AVAILABLE (or never delivered), and each
  acquisition counts one delivery; the lock lasts lock_s;
- ACCEPT acknowledges, REJECT and GAP archive, RELEASE makes it AVAILABLE (ARCHIVED once its count
  reached the limit), RENEW extends the lock; acknowledgements of records the member does not hold
  change nothing and answer INVALID_RECORD_STATE (INVALID_REQUEST for offsets past the last
  one delivered; offsets below the start offset are skipped, as Kafka 4.4);
- an expired lock or a closed session releases as RELEASE does;
- the start offset moves over every ACKNOWLEDGED / ARCHIVED offset at its head, never backwards.
"""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkapy.groupcoord.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AckBatch,
    SharePartition,
    validate_ack_batches,
)
from kafkapy.groupcoord.share.state_records import ShareState, apply_update
from kafkapy.protocol.errors import ErrorCode

MEMBERS = ("m1", "m2", "m3")
LOCK_S = 10.0


class Rec:
    """The model's view of one offset."""

    __slots__ = ("state", "count", "member", "deadline")

    def __init__(self, state: str, count: int = 0, member: str | None = None, deadline: float = 0.0) -> None:
        self.state, self.count, self.member, self.deadline = state, count, member, deadline

    def view(self) -> tuple:
        return self.state, self.count, self.member if self.state == ACQUIRED else None


class Model:
    """The reference: a plain map offset -> Rec, written from the rules in the module docstring."""

    def __init__(self, start: int, limit: int, window: int) -> None:
        self.start = self.end = start
        self.limit, self.window = limit, window
        self.recs: dict[int, Rec] = {}

    def advance(self) -> None:
        while self.start < self.end and self.recs[self.start].state in (ACKNOWLEDGED, ARCHIVED):
            del self.recs[self.start]
            self.start += 1
        if self.start == self.end:
            assert not self.recs

    def release(self, rec: Rec) -> bool:
        rec.member = None
        rec.state = ARCHIVED if rec.count >= self.limit else AVAILABLE
        return rec.state == AVAILABLE

    def fetch_offset(self) -> int:
        available = [o for o, r in self.recs.items() if r.state == AVAILABLE]
        return min(available) if available else self.end

    def acquire(self, batches, member: str, max_records: int, now: float, strict: bool) -> list:
        taken, out = 0, []
        for first, last, deliverable in batches:
            if taken >= max_records:
                break
            for offset in range(max(first, self.start), last + 1):
                if strict and taken >= max_records:
                    break
                if offset >= self.end:
                    if offset - self.start >= self.window:
                        break
                    for gap in range(self.end, offset):   # compacted away: done with
                        self.recs[gap] = Rec(ARCHIVED)
                    self.end = offset + 1
                    self.recs[offset] = Rec(AVAILABLE if deliverable else ARCHIVED)
                rec = self.recs[offset]
                if rec.state != AVAILABLE:
                    continue
                rec.state, rec.member, rec.deadline = ACQUIRED, member, now + LOCK_S
                rec.count += 1
                taken += 1
                out.append((offset, rec.count))
        self.advance()
        runs: list[list[int]] = []
        for offset, count in out:
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, count])
        return [tuple(r) for r in runs]

    def acknowledge(self, member: str, batches: list[tuple[int, int, list[int]]], now: float) -> int:
        # Kafka 4.4's SharePartition, batch by batch: offsets past the last delivered one are a bad
        # request; an empty window, offsets not acquired (an earlier batch of the request
        # acknowledged them included) or another member's a bad record state; offsets below the
        # start offset are done with and skipped
        changed: set[int] = set()
        for first, last, types in batches:
            if self.start == self.end:
                return ErrorCode.INVALID_RECORD_STATE
            if last >= self.end:
                return ErrorCode.INVALID_REQUEST
            for offset in range(max(first, self.start), last + 1):
                rec = self.recs.get(offset)
                if offset in changed or rec is None or rec.state != ACQUIRED or rec.member != member:
                    return ErrorCode.INVALID_RECORD_STATE
            for i, offset in enumerate(range(first, last + 1)):
                if (types[0] if len(types) == 1 else types[i]) != RENEW:
                    changed.add(offset)
        for first, last, types in batches:
            for i, offset in enumerate(range(first, last + 1)):
                if offset < self.start:
                    continue
                kind = types[0] if len(types) == 1 else types[i]
                rec = self.recs[offset]
                if kind == ACCEPT:
                    rec.state, rec.member = ACKNOWLEDGED, None
                elif kind == RELEASE:
                    self.release(rec)
                elif kind == RENEW:
                    rec.deadline = now + LOCK_S
                else:
                    rec.state, rec.member = ARCHIVED, None
        self.advance()
        return ErrorCode.NONE

    def expire(self, now: float) -> bool:
        released = False
        for rec in self.recs.values():
            if rec.state == ACQUIRED and rec.deadline <= now:
                released |= self.release(rec)
        self.advance()
        return released

    def release_member(self, member: str) -> bool:
        released = False
        for rec in self.recs.values():
            if rec.state == ACQUIRED and rec.member == member:
                released |= self.release(rec)
        self.advance()
        return released

    def reset_start(self, offset: int) -> None:
        self.recs = {o: r for o, r in self.recs.items() if o >= offset}
        self.start = max(self.start, offset)
        self.end = max(self.end, self.start)
        self.advance()

    def restart(self) -> None:
        """Only ACKNOWLEDGED / ARCHIVED / AVAILABLE are durable: a held record comes back
        AVAILABLE with its count, ARCHIVED when that count reached the limit."""
        for rec in self.recs.values():
            if rec.state in (ACQUIRED, AVAILABLE):
                rec.state, rec.member = (ARCHIVED if rec.count >= self.limit else AVAILABLE), None
        self.advance()


@st.composite
def logs(draw):
    """The batches of a partition's log: (first, last, deliverable), ascending, with gaps where
    compaction removed whole batches; not deliverable: control batches and aborted transactions."""
    batches, offset = [], 0
    for _ in range(draw(st.integers(1, 12))):
        offset += draw(st.sampled_from([0, 0, 0, 1, 2]))
        size = draw(st.integers(1, 4))
        batches.append((offset, offset + size - 1, draw(st.booleans()) or draw(st.booleans())))
        offset += size
    return batches


class SharePartitionModel(RuleBasedStateMachine):
    @initialize(log=logs(), limit=st.integers(1, 4), window=st.integers(3, 40), start=st.integers(0, 3))
    def setup(self, log, limit, window, start):
        self.log = log
        self.log_end = log[-1][1] + 1
        self.now = 0.0
        self.sp = SharePartition(start, limit, window)
        self.model = Model(start, limit, window)
        self.counts: dict[int, int] = {}   # highest delivery count seen per offset
        self.stored: ShareState | None = None   # what the deltas written so far add up to

    def _read(self, fetch_offset: int, n_batches: int):
        """What a read of the log from the fetch offset returns: the batches from the one
        holding it on (n_batches of them, as max bytes allows)."""
        return [b for b in self.log if b[1] >= fetch_offset][:n_batches]

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 8), strict=st.booleans(),
          n_batches=st.integers(1, 6))
    def acquire(self, member, max_records, strict, n_batches):
        fetch_offset = self.sp.fetch_offset()
        assert fetch_offset == self.model.fetch_offset()
        batches = self._read(fetch_offset, n_batches)
        if fetch_offset >= self.log_end or not batches:
            return
        got = self.sp.acquire(batches, member, max_records, LOCK_S, self.now, strict=strict)
        want = self.model.acquire(batches, member, max_records, self.now, strict)
        assert got == want

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member, data):
        held = sorted(o for o, r in self.model.recs.items() if r.state == ACQUIRED and r.member == member)
        anywhere = list(range(max(self.model.start - 2, 0), self.model.end + 2))
        pool = held if held and data.draw(st.integers(0, 4), label="mostly held") else anywhere
        if not pool:
            return
        chosen = sorted(set(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6), label="offsets")))
        ranges: list[list[int]] = []   # contiguous runs of the chosen offsets, in order
        for offset in chosen:
            if ranges and ranges[-1][1] == offset - 1 and data.draw(st.booleans(), label="extend"):
                ranges[-1][1] = offset
            else:
                ranges.append([offset, offset])
        kinds = st.sampled_from([ACCEPT, RELEASE, REJECT, RENEW, GAP])
        batches = []
        for first, last in ranges:
            if data.draw(st.booleans(), label="one type"):
                types = [data.draw(kinds)]
            else:
                types = data.draw(st.lists(kinds, min_size=last - first + 1, max_size=last - first + 1))
            batches.append((first, last, types))
        wire = [AckBatch(f, last, t) for f, last, t in batches]
        assert validate_ack_batches(wire, allow_renew=True) == ErrorCode.NONE
        assert self.sp.acknowledge(member, wire, LOCK_S, self.now) == self.model.acknowledge(member, batches, self.now)

    @rule(dt=st.sampled_from([0.5, 3.0, 9.9, 10.0, 12.0, 25.0]))
    def time_passes(self, dt):
        self.now += dt
        assert self.sp.expire_locks(self.now) == self.model.expire(self.now)

    @rule(member=st.sampled_from(MEMBERS))
    def session_closes(self, member):
        assert self.sp.release_member(member) == self.model.release_member(member)

    @rule(data=st.data())
    def log_start_moves(self, data):
        """Retention or DeleteRecords moved the log start; the broker moves a start offset
        behind it (SharePartitionCoordinator.share_partition)."""
        log_start = data.draw(st.integers(0, self.log_end), label="log start")
        if self.sp.start_offset < log_start:
            self.sp.reset_start(log_start)
            self.model.reset_start(log_start)

    @rule()
    def restart(self):
        start, batches = self.sp.to_state()
        self.sp = SharePartition.from_state(start, batches, self.model.limit, self.model.window)
        self.model.restart()

    @rule()
    def write_fails(self):
        """A write of a delta failed: it is lost, and the share-partition is told so."""
        self.sp.take_delta()
        self.sp.write_failed()

    @rule()
    def restart_from_deltas(self):
        self.stored_is_current()
        self.sp = SharePartition.from_state(self.stored.start_offset, self.stored.batches, self.model.limit,
                                            self.model.window)
        self.model.restart()

    @invariant()
    def stored_is_current(self):
        """Each step's delta, laid over what was stored, gives the whole durable state."""
        if not hasattr(self, "sp"):
            return
        delta = self.sp.take_delta()
        if delta is not None:
            self.stored = apply_update(self.stored, ShareState(*delta))
        assert self.stored is not None
        assert (self.stored.start_offset, self.stored.batches) == self.sp.to_state()

    @invariant()
    def same_state(self):
        if not hasattr(self, "sp"):
            return
        sp, model = self.sp, self.model
        assert (sp.start_offset, sp.end_offset) == (model.start, model.end)
        ours = {o: (r.state, r.delivery_count, r.member if r.state == ACQUIRED else None)
                for o, r in sp.records.items()}
        assert ours == {o: r.view() for o, r in model.recs.items()}
        assert sp.fetch_offset() == model.fetch_offset()

    @invariant()
    def counts_only_grow_and_limit_holds(self):
        if not hasattr(self, "sp"):
            return
        for offset, rec in self.sp.records.items():
            assert rec.delivery_count >= self.counts.get(offset, 0)
            self.counts[offset] = rec.delivery_count
            assert rec.delivery_count <= self.model.limit
            if rec.state == AVAILABLE:
                assert rec.delivery_count < self.model.limit
            assert offset >= self.sp.start_offset


SharePartitionModel.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
test_share_partition_model = SharePartitionModel.TestCase
