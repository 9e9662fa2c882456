"""The cleaner-offset-checkpoint file: Kafka's format, kept across restarts, lowered by
truncation, emptied of deleted partitions."""
from __future__ import annotations

import os

from kafkapy.log.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from kafkapy.log.cleaner import CLEANER_OFFSET_CHECKPOINT
from kafkapy.log.manager import LogManager
from kafkapy.protocol.records import build_batch

from logtools import BASE_TS, small_config

NOW = BASE_TS + 1000


def compact_config(**overrides):
    base = dict(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    base.update(overrides)
    return small_config(**base)


def open_manager(log_dir):
    manager = LogManager([str(log_dir)], small_config(), cleaner_enable=False)
    manager.load({"t": compact_config(), "u": compact_config()})
    return manager


def fill(plog, rounds=20, keys=5):
    for r in range(rounds):
        for k in range(keys):
            plog.append(bytearray(build_batch([(b"key%d" % k, b"v%d" % r + b"x" * 40, (), BASE_TS)],
                                              base_timestamp=BASE_TS)))
    plog.roll()


def files_of(directory):
    return {name: os.stat(directory / name).st_mtime_ns for name in os.listdir(directory)}


def test_checkpoint_written_in_kafka_format_and_survives_restart(tmp_path):
    manager = open_manager(tmp_path)
    plog = manager.create("t", 0, compact_config())
    fill(plog)
    assert manager.cleaner.run_once(NOW) == 1
    end = plog.segments[-1].base_offset
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    assert path.read_text() == f"0\n1\nt 0 {end}\n"
    manager.close()

    manager = open_manager(tmp_path)
    plog = manager.get("t", 0)
    assert plog.cleaner_checkpoint == end
    before = files_of(plog.dir)
    # Clean already: not cleaned again (no segment rewritten, nothing renamed).
    assert manager.cleaner.run_once(NOW) == 0
    assert files_of(plog.dir) == before
    # New dirty data is cleaned from the checkpoint on, and the file follows.
    fill(plog, rounds=3)
    assert manager.cleaner.run_once(NOW) == 1
    assert read_offset_checkpoint(path) == {("t", 0): plog.segments[-1].base_offset}
    manager.close()


def test_truncation_lowers_the_checkpoint(tmp_path):
    manager = open_manager(tmp_path)
    plog = manager.create("t", 0, compact_config())
    fill(plog)
    manager.cleaner.run_once(NOW)
    assert plog.cleaner_checkpoint == plog.segments[-1].base_offset
    plog.truncate_to(30)
    end = plog.log_end_offset  # 30, or the end of the batch (or filler) holding it
    assert end < 50 and plog.cleaner_checkpoint == end
    manager.cleaner.run_once(NOW)  # nothing dirty enough to clean, but the file is brought up to date
    assert read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {("t", 0): end}
    plog.truncate_fully_and_start_at(10)
    assert plog.cleaner_checkpoint == 10
    manager.close()


def test_deleted_partition_leaves_the_checkpoint(tmp_path):
    manager = open_manager(tmp_path)
    for topic in ("t", "u"):
        fill(manager.create(topic, 0, compact_config()))
    assert manager.cleaner.run_once(NOW) == 2
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    assert set(read_offset_checkpoint(path)) == {("t", 0), ("u", 0)}
    manager.delete("u", 0)
    assert set(read_offset_checkpoint(path)) == {("t", 0)}
    manager.close()


def test_checkpoint_beyond_log_end_restarts_from_log_start(tmp_path, caplog):
    manager = open_manager(tmp_path)
    fill(manager.create("t", 0, compact_config()))
    manager.close()
    write_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT, {("t", 0): 10_000, ("gone", 3): 5})
    manager = open_manager(tmp_path)
    plog = manager.get("t", 0)
    assert plog.cleaner_checkpoint == 10_000
    with caplog.at_level("WARNING"):
        assert manager.cleaner.run_once(NOW) == 1
    assert "above its log end offset" in caplog.text
    # Entries of partitions this dir does not hold are dropped with the next write.
    assert read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {("t", 0): plog.segments[-1].base_offset}
    manager.close()
