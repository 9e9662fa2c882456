"""A history checker: what clients did during a fault test, recorded, then judged by Kafka's promises.

Counting records after a test says little when the counts agree by luck; a history says which record
went where. Producers record each send and its acknowledgement, consumers each record they read,
and a final full read records what the log holds at the end; `check` then verifies per partition:

- every acknowledged record is in the final log exactly once, at the offset it was acknowledged
  at, and each producer's records are in the order it sent them;
- no record was read that is not at that offset in the final log (a record a consumer was allowed
  to see was truncated later), and no two reads of one offset saw different records;
- a read_committed consumer never saw a record of an aborted transaction, nor of one that was
  still open when it read;
- a group's committed offsets never went backwards;
- no value is in the final log twice (an idempotent or transactional producer wrote a duplicate).

    history = History()
    history.sent("p", "t", 0, b"v1")
    history.acked("p", "t", 0, b"v1", offset=0)
    history.final_read("t", 0, 0, b"v1")
    report = check(history)
    assert report.ok, report.text()

Records are told apart by their value (plus, for transactional records, the transaction they were
written in: an aborted batch retried in a new transaction has the same values), so every value a
test producer sends must be unique. The module is pure Python: no clients, no sockets.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Iterable

__all__ = [
    "COMMITTED",
    "ABORTED",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "TXN_HEADER",
    "History",
    "Journal",
    "HistoryReport",
    "PartitionReport",
    "check",
    "longest_ack_gap",
]

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
COMMITTED = "committed"
ABORTED = "aborted"
# The record header a transactional test producer puts on each record it writes: the transaction's
# name, so that a reader can tell an aborted copy of a value from its committed retry.
TXN_HEADER = "kafkapy-txn"
MAX_EXAMPLES = 5  # per kind of violation, in the report

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class Send:
    """A record handed to a producer client; `offset` is set when it is acknowledged."""

    producer: str
    topic: str
    partition: int
    value: bytes
    key: bytes | None = None
    txn: str | None = None  # the transaction it was sent in, if any
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1
    offset: int | None = None  # acknowledged at
    error: str | None = None  # the delivery failed with this (it may still be in the log, at most once)
    acked_at: int = 0  # monotonic ns of the acknowledgement


@dataclass(slots=True)
class Read:
    """A record a consumer returned to the application."""

    consumer: str
    topic: str
    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None
    isolation: str = READ_UNCOMMITTED
    txn: str | None = None
    producer_id: int = -1
    sequence: int = -1
    at: int = 0  # position in the history: orders reads against transaction outcomes


@dataclass(slots=True)
class OffsetCommit:
    """A group's committed offset for a partition, as seen (committed by a client or fetched back)."""

    group: str
    topic: str
    partition: int
    offset: int
    at: int = 0


class History:
    """The events of one test run, recorded from any number of client threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clock = 0  # monotonic nanoseconds, strictly increasing within this history
        self.sends: list[Send] = []
        self._pending: dict[tuple[str, str, int, bytes | None, str | None], Send] = {}
        self.reads: list[Read] = []
        self.final: dict[str, dict[TopicPartition, list[Read]]] = {}  # isolation -> partition -> reads
        self.txn_begun: dict[str, int] = {}  # transaction -> when it began
        self.txn_committing: dict[str, int] = {}  # transaction -> when its producer asked to commit it
        self.txn_outcomes: dict[str, tuple[str, int]] = {}  # transaction -> (committed|aborted, when)
        self.commits: list[OffsetCommit] = []
        self.notes: list[str] = []
        self.stray_acks = 0  # acknowledgements matching no send (a recording mistake of the test)

    def _tick(self) -> int:
        # CLOCK_MONOTONIC is one clock for every process on the machine, so events a client in a
        # child process wrote to a journal (`load_journal`) order correctly against ours.
        self._clock = max(self._clock + 1, time.monotonic_ns())
        return self._clock

    # -- producers

    def sent(self, producer: str, topic: str, partition: int, value: bytes, key: bytes | None = None,
             txn: str | None = None, producer_id: int = -1, producer_epoch: int = -1, sequence: int = -1) -> None:
        with self._lock:
            send = Send(producer, topic, partition, value, key, txn, producer_id, producer_epoch, sequence)
            self.sends.append(send)
            self._pending[(producer, topic, partition, value, txn)] = send

    def acked(self, producer: str, topic: str, partition: int, value: bytes, offset: int,
              txn: str | None = None) -> None:
        """The producer's delivery report said the record is written at `offset` (-1: not told)."""
        with self._lock:
            send = self._pending.pop((producer, topic, partition, value, txn), None)
            if send is None:
                self.stray_acks += 1
                if self.stray_acks <= MAX_EXAMPLES:
                    self.notes.append(f"acknowledgement of a record never sent: {producer} {topic}-{partition} "
                                      f"{value!r}")
                return
            send.offset = offset
            send.acked_at = time.monotonic_ns()

    def failed(self, producer: str, topic: str, partition: int, value: bytes, error: str,
               txn: str | None = None) -> None:
        with self._lock:
            send = self._pending.pop((producer, topic, partition, value, txn), None)
            if send is not None:
                send.error = error

    def unsent(self, producer: str, topic: str, partition: int, value: bytes, txn: str | None = None) -> None:
        """Take back a `sent` whose hand-over the client refused (a full queue): it is not in flight."""
        with self._lock:
            send = self._pending.pop((producer, topic, partition, value, txn), None)
            if send is not None:
                self.sends.remove(send)

    def begin_transaction(self, txn: str, at: int | None = None) -> None:
        with self._lock:
            self.txn_begun[txn] = at or self._tick()

    def committing(self, txn: str, at: int | None = None) -> None:
        """The producer is about to call commit (EndTxn): from here on its records may be read."""
        with self._lock:
            self.txn_committing.setdefault(txn, at or self._tick())

    def end_transaction(self, txn: str, outcome: str, at: int | None = None) -> None:
        """`outcome` is COMMITTED or ABORTED, recorded once the producer knows it (commit returned)."""
        if outcome not in (COMMITTED, ABORTED):
            raise ValueError(f"outcome must be {COMMITTED!r} or {ABORTED!r}, not {outcome!r}")
        with self._lock:
            self.txn_outcomes[txn] = (outcome, at or self._tick())

    # -- consumers

    def read(self, consumer: str, topic: str, partition: int, offset: int, value: bytes | None,
             key: bytes | None = None, isolation: str = READ_UNCOMMITTED, txn: str | None = None,
             producer_id: int = -1, sequence: int = -1, at: int | None = None) -> None:
        with self._lock:
            self.reads.append(Read(consumer, topic, partition, offset, value, key, isolation, txn,
                                   producer_id, sequence, at or self._tick()))

    def final_read(self, topic: str, partition: int, offset: int, value: bytes | None, key: bytes | None = None,
                   isolation: str = READ_UNCOMMITTED, txn: str | None = None) -> None:
        """One record of the full read from offset 0 made after the faults healed: the log as it ends."""
        with self._lock:
            self.final.setdefault(isolation, {}).setdefault((topic, partition), []).append(
                Read("final", topic, partition, offset, value, key, isolation, txn, at=self._tick()))

    def final_read_begun(self, topic: str, partitions: Iterable[int], isolation: str = READ_UNCOMMITTED) -> None:
        """A full read of these partitions starts: one that then finds nothing says they are empty."""
        with self._lock:
            for partition in partitions:
                self.final.setdefault(isolation, {}).setdefault((topic, partition), [])

    def committed_offset(self, group: str, topic: str, partition: int, offset: int, at: int | None = None) -> None:
        with self._lock:
            self.commits.append(OffsetCommit(group, topic, partition, offset, at or self._tick()))

    def note(self, text: str) -> None:
        with self._lock:
            self.notes.append(text)

    def load_journal(self, path: str | os.PathLike[str]) -> int:
        """Add the events a `Journal` (a client in another process) wrote; returns how many.

        A last line cut short by a kill is skipped: the process died while writing it."""
        count = 0
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                kind = event.pop("event")
                for name in ("value", "key"):
                    if event.get(name) is not None:
                        event[name] = bytes.fromhex(event[name])
                getattr(self, kind)(**event)
                count += 1
        return count


class Journal:
    """Writes a client's events, one JSON line each, for a `History` in another process to load.

    Same method names and arguments as History's; each line is flushed at once so that a client
    killed with SIGKILL leaves every event it recorded before the kill."""

    _KINDS = ("sent", "unsent", "acked", "failed", "final_read_begun", "begin_transaction", "committing", "end_transaction", "read",
              "committed_offset", "note")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def __getattr__(self, kind: str):
        if kind not in self._KINDS:
            raise AttributeError(kind)

        def write(*args: object, **kwargs: object) -> None:
            names = History.__dict__[kind].__code__.co_varnames[1:1 + len(args)]
            event = {**dict(zip(names, args)), **kwargs}
            for name in ("value", "key"):
                if isinstance(event.get(name), (bytes, bytearray)):
                    event[name] = bytes(event[name]).hex()
            if kind in ("begin_transaction", "committing", "end_transaction", "read", "committed_offset"):
                event.setdefault("at", time.monotonic_ns())
            with self._lock:
                self._file.write(json.dumps({"event": kind, **event}) + "\n")
                self._file.flush()
        return write

    def close(self) -> None:
        self._file.close()


@dataclass(slots=True)
class PartitionReport:
    """What the checker found in one partition."""

    topic: str
    partition: int
    sent: int = 0
    acked: int = 0
    final_records: int = 0
    missing: int = 0  # acknowledged, not in the final log
    duplicates: int = 0  # extra copies of a value in the final log
    moved: int = 0  # acknowledged at one offset, found at another
    out_of_order: int = 0  # a producer's records not in the order it sent them
    truncated_reads: int = 0  # read by a consumer, not at that offset in the final log
    conflicting_reads: int = 0  # one offset read with different records
    uncommitted_reads: int = 0  # read_committed saw an aborted or open transaction's record
    unacked_present: int = 0  # sent, not acknowledged, but written (allowed)
    reads: int = 0
    violations: list[str] = field(default_factory=list)


@dataclass(slots=True)
class HistoryReport:
    """The verdict over a whole history: `ok` when no partition and no group broke a rule."""

    partitions: list[PartitionReport] = field(default_factory=list)
    offset_regressions: int = 0
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    transactions: dict[str, int] = field(default_factory=dict)  # outcome -> count

    @property
    def ok(self) -> bool:
        return not self.violations and all(not p.violations for p in self.partitions)

    def totals(self) -> dict[str, int]:
        names = ("sent", "acked", "final_records", "missing", "duplicates", "moved", "out_of_order",
                 "truncated_reads", "conflicting_reads", "uncommitted_reads", "unacked_present", "reads")
        out = {name: sum(getattr(p, name) for p in self.partitions) for name in names}
        out["offset_regressions"] = self.offset_regressions
        return out

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "totals": self.totals(), "transactions": dict(self.transactions),
                "partitions": [asdict(p) for p in self.partitions], "violations": self.all_violations(),
                "notes": list(self.notes)}

    def all_violations(self) -> list[str]:
        out = list(self.violations)
        for p in self.partitions:
            out += [f"{p.topic}-{p.partition}: {v}" for v in p.violations]
        return out

    def text(self) -> str:
        """A few lines for a test failure or a campaign log."""
        t = self.totals()
        lines = [f"history check: {'PASS' if self.ok else 'FAIL'}: {len(self.partitions)} partition(s), "
                 f"sent {t['sent']}, acked {t['acked']}, final {t['final_records']}, reads {t['reads']}",
                 f"  lost {t['missing']}, duplicates {t['duplicates']}, moved {t['moved']}, "
                 f"out of order {t['out_of_order']}, truncated reads {t['truncated_reads']}, "
                 f"conflicting reads {t['conflicting_reads']}, uncommitted reads {t['uncommitted_reads']}, "
                 f"offset regressions {t['offset_regressions']}, unacked written {t['unacked_present']}"]
        if self.transactions:
            lines.append("  transactions: " + ", ".join(f"{k} {v}" for k, v in sorted(self.transactions.items())))
        lines += [f"  violation: {v}" for v in self.all_violations()]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _examples(found: list[str]) -> str:
    return "; ".join(found[:MAX_EXAMPLES]) + (" ..." if len(found) > MAX_EXAMPLES else "")


def check(history: History) -> HistoryReport:
    """Judge a finished history (see the module docstring for the rules)."""
    with history._lock:  # a snapshot: clients may still be winding down
        sends = list(history.sends)
        reads = list(history.reads)
        final = {iso: {tp: list(rs) for tp, rs in parts.items()} for iso, parts in history.final.items()}
        outcomes = dict(history.txn_outcomes)
        begun = dict(history.txn_begun)
        committing = dict(history.txn_committing)
        commits = list(history.commits)
        notes = list(history.notes)
        if history.stray_acks:
            notes.append(f"{history.stray_acks} acknowledgement(s) matched no recorded send")
    report = HistoryReport(notes=notes)
    report.transactions = dict(Counter(o for o, _ in outcomes.values()))
    open_txns = len(set(begun) - set(outcomes))
    if open_txns:
        report.transactions["unknown"] = open_txns
    if not final and any(s.offset is not None for s in sends):
        report.violations.append("no final read recorded: nothing to check the acknowledgements against")
    sends_by_tp: dict[TopicPartition, list[Send]] = defaultdict(list)
    for send in sends:
        sends_by_tp[(send.topic, send.partition)].append(send)
    reads_by_tp: dict[TopicPartition, list[Read]] = defaultdict(list)
    for read in reads:
        reads_by_tp[(read.topic, read.partition)].append(read)
    partitions = set(sends_by_tp) | set(reads_by_tp)
    for parts in final.values():
        partitions |= set(parts)
    for tp in sorted(partitions):
        report.partitions.append(_check_partition(tp, sends_by_tp.get(tp, []), reads_by_tp.get(tp, []),
                                                  {iso: parts[tp] for iso, parts in final.items() if tp in parts},
                                                  outcomes, committing))
    report.offset_regressions = _check_commits(commits, report.violations)
    return report


def _check_partition(tp: TopicPartition, sends: list[Send], reads: list[Read], finals: dict[str, list[Read]],
                     outcomes: dict[str, tuple[str, int]], committing: dict[str, int]) -> PartitionReport:
    topic, partition = tp
    out = PartitionReport(topic, partition, sent=len(sends), acked=sum(1 for s in sends if s.offset is not None),
                          reads=len(reads))
    # The final log to hold acknowledgements against: read_committed if there is one (it is what an
    # exactly-once reader sees, and an acknowledged non-transactional record is in both).
    iso = READ_COMMITTED if READ_COMMITTED in finals else READ_UNCOMMITTED
    log = finals.get(iso, [])
    out.final_records = len(log)
    where: dict[tuple[bytes | None, str | None], int] = {}
    copies: Counter[bytes | None] = Counter()
    for r in log:
        where.setdefault((r.value, r.txn), r.offset)
        copies[r.value] += 1
    duplicates = [f"{v!r} x{n}" for v, n in copies.items() if n > 1]
    out.duplicates = sum(n - 1 for n in copies.values() if n > 1)

    missing, moved, backwards = [], [], []
    last_offset: dict[str, tuple[int, bytes]] = {}
    for send in sends:
        offset = where.get((send.value, send.txn))
        committed = send.txn is None or outcomes.get(send.txn, ("", 0))[0] == COMMITTED
        if send.offset is not None and committed and offset is None:
            missing.append(f"{send.value!r} (acked at {send.offset})")
        if offset is None:
            continue
        if send.offset is None:
            out.unacked_present += 1
        elif send.offset >= 0 and send.offset != offset:
            moved.append(f"{send.value!r} acked at {send.offset}, found at {offset}")
        before = last_offset.get(send.producer)
        if before is not None and offset < before[0]:
            backwards.append(f"{send.value!r} at {offset}, sent after {before[1]!r} at {before[0]}")
        last_offset[send.producer] = (offset, send.value)
    out.missing, out.moved, out.out_of_order = len(missing), len(moved), len(backwards)

    truncated, conflicting, uncommitted = [], [], []
    final_by_offset = {i: {r.offset: r for r in rs} for i, rs in finals.items()}
    first_seen: dict[tuple[str, int], Read] = {}
    for read in reads:
        earlier = first_seen.setdefault((read.isolation, read.offset), read)
        if (earlier.value, earlier.txn) != (read.value, read.txn):
            conflicting.append(f"offset {read.offset}: {earlier.consumer} read {earlier.value!r}, "
                               f"{read.consumer} read {read.value!r}")
        final_at = final_by_offset.get(read.isolation)
        if final_at is not None:  # a final read at this isolation was made (an empty one included)
            now = final_at.get(read.offset)
            if now is None or (now.value, now.txn) != (read.value, read.txn):
                truncated.append(f"offset {read.offset}: {read.consumer} read {read.value!r}, final log has "
                                 f"{None if now is None else now.value!r}")
        if read.isolation == READ_COMMITTED and read.txn is not None:
            outcome = outcomes.get(read.txn, ("open", 0))[0]
            if outcome == ABORTED:
                uncommitted.append(f"offset {read.offset}: {read.value!r} of aborted transaction {read.txn}")
            elif committing.get(read.txn, read.at + 1) > read.at:
                uncommitted.append(f"offset {read.offset}: {read.value!r} of transaction {read.txn} before it "
                                   f"committed")
    for read in log:  # the final read_committed read is a read_committed read too
        if iso == READ_COMMITTED and read.txn is not None and outcomes.get(read.txn, ("", 0))[0] == ABORTED:
            uncommitted.append(f"final read, offset {read.offset}: {read.value!r} of aborted transaction {read.txn}")
    out.truncated_reads, out.conflicting_reads = len(truncated), len(conflicting)
    out.uncommitted_reads = len(uncommitted)
    for what, found in (("acknowledged record(s) lost", missing), ("duplicate value(s)", duplicates),
                        ("acknowledged record(s) at another offset", moved),
                        ("record(s) out of the order sent", backwards),
                        ("read record(s) later truncated", truncated),
                        ("offset(s) read with different records", conflicting),
                        ("read_committed read(s) of aborted or open transactions", uncommitted)):
        if found:
            out.violations.append(f"{len(found)} {what}: {_examples(found)}")
    return out


def _check_commits(commits: Iterable[OffsetCommit], violations: list[str]) -> int:
    last: dict[tuple[str, str, int], int] = {}
    regressions = []
    for commit in sorted(commits, key=lambda c: c.at):
        key = (commit.group, commit.topic, commit.partition)
        before = last.get(key)
        if before is not None and commit.offset < before:
            regressions.append(f"group {commit.group} {commit.topic}-{commit.partition}: {before} then {commit.offset}")
        last[key] = commit.offset if before is None else max(before, commit.offset)
    if regressions:
        violations.append(f"{len(regressions)} committed group offset(s) went backwards: {_examples(regressions)}")
    return len(regressions)


def longest_ack_gap(history: History, start_ns: int, end_ns: int, topic: str | None = None) -> dict[int, float]:
    """Per partition (of `topic`, or of every topic), the longest time in seconds without an
    acknowledgement between `start_ns` and `end_ns` (monotonic ns): how long producers to it
    were kept waiting by a fault."""
    with history._lock:
        times: dict[int, list[int]] = defaultdict(list)
        for send in history.sends:
            if send.offset is not None and (topic is None or send.topic == topic) and start_ns <= send.acked_at <= end_ns:
                times[send.partition].append(send.acked_at)
        partitions = {s.partition for s in history.sends if topic is None or s.topic == topic}
    out = {}
    for partition in sorted(partitions):
        points = [start_ns, *sorted(times.get(partition, [])), end_ns]
        out[partition] = round(max(b - a for a, b in zip(points, points[1:])) / 1e9, 3)
    return out

