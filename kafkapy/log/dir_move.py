"""Moving a partition's log to another of the broker's log dirs while it is written (AlterReplicaLogDirs).

Kafka fills a "future" log through a local fetcher; kafkapy copies the files instead, since batches
are stored as they were received and a byte copy needs no per-record work:

1. `<dest>/<topic>-<partition>.<uuid hex>-future` is filled by a worker thread, pass after pass, by
   byte ranges: the first pass copies every segment, each later one what the previous one left (the
   growth of the active segment, new segments, the indexes of segments that became inactive). A
   segment rewritten under the copy (follower truncation, a log cleaner swap) is copied again, a
   deleted one (retention, DeleteRecords) is removed. The log cleaner leaves a moving log alone.
2. Once a pass leaves at most FINAL_PASS_BYTES, the switch runs on the event-loop thread holding the
   log's lock, so that no append (produce, replica fetch), roll, truncation or retention interleaves:
   the rest is copied, then the small files (leader-epoch-checkpoint, partition.metadata, producer
   snapshots, .txnindex); every segment is reopened in the copy (the active one's index entries are
   written there from memory), everything is fsynced and the partition is written in both dirs'
   checkpoints. Then the old dir is renamed `<topic>-<partition>.<uuid hex>-moved`, the future dir
   `<topic>-<partition>`, and the same PartitionLog object switches to the new files, so whatever
   holds it (replica manager, coordinators, fetch sessions) keeps working. The old dir is deleted in
   the background and its files are closed after file.delete.delay.ms (a fetch may still be sending
   from them).

A crash never loses the original (`clean_interrupted_moves`, run by LogManager.load): a `-future` dir
is deleted (the move is dropped and has to be asked for again, where Kafka resumes it), and a `-moved`
dir is deleted when its partition is in a log dir, else renamed back (a crash between the two renames).
A move that fails (e.g. the destination disk is full) is dropped the same way; the log stays where it was.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import re
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .checkpoints import fsync_dir
from .dir_names import FUTURE_SUFFIX, MOVED_SUFFIX
from .errors import KafkaStorageError
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, segment_file_name

if TYPE_CHECKING:
    from .flusher import Flusher
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["FINAL_PASS_BYTES", "FUTURE_SUFFIX", "MOVED_SUFFIX", "LogDirMove", "LogDirMover", "MovedLogs",
           "clean_interrupted_moves"]

# The switch copies what is left on the event-loop thread: this bounds how long appends wait.
FINAL_PASS_BYTES = 4 << 20
_CHUNK = 8 << 20  # a cancellation is noticed between chunks
_SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex)$")
_LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
_NO_COPY_FILE_RANGE = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP)


class _Cancelled(Exception):
    """The move was cancelled while a copy ran."""


class _SourceChanged(Exception):
    """A file to copy is gone or shorter than planned: its segment was deleted or rewritten."""


@dataclass(slots=True)
class _SegmentCopy:
    """How much of one segment is in the future dir."""

    segment: LogSegment  # the object copied: another one at the same base offset is a rewrite
    rewrites: int
    log_bytes: int = 0
    indexes: bool = False


@dataclass(slots=True)
class _Step:
    """One file to copy: bytes [start, end) (end None: the whole file); src None: remove dst."""

    base: int
    src: Path | None
    dst: Path
    start: int = 0
    end: int | None = None
    optional: bool = False  # an index file may be missing (it is rebuilt on first use)


@dataclass(slots=True)
class _Plan:
    steps: list[_Step]
    states: dict[int, _SegmentCopy]  # the copy's state once every step is done
    end_offset: int  # the log end offset the steps bring the copy to
    pending_bytes: int


@dataclass(eq=False)
class LogDirMove:
    """One partition log on its way to another log dir; what DescribeLogDirs reports as the
    future replica."""

    plog: PartitionLog
    log_dir: Path  # the destination, one of the LogManager's log dirs
    future_dir: Path
    id: str
    copied_end_offset: int
    copied: dict[int, _SegmentCopy] = field(default_factory=dict)
    pass_bytes: int = 0  # copied by the running pass (progress)
    cancelled: bool = False
    task: asyncio.Task | None = None
    # Held by every job on the future dir, so that its removal waits for a running copy.
    copy_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def key(self) -> tuple[str, int]:
        return self.plog.topic, self.plog.partition

    @property
    def size(self) -> int:
        """Bytes of records in the future dir so far."""
        return sum(c.log_bytes for c in self.copied.values()) + self.pass_bytes

    @property
    def offset_lag(self) -> int:
        """How far the copy is behind the log end (Kafka's future replica offset lag)."""
        return max(self.plog.log_end_offset - self.copied_end_offset, 0)


class MovedLogs(Protocol):
    """What the mover needs of the partition logs it moves between log dirs (the LogManager's)."""

    flusher: Flusher

    def get(self, topic: str, partition: int) -> PartitionLog | None: ...

    def write_checkpoints(self, background: bool = False, *,
                          also_in: dict[tuple[str, int], Path] | None = None) -> None: ...


class LogDirMover:
    """Moves partition logs between the log dirs of one LogManager: an asyncio task per move,
    file copies on a small thread pool (num.replica.alter.log.dirs.threads)."""

    def __init__(self, manager: MovedLogs, threads: int = 1):
        self._manager = manager
        self._threads = max(threads, 1)
        self._moves: dict[tuple[str, int], LogDirMove] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    # ---------------------------------------------------------------- queries
    def get(self, topic: str, partition: int) -> LogDirMove | None:
        return self._moves.get((topic, partition))

    def moves(self) -> list[LogDirMove]:
        return list(self._moves.values())

    def is_moving(self, plog: PartitionLog) -> bool:
        move = self._moves.get((plog.topic, plog.partition))
        return move is not None and move.plog is plog

    # ---------------------------------------------------------------- control
    def start(self, plog: PartitionLog, log_dir: Path) -> LogDirMove:
        """Start moving `plog` into `log_dir` (another of the log dirs); needs a running event loop."""
        key = (plog.topic, plog.partition)
        if self._closed:
            raise KafkaStorageError("the log manager is closed")
        if key in self._moves:
            raise ValueError(f"{plog.dir.name} is already moving")
        final_dir = log_dir / plog.dir.name
        if final_dir.exists():
            raise KafkaStorageError(f"cannot move {plog.dir.name}: {final_dir} already exists")
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="kafkapy-log-dir-move")
        move_id = uuid.uuid4().hex
        move = LogDirMove(plog, log_dir, log_dir / f"{plog.dir.name}.{move_id}{FUTURE_SUFFIX}", move_id,
                          copied_end_offset=plog.log_start_offset)
        self._moves[key] = move
        move.task = loop.create_task(self._run(move), name=f"move {plog.dir.name} to {log_dir}")
        log.info("moving partition %s-%d from %s to %s (%d bytes)", plog.topic, plog.partition,
                 plog.dir.parent, log_dir, plog.size_in_bytes())
        return move

    def cancel(self, topic: str, partition: int, reason: str) -> None:
        """Stop moving the partition (if it is moving) and delete its future dir; the log stays."""
        move = self._moves.pop((topic, partition), None)
        if move is None:
            return
        move.cancelled = True
        if move.task is not None and move.task is not _current_task():
            move.task.cancel()
        log.info("move of partition %s-%d to %s cancelled: %s", topic, partition, move.log_dir, reason)
        self._discard(move)

    def close(self) -> None:
        """Cancel every move (the logs stay where they are) and wait for the copy threads."""
        self._closed = True
        for topic, partition in list(self._moves):
            self.cancel(topic, partition, "shutting down")
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    def _discard(self, move: LogDirMove) -> None:
        def remove() -> None:
            with move.copy_lock:
                shutil.rmtree(move.future_dir, ignore_errors=True)

        try:
            self._executor.submit(remove)
        except RuntimeError:  # the pool is shut down: nothing copies any more
            remove()

    # ---------------------------------------------------------------- the move
    async def _run(self, move: LogDirMove) -> None:
        loop = asyncio.get_running_loop()
        plog = move.plog
        try:
            await loop.run_in_executor(self._executor, self._job, move, self._create_future_dir, move)
            while True:
                with plog._lock:
                    plan = self._plan_locked(move)
                if plan.pending_bytes <= FINAL_PASS_BYTES:
                    self._switch(move)
                    return
                changed = await loop.run_in_executor(self._executor, self._job, move, self._copy, move,
                                                     plan.steps)
                if move.cancelled:
                    return
                self._apply(move, plan, changed)
        except (_Cancelled, asyncio.CancelledError):
            if self._moves.get(move.key) is move:  # the task itself was cancelled (loop shutdown)
                self.cancel(*move.key, "task cancelled")
        except Exception as exc:
            if self._moves.get(move.key) is move:
                log.error("moving partition %s-%d to %s failed, it stays in %s: %s", plog.topic,
                          plog.partition, move.log_dir, plog.dir.parent, exc,
                          exc_info=not isinstance(exc, OSError))
                self.cancel(*move.key, "failed")

    @staticmethod
    def _job(move: LogDirMove, fn, *args):
        """Run `fn` in a worker thread unless the move was cancelled."""
        with move.copy_lock:
            if move.cancelled:
                raise _Cancelled()
            return fn(*args)

    @staticmethod
    def _create_future_dir(move: LogDirMove) -> None:
        move.future_dir.mkdir()
        fsync_dir(move.log_dir)

    def _plan_locked(self, move: LogDirMove) -> _Plan:
        """What a pass has to copy to bring the future dir up to the log (caller holds its lock)."""
        plog = move.plog
        steps: list[_Step] = []
        states: dict[int, _SegmentCopy] = {}
        pending = 0
        dst_dir = move.future_dir
        for segment in plog._segments:
            base = segment.base_offset
            size = segment.size
            done = move.copied.get(base)
            if done is None or done.segment is not segment or done.rewrites != segment.rewrites:
                done = None  # new or rewritten: copied from scratch
            state = _SegmentCopy(segment, segment.rewrites, done.log_bytes if done else 0,
                                 done.indexes if done else False)
            name = segment_file_name(base, LOG_SUFFIX)
            if done is None or size > state.log_bytes:
                steps.append(_Step(base, segment.path(LOG_SUFFIX), dst_dir / name, state.log_bytes, size))
                pending += size - state.log_bytes
                state.log_bytes = size
            if not segment.offset_index.active and not state.indexes:
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    steps.append(_Step(base, segment.path(suffix), dst_dir / segment_file_name(base, suffix),
                                       optional=True))
                state.indexes = True
            states[base] = state
        for base in move.copied.keys() - states.keys():
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                steps.append(_Step(base, None, dst_dir / segment_file_name(base, suffix)))
        return _Plan(steps, states, plog.log_end_offset, pending)

    def _copy(self, move: LogDirMove, steps: list[_Step]) -> set[int]:
        """Run `steps`; returns the base offsets of segments that changed under the copy."""
        changed: set[int] = set()
        for step in steps:
            if step.base in changed:
                continue
            if step.src is None:
                step.dst.unlink(missing_ok=True)
                continue
            try:
                _copy_file(move, step)
            except _SourceChanged:
                changed.add(step.base)
        return changed

    @staticmethod
    def _apply(move: LogDirMove, plan: _Plan, changed: set[int]) -> None:
        for base in changed:
            plan.states.pop(base, None)  # copied again by the next pass
        move.copied = plan.states
        move.pass_bytes = 0
        if not changed:
            move.copied_end_offset = plan.end_offset

    def _switch(self, move: LogDirMove) -> None:
        """Copy the rest and switch the log to the copy (event-loop thread: no append interleaves)."""
        plog = move.plog
        manager = self._manager
        key = move.key
        old_dir = plog.dir
        final_dir = move.log_dir / old_dir.name
        moved_dir = old_dir.with_name(f"{old_dir.name}.{move.id}{MOVED_SUFFIX}")
        started = time.monotonic()
        with move.copy_lock, plog._lock:
            if move.cancelled:
                raise _Cancelled()
            if plog._closed or plog.is_offline or manager.get(*key) is not plog:
                raise KafkaStorageError(f"{old_dir.name} was closed or went offline")
            plan = self._plan_locked(move)
            if self._copy(move, plan.steps):
                raise KafkaStorageError(f"a segment of {old_dir.name} changed under the log's lock")
            self._apply(move, plan, set())
            _copy_small_files(move, old_dir)
            segments: list[LogSegment] = []
            try:
                for segment in plog._segments:
                    segments.append(segment.reopen_copy(move.future_dir, plog.config.segment_index_bytes))
                fsync_dir(move.future_dir)
                # Both copies are complete: whichever a crash leaves keeps its offsets checkpoint.
                manager.write_checkpoints(also_in={key: move.log_dir})
                plog.moved_from.add(old_dir)
                os.rename(old_dir, moved_dir)
                try:
                    fsync_dir(old_dir.parent)
                    os.rename(move.future_dir, final_dir)
                except BaseException:
                    os.rename(moved_dir, old_dir)
                    raise
            except BaseException:
                for segment in segments:
                    segment.close()
                raise
            # The commit point is passed: from here the log lives in final_dir whatever happens.
            for segment in segments:
                segment.dir_renamed(final_dir)
            old_segments = plog._switch_dir_locked(final_dir, segments)
            del self._moves[key]
        try:
            fsync_dir(final_dir.parent)
        except OSError as exc:
            log.error("could not sync %s after moving %s into it: %s", final_dir.parent, final_dir.name, exc)
        manager.write_checkpoints()
        held_ms = (time.monotonic() - started) * 1000
        manager.flusher.submit(lambda: shutil.rmtree(moved_dir, ignore_errors=True))
        # A fetch may still be sending from the old files (as after a segment deletion).
        delay = plog.config.file_delete_delay_ms / 1000
        asyncio.get_running_loop().call_later(delay, _close_segments, old_segments)
        log.info("moved partition %s-%d from %s to %s (%d bytes, offsets [%d, %d); appends waited %.1f ms "
                 "for the switch)", plog.topic, plog.partition, old_dir.parent, move.log_dir, plog.size_in_bytes(),
                 plog.log_start_offset, plog.log_end_offset, held_ms)


def _current_task() -> asyncio.Task | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def _close_segments(segments: list[LogSegment]) -> None:
    for segment in segments:
        try:
            segment.close()
        except OSError as exc:
            log.warning("closing %s after its move failed: %s", segment, exc)


def _copy_small_files(move: LogDirMove, src_dir: Path) -> None:
    """Everything but segment files and leftovers: leader-epoch-checkpoint, partition.metadata,
    producer snapshots, .txnindex files."""
    for name in os.listdir(src_dir):
        if _SEGMENT_FILE.match(name) or name.endswith(_LEFTOVER_SUFFIXES):
            continue
        path = src_dir / name
        if path.is_file():
            _copy_file(move, _Step(-1, path, move.future_dir / name))


def _copy_file(move: LogDirMove, step: _Step) -> None:
    try:
        src = os.open(step.src, os.O_RDONLY)
    except FileNotFoundError:
        if step.optional:
            return
        raise _SourceChanged() from None
    try:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if step.start == 0 else 0)
        dst = os.open(step.dst, flags, 0o644)
        try:
            end = os.fstat(src).st_size if step.end is None else step.end
            position = step.start
            counted = step.end is not None
            while position < end:
                if move.cancelled:
                    raise _Cancelled()
                n = _copy_range(src, dst, position, min(_CHUNK, end - position))
                if n == 0:
                    raise _SourceChanged()
                position += n
                if counted:
                    move.pass_bytes += n
            os.ftruncate(dst, end)
            os.fdatasync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_range(src: int, dst: int, position: int, count: int) -> int:
    """Copy up to `count` bytes at `position` of `src` to the same position of `dst` in the
    kernel where it can; returns how many (0 at the end of `src`)."""
    try:
        return os.copy_file_range(src, dst, count, position, position)
    except OSError as exc:
        if exc.errno not in _NO_COPY_FILE_RANGE:
            raise
    data = os.pread(src, count, position)
    view = memoryview(data)
    offset = position
    while view:
        written = os.pwrite(dst, view, offset)
        view = view[written:]
        offset += written
    return len(data)


def clean_interrupted_moves(log_dirs: list[Path]) -> None:
    """At start-up, before logs are loaded: drop the future dirs of moves a crash interrupted, and
    resolve a crash between the switch's two renames (see the module docstring)."""
    moved: list[Path] = []
    live: set[str] = set()
    for log_dir in log_dirs:
        try:
            names = os.listdir(log_dir)
        except FileNotFoundError:
            continue
        for name in names:
            path = log_dir / name
            if not path.is_dir():
                continue
            if name.endswith(FUTURE_SUFFIX):
                log.warning("removing %s, left by a move between log dirs that did not finish", path)
                shutil.rmtree(path, ignore_errors=True)
            elif name.endswith(MOVED_SUFFIX):
                moved.append(path)
            else:
                live.add(name)
    for path in moved:
        name = path.name.rpartition(".")[0]
        if name in live:
            log.info("removing %s, the old copy of a partition moved to another log dir", path)
            shutil.rmtree(path, ignore_errors=True)
        else:
            log.warning("restoring %s as %s: a move between log dirs was interrupted before its end", path, name)
            os.rename(path, path.with_name(name))
            fsync_dir(path.parent)
            live.add(name)
