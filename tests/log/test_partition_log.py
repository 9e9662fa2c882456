"""PartitionLog: offsets, reads, rolls, lookups, retention, truncation, producer dedup, flushing."""
from __future__ import annotations

import os
import struct
import threading
import time

import pytest

from kafkapy.log import LogConfig, OffsetOutOfRangeError, PartitionLog
from kafkapy.log.errors import MessageTooLargeError, RecordListTooLargeError, InvalidTimestampError
from kafkapy.log.file_slice import FileSlice
from kafkapy.log.producer_state import OutOfOrderSequenceError
from kafkapy.protocol.errors import CorruptRecordError, ErrorCode
from kafkapy.protocol.records import (
    TIMESTAMP_TYPE_MASK,
    build_batch,
    iter_batch_headers,
    iter_records,
    validate_batch,
)

from logtools import BASE_TS, batch, batches_in, read_all, small_config


@pytest.fixture
def make_log(tmp_path):
    logs = []

    def make(config: LogConfig | None = None, name: str = "topic-0", **kwargs) -> PartitionLog:
        plog = PartitionLog.open(tmp_path / name, config or small_config(), **kwargs)
        logs.append(plog)
        return plog

    yield make
    for plog in logs:
        plog.close()


def expected_with_offsets(raw: list[bytearray]) -> bytes:
    return b"".join(bytes(b) for b in raw)


# ------------------------------------------------------------------------- append and read
def test_append_assigns_offsets_and_patches_bytes(make_log):
    plog = make_log()
    first = batch(3)
    result = plog.append(first, leader_epoch=5)
    assert (result.base_offset, result.last_offset, result.log_append_time, result.duplicate) == (0, 2, -1, False)
    second = batch(2, seed=1)
    result = plog.append(second, leader_epoch=5)
    assert (result.base_offset, result.last_offset) == (3, 4)
    assert plog.log_end_offset == plog.high_watermark == 5
    header = validate_batch(second)  # CRC still valid: offset and epoch are outside it
    assert header.base_offset == 3 and header.partition_leader_epoch == 5
    assert read_all(plog) == bytes(first) + bytes(second)


def test_append_validates_when_headers_not_given(make_log):
    plog = make_log()
    bad = batch(2)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as info:
        plog.append(bad)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert plog.log_end_offset == 0


def test_append_multiple_batches_in_one_write(make_log):
    plog = make_log()
    a, b = batch(2), batch(3, seed=2)
    buf = bytearray(a + b)
    headers = list(iter_batch_headers(buf))
    result = plog.append(buf, validated=headers)
    assert (result.base_offset, result.last_offset) == (0, 4)
    assert [h.base_offset for h in headers] == [0, 2]
    assert batches_in(read_all(plog)) == [bytes(buf[:len(a)]), bytes(buf[len(a):])]


def test_read_from_middle_of_batch_returns_whole_batch(make_log):
    plog = make_log()
    raw = [batch(5, seed=i) for i in range(4)]
    for b in raw:
        plog.append(b)
    result = plog.read(7, 1 << 20)
    assert isinstance(result.records, FileSlice)
    data = result.records.tobytes()
    assert batches_in(data) == [bytes(b) for b in raw[1:]]
    assert result.next_offset == 20
    assert result.records.first_offset == 5


def test_out_of_range_is_distinct_from_no_data_yet(make_log):
    plog = make_log()
    plog.append(batch(3))
    empty = plog.read(3, 1000)
    assert empty.records == b"" and empty.next_offset == 3 and empty.high_watermark == 3
    with pytest.raises(OffsetOutOfRangeError) as info:
        plog.read(4, 1000)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 1000)


def test_read_respects_max_bytes_with_whole_batches_and_min_one(make_log):
    plog = make_log(small_config(segment_bytes=1 << 20))
    raw = [batch(1, 100, seed=i) for i in range(10)]
    for b in raw:
        plog.append(b)
    size = len(raw[0])
    result = plog.read(0, size * 3 + 10)
    assert len(result.records) == size * 3 and result.next_offset == 3
    result = plog.read(0, size - 1)  # first batch larger than max_bytes: returned whole
    assert len(result.records) == size and result.next_offset == 1
    result = plog.read(0, size - 1, min_one_batch=False)
    assert result.records == b""


def test_read_stops_at_max_offset(make_log):
    plog = make_log()
    for i in range(5):
        plog.append(batch(2, seed=i))
    result = plog.read(0, 1 << 20, max_offset=4)
    assert result.next_offset == 4 and len(batches_in(result.records.tobytes())) == 2
    assert plog.read(4, 1 << 20, max_offset=4).records == b""
    # max_offset in the middle of a batch excludes that batch (Kafka's translateOffset rule)
    assert plog.read(0, 1 << 20, max_offset=5).next_offset == 4


def test_reads_never_cross_segments_but_continue(make_log):
    plog = make_log(small_config(segment_bytes=1000))
    raw = [batch(1, 200, seed=i) for i in range(12)]
    for b in raw:
        plog.append(b)
    assert len(plog.segments) > 3
    result = plog.read(0, 1 << 20)
    assert result.next_offset == plog.segments[1].base_offset
    assert read_all(plog) == expected_with_offsets(raw)
    assert read_all(plog, max_bytes=1) == expected_with_offsets(raw)


def test_file_slice_supports_sendfile(make_log, tmp_path):
    plog = make_log()
    raw = [batch(2, 50, seed=i) for i in range(3)]
    for b in raw:
        plog.append(b)
    records = plog.read(0, 1 << 20).records
    out = tmp_path / "out"
    with open(out, "wb") as f:
        assert records.sendfile(f.fileno()) == len(records)
    assert out.read_bytes() == expected_with_offsets(raw)
    assert os.pread(records.file.fileno(), records.length, records.position) == records.tobytes()


# ------------------------------------------------------------------------- limits and time
def test_message_too_large_and_record_list_too_large(make_log):
    plog = make_log(small_config(max_message_bytes=200, segment_bytes=300))
    with pytest.raises(MessageTooLargeError) as info:
        plog.append(batch(1, 300))
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    buf = bytearray(batch(1, 100) + batch(1, 100, seed=3) + batch(1, 100, seed=4))
    with pytest.raises(RecordListTooLargeError) as info:
        plog.append(buf)
    assert info.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert plog.log_end_offset == 0


def test_log_append_time_stamps_batches_and_recomputes_crc(make_log):
    plog = make_log(small_config(message_timestamp_type="LogAppendTime"))
    b = batch(3, ts=1000)
    before = time.time() * 1000
    result = plog.append(b)
    assert result.log_append_time >= before - 1
    stored = read_all(plog)
    header = validate_batch(stored)  # CRC recomputed
    assert header.attributes & TIMESTAMP_TYPE_MASK
    assert header.max_timestamp == result.log_append_time
    assert all(r.timestamp == result.log_append_time for r in iter_records(stored))


def test_create_time_limits(make_log):
    now = int(time.time() * 1000)
    plog = make_log(small_config(message_timestamp_before_max_ms=60_000,
                                 message_timestamp_after_max_ms=60_000))
    plog.append(batch(1, ts=now))
    with pytest.raises(InvalidTimestampError) as info:
        plog.append(batch(1, ts=now - 3_600_000))
    assert info.value.code == ErrorCode.INVALID_TIMESTAMP
    with pytest.raises(InvalidTimestampError):
        plog.append(batch(1, ts=now + 3_600_000))


def test_offset_for_timestamp_and_max_timestamp(make_log):
    plog = make_log(small_config(segment_bytes=600))
    for i in range(20):
        plog.append(batch(3, 30, ts=BASE_TS + 100 * i, ts_step=10, seed=i))
    assert len(plog.segments) > 2
    # record-level answer: batch 7 holds offsets 21..23 at +700, +710, +720
    assert plog.offset_for_timestamp(BASE_TS + 705) == (22, BASE_TS + 710)
    assert plog.offset_for_timestamp(BASE_TS) == (0, BASE_TS)
    assert plog.offset_for_timestamp(BASE_TS - 5) == (0, BASE_TS)
    assert plog.offset_for_timestamp(BASE_TS + 100_000) is None
    assert plog.max_timestamp_offset() == (59, BASE_TS + 1920)


def test_max_timestamp_picks_first_record_holding_it(make_log):
    plog = make_log()
    plog.append(batch(2, ts=BASE_TS + 50))
    plog.append(bytearray(build_batch([(b"a", b"1", (), BASE_TS + 500), (b"b", b"2", (), BASE_TS + 100)],
                                      base_timestamp=BASE_TS + 500)))
    plog.append(batch(2, ts=BASE_TS + 10, seed=5))
    assert plog.max_timestamp_offset() == (2, BASE_TS + 500)


def test_empty_log_lookups(make_log):
    plog = make_log()
    assert plog.max_timestamp_offset() == (-1, -1)
    assert plog.offset_for_timestamp(0) is None
    assert plog.read(0, 100).records == b""


# ------------------------------------------------------------------------- segments on disk
def test_segment_files_and_index_trim(make_log, tmp_path):
    plog = make_log(small_config(segment_bytes=1000, segment_index_bytes=4000, index_interval_bytes=100))
    for i in range(12):
        plog.append(batch(1, 200, seed=i))
    names = sorted(os.listdir(plog.dir))
    bases = [s.base_offset for s in plog.segments]
    for base in bases:
        assert f"{base:020d}.log" in names and f"{base:020d}.index" in names and f"{base:020d}.timeindex" in names
    # inactive segments have trimmed indexes; the active one is preallocated
    first = plog.segments[0]
    assert os.path.getsize(first.path(".index")) % 8 == 0 < os.path.getsize(first.path(".index")) < 4000
    active = plog.segments[-1]
    assert os.path.getsize(active.path(".index")) == 4000
    assert os.path.getsize(active.path(".timeindex")) == 3996
    plog.close()
    assert os.path.getsize(active.path(".index")) < 4000
    assert os.path.getsize(active.path(".timeindex")) % 12 == 0


def test_offset_index_entries_follow_kafka_layout(make_log):
    plog = make_log(small_config(segment_bytes=1 << 20, index_interval_bytes=100))
    raw = [batch(2, 60, seed=i) for i in range(10)]
    for b in raw:
        plog.append(b)
    plog.close()
    seg = plog.segments[0]
    data = seg.path(".index").read_bytes()
    entries = [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]
    positions = {}
    pos = 0
    for i, b in enumerate(raw):
        positions[2 * i + 1] = pos  # last offset of batch i -> its start
        pos += len(b)
    assert entries and all(positions[rel] == p for rel, p in entries)
    tdata = seg.path(".timeindex").read_bytes()
    tentries = [struct.unpack_from(">qi", tdata, i) for i in range(0, len(tdata), 12)]
    assert all(a[0] < b[0] for a, b in zip(tentries, tentries[1:]))


def test_roll_on_segment_ms_uses_batch_timestamps(make_log):
    plog = make_log(small_config(segment_bytes=1 << 20, segment_ms=1000))
    plog.append(batch(1, ts=BASE_TS))
    plog.append(batch(1, ts=BASE_TS + 1000, seed=1))
    assert len(plog.segments) == 1
    plog.append(batch(1, ts=BASE_TS + 1001, seed=2))
    assert [s.base_offset for s in plog.segments] == [0, 2]


def test_roll_on_full_index(make_log):
    plog = make_log(small_config(segment_bytes=1 << 20, segment_index_bytes=24, index_interval_bytes=0))
    for i in range(12):
        plog.append(batch(1, 10, seed=i))
    assert len(plog.segments) >= 3
    assert all(s.offset_index.entries <= 3 for s in plog.segments)
    assert read_all(plog) == b"".join(batches_in(read_all(plog)))


def test_roll_on_segment_bytes(make_log):
    plog = make_log(small_config(segment_bytes=500))
    raw = [batch(1, 100, seed=i) for i in range(10)]
    for b in raw:
        plog.append(b)
    for seg in plog.segments:
        assert seg.size <= 500
    assert read_all(plog) == expected_with_offsets(raw)


# ------------------------------------------------------------------------- retention
def test_retention_bytes_deletes_whole_old_segments(make_log):
    plog = make_log(small_config(segment_bytes=500, retention_bytes=1000, retention_ms=-1))
    raw = [batch(1, 100, seed=i) for i in range(20)]
    for b in raw:
        plog.append(b)
    total_before = plog.size_bytes
    deleted = plog.delete_old_segments()
    assert deleted > 0
    assert plog.size_bytes <= 1000 + 500 and plog.size_bytes < total_before
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    tail = read_all(plog)
    assert expected_with_offsets(raw).endswith(tail)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 100)


def test_retention_ms_never_deletes_active_unless_rolled(make_log):
    plog = make_log(small_config(segment_bytes=500, retention_ms=1000))
    for i in range(6):
        plog.append(batch(1, 100, ts=BASE_TS + i, seed=i))
    end = plog.log_end_offset
    deleted = plog.delete_old_segments(now_ms=BASE_TS + 10_000)
    # everything was expired: Kafka rolls an empty active segment and deletes all the rest
    assert deleted >= 2
    assert len(plog.segments) == 1 and plog.segments[0].size == 0
    assert plog.log_start_offset == plog.log_end_offset == end
    assert plog.read(end, 100).records == b""
    # an empty active segment is never deleted
    assert plog.delete_old_segments(now_ms=BASE_TS + 100_000) == 0
    plog.append(batch(1, ts=BASE_TS + 100_000))
    assert plog.delete_old_segments(now_ms=BASE_TS + 100_500) == 0


def test_retention_ms_keeps_recent_segments(make_log):
    plog = make_log(small_config(segment_bytes=500, retention_ms=1000))
    for i in range(8):
        plog.append(batch(1, 100, ts=BASE_TS + i * 1000, seed=i))
    segments_before = len(plog.segments)
    plog.delete_old_segments(now_ms=BASE_TS + 7000 + 500)
    assert 0 < len(plog.segments) < segments_before
    for seg in plog.segments[:-1]:
        assert BASE_TS + 7500 - seg.largest_timestamp() <= 1000


def test_delete_records_moves_log_start_offset(make_log):
    plog = make_log(small_config(segment_bytes=500))
    raw = [batch(2, 100, seed=i) for i in range(10)]
    for b in raw:
        plog.append(b)
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(plog.high_watermark + 1)
    low = plog.delete_records_before(7)
    assert low == plog.log_start_offset == 7
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(6, 100)
    result = plog.read(7, 1 << 20)  # the batch holding 6..7 is returned whole
    assert result.records.first_offset == 6
    assert plog.segments[0].base_offset <= 7
    assert plog.delete_records_before(3) == 7  # never moves back


def test_deleted_segment_files_wait_for_delay(make_log):
    plog = make_log(small_config(segment_bytes=500, file_delete_delay_ms=60_000, retention_bytes=0))
    for i in range(6):
        plog.append(batch(1, 100, seed=i))
    held = plog.read(0, 1 << 20).records
    expected = held.tobytes()
    plog.delete_old_segments()
    names = os.listdir(plog.dir)
    assert any(n.endswith(".log.deleted") for n in names)
    assert held.tobytes() == expected  # a FileSlice still in flight keeps working


# ------------------------------------------------------------------------- epochs and truncation
def test_leader_epoch_cache_and_end_offsets(make_log):
    plog = make_log()
    plog.append(batch(2), leader_epoch=1)
    plog.append(batch(2, seed=1), leader_epoch=1)
    plog.append(batch(3, seed=2), leader_epoch=3)
    assert plog.leader_epochs.entries() == [(1, 0), (3, 4)]
    assert plog.end_offset_for_epoch(1) == (1, 4)
    assert plog.end_offset_for_epoch(2) == (1, 4)
    assert plog.end_offset_for_epoch(3) == (3, 7)
    assert plog.end_offset_for_epoch(0) == (0, 0)
    assert plog.end_offset_for_epoch(4) == (-1, -1)
    assert (plog.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 4\n"


def test_truncate_to_removes_whole_batches_and_epochs(make_log):
    plog = make_log(small_config(segment_bytes=600))
    raw = [batch(2, 80, seed=i) for i in range(12)]
    for i, b in enumerate(raw):
        plog.append(b, leader_epoch=i // 4)
    plog.truncate_to(9)  # inside batch 4..5? batch 4 holds 8,9 -> removed whole
    assert plog.log_end_offset == 8
    assert read_all(plog) == expected_with_offsets(raw[:4])
    assert plog.leader_epochs.entries() == [(0, 0)]
    assert plog.end_offset_for_epoch(0) == (0, 8)
    again = batch(1, seed=99)
    assert plog.append(again, leader_epoch=5).base_offset == 8
    assert read_all(plog) == expected_with_offsets(raw[:4] + [again])


def test_truncate_fully_and_start_at(make_log):
    plog = make_log()
    for i in range(3):
        plog.append(batch(2, seed=i))
    plog.truncate_fully_and_start_at(100)
    assert plog.log_start_offset == plog.log_end_offset == 100
    assert plog.append(batch(1)).base_offset == 100
    assert [s.base_offset for s in plog.segments] == [100]


# ------------------------------------------------------------------------- producers
def test_idempotent_duplicate_is_not_appended(make_log):
    plog = make_log()
    first = batch(3, producer_id=7, producer_epoch=0, base_sequence=0)
    retry = bytearray(first)
    plog.append(first)
    plog.append(batch(2, producer_id=7, producer_epoch=0, base_sequence=3, seed=9))
    result = plog.append(retry)
    assert result.duplicate and (result.base_offset, result.last_offset) == (0, 2)
    assert plog.log_end_offset == 5
    with pytest.raises(OutOfOrderSequenceError) as info:
        plog.append(batch(1, producer_id=7, producer_epoch=0, base_sequence=10, seed=3))
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producer_state_survives_restart(tmp_path):
    config = small_config(segment_bytes=600)
    plog = PartitionLog.open(tmp_path / "t-0", config)
    for seq in range(0, 30, 3):
        plog.append(batch(3, producer_id=11, producer_epoch=2, base_sequence=seq, seed=seq))
    plog.abandon()  # crash: replay from the last snapshot
    plog = PartitionLog.open(tmp_path / "t-0", config)
    result = plog.append(batch(3, producer_id=11, producer_epoch=2, base_sequence=27, seed=27))
    assert result.duplicate and result.base_offset == 27
    assert plog.append(batch(1, producer_id=11, producer_epoch=2, base_sequence=30)).base_offset == 30
    plog.close()


# ------------------------------------------------------------------------- durability
def test_sync_until_group_commit_shares_fsyncs(make_log):
    plog = make_log(small_config(fsync_on_ack=True, segment_bytes=1 << 20))
    futures = []
    lock = threading.Lock()

    def writer(n):
        for i in range(20):
            with lock:
                result = plog.append(batch(1, seed=n * 100 + i))
                futures.append(plog.sync_until(result.last_offset))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in futures:
        assert f.result(timeout=10) >= 1
    assert plog.durable_offset == plog.log_end_offset == 160
    assert plog._flusher.fsync_rounds < 160
    done = plog.sync_until(5)
    assert done.done()


def test_flush_messages_advances_recovery_point(make_log):
    plog = make_log(small_config(flush_messages=5))
    for i in range(10):
        plog.append(batch(1, seed=i))
    deadline = time.time() + 5
    while plog.recovery_point < 5 and time.time() < deadline:
        time.sleep(0.01)
    assert plog.recovery_point >= 5


def test_flush_if_due_uses_flush_ms(make_log):
    plog = make_log(small_config(flush_ms=0))
    plog.append(batch(1))
    assert plog.flush_if_due(int(time.time() * 1000) + 1)
    deadline = time.time() + 5
    while plog.recovery_point < 1 and time.time() < deadline:
        time.sleep(0.01)
    assert plog.recovery_point == 1
    assert not plog.flush_if_due(int(time.time() * 1000) + 1)


def test_roll_flushes_previous_segments_in_background(make_log):
    plog = make_log(small_config(segment_bytes=500))
    for i in range(6):
        plog.append(batch(1, 100, seed=i))
    deadline = time.time() + 5
    while plog.recovery_point < plog.segments[-1].base_offset and time.time() < deadline:
        time.sleep(0.01)
    assert plog.recovery_point == plog.segments[-1].base_offset


def test_config_update_applies(make_log):
    plog = make_log(small_config(segment_bytes=1 << 20))
    plog.append(batch(1))
    plog.update_config(small_config(segment_bytes=1 << 20, message_timestamp_type="LogAppendTime"))
    assert plog.append(batch(1)).log_append_time > 0


def test_roll_on_segment_ms_by_clock_without_timestamps(make_log):
    plog = make_log(small_config(segment_bytes=1 << 20, segment_ms=1))
    plog.append(bytearray(build_batch([(b"k", b"v")], base_timestamp=-1)))
    time.sleep(0.01)
    plog.append(bytearray(build_batch([(b"k", b"w")], base_timestamp=-1)))
    assert [s.base_offset for s in plog.segments] == [0, 1]


def test_truncate_to_the_end_drops_an_epoch_recorded_there(make_log):
    # A broker that became leader (epoch 3 recorded at its end) and wrote nothing, then follows
    # again: truncating to its end must forget epoch 3, as Kafka's UnifiedLog.truncateTo does,
    # or it keeps fetching with last fetched epoch 3 and the leader keeps reporting divergence.
    plog = make_log(small_config())
    for i in range(3):
        plog.append(batch(2, 40, seed=i), leader_epoch=1)
    plog.assign_epoch(3, plog.log_end_offset)
    assert plog.leader_epochs.latest_epoch == 3
    plog.truncate_to(plog.log_end_offset)
    assert plog.log_end_offset == 6
    assert plog.leader_epochs.entries() == [(1, 0)]
