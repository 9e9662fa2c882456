"""Log directory failures with injected storage faults (log/storage_faults.py, log/dir_health.py):
ENOSPC makes a dir full (writes refused, reads go on, back once space is free), EIO takes it
offline until a restart; the other dirs keep serving; nothing acknowledged is lost."""
from __future__ import annotations

import errno

import pytest

from kafkapy.log import LogManager
from kafkapy.log.dir_health import FULL, OFFLINE, ONLINE
from kafkapy.log.errors import KafkaStorageError
from kafkapy.protocol.errors import ErrorCode

from logtools import batch, read_all, small_config


@pytest.fixture
def manager(tmp_path):
    m = LogManager([str(tmp_path / "a"), str(tmp_path / "b")], small_config(segment_bytes=4096))
    m.load()
    yield m
    m.close()


def _two_logs(m):
    first = m.create("t", 0)
    second = m.create("t", 1)
    assert first.dir.parent != second.dir.parent
    return first, second


def test_enospc_makes_the_dir_full_then_it_comes_back(manager):
    full, other = _two_logs(manager)
    changes = []
    manager.dir_listeners.append(lambda state: changes.append((state.path, state.status)))
    acked = [batch(2, seed=i) for i in range(3)]
    for b in acked:
        full.append(bytearray(b))
    before = read_all(full)
    manager.storage_faults.inject(error="ENOSPC", log_dir=full.dir.parent)
    with pytest.raises(KafkaStorageError) as refused:
        full.append(bytearray(batch(1)))
    assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    state = manager.dir_state(full.dir.parent)
    assert state.status == FULL and changes == [(full.dir.parent, FULL)]
    assert not full.is_offline and full.write_refused
    assert read_all(full) == before                    # reads go on
    other.append(bytearray(batch(1)))                  # the other dir keeps serving
    # new partitions go to the dirs that are online
    assert manager.create("u", 0).dir.parent == other.dir.parent
    assert manager.recheck_full_dirs() == []           # the fault still holds
    manager.storage_faults.clear()
    assert manager.recheck_full_dirs() == [full.dir.parent]
    assert state.status == ONLINE and state.recoveries == 1 and changes[-1] == (full.dir.parent, ONLINE)
    result = full.append(bytearray(batch(1)))
    assert result.base_offset == 6 and full.log_end_offset == 7  # no hole, nothing lost
    assert read_all(full).startswith(before)


def test_a_half_written_batch_is_cut_off(manager, monkeypatch):
    plog, _ = _two_logs(manager)
    plog.append(bytearray(batch(1)))
    before = read_all(plog)
    segment = plog.segments[-1]
    import os

    real_write = os.write

    def half_then_enospc(fd, data):
        if fd == segment._fd:
            real_write(fd, bytes(data)[:len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", half_then_enospc)
    with pytest.raises(KafkaStorageError):
        plog.append(bytearray(batch(3)))
    monkeypatch.setattr(os, "write", real_write)
    assert os.path.getsize(segment.path(".log")) == segment.size
    assert manager.recheck_full_dirs() == [plog.dir.parent]
    plog.append(bytearray(batch(1)))
    assert read_all(plog).startswith(before) and plog.log_end_offset == 2


def test_eio_takes_the_dir_offline_for_good(manager):
    failing, other = _two_logs(manager)
    manager.storage_faults.inject(error="EIO", log_dir=failing.dir.parent)
    with pytest.raises(KafkaStorageError):
        failing.append(bytearray(batch(1)))
    assert manager.dir_state(failing.dir.parent).status == OFFLINE
    assert failing.is_offline
    with pytest.raises(KafkaStorageError):
        failing.read(0, 100)
    manager.storage_faults.clear()
    assert manager.recheck_full_dirs() == []
    assert failing.is_offline
    other.append(bytearray(batch(1)))


def test_an_fsync_fault_on_one_partition_takes_its_dir(manager):
    plog, other = _two_logs(manager)
    plog.append(bytearray(batch(1)))
    manager.storage_faults.inject(error="ENOSPC", operation="fsync", topic="t", partition=plog.partition)
    with pytest.raises(OSError):
        plog._sync_data()
    plog._io_failed("fsync", OSError(errno.ENOSPC, "injected"))
    assert manager.dir_state(plog.dir.parent).status == FULL
    assert manager.dir_state(other.dir.parent).status == ONLINE
    manager.storage_faults.clear()
    assert manager.recheck_full_dirs() == [plog.dir.parent]
    assert plog.durable_offset == plog.log_end_offset


def test_bad_fault_arguments_are_refused(manager):
    with pytest.raises(ValueError):
        manager.storage_faults.inject(error="EPERM", log_dir=manager.log_dirs[0])
    with pytest.raises(ValueError):
        manager.storage_faults.inject(log_dir="/nowhere")
    with pytest.raises(ValueError):
        manager.storage_faults.inject(operation="read", topic="t")
