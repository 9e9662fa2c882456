"""Moving a partition log to another log dir while it is written (kafkapy.log.dir_move).

The reference for "identical afterwards" is a second log that received the same appends and never
moved: once both are closed, every file of the moved partition dir equals the reference's byte for
byte (segments, indexes, leader-epoch checkpoint, producer snapshots, .txnindex).
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import shutil
import textwrap
import time
from pathlib import Path

import pytest

from kafkapy.log import LogManager
from kafkapy.log import dir_move
from kafkapy.log.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from kafkapy.protocol.errors import ErrorCode, KafkaError
from kafkapy.protocol.records import build_batch

from logtools import BASE_TS, read_all, small_config

REPO = Path(__file__).resolve().parents[2]
KEY = ("t", 0)


def config(**overrides):
    return small_config(**{"segment_bytes": 16384, "file_delete_delay_ms": 0, **overrides})


def open_manager(*dirs: Path, **overrides) -> LogManager:
    manager = LogManager([str(d) for d in dirs], config(**overrides))
    manager.load()
    return manager


class Workload:
    """Deterministic appends: idempotent batches, a leader epoch change, an aborted transaction
    (a .txnindex entry), DeleteRecords; the same sequence applied to several logs."""

    def __init__(self):
        self.i = 0

    def step(self, *plogs) -> None:
        i = self.i
        self.i += 1
        epoch = 0 if i < 300 else 3
        if i == 250:
            value = build_batch([(b"txn", b"v")], base_timestamp=BASE_TS + i, producer_id=7, producer_epoch=0,
                                base_sequence=0, is_transactional=True)
        else:
            value = build_batch([(b"k%d" % i, b"x" * (50 + i % 200)), (b"k", b"y")], base_timestamp=BASE_TS + i,
                                producer_id=5, producer_epoch=0, base_sequence=2 * (i - (i > 250)))
        for plog in plogs:
            if i == 251:
                plog.append_txn_marker(7, 0, 0, commit=False, leader_epoch=epoch, timestamp=BASE_TS + i)
            plog.append(bytearray(value), leader_epoch=epoch)
            if i == 400:
                plog.delete_records_before(plog.log_end_offset - 5)


def state(plog) -> dict:
    return {
        "data": read_all(plog),
        "start": plog.log_start_offset,
        "end": plog.log_end_offset,
        "bases": [s.base_offset for s in plog.segments],
        "epochs": plog.leader_epochs.entries(),
        "producers": {pid: (e.producer_epoch, e.last_seq, e.last_data_offset)
                      for pid, e in plog.producer_state.active_producers().items()},
        "aborted": plog.aborted_transactions(0, plog.log_end_offset),
        "offset_indexes": [bytes(s.offset_index._load()) for s in plog.segments],
        "time_indexes": [bytes(s.time_index._load()) for s in plog.segments],
    }


def files(partition_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(partition_dir.iterdir())}


def other_dir(manager: LogManager, plog) -> Path:
    return next(d for d in manager.log_dirs if d != plog.dir.parent)


async def wait_moved(manager: LogManager, *plogs, workload: Workload | None = None, timeout: float = 60):
    """Run the event loop, appending every 2 ms, until the move is over."""
    deadline = asyncio.get_running_loop().time() + timeout
    while manager.mover.get(*KEY) is not None:
        assert asyncio.get_running_loop().time() < deadline, "the move did not finish"
        if workload is not None:
            workload.step(*plogs)
        await asyncio.sleep(0.002)


@pytest.fixture
def passes(monkeypatch) -> list[int]:
    """Several passes even for a small log, so that appends land between them; counts the passes."""
    monkeypatch.setattr(dir_move, "FINAL_PASS_BYTES", 8192)
    monkeypatch.setattr(dir_move, "_CHUNK", 4096)
    done: list[int] = []
    apply = dir_move.LogDirMover._apply

    def counting(move, plan, changed):
        done.append(len(changed))
        apply(move, plan, changed)

    monkeypatch.setattr(dir_move.LogDirMover, "_apply", staticmethod(counting))
    return done


@pytest.fixture
def slow_copy(monkeypatch) -> list[int]:
    """Copies of 1 KiB taking 2 ms each in passes, so that a test can act while a move copies."""
    monkeypatch.setattr(dir_move, "_CHUNK", 1024)
    monkeypatch.setattr(dir_move, "FINAL_PASS_BYTES", 0)  # switch only once nothing is left
    calls: list[int] = []
    real = dir_move._copy_range

    def slow(*args):
        calls.append(1)
        time.sleep(0.002)
        return real(*args)

    monkeypatch.setattr(dir_move, "_copy_range", slow)
    return calls


def test_move_while_appending_leaves_identical_files(tmp_path, passes):
    async def main():
        manager = open_manager(tmp_path / "a", tmp_path / "b")
        reference = open_manager(tmp_path / "ref")
        plog, ref = manager.create(*KEY), reference.create(*KEY)
        workload = Workload()
        for _ in range(150):
            workload.step(plog, ref)
        src = plog.dir
        dst = other_dir(manager, plog)
        manager.move(*KEY, dst)
        assert manager.mover.get(*KEY).log_dir == dst
        await wait_moved(manager, plog, ref, workload=workload)
        assert len(passes) >= 2 and workload.i > 150, "appends should have landed between passes"
        while workload.i < 450:  # appends, rolls and DeleteRecords after the switch
            workload.step(plog, ref)
        assert plog.dir == dst / "t-0"
        assert state(plog) == state(ref)
        # Both dirs' checkpoints: the partition is only in the destination, with the right offsets.
        manager.write_checkpoints()
        manager.flusher.submit(lambda: None).result()
        assert KEY not in read_offset_checkpoint(src.parent / RECOVERY_POINT_CHECKPOINT)
        assert plog.log_start_offset > plog.segments[0].base_offset  # so the checkpoint holds it
        assert read_offset_checkpoint(dst / LOG_START_OFFSET_CHECKPOINT)[KEY] == plog.log_start_offset
        assert read_offset_checkpoint(dst / RECOVERY_POINT_CHECKPOINT)[KEY] <= plog.log_end_offset
        manager.close()
        reference.close()
        assert not src.exists()
        assert sorted(p.name for p in src.parent.iterdir() if p.is_dir()) == []
        assert files(dst / "t-0") == files(tmp_path / "ref" / "t-0")

    asyncio.run(main())
    again, reference = open_manager(tmp_path / "a", tmp_path / "b"), open_manager(tmp_path / "ref")
    assert state(again.get(*KEY)) == state(reference.get(*KEY))
    again.close()
    reference.close()


def test_move_right_after_the_switch_survives_a_crash(tmp_path, passes):
    """Files as a kill -9 right after the switch leaves them: the copy recovers to the same log."""
    async def main():
        manager = open_manager(tmp_path / "a", tmp_path / "b")
        plog = manager.create(*KEY)
        workload = Workload()
        for _ in range(200):
            workload.step(plog)
        manager.move(*KEY, other_dir(manager, plog))
        await wait_moved(manager, plog, workload=workload)
        expected = state(plog)
        plog.abandon()
        manager.flusher.stop()
        return expected, plog.dir

    expected, moved_to = asyncio.run(main())
    again = open_manager(tmp_path / "a", tmp_path / "b")
    plog = again.get(*KEY)
    assert plog.dir == moved_to
    got = state(plog)
    # Recovery rebuilds the active segment's indexes: compare everything else.
    assert {k: v for k, v in got.items() if "index" not in k} == \
        {k: v for k, v in expected.items() if "index" not in k}
    again.close()


def test_move_of_a_follower_with_truncation(tmp_path, passes, monkeypatch):
    """Replica-fetcher appends and truncations during the move (the copy of a rewritten segment
    is made again)."""
    # each 4 KiB copy takes at least 1 ms, so that the move spans several rounds of the loop below
    # even where copying is nearly free (memory storage: a tmpfs finished it within one round)
    real_copy = dir_move._copy_range

    def paced_copy(*args):
        time.sleep(0.001)
        return real_copy(*args)

    monkeypatch.setattr(dir_move, "_copy_range", paced_copy)

    async def main():
        manager = open_manager(tmp_path / "a", tmp_path / "b")
        reference = open_manager(tmp_path / "ref")
        plog, ref = manager.create(*KEY), reference.create(*KEY)
        offset = 0

        def follow(n: int) -> None:
            nonlocal offset
            for _ in range(n):
                buf = bytearray(build_batch([(b"k%d" % offset, b"v" * 300)], base_offset=offset,
                                            base_timestamp=BASE_TS + offset, partition_leader_epoch=1))
                for log_ in (plog, ref):
                    log_.append_as_follower(buf)
                offset += 1

        follow(200)
        manager.move(*KEY, other_dir(manager, plog))
        rounds = 0
        while manager.mover.get(*KEY) is not None:
            follow(3)
            if rounds % 2 == 1:
                offset -= 2
                for log_ in (plog, ref):
                    log_.truncate_to(offset)
            rounds += 1
            await asyncio.sleep(0.002)
        assert rounds >= 2 and len(passes) >= 2, "truncations should have landed between passes"
        follow(40)
        assert state(plog) == state(ref)
        moved = plog.dir
        manager.close()
        reference.close()
        assert files(moved) == files(tmp_path / "ref" / "t-0")

    asyncio.run(main())


def test_cancel_keeps_the_original(tmp_path, slow_copy):
    async def main():
        manager = open_manager(tmp_path / "a", tmp_path / "b")
        plog = manager.create(*KEY)
        workload = Workload()
        for _ in range(400):
            workload.step(plog)
        before = state(plog)
        src, dst = plog.dir, other_dir(manager, plog)
        manager.move(*KEY, dst)
        move = manager.mover.get(*KEY)
        while not slow_copy:
            await asyncio.sleep(0.001)
        assert move.future_dir.exists()
        # The same destination again changes nothing.
        manager.move(*KEY, dst)
        assert manager.mover.get(*KEY) is move
        # Back to the current dir: as Kafka, the future replica is dropped.
        manager.move(*KEY, src.parent)
        assert manager.mover.get(*KEY) is None and move.cancelled
        manager.mover._executor.submit(lambda: None).result()
        await asyncio.sleep(0.05)
        manager.mover._executor.submit(lambda: None).result()
        assert not move.future_dir.exists()
        assert plog.dir == src and state(plog) == before
        workload.step(plog)  # still writable
        manager.close()

    asyncio.run(main())


def test_retarget_delete_and_shutdown_during_a_move(tmp_path, slow_copy):
    async def main():
        manager = open_manager(tmp_path / "a", tmp_path / "b", tmp_path / "c")
        plogs = {}
        for p in range(3):
            plogs[p] = manager.create("t", p)
            for i in range(60):
                plogs[p].append(bytearray(build_batch([(b"k%d" % i, b"v" * 300)], base_timestamp=BASE_TS + i)))
        homes = {p: plogs[p].dir for p in range(3)}
        futures = []
        # Toward another dir while moving: the move starts over toward the new one.
        first, second = [d for d in manager.log_dirs if d != homes[0].parent]
        manager.move("t", 0, first)
        old = manager.mover.get("t", 0)
        futures.append(old.future_dir)
        await asyncio.sleep(0.01)
        manager.move("t", 0, second)
        new = manager.mover.get("t", 0)
        assert new is not old and new.log_dir == second and old.cancelled
        # Deleting a moving partition cancels its move.
        manager.move("t", 1, next(d for d in manager.log_dirs if d != homes[1].parent))
        futures.append(manager.mover.get("t", 1).future_dir)
        await asyncio.sleep(0.01)
        manager.delete("t", 1)
        assert manager.mover.get("t", 1) is None
        await wait_moved_key(manager, ("t", 0))
        assert plogs[0].dir == second / "t-0"
        # Closing the manager drops a move under way (the log stays where it was).
        manager.move("t", 2, next(d for d in manager.log_dirs if d != homes[2].parent))
        futures.append(manager.mover.get("t", 2).future_dir)
        await asyncio.sleep(0.01)
        assert manager.mover.get("t", 2) is not None
        expected = {p: read_all(plogs[p]) for p in (0, 2)}
        manager.close()
        return expected, futures

    expected, futures = asyncio.run(main())
    assert not any(f.exists() for f in futures)
    again = open_manager(tmp_path / "a", tmp_path / "b", tmp_path / "c")
    assert again.get("t", 1) is None
    assert read_all(again.get("t", 0)) == expected[0]
    assert read_all(again.get("t", 2)) == expected[2]
    leftovers = [p.name for d in again.log_dirs for p in d.iterdir() if p.name.endswith(("-future", "-moved"))]
    assert leftovers == []
    again.close()


async def wait_moved_key(manager: LogManager, key, timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while manager.mover.get(*key) is not None:
        assert asyncio.get_running_loop().time() < deadline, "the move did not finish"
        await asyncio.sleep(0.005)


def test_move_errors(tmp_path):
    async def main():
        manager = open_manager(tmp_path / "a", tmp_path / "b")
        plog = manager.create(*KEY)
        with pytest.raises(KafkaError) as err:
            manager.move(*KEY, tmp_path / "elsewhere")
        assert err.value.code == ErrorCode.LOG_DIR_NOT_FOUND
        with pytest.raises(KafkaError) as err:
            manager.move("t", 1, tmp_path / "a")
        assert err.value.code == ErrorCode.REPLICA_NOT_AVAILABLE
        # Already there: nothing to do.
        manager.move(*KEY, str(plog.dir.parent) + "/")
        assert manager.mover.get(*KEY) is None
        # The destination already holds the partition (a stray copy): refused, nothing touched.
        stray = other_dir(manager, plog) / "t-0"
        stray.mkdir()
        with pytest.raises(KafkaError) as err:
            manager.move(*KEY, other_dir(manager, plog))
        assert err.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        manager.close()

    asyncio.run(main())


def test_leftover_future_and_moved_dirs_on_load(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    manager = open_manager(a, b)
    for p in range(3):
        plog = manager.create("t", p)
        plog.append(bytearray(build_batch([(b"k%d" % p, b"v")], base_timestamp=BASE_TS)))
    homes = {p: manager.get("t", p).dir for p in range(3)}
    data = {p: read_all(manager.get("t", p)) for p in range(3)}
    manager.close()
    other = {p: (b if homes[p].parent == a else a) for p in range(3)}
    # 0: a crash during the copy left a future dir: it goes, the original stays.
    future = other[0] / f"t-0.{'1' * 32}-future"
    future.mkdir()
    (future / "00000000000000000000.log").write_bytes(b"partial")
    # 1: a crash between the switch's renames: the old copy is renamed back.
    moved1 = homes[1].with_name(f"t-1.{'2' * 32}-moved")
    os.rename(homes[1], moved1)
    (other[1] / f"t-1.{'2' * 32}-future").mkdir()
    # 2: a crash after both renames: the old copy goes, the moved one is the log.
    moved2 = homes[2].with_name(f"t-2.{'3' * 32}-moved")
    os.rename(homes[2], moved2)
    shutil.copytree(moved2, other[2] / "t-2")
    again = open_manager(a, b)
    assert again.get("t", 0).dir == homes[0] and not future.exists()
    assert again.get("t", 1).dir == homes[1] and not moved1.exists()
    assert again.get("t", 2).dir == other[2] / "t-2" and not moved2.exists()
    for p in range(3):
        assert read_all(again.get("t", p)) == data[p]
    leftovers = [p.name for d in (a, b) for p in d.iterdir() if p.name.endswith(("-future", "-moved"))]
    assert leftovers == []
    again.close()


_CRASHER = textwrap.dedent('''
    import asyncio, os, signal, sys
    sys.path[:0] = [{repo!r}, {tests!r}]
    from kafkapy.log import LogManager, dir_move
    from logtools import small_config
    from kafkapy.protocol.records import build_batch

    where = sys.argv[1]
    dirs = [{a!r}, {b!r}]
    # mid-copy: never switch, so that the kill lands after the first pass
    dir_move.FINAL_PASS_BYTES = -1 if where == "mid-copy" else 512
    dir_move._CHUNK = 4096
    real_rename = os.rename
    renames = []

    def rename(src, dst):
        real_rename(src, dst)
        renames.append(dst)
        if where == "between-renames" and str(dst).endswith("-moved"):
            os.kill(os.getpid(), signal.SIGKILL)

    dir_move.os.rename = rename

    async def main():
        manager = LogManager(dirs, small_config(segment_bytes=16384, file_delete_delay_ms=0))
        manager.load()
        plog = manager.create("t", 0)
        i = 0

        def append():
            nonlocal i
            plog.append(bytearray(build_batch([(b"k%d" % i, b"v" * 100)], base_timestamp=1_700_000_000_000 + i)))
            print("ack", plog.log_end_offset, flush=True)
            i += 1

        for _ in range(300):
            append()
        plog.flush()
        target = next(d for d in manager.log_dirs if d != plog.dir.parent)
        print("src", plog.dir, flush=True)
        manager.move("t", 0, target)
        move = manager.mover.get("t", 0)
        while True:
            append()
            await asyncio.sleep(0)
            if where == "mid-copy" and move.copied:
                os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
''')


@pytest.mark.parametrize("where", ["mid-copy", "between-renames"])
def test_kill9_during_a_move_keeps_the_original(tmp_path, where):
    a, b = tmp_path / "a", tmp_path / "b"
    script = tmp_path / "crasher.py"
    script.write_text(_CRASHER.format(repo=str(REPO), tests=str(REPO / "tests" / "log"), a=str(a), b=str(b)))
    proc = subprocess.run([sys.executable, str(script), where], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    acked = max(int(line.split()[1]) for line in lines if line.startswith("ack "))
    src = Path(next(line.split()[1] for line in lines if line.startswith("src ")))
    leftovers = [p.name for d in (a, b) for p in d.iterdir() if p.name.endswith(("-future", "-moved"))]
    assert leftovers, "the kill should have interrupted the move"
    manager = open_manager(a, b)
    plog = manager.get(*KEY)
    assert plog.dir == src
    # Without fsync a kill -9 loses nothing either: the page cache survives the process.
    assert plog.log_end_offset == acked
    records = read_all(plog)
    assert len(records) > 0
    leftovers = [p.name for d in (a, b) for p in d.iterdir() if p.name.endswith(("-future", "-moved"))]
    assert leftovers == []
    manager.close()
