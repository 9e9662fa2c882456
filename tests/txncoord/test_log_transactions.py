"""PartitionLog's transaction support: markers, last stable offset, the aborted-transaction index."""
from __future__ import annotations

import os
import time

import pytest

from kafkapy.log import LogConfig, PartitionLog
from kafkapy.log.producer_state import InvalidProducerEpochError, TransactionCoordinatorFencedError
from kafkapy.log.txn_index import AbortedTxn, TransactionIndex
from kafkapy.protocol.control_records import ControlRecordType, read_control_batch_marker
from kafkapy.protocol.records import build_batch, iter_batch_headers

TS = int(time.time() * 1000)


def txn_batch(pid: int, seq: int, n: int = 1, epoch: int = 0, transactional: bool = True) -> bytearray:
    records = [(b"k", b"v%d" % (seq + i), (), TS) for i in range(n)]
    return bytearray(build_batch(records, base_timestamp=TS, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=transactional))


@pytest.fixture
def make_log(tmp_path):
    logs = []

    def make(name: str = "t-0", **config) -> PartitionLog:
        plog = PartitionLog.open(tmp_path / name, LogConfig(**config) if config else None)
        logs.append(plog)
        return plog

    yield make
    for plog in logs:
        plog.close()


def test_lso_follows_open_transactions_and_markers(make_log):
    plog = make_log()
    plog.append(bytearray(build_batch([(b"a", b"plain")], base_timestamp=TS)))
    assert plog.last_stable_offset == 1
    plog.append(txn_batch(7, 0, 2))          # offsets 1-2, producer 7 open from 1
    plog.append(txn_batch(8, 0))             # offset 3, producer 8 open from 3
    assert plog.high_watermark == 4 and plog.last_stable_offset == 1
    result = plog.append_txn_marker(7, 0, 5, commit=True)
    assert result.base_offset == 4
    assert plog.last_stable_offset == 3       # producer 8 still open
    plog.append_txn_marker(8, 0, 5, commit=False)
    assert plog.last_stable_offset == plog.high_watermark == 6
    assert plog.aborted_transactions(0, 6) == [AbortedTxn(8, 3, 5, 6)]
    assert plog.aborted_transactions(6, 10) == []   # the marker is before the range
    assert plog.aborted_transactions(0, 3) == []    # the transaction starts after the range


def test_marker_batches_are_control_batches(make_log):
    plog = make_log()
    plog.append(txn_batch(3, 0))
    plog.append_txn_marker(3, 0, 9, commit=False)
    data = plog.read(1, 1 << 20).records.tobytes()
    header = next(iter_batch_headers(data))
    assert header.is_control and header.is_transactional and header.producer_id == 3
    assert read_control_batch_marker(data, header) == (ControlRecordType.ABORT, 9)


def test_marker_epoch_and_coordinator_epoch_fencing(make_log):
    plog = make_log()
    plog.append(txn_batch(3, 0, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        plog.append_txn_marker(3, 1, 4, commit=True)
    plog.append_txn_marker(3, 2, 4, commit=True)
    plog.append(txn_batch(3, 1, epoch=2))
    with pytest.raises(TransactionCoordinatorFencedError):
        plog.append_txn_marker(3, 2, 3, commit=True)
    # a higher producer epoch (the coordinator fenced the producer) is accepted
    plog.append_txn_marker(3, 3, 4, commit=False)
    assert plog.last_stable_offset == plog.log_end_offset


def test_many_aborts_collect_only_overlapping(make_log):
    plog = make_log()
    for i in range(20):
        plog.append(txn_batch(100 + i, 0, 3))
        plog.append_txn_marker(100 + i, 0, 0, commit=i % 2 == 0)
    # each transaction takes 4 offsets: data at 4i..4i+2, marker at 4i+3
    aborted = plog.aborted_transactions(0, plog.log_end_offset)
    assert [a.producer_id for a in aborted] == [100 + i for i in range(1, 20, 2)]
    middle = plog.aborted_transactions(20, 28)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in middle] == [(105, 20, 23), (107, 28, 31)][:1]


def test_index_survives_clean_restart_and_is_kafka_format(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0")
    plog.append(txn_batch(5, 0, 2))
    plog.append_txn_marker(5, 0, 1, commit=False)
    plog.close()
    files = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".txnindex")
    assert files == ["00000000000000000000.txnindex"]
    raw = (tmp_path / "t-0" / files[0]).read_bytes()
    assert len(raw) == 34 and raw[:2] == b"\x00\x00"
    plog = PartitionLog.open(tmp_path / "t-0", clean_shutdown=True)
    try:
        assert plog.aborted_transactions(0, 10) == [AbortedTxn(5, 0, 2, 3)]
    finally:
        plog.close()


def test_index_rebuilt_from_log_when_files_are_lost(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0")
    plog.append(txn_batch(5, 0, 2))
    plog.append_txn_marker(5, 0, 1, commit=False)
    plog.append(txn_batch(6, 0))
    plog.abandon()  # crash: no snapshot at the end
    (tmp_path / "t-0" / "00000000000000000000.txnindex").unlink()
    plog = PartitionLog.open(tmp_path / "t-0")
    try:
        assert plog.aborted_transactions(0, 10) == [AbortedTxn(5, 0, 2, 3)]
        assert plog.last_stable_offset == 3  # producer 6's transaction is still open after recovery
    finally:
        plog.close()


def test_truncation_drops_later_entries(make_log):
    plog = make_log()
    plog.append(txn_batch(5, 0))
    plog.append_txn_marker(5, 0, 1, commit=False)   # offset 1
    plog.append(txn_batch(6, 0))
    plog.append_txn_marker(6, 0, 1, commit=False)   # offset 3
    assert len(plog.aborted_transactions(0, 10)) == 2
    plog.truncate_to(3)
    assert plog.aborted_transactions(0, 10) == [AbortedTxn(5, 0, 1, 2)]
    assert plog.last_stable_offset == 2  # producer 6 is open again
    plog.truncate_fully_and_start_at(50)
    assert plog.aborted_transactions(0, 100) == []


def test_index_entries_go_to_the_segment_holding_the_marker(make_log, tmp_path):
    plog = make_log(segment_bytes=300)
    for i in range(6):
        plog.append(txn_batch(10 + i, 0, 2))
        plog.append_txn_marker(10 + i, 0, 0, commit=False)
    assert len(plog.segments) > 1
    index = TransactionIndex(tmp_path / "t-0")
    assert [e.producer_id for e in index.entries()] == list(range(10, 16))
    names = [p.name for p in (tmp_path / "t-0").iterdir() if p.suffix == ".txnindex"]
    bases = {s.base_offset for s in plog.segments}
    assert all(int(n.split(".")[0]) in bases for n in names)


def test_partial_trailing_entry_is_ignored(tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    entry = AbortedTxn(1, 0, 5, 6).encode()
    (directory / "00000000000000000000.txnindex").write_bytes(entry + entry[:10])
    assert TransactionIndex(directory).entries() == [AbortedTxn(1, 0, 5, 6)]
    assert os.path.exists(directory / "00000000000000000000.txnindex")
