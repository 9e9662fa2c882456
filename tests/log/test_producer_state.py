"""ProducerStateManager: Kafka's idempotence rules, transactions, snapshots, truncation, expiry,
and a property test against a plain model across clean restarts and crashes."""
from __future__ import annotations

import shutil
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.records import (
    CONTROL_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    build_batch,
    read_batch_header,
)
from kafkapy.log.producer_state import (
    CompletedTxn,
    CorruptSnapshotError,
    DuplicateBatch,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    read_snapshot,
    snapshot_file_name,
)

MAX_SEQ = 2**31 - 1
NOW = 1_700_000_000_000


def hdr(pid: int = 1, epoch: int = 0, seq: int = 0, count: int = 1, offset: int = 0, ts: int = NOW,
        txn: bool = False, control: bool = False) -> BatchHeader:
    attributes = (TRANSACTIONAL_MASK if txn or control else 0) | (CONTROL_MASK if control else 0)
    return BatchHeader(base_offset=offset, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=attributes, last_offset_delta=count - 1, base_timestamp=ts,
                       max_timestamp=ts, producer_id=pid, producer_epoch=epoch,
                       base_sequence=-1 if control else seq, records_count=count)


class Log:
    """A stand-in for PartitionLog: checks, assigns offsets, updates, keeps the headers."""

    def __init__(self, psm: ProducerStateManager, start: int = 0):
        self.psm = psm
        self.leo = start
        self.headers: list[BatchHeader] = []

    def append(self, pid=1, epoch=0, seq=0, count=1, ts=NOW, txn=False, control=False):
        h = hdr(pid, epoch, seq, count, self.leo, ts, txn, control)
        dup = self.psm.check(h)
        if dup is not None:
            return dup
        self.psm.update(h)
        self.headers.append(h)
        self.leo = h.next_offset
        return (h.base_offset, h.last_offset)


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(tmp_path)


@pytest.fixture
def plog(psm):
    return Log(psm)


# ----------------------------------------------------------------------------- sequences


def test_non_idempotent_batches_are_not_checked(psm):
    h = hdr(pid=-1, epoch=-1, seq=-1)
    assert psm.check(h) is None
    psm.update(h)
    assert psm.active_producers() == {}
    assert psm.map_end_offset == 1


def test_unknown_producer_accepts_any_sequence(plog):
    assert plog.append(pid=7, seq=12345, count=3) == (0, 2)
    entry = plog.psm.last_entry(7)
    assert entry.producer_epoch == 0 and entry.first_seq == 12345 and entry.last_seq == 12347


def test_in_sequence_batches_are_accepted(plog):
    assert plog.append(seq=0, count=2) == (0, 1)
    assert plog.append(seq=2, count=3) == (2, 4)
    assert plog.append(seq=5, count=1) == (5, 5)
    assert plog.psm.last_entry(1).last_seq == 5


@pytest.mark.parametrize("seq,count", [(4, 1), (2, 2), (1, 1), (100, 1), (1, 2)])
def test_gap_or_overlap_is_out_of_order(plog, seq, count):
    plog.append(seq=0, count=2)
    plog.append(seq=2, count=1)  # last seq 2, next must be 3
    with pytest.raises(OutOfOrderSequenceError) as info:
        plog.psm.check(hdr(seq=seq, count=count, offset=plog.leo))
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45


def test_duplicate_within_last_five_returns_original_offsets(plog):
    offsets = [plog.append(seq=i * 2, count=2, ts=NOW + i) for i in range(5)]
    for i, (base, last) in enumerate(offsets):
        dup = plog.psm.check(hdr(seq=i * 2, count=2, offset=plog.leo))
        assert dup == DuplicateBatch(base, last, NOW + i)
    assert plog.leo == 10  # nothing re-appended


def test_duplicate_needs_exact_sequence_range(plog):
    plog.append(seq=0, count=3)
    plog.append(seq=3, count=1)
    # same first sequence, different length: not the same batch, and not in sequence either
    with pytest.raises(OutOfOrderSequenceError):
        plog.psm.check(hdr(seq=0, count=2, offset=plog.leo))


def test_retry_older_than_last_five_is_out_of_order(plog):
    for i in range(6):
        plog.append(seq=i)
    # seq 0 was the 6th-oldest and fell out of the retained window: Kafka answers OUT_OF_ORDER,
    # not DUPLICATE_SEQUENCE_NUMBER.
    with pytest.raises(OutOfOrderSequenceError):
        plog.psm.check(hdr(seq=0, offset=plog.leo))
    assert plog.psm.check(hdr(seq=1, offset=plog.leo)) == DuplicateBatch(1, 1, NOW)


def test_sequence_wraps_from_int32_max_to_zero(plog):
    plog.append(seq=MAX_SEQ - 1, count=2)  # unknown producer: any start; last seq = MAX
    assert plog.psm.last_entry(1).last_seq == MAX_SEQ
    assert plog.append(seq=0, count=1) == (2, 2)
    assert plog.psm.last_entry(1).last_seq == 0


def test_batch_spanning_the_wrap(plog):
    plog.append(seq=MAX_SEQ - 5, count=5)  # last seq MAX-1
    assert plog.append(seq=MAX_SEQ, count=3) == (5, 7)  # MAX, 0, 1
    entry = plog.psm.last_entry(1)
    assert entry.last_seq == 1
    assert plog.psm.check(hdr(seq=MAX_SEQ, count=3, offset=plog.leo)) == DuplicateBatch(5, 7, NOW)
    assert plog.append(seq=2) == (8, 8)
    with pytest.raises(OutOfOrderSequenceError):
        plog.psm.check(hdr(seq=MAX_SEQ, count=1, offset=plog.leo))


def test_negative_sequence_for_idempotent_batch_is_invalid_record(plog):
    with pytest.raises(KafkaError) as info:
        plog.psm.check(hdr(seq=-1))
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_coordinator_origin_checks_only_epoch_and_txn_state(psm):
    # e.g. TxnOffsetCommit records the group coordinator writes: producer id and epoch, no sequence
    psm.update(hdr(pid=3, epoch=2, seq=0, txn=True))
    offset_commit = hdr(pid=3, epoch=2, seq=-1, offset=1, txn=True)
    assert psm.check(offset_commit, from_client=False) is None
    psm.update(offset_commit)
    assert psm.check(hdr(pid=3, epoch=2, seq=-1, offset=2, txn=True), from_client=False) is None
    with pytest.raises(InvalidProducerEpochError):
        psm.check(hdr(pid=3, epoch=1, seq=-1, offset=2, txn=True), from_client=False)
    with pytest.raises(InvalidTxnStateError):
        psm.check(hdr(pid=3, epoch=2, seq=-1, offset=2), from_client=False)
    with pytest.raises(KafkaError) as info:
        psm.check(hdr(pid=3, epoch=2, seq=-1, offset=2, txn=True))
    assert info.value.code == ErrorCode.INVALID_RECORD


def test_real_batch_header(plog, tmp_path):
    raw = bytearray(build_batch([(b"k", b"v"), (b"k2", b"v2")], producer_id=42, producer_epoch=3,
                                base_sequence=10, base_timestamp=NOW))
    h = read_batch_header(raw)
    assert plog.psm.check(h) is None
    plog.psm.update(h)
    assert plog.psm.check(read_batch_header(raw)) == DuplicateBatch(0, 1, NOW)


# ----------------------------------------------------------------------------- epochs


def test_lower_epoch_is_fenced(plog):
    plog.append(epoch=5, seq=0)
    with pytest.raises(InvalidProducerEpochError) as info:
        plog.psm.check(hdr(epoch=4, seq=1, offset=plog.leo))
    assert info.value.code == ErrorCode.INVALID_PRODUCER_EPOCH == 47


def test_lower_epoch_fenced_even_when_it_looks_like_a_duplicate(plog):
    plog.append(epoch=4, seq=0)
    plog.append(epoch=5, seq=0)
    with pytest.raises(InvalidProducerEpochError):
        plog.psm.check(hdr(epoch=4, seq=0, offset=plog.leo))


def test_epoch_bump_must_start_at_zero(plog):
    plog.append(epoch=0, seq=0, count=10)
    with pytest.raises(OutOfOrderSequenceError):
        plog.psm.check(hdr(epoch=1, seq=10, offset=plog.leo))
    assert plog.append(epoch=1, seq=0) == (10, 10)
    entry = plog.psm.last_entry(1)
    assert entry.producer_epoch == 1 and len(entry.batches) == 1


def test_epoch_bump_clears_old_batches(plog):
    plog.append(epoch=0, seq=0)
    plog.append(epoch=1, seq=0)
    # the epoch-0 batch is no longer a duplicate, and epoch 0 is now fenced
    with pytest.raises(InvalidProducerEpochError):
        plog.psm.check(hdr(epoch=0, seq=0, offset=plog.leo))
    assert plog.psm.check(hdr(epoch=1, seq=0, offset=plog.leo)) == DuplicateBatch(1, 1, NOW)


def test_epoch_bump_by_marker_requires_sequence_zero(plog):
    plog.append(epoch=0, seq=0, txn=True)
    plog.append(epoch=1, control=True)  # e.g. an abort marker written with a bumped epoch
    with pytest.raises(OutOfOrderSequenceError):
        plog.psm.check(hdr(epoch=1, seq=1, offset=plog.leo, txn=True))
    assert plog.psm.check(hdr(epoch=1, seq=0, offset=plog.leo, txn=True)) is None


# ----------------------------------------------------------------------------- transactions


def test_transaction_first_offset_tracked_and_cleared_by_marker(psm, plog):
    plog.append(pid=1, seq=0, count=2)  # offsets 0-1, not transactional
    plog.append(pid=2, seq=0, txn=True)  # offset 2 opens pid 2's txn
    plog.append(pid=2, seq=1, txn=True)
    plog.append(pid=3, seq=0, txn=True)  # offset 4
    assert psm.last_entry(2).current_txn_first_offset == 2
    assert psm.first_undecided_offset() == 2
    assert dict(psm.ongoing_transactions()) == {2: 2, 3: 4}
    marker = hdr(pid=2, epoch=0, offset=plog.leo, control=True)
    assert psm.check(marker, coordinator_epoch=7) is None
    assert psm.update(marker, coordinator_epoch=7) == CompletedTxn(2, 2, 5)
    entry = psm.last_entry(2)
    assert entry.current_txn_first_offset == -1 and entry.coordinator_epoch == 7
    assert psm.first_undecided_offset() == 4
    # a marker for a producer without an open transaction completes nothing
    assert psm.update(hdr(pid=2, offset=6, control=True)) is None


def test_non_transactional_batch_during_open_transaction(plog):
    plog.append(seq=0, txn=True)
    with pytest.raises(InvalidTxnStateError) as info:
        plog.psm.check(hdr(seq=1, offset=plog.leo))
    assert info.value.code == ErrorCode.INVALID_TXN_STATE


def test_control_batches_are_not_sequence_checked_but_epoch_is(plog):
    plog.append(epoch=3, seq=0, txn=True)
    assert plog.psm.check(hdr(epoch=3, offset=plog.leo, control=True)) is None
    assert plog.psm.check(hdr(epoch=9, offset=plog.leo, control=True)) is None
    with pytest.raises(InvalidProducerEpochError):
        plog.psm.check(hdr(epoch=2, offset=plog.leo, control=True))


def test_marker_from_older_coordinator_is_fenced(psm):
    psm.update(hdr(seq=0, txn=True))
    psm.update(hdr(offset=1, control=True), coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError) as info:
        psm.check(hdr(offset=2, control=True), coordinator_epoch=4)
    assert info.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert psm.check(hdr(offset=2, control=True), coordinator_epoch=5) is None


def test_marker_for_unknown_producer(psm):
    h = hdr(pid=9, epoch=2, control=True)
    assert psm.check(h) is None
    assert psm.update(h) is None
    assert psm.last_entry(9).producer_epoch == 2
    # a data batch at that epoch must now start at 0: the producer is known, its last seq is -1
    with pytest.raises(OutOfOrderSequenceError):
        psm.check(hdr(pid=9, epoch=2, seq=5, offset=1))


def test_update_never_raises_for_replayed_headers(psm):
    # recovery/replication: out-of-order and lower-epoch batches are applied, not refused
    psm.update(hdr(epoch=5, seq=10, offset=0))
    psm.update(hdr(epoch=5, seq=50, offset=1))
    psm.update(hdr(epoch=3, seq=7, offset=2))
    entry = psm.last_entry(1)
    assert entry.producer_epoch == 3 and entry.last_seq == 7 and len(entry.batches) == 1


def test_log_append_time_is_what_a_retry_reports(psm):
    h = hdr(seq=0, ts=NOW)
    h.attributes |= TIMESTAMP_TYPE_MASK
    h.max_timestamp = NOW + 999  # stamped by the log before update
    psm.update(h)
    assert psm.check(hdr(seq=0, offset=1)) == DuplicateBatch(0, 0, NOW + 999)


# ----------------------------------------------------------------------------- expiry


def test_remove_expired(psm):
    psm.update(hdr(pid=1, seq=0, offset=0, ts=NOW))
    psm.update(hdr(pid=2, seq=0, offset=1, ts=NOW + 1000))
    psm.update(hdr(pid=3, seq=0, offset=2, ts=NOW, txn=True))  # open txn: never expired
    assert psm.remove_expired(NOW + 86_400_000 - 1) == 0
    assert psm.remove_expired(NOW + 86_400_000) == 1
    assert psm.last_entry(1) is None and psm.last_entry(2) is not None
    assert psm.remove_expired(NOW + 10**9, 1000) == 1
    assert set(psm.active_producers()) == {3}


def test_expired_producer_is_accepted_at_any_sequence(plog):
    plog.append(seq=0, ts=NOW)
    plog.psm.remove_expired(NOW + 86_400_000)
    assert plog.append(seq=77) == (1, 1)


# ----------------------------------------------------------------------------- snapshots


def test_snapshot_round_trip(tmp_path, plog):
    plog.append(pid=1, epoch=2, seq=0, count=3, ts=NOW + 1)
    plog.append(pid=1, epoch=2, seq=3, count=2, ts=NOW + 2)
    plog.append(pid=2, epoch=0, seq=MAX_SEQ, count=2, ts=NOW + 3)  # wraps: first MAX, last 0
    plog.append(pid=3, epoch=1, seq=0, txn=True, ts=NOW + 4)
    plog.psm.update(hdr(pid=4, epoch=6, offset=plog.leo, control=True), coordinator_epoch=11)
    plog.leo += 1
    path = plog.psm.snapshot(plog.leo)
    assert path.name == snapshot_file_name(9) == "00000000000000000009.snapshot"

    fresh = ProducerStateManager(tmp_path)
    assert fresh.snapshot_offsets() == [9]
    assert fresh.load(0, 9, now_ms=NOW) == 9
    assert fresh.map_end_offset == 9
    e1 = fresh.last_entry(1)
    assert (e1.producer_epoch, e1.first_seq, e1.last_seq, e1.last_timestamp) == (2, 3, 4, NOW + 2)
    assert fresh.check(hdr(pid=1, epoch=2, seq=3, count=2, offset=9)) == DuplicateBatch(3, 4, NOW + 2)
    assert fresh.check(hdr(pid=1, epoch=2, seq=5, offset=9)) is None
    e2 = fresh.last_entry(2)
    assert (e2.first_seq, e2.last_seq, e2.batches[0].base_offset) == (MAX_SEQ, 0, 5)
    assert fresh.check(hdr(pid=2, seq=MAX_SEQ, count=2, offset=9)) == DuplicateBatch(5, 6, NOW + 3)
    assert fresh.last_entry(3).current_txn_first_offset == 7
    assert fresh.first_undecided_offset() == 7
    e4 = fresh.last_entry(4)
    assert (e4.producer_epoch, e4.coordinator_epoch, e4.last_seq, len(e4.batches)) == (6, 11, -1, 0)


def test_snapshot_format_is_kafkas(tmp_path, psm):
    psm.update(hdr(pid=5, epoch=1, seq=3, count=4, offset=10, ts=NOW))
    data = psm.snapshot(14).read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count, len(data)) == (1, 1, 10 + 46)
    assert crc == crc32c(data[6:])
    entry = struct.unpack_from(">qhiqiqiq", data, 10)
    # producer id, epoch, last seq, last offset, offset delta, timestamp, coordinator epoch, txn first
    assert entry == (5, 1, 6, 13, 3, NOW, -1, -1)


def test_only_last_batch_survives_a_snapshot(tmp_path, plog):
    for i in range(4):
        plog.append(seq=i)
    plog.psm.snapshot(plog.leo)
    fresh = ProducerStateManager(tmp_path)
    fresh.load(0, plog.leo, now_ms=NOW)
    assert fresh.check(hdr(seq=3, offset=4)) == DuplicateBatch(3, 3, NOW)
    with pytest.raises(OutOfOrderSequenceError):
        fresh.check(hdr(seq=2, offset=4))


def test_load_replays_from_snapshot_offset(tmp_path, plog):
    plog.append(seq=0, count=2)
    plog.psm.snapshot(plog.leo)  # at 2
    plog.append(seq=2)
    plog.append(seq=3)
    fresh = ProducerStateManager(tmp_path)
    start = fresh.load(0, plog.leo, now_ms=NOW)
    assert start == 2
    for h in plog.headers:
        if h.base_offset >= start:
            fresh.update(h)
    assert fresh.map_end_offset == plog.leo == 4
    for seq, off in [(0, 0), (2, 2), (3, 3)]:
        dup = fresh.check(hdr(seq=seq, count=2 if seq == 0 else 1, offset=4))
        assert dup is not None and dup.base_offset == off
    assert fresh.check(hdr(seq=4, offset=4)) is None


def test_load_without_snapshot_replays_from_log_start(tmp_path):
    psm = ProducerStateManager(tmp_path)
    assert psm.load(17, 100) == 17
    assert psm.map_end_offset == 17 and psm.active_producers() == {}


def test_load_deletes_snapshots_above_log_end(tmp_path, plog):
    plog.append(seq=0)
    plog.psm.snapshot(1)
    plog.append(seq=1)
    plog.psm.snapshot(2)
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 1, now_ms=NOW) == 1
    assert fresh.snapshot_offsets() == [1]
    assert not (tmp_path / snapshot_file_name(2)).exists()
    assert fresh.last_entry(1).last_seq == 0


def test_load_falls_back_past_a_corrupt_snapshot(tmp_path, plog):
    plog.append(seq=0)
    plog.psm.snapshot(1)
    plog.append(seq=1)
    path = plog.psm.snapshot(2)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 2, now_ms=NOW) == 1
    assert not path.exists()
    assert fresh.last_entry(1).last_seq == 0


@pytest.mark.parametrize("damage", ["truncate", "version", "empty"])
def test_damaged_snapshots_are_rejected(tmp_path, psm, damage):
    psm.update(hdr())
    path = psm.snapshot(1)
    data = path.read_bytes()
    data = {"truncate": data[:-3], "version": b"\x00\x02" + data[2:], "empty": b""}[damage]
    path.write_bytes(data)
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 1) == 0
    assert fresh.snapshot_offsets() == []


def test_load_filters_expired_producers_and_removes_temp_files(tmp_path, psm):
    psm.update(hdr(pid=1, ts=NOW, offset=0))
    psm.update(hdr(pid=2, ts=NOW + 10_000, offset=1))
    psm.snapshot(2)
    (tmp_path / (snapshot_file_name(5) + ".tmp")).write_bytes(b"partial")
    fresh = ProducerStateManager(tmp_path)
    fresh.load(0, 2, now_ms=NOW + 86_400_000 + 5_000)
    assert set(fresh.active_producers()) == {2}
    assert not (tmp_path / (snapshot_file_name(5) + ".tmp")).exists()


def test_keeps_only_the_last_two_snapshots(tmp_path, plog):
    for i in range(4):
        plog.append(seq=i)
        plog.psm.snapshot(plog.leo)
    assert plog.psm.snapshot_offsets() == [3, 4]
    assert sorted(p.name for p in tmp_path.glob("*.snapshot")) == [snapshot_file_name(3), snapshot_file_name(4)]
    assert not list(tmp_path.glob("*.tmp"))


def test_snapshot_below_log_start_is_still_loaded(tmp_path, plog):
    plog.append(seq=0)
    plog.psm.snapshot(1)
    fresh = ProducerStateManager(tmp_path)
    # retention moved the log start past the snapshot: producer state is kept (KIP-360 spirit)
    assert fresh.load(5, 5, now_ms=NOW) == 5
    assert fresh.last_entry(1).last_seq == 0


def test_snapshot_of_empty_state(tmp_path, psm):
    psm.snapshot(0)
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 0) == 0 and fresh.active_producers() == {}


# ----------------------------------------------------------------------------- truncation


def test_truncate_to_reloads_and_asks_for_replay(tmp_path, plog):
    for i in range(3):
        plog.append(seq=i)  # offsets 0..2
    plog.psm.snapshot(plog.leo)  # at 3
    plog.append(seq=3)
    plog.append(seq=4)
    plog.psm.snapshot(plog.leo)  # at 5
    plog.append(seq=5)  # offset 5

    start = plog.psm.truncate_to(4, 0, now_ms=NOW)
    assert start == 3
    assert plog.psm.snapshot_offsets() == [3]
    for h in plog.headers:
        if start <= h.base_offset < 4:
            plog.psm.update(h)
    assert plog.psm.map_end_offset == 4
    assert plog.psm.last_entry(1).last_seq == 3
    # the truncated batches (seq 4, 5) are gone: seq 4 is the next expected
    assert plog.psm.check(hdr(seq=4, offset=4)) is None
    with pytest.raises(OutOfOrderSequenceError):
        plog.psm.check(hdr(seq=5, offset=4))


def test_truncate_to_below_every_snapshot_replays_from_log_start(tmp_path, plog):
    plog.append(seq=0)
    plog.append(seq=1)
    plog.psm.snapshot(2)
    assert plog.psm.truncate_to(1, 0, now_ms=NOW) == 0
    assert plog.psm.active_producers() == {}
    assert plog.psm.snapshot_offsets() == []


def test_truncate_to_current_end_is_a_no_op(plog):
    plog.append(seq=0)
    assert plog.psm.truncate_to(1) == 1
    assert plog.psm.last_entry(1).last_seq == 0


def test_truncate_fully_and_start_at(tmp_path, plog):
    plog.append(seq=0)
    plog.psm.snapshot(1)
    plog.psm.truncate_fully_and_start_at(50)
    assert plog.psm.map_end_offset == 50
    assert plog.psm.active_producers() == {}
    assert not list(tmp_path.glob("*.snapshot"))


# ----------------------------------------------------------------------------- property test:
# a plain model of the rules, across clean restarts (snapshot at the log end) and crashes (older
# snapshot + header replay).

PIDS = (0, 1, 2)


@dataclass
class ModelProducer:
    epoch: int
    # (first seq, last seq, base offset, last offset, timestamp) of batches the broker can still
    # recognise as retries: the last five, or only the last one right after loading a snapshot.
    retained: list = field(default_factory=list)
    history: list = field(default_factory=list)  # every batch of the current epoch


def model_outcome(producers: dict[int, ModelProducer], pid: int, epoch: int, first: int, last: int):
    p = producers.get(pid)
    if p is None:
        return "ok"
    if epoch < p.epoch:
        return "fenced"
    if epoch > p.epoch:
        return "ok" if first == 0 else "out_of_order"
    for b in p.retained:
        if b[0] == first and b[1] == last:
            return DuplicateBatch(b[2], b[3], b[4])
    expected_next = 0 if not p.retained else (0 if p.retained[-1][1] == MAX_SEQ else p.retained[-1][1] + 1)
    return "ok" if first == expected_next else "out_of_order"


def model_apply(producers: dict[int, ModelProducer], pid: int, epoch: int, batch: tuple) -> None:
    p = producers.get(pid)
    if p is None or p.epoch != epoch:
        p = producers[pid] = ModelProducer(epoch)
    p.retained = (p.retained + [batch])[-5:]
    p.history.append(batch)


def header(pid, epoch, first, count, offset, ts) -> BatchHeader:
    return BatchHeader(base_offset=offset, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=0, last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts,
                       producer_id=pid, producer_epoch=epoch, base_sequence=first, records_count=count)


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="psm-model-"))
        self.psm = ProducerStateManager(self.dir)
        self.model: dict[int, ModelProducer] = {}
        self.leo = 0
        self.ts = NOW
        self.log: list[BatchHeader] = []  # every appended header, in offset order
        self.snapshot_at: int | None = None
        self.model_at_snapshot: dict[int, ModelProducer] = {}

    def teardown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(pid=st.sampled_from(PIDS),
          epoch_move=st.sampled_from(["same", "same", "same", "same", "higher", "lower"]),
          seq_kind=st.sampled_from(["next", "next", "next", "retry", "retry", "zero", "any", "near_max"]),
          back=st.integers(0, 7), count=st.integers(1, 3), any_seq=st.integers(0, MAX_SEQ))
    def produce(self, pid, epoch_move, seq_kind, back, count, any_seq):
        p = self.model.get(pid)
        epoch = 0 if p is None else p.epoch + {"same": 0, "higher": 1, "lower": -1}[epoch_move]
        epoch = max(epoch, 0)
        if seq_kind == "retry" and p is not None and p.history:
            old = p.history[-1 - min(back, len(p.history) - 1)]
            first, count = old[0], (old[1] - old[0]) % (MAX_SEQ + 1) + 1
        elif seq_kind == "next" and p is not None and p.retained:
            first = 0 if p.retained[-1][1] == MAX_SEQ else p.retained[-1][1] + 1
        elif seq_kind == "any":
            first = any_seq
        elif seq_kind == "near_max":
            first = MAX_SEQ - 1
        else:
            first = 0
        self.ts += 1
        h = header(pid, epoch, first, count, self.leo, self.ts)
        expected = model_outcome(self.model, pid, epoch, first, h.last_sequence)
        try:
            got = self.psm.check(h)
        except OutOfOrderSequenceError:
            got = "out_of_order"
        except InvalidProducerEpochError:
            got = "fenced"
        if got is None:
            got = "ok"
        assert got == expected, (pid, epoch, first, count, self.model.get(pid))
        if got == "ok":
            self.psm.update(h)
            self.log.append(h)
            model_apply(self.model, pid, epoch, (first, h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp))
            self.leo = h.next_offset

    @rule()
    def clean_restart(self):
        self.psm.snapshot(self.leo)
        self._remember_snapshot()
        self.psm = ProducerStateManager(self.dir)
        assert self.psm.load(0, self.leo, now_ms=self.ts) == self.leo
        self.model = self._copy(self.model_at_snapshot)

    @rule()
    def take_snapshot(self):
        self.psm.snapshot(self.leo)
        self._remember_snapshot()

    @rule()
    def crash_and_recover(self):
        self.psm = ProducerStateManager(self.dir)
        start = self.psm.load(0, self.leo, now_ms=self.ts)
        assert start == (self.snapshot_at if self.snapshot_at is not None else 0)
        self.model = self._copy(self.model_at_snapshot)
        for h in self.log:
            if h.base_offset >= start:
                self.psm.update(h)
                model_apply(self.model, h.producer_id, h.producer_epoch,
                            (h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp))
        assert self.psm.map_end_offset == self.leo

    @invariant()
    def same_producers(self):
        assert set(self.psm.active_producers()) == set(self.model)
        for pid, p in self.model.items():
            entry = self.psm.last_entry(pid)
            assert entry.producer_epoch == p.epoch
            got = [(b.first_seq, b.last_seq, b.base_offset, b.last_offset, b.timestamp) for b in entry.batches]
            assert got == p.retained

    def _remember_snapshot(self):
        self.snapshot_at = self.leo
        # a snapshot keeps only the last batch of every producer
        self.model_at_snapshot = {pid: ModelProducer(p.epoch, p.retained[-1:], p.history[:])
                                  for pid, p in self.model.items()}

    @staticmethod
    def _copy(state: dict[int, ModelProducer]) -> dict[int, ModelProducer]:
        return {pid: ModelProducer(p.epoch, p.retained[:], p.history[:]) for pid, p in state.items()}


ProducerStateMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestProducerStateModel = ProducerStateMachine.TestCase
