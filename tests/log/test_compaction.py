"""The log cleaner: latest value per key, tombstones, offsets kept, crash-safe swaps."""
from __future__ import annotations

import os

import pytest

from kafkapy.log import PartitionLog
from kafkapy.log.cleaner import LogCleaner, clean_log
from kafkapy.log.manager import LogManager
from kafkapy.protocol.records import build_batch, iter_batch_headers, iter_records

from logtools import BASE_TS, read_all, small_config

NOW = BASE_TS + 1000


def compact_config(**overrides):
    base = dict(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    base.update(overrides)
    return small_config(**base)


def append(plog, pairs, ts=BASE_TS):
    """One batch of (key, value) records."""
    return plog.append(bytearray(build_batch([(k, v, (), ts) for k, v in pairs], base_timestamp=ts)))


def records(plog, start=None):
    data = read_all(plog, start=start)
    out = []
    pos = 0
    for header in iter_batch_headers(data, validate=True):
        header.position = pos
        out.extend(iter_records(data, header))
        pos += header.size
    return out


def fill(plog, rounds=6, keys=5, value=b"v"):
    """rounds x keys records (one batch per record), rolling now and then; returns the
    expected latest (offset, value) per key."""
    latest = {}
    for r in range(rounds):
        for k in range(keys):
            key = b"key%d" % k
            val = b"%s-%d-%d" % (value, r, k) + b"x" * 40
            result = append(plog, [(key, val)])
            latest[key] = (result.base_offset, val)
    return latest


def test_latest_value_per_key_survives_with_its_offset(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    latest = fill(plog, rounds=20)
    plog.roll()
    append(plog, [(b"key0", b"in-active")])  # the active segment: never cleaned
    start, end = plog.log_start_offset, plog.log_end_offset
    segments_before = [s.base_offset for s in plog.segments]
    result = clean_log(plog, NOW)
    assert result is not None and result.records_removed == 19 * 5 and result.segments_rewritten > 0
    assert (plog.log_start_offset, plog.log_end_offset) == (start, end)
    assert [s.base_offset for s in plog.segments] == segments_before
    got = records(plog)
    offsets = [r.offset for r in got]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    closed = {r.key: (r.offset, r.value) for r in got[:-1]}
    assert closed == latest
    assert (got[-1].key, got[-1].value, got[-1].offset) == (b"key0", b"in-active", end - 1)
    # Gaps: a fetch in the middle of a removed range starts at the next surviving batch.
    first_kept = min(o for o, _ in latest.values())
    assert first_kept > 0
    # (or at the empty batch kept to mark where a segment ends).
    assert 0 < int.from_bytes(plog.read(0, 1 << 20).records.tobytes()[:8], "big") <= first_kept
    assert got[0].offset == first_kept
    # Nothing more to do until new dirty data is rolled.
    assert clean_log(plog, NOW) is None
    plog.close()
    reopened = PartitionLog.open(tmp_path / "t-0", compact_config())
    assert [(r.offset, r.key, r.value) for r in records(reopened)] == [(r.offset, r.key, r.value) for r in got]
    reopened.close()


def test_active_segment_untouched(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    for i in range(10):
        append(plog, [(b"same", b"%d" % i)])
    assert len(plog.segments) == 1
    before = read_all(plog)
    assert clean_log(plog, NOW) is None
    assert read_all(plog) == before
    plog.close()


def test_tombstones_removed_after_delete_retention(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config(delete_retention_ms=10_000))
    fill(plog, rounds=10, keys=3)
    append(plog, [(b"key1", None)])
    fill(plog, rounds=10, keys=1, value=b"w")  # key0 only: rolls the tombstone's segment away
    plog.roll()
    clean_log(plog, NOW)
    got = {r.key: r.value for r in records(plog)}
    assert b"key1" in got and got[b"key1"] is None  # first cleaning keeps the tombstone
    # New dirty data, then a cleaning past delete.retention.ms drops it.
    fill(plog, rounds=10, keys=1, value=b"z")
    plog.roll()
    clean_log(plog, NOW + 20_000)
    got = {r.key: r.value for r in records(plog)}
    assert b"key1" not in got
    assert got[b"key2"].startswith(b"v-9-2") and got[b"key0"].startswith(b"z-9-0")
    plog.close()


def test_dirty_ratio_and_min_compaction_lag(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=0.5))
    fill(plog, rounds=20)
    plog.roll()
    assert clean_log(plog, NOW) is not None
    # A little new dirty data is below the ratio.
    append(plog, [(b"key0", b"new")])
    plog.roll()
    assert clean_log(plog, NOW) is None
    lagged = PartitionLog.open(tmp_path / "u-0", compact_config(min_compaction_lag_ms=60_000))
    fill(lagged, rounds=20)
    lagged.roll()
    assert clean_log(lagged, NOW) is None
    assert clean_log(lagged, NOW + 120_000) is not None
    plog.close()
    lagged.close()


def test_old_slices_stay_readable_after_swap(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config(file_delete_delay_ms=60_000))
    fill(plog, rounds=20)
    plog.roll()
    held = plog.read(0, 1 << 20).records
    expected = held.tobytes()
    assert clean_log(plog, NOW) is not None
    assert held.tobytes() == expected  # the old file is renamed .deleted, still open
    assert any(name.endswith(".deleted") for name in os.listdir(tmp_path / "t-0"))
    plog.close()
    assert not any(name.endswith(".deleted") for name in os.listdir(tmp_path / "t-0"))
    assert PartitionLog.open(tmp_path / "t-0", compact_config()).log_end_offset == plog.log_end_offset


def _crash_during_swap(tmp_path, leftover_suffix, original_renamed=True):
    """Clean a log's copy by hand and leave the cleaned file as `.cleaned` or `.swap`."""
    directory = tmp_path / "t-0"
    plog = PartitionLog.open(directory, compact_config())
    fill(plog, rounds=20)
    plog.roll()
    append(plog, [(b"key3", b"tail")])
    original = [(r.offset, r.key, r.value) for r in records(plog)]
    plog.close()
    # A copy of the partition, cleaned: its first segment is what the crashed cleaner wrote.
    copy_dir = tmp_path / "copy" / "t-0"
    copy_dir.parent.mkdir()
    os.system(f"cp -r {directory} {copy_dir}")
    copy = PartitionLog.open(copy_dir, compact_config(), clean_shutdown=True)
    clean_log(copy, NOW)
    cleaned = [(r.offset, r.key, r.value) for r in records(copy)]
    first = copy.segments[0].path(".log").name
    copy.close()
    os.system(f"cp {copy_dir / first} {directory / (first + leftover_suffix)}")
    if leftover_suffix == ".swap" and original_renamed:
        # Crashed after renaming the original away: only the .deleted files remain of it.
        for suffix in (".log", ".index", ".timeindex"):
            name = first.replace(".log", suffix)
            os.rename(directory / name, directory / (name + ".deleted"))
    return directory, original, cleaned, first


def test_recovery_discards_leftover_cleaned_file(tmp_path):
    directory, original, _, first = _crash_during_swap(tmp_path, ".cleaned")
    plog = PartitionLog.open(directory, compact_config())
    assert [(r.offset, r.key, r.value) for r in records(plog)] == original
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(directory))
    plog.close()


@pytest.mark.parametrize("original_renamed", [True, False])
def test_recovery_completes_leftover_swap(tmp_path, original_renamed):
    directory, original, cleaned, first = _crash_during_swap(tmp_path, ".swap", original_renamed)
    plog = PartitionLog.open(directory, compact_config())
    got = [(r.offset, r.key, r.value) for r in records(plog)]
    first_segment_end = plog.segments[1].base_offset
    # The first segment is the cleaned one; the rest is as it was.
    assert [g for g in got if g[0] < first_segment_end] == [c for c in cleaned if c[0] < first_segment_end]
    assert [g for g in got if g[0] >= first_segment_end] == [o for o in original if o[0] >= first_segment_end]
    assert plog.log_end_offset == original[-1][0] + 1
    assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(directory))
    # The rebuilt indexes serve reads from any offset.
    for offset in range(0, plog.log_end_offset, 7):
        result = plog.read(offset, 1 << 20)
        assert result.records and result.next_offset > offset
    plog.close()


def test_log_manager_cleaner_thread(tmp_path):
    manager = LogManager([str(tmp_path)], small_config(), cleaner_backoff_ms=20)
    plog = manager.create("c", 0, compact_config())
    latest = fill(plog, rounds=20)
    plog.roll()
    import time
    deadline = time.monotonic() + 30  # the worker process starts on first use, at idle priority
    while plog.cleaner_checkpoint < plog.segments[-1].base_offset and time.monotonic() < deadline:
        time.sleep(0.02)
    assert plog.cleaner_checkpoint == plog.segments[-1].base_offset
    assert {r.key: (r.offset, r.value) for r in records(plog)} == latest
    manager.close()
    assert manager.cleaner is not None and manager.cleaner._thread is None


def test_cleaner_run_once_skips_delete_policy(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    fill(plog, rounds=20)
    plog.roll()
    assert LogCleaner(lambda: [plog]).run_once() == 0
    plog.close()


def test_group_offsets_reload_identically_after_compaction(tmp_path):
    """__consumer_offsets usage: committed offsets loaded from a compacted log are the same."""
    from kafkapy.groupcoord import GroupCoordinator, GroupCoordinatorConfig, OffsetAndMetadata, OffsetsTopicStore
    from tests.groupcoord.fakes import ManualScheduler

    config = compact_config(segment_bytes=2048)

    def make(sched):
        logs = {}

        def log_for(partition):
            if partition not in logs:
                logs[partition] = PartitionLog.open(tmp_path / f"__consumer_offsets-{partition}", config)
            return logs[partition]

        coord = GroupCoordinator(GroupCoordinatorConfig(offsets_topic_num_partitions=1),
                                 OffsetsTopicStore(log_for), clock_ms=sched.clock_ms)
        coord.start(sched)
        coord.on_elected(0)
        return coord, logs

    def committed(coord):
        out = {}
        for g in range(7):
            _, found = coord.fetch_offsets(f"g{g}", [("t", p) for p in range(5)])
            out[f"g{g}"] = {tp: (v[0].offset, v[0].metadata) if v[0] is not None else None
                            for tp, v in found.items()}
        return out

    sched = ManualScheduler()
    coord, logs = make(sched)
    for i in range(300):
        coord.commit_offsets(f"g{i % 7}", "", None, -1, {("t", i % 5): OffsetAndMetadata(i, metadata=f"m{i}")})
    coord.delete_groups(["g3"])
    plog = logs[0]
    plog.roll()
    size_before = plog.size_bytes
    result = clean_log(plog, sched.clock_ms())
    assert result is not None and result.records_removed > 0 and plog.size_bytes < size_before
    expected = committed(coord)
    assert expected["g0"][("t", 0)] is not None and all(v is None for v in expected["g3"].values())
    coord.close()
    plog.close()

    coord2, logs2 = make(sched)
    assert committed(coord2) == expected
    assert coord2.manager.get_group("g3") is None
    coord2.close()
    logs2[0].close()


def test_compressed_and_idempotent_batches_keep_codec_and_producer_fields(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", compact_config())
    seq = 0
    for r in range(20):
        pairs = [(b"key%d" % k, b"%d-%d" % (r, k) + b"y" * 50, (), BASE_TS) for k in range(4)]
        plog.append(bytearray(build_batch(pairs, base_timestamp=BASE_TS, compression=4, producer_id=9,
                                          producer_epoch=0, base_sequence=seq)))
        seq += 4
    plog.roll()
    end = plog.log_end_offset
    assert clean_log(plog, NOW) is not None
    data = read_all(plog)
    headers = list(iter_batch_headers(data, validate=True))
    assert all(h.compression == 4 and h.producer_id == 9 for h in headers)
    assert headers[-1].base_offset + headers[-1].last_offset_delta == end - 1
    assert {r.key: r.value for r in records(plog)} == {b"key%d" % k: b"19-%d" % k + b"y" * 50 for k in range(4)}
    plog.close()
    reopened = PartitionLog.open(tmp_path / "t-0", compact_config())
    # The producer's next sequence is accepted after the cleaned log is reloaded.
    result = reopened.append(bytearray(build_batch([(b"key0", b"next")], producer_id=9, producer_epoch=0,
                                                   base_sequence=seq)))
    assert result.base_offset == end and not result.duplicate
    reopened.close()
