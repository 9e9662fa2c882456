"""The history checker (kafkapy.testing.history): each rule caught alone, and a correct history of
any shape passing while any one break of it fails (hypothesis)."""
from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.testing.history import (
    ABORTED,
    COMMITTED,
    READ_COMMITTED,
    History,
    Journal,
    check,
    longest_ack_gap,
)


def simple(values=(b"a", b"b", b"c"), final=None) -> History:
    """One producer, topic t partition 0, every value acked at its index; the final log as given."""
    h = History()
    for offset, value in enumerate(values):
        h.sent("p", "t", 0, value)
        h.acked("p", "t", 0, value, offset)
    for offset, value in (enumerate(values) if final is None else final):
        h.final_read("t", 0, offset, value)
    return h


def test_a_correct_history_passes_and_reports():
    h = simple()
    h.read("c", "t", 0, 0, b"a")
    h.committed_offset("g", "t", 0, 1)
    h.committed_offset("g", "t", 0, 3)
    report = check(h)
    assert report.ok, report.text()
    assert report.totals()["acked"] == 3 and report.totals()["final_records"] == 3
    assert "PASS" in report.text() and report.to_dict()["ok"] is True


def test_lost_acknowledged_record():
    report = check(simple(final=[(0, b"a"), (2, b"c")]))
    assert not report.ok and report.totals()["missing"] == 1
    assert "lost" in report.text() and "b'b'" in report.text()


def test_duplicate_value():
    report = check(simple(final=[(0, b"a"), (1, b"b"), (2, b"c"), (3, b"c")]))
    assert report.totals()["duplicates"] == 1 and not report.ok


def test_moved_and_out_of_order():
    report = check(simple(final=[(0, b"a"), (1, b"c"), (2, b"b")]))
    assert report.totals()["moved"] == 2 and report.totals()["out_of_order"] == 1


def test_unacked_record_may_be_written_once():
    h = simple()
    h.sent("p", "t", 0, b"d")
    h.failed("p", "t", 0, b"d", "_MSG_TIMED_OUT")
    h.final_read("t", 0, 3, b"d")
    report = check(h)
    assert report.ok, report.text()
    assert report.totals()["unacked_present"] == 1


def test_read_then_truncated():
    h = simple(final=[(0, b"a"), (1, b"b"), (2, b"c")])
    h.read("c", "t", 0, 3, b"x")  # read beyond what the log ends with
    h.read("c", "t", 0, 1, b"b")
    report = check(h)
    assert report.totals()["truncated_reads"] == 1 and not report.ok


def test_one_offset_read_with_two_records():
    h = simple()
    h.read("c1", "t", 0, 1, b"b")
    h.read("c2", "t", 0, 1, b"z")
    report = check(h)
    assert report.totals()["conflicting_reads"] == 1
    assert report.totals()["truncated_reads"] == 1


def test_read_committed_rules():
    h = History()
    h.begin_transaction("t1")
    h.sent("tx", "out", 0, b"A", txn="t1")
    h.acked("tx", "out", 0, b"A", 0, txn="t1")
    h.read("rc", "out", 0, 0, b"A", isolation=READ_COMMITTED, txn="t1")  # before commit: open
    h.end_transaction("t1", ABORTED)
    h.read("rc", "out", 0, 0, b"A", isolation=READ_COMMITTED, txn="t1")  # aborted
    h.begin_transaction("t2")
    h.sent("tx", "out", 0, b"A", txn="t2")  # the same value, retried in a new transaction
    h.acked("tx", "out", 0, b"A", 2, txn="t2")
    h.committing("t2")
    h.read("rc", "out", 0, 2, b"A", isolation=READ_COMMITTED, txn="t2")  # fine: commit asked
    h.end_transaction("t2", COMMITTED)
    h.final_read("out", 0, 2, b"A", isolation=READ_COMMITTED, txn="t2")
    report = check(h)
    assert report.totals()["uncommitted_reads"] == 2, report.text()
    assert report.totals()["missing"] == 0 and report.transactions == {ABORTED: 1, COMMITTED: 1}


def test_aborted_acked_record_is_not_lost_but_committed_one_is():
    h = History()
    for txn, outcome in (("t1", ABORTED), ("t2", COMMITTED)):
        h.begin_transaction(txn)
        h.sent("tx", "out", 0, b"v", txn=txn)
        h.acked("tx", "out", 0, b"v", -1, txn=txn)
        h.end_transaction(txn, outcome)
    h.final_read("out", 0, 0, b"other", isolation=READ_COMMITTED)
    assert check(h).totals()["missing"] == 1


def test_group_offsets_going_backwards():
    h = simple()
    for offset in (1, 3, 2, 3):
        h.committed_offset("g", "t", 0, offset)
    h.committed_offset("g2", "t", 0, 0)
    report = check(h)
    assert report.offset_regressions == 1 and not report.ok


def test_no_final_read_is_a_violation():
    h = History()
    h.sent("p", "t", 0, b"a")
    assert check(h).ok  # nothing acknowledged: nothing promised
    h.acked("p", "t", 0, b"a", 0)
    assert not check(h).ok


def test_journal_from_another_process(tmp_path):
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    journal.begin_transaction("t1")
    journal.sent("tx", "out", 0, b"\x00A", txn="t1")
    journal.acked("tx", "out", 0, b"\x00A", 0, txn="t1")
    journal.committing("t1")
    journal.end_transaction("t1", COMMITTED)
    journal.committed_offset("g", "in", 0, 5)
    journal.close()
    with open(path, "a") as f:
        f.write('{"event": "sent", "produ')  # killed mid-line
    h = History()
    assert h.load_journal(path) == 6
    h.read("rc", "out", 0, 0, b"\x00A", isolation=READ_COMMITTED, txn="t1")
    h.final_read("out", 0, 0, b"\x00A", isolation=READ_COMMITTED, txn="t1")
    report = check(h)
    assert report.ok, report.text()
    assert report.totals()["acked"] == 1 and h.commits[0].offset == 5


# ------------------------------------------------------------------ properties

@st.composite
def runs(draw):
    """A correct run: producers send numbered values to partitions, some acked, some failed but
    written, some failed and not written; consumers read prefixes of each final log."""
    partitions = draw(st.integers(1, 3))
    producers = draw(st.integers(1, 3))
    logs: list[list[tuple[str, bytes, bool]]] = [[] for _ in range(partitions)]
    for n in range(draw(st.integers(0, 40))):
        producer = f"p{draw(st.integers(0, producers - 1))}"
        partition = draw(st.integers(0, partitions - 1))
        fate = draw(st.sampled_from(["acked", "acked", "acked", "failed-written", "failed-lost"]))
        logs[partition].append((producer, b"v%d" % n, fate != "failed-lost"))
        logs[partition][-1] += (fate,)
    reads = draw(st.lists(st.tuples(st.integers(0, partitions - 1), st.floats(0, 1)), max_size=6))
    return partitions, logs, reads


def build(partitions, logs, reads) -> History:
    h = History()
    for partition, entries in enumerate(logs):
        offset = 0
        for producer, value, written, fate in entries:
            h.sent(producer, "t", partition, value)
            if fate == "acked":
                h.acked(producer, "t", partition, value, offset)
            else:
                h.failed(producer, "t", partition, value, "timed out")
            if written:
                h.final_read("t", partition, offset, value)
                offset += 1
    for partition, fraction in reads:
        written = [value for _, value, w, _ in logs[partition] if w]
        for offset, value in enumerate(written[:int(len(written) * fraction)]):
            h.read("c", "t", partition, offset, value)
    for offset in range(3):
        h.committed_offset("g", "t", 0, offset)
    return h


@settings(max_examples=150, deadline=None)
@given(runs())
def test_correct_histories_pass(run):
    report = check(build(*run))
    assert report.ok, report.text()


@settings(max_examples=150, deadline=None)
@given(runs(), st.sampled_from(["drop", "duplicate", "truncate-read", "swap"]), st.data())
def test_any_break_is_caught(run, breakage, data):
    partitions, logs, reads = run
    h = build(partitions, logs, reads)
    final = h.final[next(iter(h.final))] if h.final else {}
    acked_offsets = {(s.partition, s.offset) for s in h.sends if s.offset is not None}
    if breakage == "drop":
        candidates = [(tp, i) for tp, rs in final.items() for i, r in enumerate(rs) if (tp[1], r.offset) in acked_offsets]
        if not candidates:
            return
        tp, i = data.draw(st.sampled_from(candidates))
        del final[tp][i]
    elif breakage == "duplicate":
        candidates = [tp for tp, rs in final.items() if rs]
        if not candidates:
            return
        tp = data.draw(st.sampled_from(candidates))
        last = final[tp][-1]
        h.final_read("t", tp[1], last.offset + 1, final[tp][0].value)
    elif breakage == "truncate-read":
        if not h.reads:
            return
        read = data.draw(st.sampled_from(h.reads))
        final[("t", read.partition)] = [r for r in final[("t", read.partition)] if r.offset < read.offset]
    else:  # two acked records of one producer change places
        candidates = []
        for tp, rs in final.items():
            for a in range(len(rs)):
                for b in range(a + 1, len(rs)):
                    sa = next(s for s in h.sends if s.value == rs[a].value)
                    sb = next(s for s in h.sends if s.value == rs[b].value)
                    if sa.producer == sb.producer and sa.offset is not None:
                        candidates.append((tp, a, b))
        if not candidates:
            return
        tp, a, b = data.draw(st.sampled_from(candidates))
        rs = final[tp]
        rs[a].value, rs[b].value = rs[b].value, rs[a].value
    assert not check(h).ok


def test_longest_ack_gap():
    h = History()
    for n in range(3):
        h.sent("p", "t", 0, b"%d" % n)
    start = time.monotonic_ns()
    h.acked("p", "t", 0, b"0", 0)
    time.sleep(0.3)
    h.acked("p", "t", 0, b"1", 1)
    end = time.monotonic_ns()
    gap = longest_ack_gap(h, start, end)
    assert set(gap) == {0} and 0.25 < gap[0] < 1.0


def test_final_reads_per_topic_and_isolation():
    """A plain topic read read_uncommitted and a transactional one read read_committed: each
    partition is held against its own final read; an empty final read still counts."""
    h = simple()
    h.begin_transaction("x")
    h.sent("tx", "out", 0, b"A", txn="x")
    h.acked("tx", "out", 0, b"A", 0, txn="x")
    h.committing("x")
    h.end_transaction("x", COMMITTED)
    h.final_read_begun("out", [0, 1], READ_COMMITTED)
    h.final_read("out", 0, 0, b"A", isolation=READ_COMMITTED, txn="x")
    h.read("c", "out", 1, 0, b"gone", isolation=READ_COMMITTED)
    report = check(h)
    assert report.totals()["missing"] == 0 and report.totals()["truncated_reads"] == 1, report.text()
