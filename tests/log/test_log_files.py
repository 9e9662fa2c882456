"""Config parsing, checkpoint file formats, index files and the log manager's bookkeeping."""
from __future__ import annotations

import os
import time

import pytest

from kafkapy.log import LogConfig, LogManager
from kafkapy.log.checkpoints import (
    CheckpointError,
    read_epoch_checkpoint,
    read_offset_checkpoint,
    write_epoch_checkpoint,
    write_offset_checkpoint,
)
from kafkapy.log.config import LOG_CONFIG_DEFS, LONG_MAX
from kafkapy.log.errors import InvalidConfigError
from kafkapy.log.leader_epoch import LeaderEpochCache
from kafkapy.log.offset_index import OffsetIndex
from kafkapy.log.sparse_index import CorruptIndexError
from kafkapy.log.time_index import TimeIndex
from kafkapy.protocol.errors import ErrorCode

from logtools import batch, read_all, small_config


# ------------------------------------------------------------------------- config
def test_config_defaults_match_kafka():
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.segment_index_bytes, c.index_interval_bytes) == (
        1073741824, 604800000, 10485760, 4096)
    assert (c.retention_ms, c.retention_bytes, c.flush_messages, c.flush_ms) == (604800000, -1, LONG_MAX, LONG_MAX)
    assert (c.message_timestamp_type, c.cleanup_policy, c.file_delete_delay_ms, c.max_message_bytes) == (
        "CreateTime", "delete", 60000, 1048588)
    assert c.min_insync_replicas == 1 and c.fsync_on_ack is False


def test_config_from_properties():
    c = LogConfig.from_properties({"segment.bytes": "1000", "retention.ms": "-1",
                                   "message.timestamp.type": "LogAppendTime",
                                   "kafkapy.log.fsync.on.ack": "true", "cleanup.policy": "compact, delete",
                                   "message.timestamp.difference.max.ms": "5000", "unknown.thing": "x"})
    assert c.segment_bytes == 1000 and c.retention_ms == -1 and c.log_append_time
    assert c.fsync_on_ack and c.cleanup_policy == "compact,delete" and c.delete_enabled
    assert c.message_timestamp_before_max_ms == c.message_timestamp_after_max_ms == 5000
    as_properties = {d.name: str(getattr(c, d.field)).lower() if isinstance(getattr(c, d.field), bool)
                     else str(getattr(c, d.field)) for d in LOG_CONFIG_DEFS}
    assert LogConfig.from_properties(as_properties) == c


@pytest.mark.parametrize("props", [{"segment.bytes": "abc"}, {"segment.bytes": "1"},
                                   {"message.timestamp.type": "Other"}, {"flush.messages": "0"},
                                   {"kafkapy.log.fsync.on.ack": "yes"}, {"segment.bytes": str(2**31)}])
def test_config_rejects_bad_values(props):
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_properties(props)
    assert info.value.code == ErrorCode.INVALID_CONFIG


# ------------------------------------------------------------------------- checkpoints
def test_offset_checkpoint_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("b-topic", 1): 7, ("a", 0): 100})
    assert path.read_text() == "0\n2\na 0 100\nb-topic 1 7\n"
    assert read_offset_checkpoint(path) == {("a", 0): 100, ("b-topic", 1): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    assert read_offset_checkpoint(tmp_path / "missing") == {}


# an empty (0-byte) file is no entries, as in Kafka (test_recovery.py); a blank line is malformed
@pytest.mark.parametrize("text", ["\n", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\nx\n", "0\n1\na b 1\n"])
def test_malformed_checkpoints_raise(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        read_offset_checkpoint(path)


def test_epoch_checkpoint_format(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    write_epoch_checkpoint(path, [(0, 0), (4, 120)])
    assert path.read_text() == "0\n2\n0 0\n4 120\n"
    assert read_epoch_checkpoint(path) == [(0, 0), (4, 120)]


def test_leader_epoch_cache_rules(tmp_path):
    end = [50]
    cache = LeaderEpochCache(tmp_path, lambda: end[0])
    assert cache.end_offset_for_epoch(0) == (-1, -1)
    assert cache.assign(1, 0) and not cache.assign(1, 10)
    assert cache.assign(3, 20) and cache.assign(5, 30)
    assert cache.end_offset_for_epoch(5) == (5, 50)
    assert cache.end_offset_for_epoch(4) == (3, 30)
    assert cache.end_offset_for_epoch(0) == (0, 0)
    assert cache.end_offset_for_epoch(9) == (-1, -1)
    cache.assign(4, 25)  # a lower epoch at an earlier offset truncates later entries
    assert cache.entries() == [(1, 0), (3, 20), (4, 25)]
    cache.truncate_from_end(25)
    assert cache.entries() == [(1, 0), (3, 20)]
    cache.truncate_from_start(22)
    assert cache.entries() == [(3, 22)]
    reloaded = LeaderEpochCache(tmp_path, lambda: 0)
    reloaded.load()
    assert reloaded.entries() == [(3, 22)]


# ------------------------------------------------------------------------- index files
def test_offset_index_preallocates_and_trims(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, 803, active=True)
    assert os.path.getsize(path) == 800 and index.max_entries == 100
    for i in range(10):
        index.append(100 + 3 * i, 50 * i)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(115) == (115, 250)
    assert index.lookup(117) == (115, 250)
    assert index.lookup(10_000) == (127, 450)
    assert index.lookup_position(260) == (115, 250)
    index.truncate_to(118)
    assert index.entries == 6 and index.last_entry() == (115, 250)
    index.make_inactive()
    assert os.path.getsize(path) == 48
    assert path.read_bytes()[:8] == (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
    reopened = OffsetIndex(path, 100, 803, active=False)
    assert reopened.lookup(117) == (115, 250) and reopened.entries == 6


def test_offset_index_detects_disorder(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes((5).to_bytes(4, "big") + (10).to_bytes(4, "big") + (3).to_bytes(4, "big") + (20).to_bytes(4, "big"))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 800, active=False).lookup(4)
    path.write_bytes(b"\x00" * 7)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 800, active=False).last_entry()


def test_time_index_only_grows(tmp_path):
    path = tmp_path / "00000000000000000010.timeindex"
    index = TimeIndex(path, 10, 120, active=True)
    assert os.path.getsize(path) == 120
    index.maybe_append(1000, 12)
    index.maybe_append(1000, 15)  # same timestamp: no entry
    index.maybe_append(900, 16)  # older: no entry
    index.maybe_append(2000, 20)
    assert index.entries == 2
    assert index.lookup(1500) == (1000, 12)
    assert index.lookup(10) == (-1, 10)
    index.close()
    assert os.path.getsize(path) == 24


# ------------------------------------------------------------------------- manager
def test_manager_create_is_idempotent_and_spreads_dirs(tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    m = LogManager(dirs, small_config())
    m.load()
    a = m.create("t", 0)
    assert m.create("t", 0) is a
    b = m.create("t", 1)
    assert {a.dir.parent, b.dir.parent} == {tmp_path / "d1", tmp_path / "d2"}
    assert set(m.all_logs()) == {("t", 0), ("t", 1)}
    assert (a.topic, a.partition) == ("t", 0)
    m.close()
    m = LogManager(dirs, small_config())
    m.load()
    assert set(m.all_logs()) == {("t", 0), ("t", 1)}
    m.close()


def test_manager_topic_with_dashes(tmp_path):
    m = LogManager([str(tmp_path)], small_config())
    m.load()
    m.create("my-topic-name", 12).append(batch(1))
    m.close()
    m = LogManager([str(tmp_path)], small_config())
    m.load()
    assert m.get("my-topic-name", 12).log_end_offset == 1
    m.close()


def test_manager_delete_removes_directory(tmp_path):
    m = LogManager([str(tmp_path)], small_config())
    m.load()
    plog = m.create("t", 0)
    plog.append(batch(1))
    m.delete("t", 0)
    assert m.get("t", 0) is None
    m.flusher.submit(lambda: None).result(timeout=5)
    assert not any(p.name.startswith("t-0") for p in tmp_path.iterdir())
    assert m.create("t", 0).log_end_offset == 0
    m.close()


def test_manager_update_config_retention_and_flush(tmp_path):
    m = LogManager([str(tmp_path)], small_config(segment_bytes=500))
    m.load()
    plog = m.create("t", 0)
    for i in range(10):
        plog.append(batch(1, 100, seed=i))
    m.update_config("t", small_config(segment_bytes=500, retention_bytes=600, flush_ms=0))
    assert plog.config.retention_bytes == 600
    m.run_retention()
    assert plog.log_start_offset > 0 and plog.size_bytes <= 1100
    m.flush_dirty()
    deadline = time.time() + 5
    while plog.recovery_point < plog.log_end_offset and time.time() < deadline:
        time.sleep(0.01)
    assert plog.recovery_point == plog.log_end_offset
    m.close()


def test_manager_ignores_non_partition_entries(tmp_path):
    (tmp_path / "meta.properties").write_text("x")
    (tmp_path / "not_a_partition").mkdir()
    (tmp_path / "t-0.abc-delete").mkdir()
    m = LogManager([str(tmp_path)], small_config())
    m.load()
    assert m.all_logs() == {}
    assert not (tmp_path / "t-0.abc-delete").exists()
    m.close()


def test_fetch_sees_only_whole_batches_after_reopen(tmp_path):
    m = LogManager([str(tmp_path)], small_config(segment_bytes=1 << 20))
    m.load()
    plog = m.create("t", 0)
    raw = [batch(2, 30, seed=i) for i in range(5)]
    for b in raw:
        plog.append(b)
    m.close()
    m = LogManager([str(tmp_path)], small_config(segment_bytes=1 << 20))
    m.load()
    assert read_all(m.get("t", 0), max_bytes=100) == b"".join(bytes(b) for b in raw)
    m.close()
