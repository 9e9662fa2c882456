"""The cleaner's topic and broker configs, each as Kafka honours it: max.compaction.lag.ms,
segment.ms, log.cleaner.dedupe.buffer.size, log.cleaner.io.max.bytes.per.second,
log.cleaner.threads, and the cleaner's time slicing. (min.cleanable.dirty.ratio and
min.compaction.lag.ms: test_compaction.py::test_dirty_ratio_and_min_compaction_lag;
delete.retention.ms: test_cleaner_transactions.py.)"""
from __future__ import annotations

import itertools
import os
import time

from kafkapy.log import PartitionLog
from kafkapy.log import compaction as cleaner_module
from kafkapy.log.cleaner import CleanerConfig, LogCleaner, clean_log
from kafkapy.protocol.records import build_batch, iter_batch_headers, iter_records

from logtools import BASE_TS, read_all, small_config

NOW = BASE_TS + 1000


def compact_config(**overrides):
    base = dict(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    base.update(overrides)
    return small_config(**base)


def put(plog, key, value, ts=BASE_TS):
    return plog.append(bytearray(build_batch([(key, value, (), ts)], base_timestamp=ts)))


def latest_values(plog):
    data = read_all(plog)
    out = {}
    pos = 0
    for header in iter_batch_headers(data, validate=True):
        header.position = pos
        for record in iter_records(data, header):
            out.setdefault(record.key, []).append(record.value)
        pos += header.size
    return out


def fill(plog, rounds, keys, ts=BASE_TS):
    for r in range(rounds):
        for k in range(keys):
            put(plog, b"key%03d" % k, b"v%d" % r + b"x" * 30, ts)
    plog.roll()


def test_max_compaction_lag_cleans_below_the_dirty_ratio(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=0.99,
                                                              max_compaction_lag_ms=5_000))
    fill(plog, 10, 5)
    assert clean_log(plog, NOW) is not None  # first cleaning: all dirty
    fill(plog, 1, 5)  # a little new dirty data: far below 0.99
    assert clean_log(plog, BASE_TS + 4_000) is None
    # Once the dirty segment's first batch is older than max.compaction.lag.ms it is cleaned.
    assert clean_log(plog, BASE_TS + 6_000) is not None
    assert all(len(v) == 1 for v in latest_values(plog).values())
    plog.close()


def test_segment_ms_rolls_the_active_segment_so_it_can_be_cleaned(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config(segment_ms=60_000, segment_bytes=1 << 20))
    for i in range(5):
        put(plog, b"k", b"%d" % i)
    assert len(plog.segments) == 1 and clean_log(plog, NOW) is None  # all in the active segment
    put(plog, b"k", b"later", ts=BASE_TS + 61_000)  # past segment.ms: the append rolls first
    assert len(plog.segments) == 2
    assert clean_log(plog, BASE_TS + 62_000) is not None
    assert latest_values(plog)[b"k"] == [b"4", b"later"]
    plog.close()


def test_max_compaction_lag_also_bounds_the_roll(tmp_path):
    # Kafka's LogConfig.maxSegmentMs: min(segment.ms, max.compaction.lag.ms) for a compacted log.
    plog = PartitionLog.open(tmp_path / "t-0", compact_config(max_compaction_lag_ms=30_000, segment_bytes=1 << 20))
    put(plog, b"k", b"a")
    put(plog, b"k", b"b", ts=BASE_TS + 31_000)
    assert len(plog.segments) == 2
    plog.close()
    deleting = PartitionLog.open(tmp_path / "u-0", small_config(max_compaction_lag_ms=30_000, segment_bytes=1 << 20))
    put(deleting, b"k", b"a")
    put(deleting, b"k", b"b", ts=BASE_TS + 31_000)
    assert len(deleting.segments) == 1  # not compacted: segment.ms alone
    deleting.close()


def test_dedupe_buffer_bounds_the_offset_map(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    fill(plog, 4, 30)  # 30 keys
    config = CleanerConfig(dedupe_buffer_size=10 * 24, io_buffer_load_factor=1.0)
    assert config.max_map_entries == 10
    end = plog.segments[-1].base_offset
    checkpoints = []
    while (result := clean_log(plog, NOW, config=config)) is not None:
        checkpoints.append(result.cleaned_up_to)
        assert len(checkpoints) < 50
    # Each cleaning maps at most 10 keys and stops there; the next goes on from its end.
    assert len(checkpoints) > 3 and checkpoints == sorted(checkpoints) and checkpoints[-1] == end
    assert plog.cleaner_checkpoint == end
    assert all(len(v) == 1 for v in latest_values(plog).values())
    plog.close()


def test_io_max_bytes_per_second_throttles(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    fill(plog, 6, 20)
    rate = 100_000
    started = time.monotonic()
    result = clean_log(plog, NOW, config=CleanerConfig(io_max_bytes_per_second=rate))
    elapsed = time.monotonic() - started
    # Every segment is read twice (offset map, filter) and the rewritten ones written once.
    moved = 2 * result.bytes_before + result.bytes_after
    assert elapsed >= 0.8 * moved / rate - 0.01
    plog.close()


def test_threads_zero_runs_no_cleaner():
    cleaner = LogCleaner(list, config=CleanerConfig(threads=0, backoff_ms=10))
    cleaner.start()
    assert cleaner._thread is None
    cleaner.stop()


def test_cleaner_in_a_thread_yields_the_gil(tmp_path, monkeypatch):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    fill(plog, 10, 50)
    sleeps = []
    clock = itertools.count(0, 0.001)  # each look at the clock: 1 ms of work
    monkeypatch.setattr(cleaner_module._Pacer, "clock", staticmethod(lambda: next(clock)))
    monkeypatch.setattr(cleaner_module._Pacer, "sleep", staticmethod(sleeps.append))
    assert clean_log(plog, NOW, yield_every_s=0.002) is not None
    assert len(sleeps) > 10 and all(s == 0.002 for s in sleeps)
    plog.close()


def test_cleaning_in_a_worker_process(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    fill(plog, 10, 5)
    cleaner = LogCleaner(lambda: [plog], config=CleanerConfig(backoff_ms=60_000), worker="process")
    try:
        assert cleaner.run_once(NOW) == 1
    finally:
        cleaner.stop()
    assert all(len(v) == 1 for v in latest_values(plog).values())
    plog.close()


def test_stop_during_a_cleaning_ends_the_worker_at_once(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    fill(plog, 40, 200)
    # ~4 s of cleaning at this rate: stop() must not wait for it.
    config = CleanerConfig(backoff_ms=0, io_max_bytes_per_second=plog.size_bytes / 2)
    cleaner = LogCleaner(lambda: [plog], config=config, worker="process")
    cleaner.start()
    deadline = time.monotonic() + 20
    while cleaner._pool is None or not getattr(cleaner._pool, "_processes", None):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    started = time.monotonic()
    cleaner.stop()
    assert time.monotonic() - started < 3
    assert plog.cleaner_checkpoint == 0  # the cleaning was dropped
    assert not any(name.endswith(".cleaned") for name in os.listdir(tmp_path / "t-0"))
    plog.close()
