"""The log cleaner on transactional and idempotent data, as Kafka 3.7's Cleaner does it:
aborted batches removed, markers kept until their delete horizon, producer state kept."""
from __future__ import annotations

import os

import pytest

from kafkapy.log import PartitionLog
from kafkapy.log.cleaner import clean_log
from kafkapy.log.producer_state import OutOfOrderSequenceError
from kafkapy.protocol.records import DELETE_HORIZON_MASK, build_batch, iter_batch_headers, iter_records

from logtools import BASE_TS, read_all, small_config

NOW = BASE_TS + 1000
RETENTION = 10_000


def compact_config(**overrides):
    base = dict(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0, delete_retention_ms=RETENTION)
    base.update(overrides)
    return small_config(**base)


def batches(plog):
    """(header, records) of every batch of the log."""
    data = read_all(plog)
    out = []
    pos = 0
    for header in iter_batch_headers(data, validate=True):
        header.position = pos
        out.append((header, list(iter_records(data, header))))
        pos += header.size
    return out


def plain(plog, key, value):
    return plog.append(bytearray(build_batch([(key, value, (), BASE_TS)], base_timestamp=BASE_TS)))


def txn(plog, pid, seq, pairs, epoch=0):
    return plog.append(bytearray(build_batch([(k, v, (), BASE_TS) for k, v in pairs], base_timestamp=BASE_TS,
                                             producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                             is_transactional=True)))


def dirty_round(plog, tag):
    """New dirty data on a key of its own, then a roll, so that the next cleaning runs."""
    for i in range(3):
        plain(plog, b"filler", b"%s-%d" % (tag, i))
    plog.roll()


def markers(plog):
    return [(h.base_offset, bool(h.attributes & DELETE_HORIZON_MASK), len(recs))
            for h, recs in batches(plog) if h.is_control]


def test_aborted_data_removed_markers_kept_until_delete_horizon(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    plain(plog, b"a", b"before")
    aborted = txn(plog, 7, 0, [(b"a", b"aborted-1"), (b"b", b"aborted-2")])
    abort_marker = plog.append_txn_marker(7, 0, 0, commit=False).base_offset
    committed = txn(plog, 7, 2, [(b"c", b"committed")])
    plog.append_txn_marker(7, 0, 0, commit=True)
    dirty_round(plog, b"r1")
    assert [e.last_offset for e in plog.aborted_transactions(0, plog.log_end_offset)] == [abort_marker]

    # Pass 1: the aborted batch goes (its data is not even in the offset map: "a" keeps
    # "before"); the abort marker stays, as its transaction's batch was seen in this pass.
    assert clean_log(plog, NOW) is not None
    got = batches(plog)
    values = {r.key: r.value for h, recs in got if not h.is_control for r in recs}
    assert values[b"a"] == b"before" and b"b" not in values and values[b"c"] == b"committed"
    # (a batch ending a segment stays as an empty batch of no producer: segments keep their ends)
    assert all(not recs and h.producer_id == -1 for h, recs in got if h.base_offset == aborted.base_offset)
    assert (abort_marker, False, 1) in markers(plog)
    assert [e.last_offset for e in plog.aborted_transactions(0, plog.log_end_offset)] == [abort_marker]

    # Pass 2: no batch of the aborted transaction is left, so its marker may go; first it
    # gets a delete horizon (now + delete.retention.ms), like a tombstone.
    dirty_round(plog, b"r2")
    assert clean_log(plog, NOW + 1) is not None
    header = next(h for h, _ in batches(plog) if h.base_offset == abort_marker)
    assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == NOW + 1 + RETENTION

    # Pass 3, before the horizon: still there. Pass 4, after it: gone, with its index entry.
    dirty_round(plog, b"r3")
    clean_log(plog, NOW + 2)
    assert any(off == abort_marker for off, _, _ in markers(plog))
    dirty_round(plog, b"r4")
    assert clean_log(plog, NOW + 2 + RETENTION + 1) is not None
    assert all(off != abort_marker for off, _, _ in markers(plog))
    assert plog.aborted_transactions(0, plog.log_end_offset) == []
    # The commit marker closes the producer's last transaction: the last record of an active
    # producer is kept (and its committed data, the latest value of "c").
    assert values[b"c"] == b"committed" and any(h.base_offset == committed.base_offset for h, _ in batches(plog))
    plog.close()
    reopened = PartitionLog.open(tmp_path / "t-0", compact_config())
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == []
    reopened.close()


def test_open_transaction_is_never_cleaned(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    plain(plog, b"k", b"old")
    plog.roll()
    open_txn = txn(plog, 9, 0, [(b"k", b"pending")])
    plog.roll()
    for i in range(5):
        plain(plog, b"k", b"later-%d" % i)
    plog.roll()
    # The last stable offset is the open transaction's first offset: nothing from there on
    # may be cleaned, so "k"'s old value (below it) is all the cleaner may look at.
    assert plog.last_stable_offset == open_txn.base_offset
    clean_log(plog, NOW)
    got = [(h.base_offset, [r.value for r in recs]) for h, recs in batches(plog)]
    assert (open_txn.base_offset, [b"pending"]) in got
    assert sum(1 for _, vals in got if vals and vals[0].startswith(b"later")) == 5


def test_idempotent_producer_continues_after_cleaning_and_reload(tmp_path):
    directory = tmp_path / "t-0"
    plog = PartitionLog.open(directory, compact_config())
    pid, epoch = 11, 0
    seq = 0
    for i in range(40):
        plog.append(bytearray(build_batch([(b"same", b"v%d" % i + b"x" * 60, (), BASE_TS)], base_timestamp=BASE_TS,
                                          producer_id=pid, producer_epoch=epoch, base_sequence=seq)))
        seq += 1
    last_batch = build_batch([(b"same", b"last", (), BASE_TS)], base_timestamp=BASE_TS,
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    last = plog.append(bytearray(last_batch))
    seq += 1
    plog.roll()
    assert len(plog.segments) == 3  # two closed segments
    result = clean_log(plog, NOW)
    assert result is not None and result.records_removed == 40
    # Only the producer's last batch holds data; batches emptied of their records are gone
    # except the one ending each segment (kafkapy keeps segment ends).
    data_batches = [(h, recs) for h, recs in batches(plog) if recs]
    assert [(h.base_offset, h.producer_id, h.base_sequence) for h, _ in data_batches] == [(last.base_offset, pid, 40)]
    plog.close()
    # A reload that must rebuild the producer state from the log (no snapshot).
    for name in os.listdir(directory):
        if name.endswith(".snapshot"):
            os.unlink(directory / name)
    reopened = PartitionLog.open(directory, compact_config(), clean_shutdown=False)
    assert reopened.producer_state.last_entry(pid).last_seq == 40
    # The retry of the last batch is a duplicate, the next sequence is in order, a gap is not.
    assert reopened.append(bytearray(last_batch)).duplicate
    reopened.append(bytearray(build_batch([(b"same", b"next", (), BASE_TS)], base_timestamp=BASE_TS,
                                          producer_id=pid, producer_epoch=epoch, base_sequence=seq)))
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append(bytearray(build_batch([(b"same", b"gap", (), BASE_TS)], base_timestamp=BASE_TS,
                                              producer_id=pid, producer_epoch=epoch, base_sequence=seq + 5)))
    reopened.close()


def test_tombstone_gets_delete_horizon_then_goes(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    plain(plog, b"gone", b"value")
    plain(plog, b"gone", None)
    dirty_round(plog, b"r1")
    clean_log(plog, NOW)
    tomb = [(h, recs) for h, recs in batches(plog) if any(r.key == b"gone" for r in recs)]
    assert len(tomb) == 1 and tomb[0][1][0].value is None
    header = tomb[0][0]
    assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == NOW + RETENTION
    assert tomb[0][1][0].timestamp == BASE_TS  # record timestamps are kept
    dirty_round(plog, b"r2")
    clean_log(plog, NOW + RETENTION - 1)
    assert any(r.key == b"gone" for _, recs in batches(plog) for r in recs)
    dirty_round(plog, b"r3")
    clean_log(plog, NOW + RETENTION + 1)
    assert not any(r.key == b"gone" for _, recs in batches(plog) for r in recs)
    plog.close()


def test_emptied_batch_goes_once_its_producer_wrote_again(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    pid = 21

    def idempotent(seq, value):
        return plog.append(bytearray(build_batch([(b"k", value, (), BASE_TS)], base_timestamp=BASE_TS,
                                                 producer_id=pid, producer_epoch=0, base_sequence=seq)))

    idempotent(0, b"a")
    first_last = idempotent(1, b"b")
    plain(plog, b"other", b"x")
    plog.roll()
    plain(plog, b"k", b"plain")  # "k"'s latest is no longer the producer's
    plog.roll()
    clean_log(plog, NOW)
    # The producer's last batch stays, emptied (its sequence is what the producer state needs).
    kept = [(h, recs) for h, recs in batches(plog) if h.producer_id == pid]
    assert [(h.base_offset, h.base_sequence, len(recs)) for h, recs in kept] == [(first_last.base_offset, 1, 0)]
    # Once the producer wrote again, the emptied batch is no longer its last: it goes.
    idempotent(2, b"c")
    plog.roll()
    dirty_round(plog, b"r1")
    clean_log(plog, NOW + 1)
    assert [h.base_sequence for h, _ in batches(plog) if h.producer_id == pid] == [2]
    plog.close()
