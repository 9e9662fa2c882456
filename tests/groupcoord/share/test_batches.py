"""Offset ranges from record batch headers (kafkapy/groupcoord/share/batches.py)."""
from __future__ import annotations

from kafkapy.groupcoord.share.batches import batch_ranges
from kafkapy.protocol.control_records import build_control_batch
from kafkapy.protocol.records import build_batch


def _plain(base: int, n: int) -> bytes:
    return build_batch([(None, b"v%d" % i) for i in range(n)], base_offset=base)


def _txn(base: int, n: int, pid: int) -> bytes:
    return build_batch([(None, b"t%d" % i) for i in range(n)], base_offset=base, producer_id=pid,
                       producer_epoch=0, base_sequence=0, is_transactional=True)


def test_ranges_and_byte_positions():
    a, b = _plain(0, 3), _plain(3, 2)
    ranges = batch_ranges(a + b)
    assert [(r.first, r.last, r.deliverable) for r in ranges] == [(0, 2, True), (3, 4, True)]
    assert (ranges[0].start, ranges[0].end, ranges[1].end) == (0, len(a), len(a) + len(b))


def test_a_partial_batch_at_the_end_is_left_out():
    data = _plain(0, 3) + _plain(3, 2)
    assert [r.first for r in batch_ranges(data[:-5])] == [0]
    assert batch_ranges(b"") == [] and batch_ranges(b"\x00" * 30) == []


def test_control_batches_and_aborted_transactions_are_not_deliverable():
    data = (_txn(0, 2, pid=7) + _txn(2, 1, pid=8) + build_control_batch("abort", 7, 0, 0, base_offset=3)
            + build_control_batch("commit", 8, 0, 0, base_offset=4) + _txn(5, 1, pid=7))
    # read_committed: the read named producer 7's transaction from offset 0 as aborted
    ranges = batch_ranges(data, aborted=[(7, 0)])
    assert [(r.first, r.last, r.deliverable) for r in ranges] == [
        (0, 1, False), (2, 2, True), (3, 3, False), (4, 4, False), (5, 5, True)]
    # read_uncommitted: only the markers are left out
    assert [r.deliverable for r in batch_ranges(data)] == [True, True, False, False, True]
