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
    from kafkapy.groupcoord.share.batches import LazyBatchRanges
    assert [(r.first, r.last, r.deliverable) for r in LazyBatchRanges(data, aborted=[(7, 0)])] == \
        [(r.first, r.last, r.deliverable) for r in ranges]


def test_lazy_ranges_read_only_the_headers_asked_for(tmp_path):
    """LazyBatchRanges over a segment slice: the same batches as batch_ranges, read as iterated,
    and a payload that is a slice of the file, not its bytes."""
    from kafkapy.groupcoord.share.batches import LazyBatchRanges, batch_ranges
    from kafkapy.log.file_slice import FileSlice

    # big batches, then small ones (headers read one by one, then a chunk at a time), then a partial one
    buf = (b"".join(_plain(base, 400) for base in range(0, 2000, 400))
           + b"".join(_plain(base, 3) for base in range(2000, 2300, 3)) + _plain(2300, 3)[:40])
    path = tmp_path / "seg"
    path.write_bytes(b"\x00" * 7 + buf)
    with open(path, "rb", buffering=0) as f:
        lazy = LazyBatchRanges(FileSlice(f, 7, len(buf)))
        assert lazy.first().first == 0 and len(lazy.seen) == 1
        want = [(r.first, r.last, r.start, r.end, r.deliverable) for r in batch_ranges(buf)]
        got = [(r.first, r.last, r.start, r.end, r.deliverable) for r in lazy]
        assert got == want and len(got) == 105
        part = lazy.payload(want[2][2], want[4][3])
        assert isinstance(part, FileSlice) and part.tobytes() == buf[want[2][2]:want[4][3]]
    mem = LazyBatchRanges(buf)
    assert [(r.first, r.last) for r in mem] == [(w[0], w[1]) for w in want]
    assert bytes(mem.payload(0, 10)) == buf[:10]
