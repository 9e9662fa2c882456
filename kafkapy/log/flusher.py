"""The background threads that do every fsync, so the event loop never waits on the disk.

Group commit: `request_sync(log, offset)` returns a Future; the sync thread fdatasyncs the
log's files once for every waiter that arrived before the fsync started, then completes
them all. Waiters arriving during an fsync share the next one. All waiters of one log in one
round share one Future, so completing a round costs one cross-thread wake-up of the event loop,
not one per waiter.

Full flushes (indexes too, advancing the recovery point: segment rolls, flush.messages,
flush.ms), checkpoint writes and file deletions run on a second thread, so that flushing
a large rolled segment of one topic never delays the acknowledgements of another.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, Protocol

from .errors import KafkaStorageError


class FlushedLog(Protocol):
    """What the flusher's threads call on a log (PartitionLog is the one kind)."""

    dir: Path

    def _flush_to(self, offset: int) -> None: ...

    def _sync_data(self) -> int: ...

    def _io_failed(self, what: str, exc: BaseException) -> None: ...


class _SyncRound:
    """The waiters of one log for the next fsync: the highest offset they need, one shared Future."""

    __slots__ = ("plog", "max_offset", "future", "waiters")

    def __init__(self, plog: FlushedLog, offset: int, future: Future | None = None, waiters: int = 1):
        self.plog = plog
        self.max_offset = offset
        self.future: Future = future if future is not None else Future()
        self.waiters = waiters

log = logging.getLogger(__name__)

__all__ = ["Flusher"]


class Flusher:
    """Two threads per LogManager (or per standalone PartitionLog) doing all durable writes."""

    def __init__(self, name: str = "kafkapy-log-flusher"):
        self.name = name
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the work thread waits on this one
        self._sync_cond = threading.Condition(lock)
        # True while the sync thread sleeps with nothing to do: only then is a new waiter
        # worth a wake-up (each wake-up costs the event loop a GIL hand-off).
        self._sync_idle = False
        self._sync_waiters: dict[int, _SyncRound] = {}
        self._flush_requests: dict[int, tuple[FlushedLog, int]] = {}
        self._tasks: deque[tuple[Callable[[], object], Future]] = deque()
        self._stopping = False
        self._sync_thread: threading.Thread | None = None
        self._work_thread: threading.Thread | None = None
        self.fsync_rounds = 0  # group-commit rounds done (for tests and benchmarks)
        self.gather = True

    # ---------------------------------------------------------------- requests
    def _start_sync_thread(self) -> None:
        if self._sync_thread is None:
            self._sync_thread = threading.Thread(target=self._run_syncs, name=f"{self.name}-sync",
                                                 daemon=True)
            self._sync_thread.start()

    def _start_work_thread(self) -> None:
        if self._work_thread is None:
            self._work_thread = threading.Thread(target=self._run_work, name=f"{self.name}-work",
                                                 daemon=True)
            self._work_thread.start()

    def request_sync(self, plog: FlushedLog, offset: int) -> Future:
        """A Future completed once everything in `plog` through `offset` is fsynced.

        Callers waiting in the same round get the same Future (its result: the durable offset).
        """
        with self._cond:
            if self._stopping:
                future: Future = Future()
                future.set_exception(KafkaStorageError("log flusher is stopped"))
                return future
            pending = self._sync_waiters.get(id(plog))
            if pending is None:
                pending = self._sync_waiters[id(plog)] = _SyncRound(plog, offset)
            else:
                pending.max_offset = max(pending.max_offset, offset)
                pending.waiters += 1
            self._start_sync_thread()
            if self._sync_idle:
                self._sync_cond.notify()
            return pending.future

    def request_flush(self, plog: FlushedLog, offset: int) -> None:
        """Ask for a full flush of `plog` up to `offset` (exclusive), done in the background."""
        with self._cond:
            if self._stopping:
                return
            previous = self._flush_requests.get(id(plog))
            if previous is None or previous[1] < offset:
                self._flush_requests[id(plog)] = (plog, offset)
            self._start_work_thread()
            self._cond.notify()

    def submit(self, fn: Callable[[], object]) -> Future:
        """Run `fn` on the background work thread; returns its Future."""
        future: Future = Future()
        with self._cond:
            if not self._stopping:
                self._tasks.append((fn, future))
                self._start_work_thread()
                self._cond.notify()
                return future
        # Shutting down: run inline so nothing (checkpoints, deletions) is lost.
        try:
            future.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            future.set_exception(exc)
        return future

    def cancel_waiters(self, plog: FlushedLog, from_offset: int, exc: BaseException) -> None:
        """Fail the pending round if it waits for offsets >= `from_offset` (the log was truncated
        below them); its waiters share one Future, so all of them see the error."""
        with self._cond:
            pending = self._sync_waiters.get(id(plog))
            if pending is None or pending.max_offset < from_offset:
                return
            del self._sync_waiters[id(plog)]
        if not pending.future.done():
            pending.future.set_exception(exc)

    def forget(self, plog: FlushedLog) -> None:
        """Drop pending flushes of a closed log (its waiters are failed)."""
        with self._cond:
            self._flush_requests.pop(id(plog), None)
            pending = self._sync_waiters.pop(id(plog), None)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(KafkaStorageError(f"log {plog.dir.name} was closed"))

    def stop(self) -> None:
        """Finish everything queued, then end both threads."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._sync_cond.notify_all()
            threads = [self._sync_thread, self._work_thread]
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    # ---------------------------------------------------------------- the threads
    def _waiting(self) -> int:
        return sum(pending.waiters for pending in self._sync_waiters.values())

    def _run_syncs(self) -> None:
        fsync_s = 0.0002  # running estimate of one group fsync
        while True:
            with self._sync_cond:
                while not (self._sync_waiters or self._stopping):
                    self._sync_idle = True
                    self._sync_cond.wait()
                self._sync_idle = False
                if not self._sync_waiters:
                    return
                # Gather window: while producers keep arriving (the event loop is working
                # through a burst of appends), wait a little so they share this fsync rather
                # than the next. Nobody wakes us meanwhile; we look again after each step.
                # Bounded by one fsync time, so latency at most doubles.
                deadline = time.monotonic() + (fsync_s if self.gather else 0.0)
                step = min(max(fsync_s / 4, 0.00002), 0.0005)
                count = self._waiting()
                while not self._stopping:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._sync_cond.wait(min(step, remaining))
                    now_waiting = self._waiting()
                    if now_waiting == count:
                        break
                    count = now_waiting
                waiters, self._sync_waiters = self._sync_waiters, {}
            started = time.monotonic()
            for pending in waiters.values():
                self._group_sync(pending)
            fsync_s = 0.8 * fsync_s + 0.2 * min(time.monotonic() - started, 0.05)

    def _run_work(self) -> None:
        while True:
            with self._cond:
                while not (self._flush_requests or self._tasks or self._stopping):
                    self._cond.wait()
                if not (self._flush_requests or self._tasks):
                    return
                flushes, self._flush_requests = self._flush_requests, {}
                tasks, self._tasks = self._tasks, deque()
            for plog, offset in flushes.values():
                try:
                    plog._flush_to(offset)
                except Exception as exc:
                    log.error("background flush of %s failed: %s", plog.dir.name, exc)
                    plog._io_failed(f"flush of {plog.dir.name}", exc)
            for fn, future in tasks:
                # a caller that gave up may have cancelled its Future: the work still runs (a
                # checkpoint or a deletion must not be lost), and the thread must live on
                if not future.set_running_or_notify_cancel():
                    try:
                        fn()
                    except Exception:
                        log.exception("flusher task %s failed", getattr(fn, "__name__", fn))
                    continue
                try:
                    future.set_result(fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    log.exception("flusher task %s failed", getattr(fn, "__name__", fn))
                    future.set_exception(exc)

    def _group_sync(self, pending: _SyncRound) -> None:
        plog = pending.plog
        try:
            durable = plog._sync_data()
        except Exception as exc:
            log.error("fsync of %s failed: %s", plog.dir.name, exc)
            plog._io_failed(f"fsync of {plog.dir.name}", exc)
            if not pending.future.done():
                pending.future.set_exception(KafkaStorageError(f"fsync of {plog.dir.name} failed: {exc}"))
            return
        self.fsync_rounds += 1
        if pending.max_offset < durable:
            if not pending.future.done():
                pending.future.set_result(durable)
            return
        # Not covered (the log was truncated meanwhile and re-grown): wait for a later round.
        with self._cond:
            later = self._sync_waiters.get(id(plog))
            if later is None:
                self._sync_waiters[id(plog)] = pending
            else:
                later.max_offset = max(later.max_offset, pending.max_offset)
                later.waiters += pending.waiters
                later.future.add_done_callback(lambda done, mine=pending.future: _copy_outcome(done, mine))


def _copy_outcome(source: Future, target: Future) -> None:
    if target.done():
        return
    if source.exception() is not None:
        target.set_exception(source.exception())
    else:
        target.set_result(source.result())
