"""Start-up: clean restarts skip the rescan; crashes, torn tails, bit flips and corrupt
indexes or checkpoints are repaired; a partition that cannot be loaded goes offline alone."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from kafkapy.log import LogManager, PartitionLog
from kafkapy.log.checkpoints import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offset_checkpoint,
)
from kafkapy.log.errors import LogOfflineError
from kafkapy.log.segment import LogSegment
from kafkapy.protocol.errors import ErrorCode

from logtools import batch, batches_in, read_all, small_config


@pytest.fixture
def recover_calls(monkeypatch):
    calls = []
    original = LogSegment.recover

    def counting(self, accept):
        calls.append(self.base_offset)
        return original(self, accept)

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls


def fill(plog: PartitionLog, n: int, size: int = 100, epoch: int = 0) -> list[bytes]:
    raw = []
    for i in range(n):
        b = batch(1, size, seed=plog.log_end_offset * 7 + i)
        plog.append(b, leader_epoch=epoch)
        raw.append(bytes(b))
    return raw


def manager(tmp_path, config=None) -> LogManager:
    m = LogManager([str(tmp_path / "data")], config or small_config(segment_bytes=600))
    m.load()
    return m


# ------------------------------------------------------------------------- clean vs unclean
def test_clean_restart_does_not_rescan(tmp_path, recover_calls):
    m = manager(tmp_path)
    plog = m.create("t", 0)
    raw = fill(plog, 20)
    m.close()
    data = tmp_path / "data"
    assert (data / CLEAN_SHUTDOWN_MARKER).exists()
    assert read_offset_checkpoint(data / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 20}
    m = manager(tmp_path)
    assert recover_calls == []
    assert not (data / CLEAN_SHUTDOWN_MARKER).exists()  # removed once loaded
    plog = m.get("t", 0)
    assert read_all(plog) == b"".join(raw)
    assert plog.append(batch(1)).base_offset == 20
    m.close()


def test_unclean_restart_rescans_only_after_recovery_point(tmp_path, recover_calls):
    m = manager(tmp_path)
    plog = m.create("t", 0)
    raw = fill(plog, 20)
    plog.flush(plog.segments[2].base_offset)
    m.write_checkpoints()
    checkpointed = read_offset_checkpoint(tmp_path / "data" / RECOVERY_POINT_CHECKPOINT)[("t", 0)]
    bases = [s.base_offset for s in plog.segments]
    # the segment holding the recovery point and every later one
    rescanned = [b for i, b in enumerate(bases) if i + 1 == len(bases) or bases[i + 1] > checkpointed]
    assert checkpointed >= bases[2] and len(rescanned) < len(bases)
    plog.abandon()  # kill -9: no marker, page cache intact
    m2 = manager(tmp_path)
    plog = m2.get("t", 0)
    assert recover_calls == rescanned
    assert read_all(plog) == b"".join(raw)
    m2.close()


def test_missing_recovery_checkpoint_rescans_everything(tmp_path, recover_calls):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=600))
    raw = fill(plog, 12)
    segments = [s.base_offset for s in plog.segments]
    plog.abandon()
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=600))
    assert recover_calls == segments
    assert read_all(plog) == b"".join(raw)
    plog.close()


# ------------------------------------------------------------------------- damaged data
def crash_copy(plog: PartitionLog) -> Path:
    plog.abandon()
    return plog.dir


def test_torn_tail_is_cut_and_log_accepts_appends(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    raw = fill(plog, 10)
    path = plog.segments[-1].path(".log")
    crash_copy(plog)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 30)
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    assert plog.log_end_offset == 9
    assert read_all(plog) == b"".join(raw[:9])
    assert plog.append(batch(1)).base_offset == 9
    plog.close()


@pytest.mark.parametrize("where", ["payload", "crc", "length", "magic", "base_offset", "epoch"])
def test_bit_flip_cuts_from_that_batch_and_drops_later_segments(tmp_path, where):
    config = small_config(segment_bytes=600)
    plog = PartitionLog.open(tmp_path / "t-0", config)
    raw = fill(plog, 20)
    seg = plog.segments[1]
    path = seg.path(".log")
    crash_copy(plog)
    victim = 2  # the third batch of the second segment
    start = sum(len(b) for b in batches_in(path.read_bytes())[:victim])
    offset = {"payload": 80, "crc": 18, "length": 10, "magic": 16, "base_offset": 7, "epoch": 14}[where]
    data = bytearray(path.read_bytes())
    data[start + offset] ^= 0x10
    path.write_bytes(data)
    plog = PartitionLog.open(tmp_path / "t-0", config)
    survived = read_all(plog)
    kept = [b for b in batches_in(survived)]
    first_bad = seg.base_offset + victim
    assert plog.log_end_offset == first_bad
    assert survived == b"".join(raw[:first_bad])
    assert len(kept) == first_bad
    assert plog.segments[-1].base_offset == seg.base_offset
    assert plog.append(batch(1)).base_offset == first_bad
    plog.close()


def test_garbage_appended_after_last_batch_is_cut(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    raw = fill(plog, 5)
    path = plog.segments[-1].path(".log")
    crash_copy(plog)
    with open(path, "ab") as f:
        f.write(b"\x00" * 4096)  # preallocated zeros after a crash, as some filesystems leave
    plog = PartitionLog.open(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    assert read_all(plog) == b"".join(raw) and plog.log_end_offset == 5
    plog.close()


# ------------------------------------------------------------------------- damaged indexes and checkpoints
@pytest.mark.parametrize("damage", ["truncate_odd", "garbage", "delete", "shuffle"])
def test_corrupt_index_after_clean_shutdown_is_repaired(tmp_path, damage, caplog):
    config = small_config(segment_bytes=2000, index_interval_bytes=50)
    m = LogManager([str(tmp_path / "data")], config)
    m.load()
    plog = m.create("t", 0)
    raw = fill(plog, 30, size=60)
    m.close()
    index = sorted((tmp_path / "data" / "t-0").glob("*.index"))[0]
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    if damage == "truncate_odd":
        index.write_bytes(data[:-3])
    elif damage == "garbage":
        data[-8:] = os.urandom(8)
        index.write_bytes(data)
    elif damage == "delete":
        index.unlink()
    else:
        index.write_bytes(data[8:16] + data[:8] + data[16:])
    with caplog.at_level(logging.WARNING):
        m = LogManager([str(tmp_path / "data")], config)
        m.load()
        plog = m.get("t", 0)
        assert read_all(plog) == b"".join(raw)
        for start in range(0, 30, 3):
            assert plog.read(start, 1).records.first_offset == start
    m.close()


def test_corrupt_checkpoints_fall_back_safely(tmp_path, recover_calls):
    config = small_config(segment_bytes=600)
    m = LogManager([str(tmp_path / "data")], config)
    m.load()
    plog = m.create("t", 0)
    raw = fill(plog, 10, epoch=3)
    plog.delete_records_before(4)
    m.close()
    data = tmp_path / "data"
    (data / RECOVERY_POINT_CHECKPOINT).write_bytes(b"0\n5\nt 0 zz\n")
    (data / "t-0" / "leader-epoch-checkpoint").write_bytes(b"\x00garbage")
    (data / CLEAN_SHUTDOWN_MARKER).unlink()
    m = LogManager([str(data)], config)
    m.load()
    plog = m.get("t", 0)
    assert recover_calls  # unreadable recovery point: everything is rescanned
    assert plog.log_start_offset == 4
    assert plog.leader_epochs.entries() == [(3, 4)]  # rebuilt from the batches
    assert read_all(plog, start=4) == b"".join(raw[4:])
    m.close()


def test_log_start_offset_past_recovered_end_starts_empty(tmp_path):
    config = small_config(segment_bytes=1 << 20)
    m = LogManager([str(tmp_path / "data")], config)
    m.load()
    plog = m.create("t", 0)
    fill(plog, 10)
    plog.delete_records_before(8)
    m.write_checkpoints()
    path = plog.segments[-1].path(".log")
    plog.abandon()
    with open(path, "r+b") as f:
        f.truncate(50)  # everything lost
    m = LogManager([str(tmp_path / "data")], config)
    m.load()
    plog = m.get("t", 0)
    assert plog.log_start_offset == plog.log_end_offset == 8
    assert plog.append(batch(1)).base_offset == 8
    m.close()


def test_leftover_files_are_removed(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", small_config())
    fill(plog, 3)
    plog.close()
    d = tmp_path / "t-0"
    for name in ("00000000000000000099.log.deleted", "leader-epoch-checkpoint.tmp",
                 "00000000000000000500.index", "00000000000000000500.timeindex"):
        (d / name).write_bytes(b"x")
    plog = PartitionLog.open(d, small_config(), clean_shutdown=True)
    names = set(os.listdir(d))
    assert not any(n.startswith(("00000000000000000099", "00000000000000000500")) or n.endswith(".tmp")
                   for n in names)
    plog.close()


# ------------------------------------------------------------------------- offline partitions
def test_unloadable_partition_goes_offline_alone(tmp_path, caplog):
    config = small_config()
    m = LogManager([str(tmp_path / "data")], config)
    m.load()
    good = m.create("good", 0)
    raw = fill(good, 3)
    bad = m.create("bad", 0)
    fill(bad, 3)
    m.close()
    bad_log = tmp_path / "data" / "bad-0" / "00000000000000000000.log"
    bad_log.unlink()
    bad_log.mkdir()  # a segment that cannot even be opened
    with caplog.at_level(logging.ERROR):
        m = LogManager([str(tmp_path / "data")], config)
        m.load()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "bad-0" in errors[0].getMessage()
    assert ("bad", 0) in m.offline
    offline = m.get("bad", 0)
    with pytest.raises(LogOfflineError) as info:
        offline.read(0, 100)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(LogOfflineError):
        offline.append(batch(1))
    assert m.create("bad", 0) is offline  # never recreated over the damaged files
    assert read_all(m.get("good", 0)) == b"".join(raw)
    m.get("good", 0).append(batch(1))
    m.close()
    assert not (tmp_path / "data" / CLEAN_SHUTDOWN_MARKER).exists()


def test_log_start_offset_checkpoint_only_lists_moved_starts(tmp_path):
    m = LogManager([str(tmp_path / "data")], small_config(segment_bytes=1 << 20))
    m.load()
    fill(m.create("a", 0), 5)
    b = m.create("b", 1)
    fill(b, 5)
    b.delete_records_before(3)
    m.close()
    text = (tmp_path / "data" / LOG_START_OFFSET_CHECKPOINT).read_text()
    assert text == "0\n1\nb 1 3\n"
    m = LogManager([str(tmp_path / "data")], small_config(segment_bytes=1 << 20))
    m.load()
    assert m.get("b", 1).log_start_offset == 3 and m.get("a", 0).log_start_offset == 0
    m.close()


def test_empty_leader_epoch_checkpoint_reads_as_no_entries_quietly(tmp_path, caplog):
    """A leader-epoch-checkpoint created but never written (0 bytes, as a Kafka broker can leave
    one) is no entries, as Kafka's CheckpointReadBuffer reads it: no warning, and the cache is
    filled from the batches; a garbled one is still reported."""
    from kafkapy.log.checkpoints import read_epoch_checkpoint, read_offset_checkpoint

    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert read_epoch_checkpoint(empty) == [] and read_offset_checkpoint(empty) == {}
    config = small_config(segment_bytes=600)
    m = LogManager([str(tmp_path / "data")], config)
    m.load()
    raw = fill(m.create("t", 0), 6, epoch=2)
    fill(m.create("u", 0), 0)
    m.close()
    data = tmp_path / "data"
    (data / "t-0" / "leader-epoch-checkpoint").write_bytes(b"")
    (data / "u-0" / "leader-epoch-checkpoint").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="kafkapy.log"):
        m = LogManager([str(data)], config)
        m.load()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert m.get("t", 0).leader_epochs.entries() == [(2, 0)]
    assert m.get("u", 0).leader_epochs.entries() == []
    assert read_all(m.get("t", 0)) == b"".join(raw)
    m.close()
    caplog.clear()
    (data / "t-0" / "leader-epoch-checkpoint").write_bytes(b"0\n")
    with caplog.at_level(logging.WARNING, logger="kafkapy.log"):
        m = LogManager([str(data)], config)
        m.load()
    assert any("unreadable leader epoch checkpoint" in r.getMessage() for r in caplog.records)
    assert m.get("t", 0).leader_epochs.entries() == [(2, 0)]
    m.close()
