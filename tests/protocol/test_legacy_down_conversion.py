"""Fetch v0-3 down-conversion pieces: answer size bounds and what old consumers see of transactions.

The conversion itself (offsets, timestamps, codecs, gaps) is covered in test_legacy_records.py;
the wire behaviour in conformance/test_old_versions.py.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.control_records import build_control_batch
from kafkapy.protocol.legacy_records import iter_legacy_records, iter_message_set, truncate_message_set, v2_to_legacy
from kafkapy.protocol.records import build_batch


def message_set(n: int, value_size: int = 3) -> bytes:
    return v2_to_legacy(build_batch([(None, b"v" * value_size, (), 1_700_000_000_000)] * n), 1)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 30), size=st.integers(0, 40), limit=st.integers(0, 3000))
def test_truncate_message_set_keeps_whole_messages_within_the_limit(n, size, limit):
    buf = message_set(n, size)
    cut = truncate_message_set(buf, limit)
    assert buf.startswith(cut)
    messages = list(iter_message_set(cut))      # whole, CRC-checked messages only
    assert len(messages) >= 1                   # the first one always goes
    assert len(cut) <= limit or len(messages) == 1
    if len(buf) <= limit:
        assert cut == buf
    else:
        # nothing more would have fit
        one_more = list(iter_message_set(buf))[len(messages):len(messages) + 1]
        assert not one_more or len(cut) + 12 + _size_of_next(buf, len(cut)) > limit


def _size_of_next(buf: bytes, pos: int) -> int:
    return int.from_bytes(buf[pos + 8:pos + 12], "big")


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(1, 20), min_size=1, max_size=6), limit=st.integers(0, 4000),
       magic=st.sampled_from([0, 1]))
def test_v2_to_legacy_size_limit_is_kafkas_lazy_down_conversion_bound(sizes, limit, magic):
    record = (None, b"v" * 10, (), 1_700_000_000_000)
    batches = b"".join(build_batch([record] * n, base_offset=sum(sizes[:i])) for i, n in enumerate(sizes))
    whole = v2_to_legacy(batches, magic)
    first = v2_to_legacy(build_batch([record] * sizes[0]), magic)
    cut = v2_to_legacy(batches, magic, size_limit=limit)
    assert whole.startswith(cut)
    # at least the first batch converted, at most max(limit, that), whole messages
    assert cut.startswith(first)
    assert len(cut) <= max(limit, len(first))
    assert cut == truncate_message_set(whole, max(limit, len(first)))


def test_truncate_empty_message_set():
    assert truncate_message_set(b"", 100) == b""


def test_old_consumers_read_uncommitted_aborted_data_without_markers():
    # Fetch v0-3 has no isolation level: Kafka's RecordsUtil.downConvert drops control batches only,
    # so an aborted transaction's records reach the old consumer (as read_uncommitted ones do)
    aborted = build_batch([(b"k", b"aborted")], base_offset=0, producer_id=7, producer_epoch=0, base_sequence=0,
                          is_transactional=True)
    marker = build_control_batch("abort", 7, 0, 0, base_offset=1, timestamp=5)
    plain = build_batch([(b"k", b"plain")], base_offset=2)
    for magic in (0, 1):
        got = [(m.offset, m.value) for m in iter_legacy_records(v2_to_legacy(aborted + marker + plain, magic))]
        assert got == [(0, b"aborted"), (2, b"plain")]
