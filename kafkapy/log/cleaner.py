"""The log cleaner: compaction of partitions whose cleanup.policy contains "compact".

As in Kafka 3.7 (LogCleaner, LogCleanerManager, Cleaner), a log's closed segments are split
at its cleaner checkpoint into a clean section (already compacted) and a dirty section. The
cleanable range ends at the first uncleanable offset: the active segment, the last stable
offset (no open transaction is ever cleaned) and the first segment newer than
min.compaction.lag.ms. A log is cleaned when its dirty bytes are at least
min.cleanable.dirty.ratio of the cleanable bytes, or when a dirty segment's first batch is
older than max.compaction.lag.ms.

A cleaning builds an offset map (key -> latest offset) over the dirty section, skipping the
batches of aborted transactions, up to log.cleaner.dedupe.buffer.size / threads * load factor
/ 24 keys (Kafka's map entry size; a full map ends this cleaning early, the rest waits for the
next one). Then every segment from the log start up to the map's end is rewritten with
Kafka's record filter:
- a record stays if it is the latest of its key (or past the map's end); keyless records go;
- a batch of an aborted transaction goes whole; its abort marker stays until a cleaning has
  seen none of the transaction's batches, a commit marker until none of its batches are left;
- a tombstone or such an emptied transaction's marker is first kept and its batch gets a
  delete horizon (now + delete.retention.ms, in the base timestamp with the delete-horizon
  attribute, Kafka 3.x's KIP-534); a cleaning after the horizon removes it;
- the batch holding a producer's last data offset (or its last marker when it has no data)
  is kept, emptied if need be, so the producer state survives a reload; so is the last
  batch of each segment (kafkapy's segments end where the next begins).
Offsets never change; a fetch into a removed range starts at the next batch.

The checkpoint is Kafka's `cleaner-offset-checkpoint` file in each log dir ("topic partition
offset" lines), written atomically after each cleaning and at shutdown, read at start-up;
entries go with their partitions, and truncation below an entry lowers it. An entry above
the log end or below the log start falls back to the log start, as in Kafka.

The decoding and filtering (the Python-heavy part) runs in a worker process by default, so
the broker's event loop never waits for the GIL, at the lowest CPU priority Linux offers (own
session and autogroup at nice 19, SCHED_IDLE), so it never waits for the CPU either; the
broker's cleaner thread only collects what a cleaning needs, and swaps the cleaned files in
(with worker="thread" the filtering runs in that thread, sleeping 2 ms every 2 ms of work). Each segment is written by the worker
to `<base>.log.cleaned`, synced; the thread renames it `<base>.log.swap` (the commit point:
recovery completes a swap, discards a .cleaned), renames the original `.deleted` (readers
holding a FileSlice keep reading it until its delayed deletion) and the swap file becomes
`<base>.log` with rebuilt indexes.

Not done: segments are not merged (Kafka groups small cleaned segments up to segment.bytes),
so a cleaned log keeps its number of segments; log.cleaner.threads > 1 runs one cleaner; the
log.cleaner.* settings are read at start-up only (Kafka can change them at runtime).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from .checkpoints import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from .config import CleanerConfig  # still importable from here

if TYPE_CHECKING:
    from .compaction import CleaningJob, CleaningOutcome
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "CleanerConfig", "LogCleaner"]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
# What compaction.py holds, still importable from here (loaded on first use, PEP 562).
_COMPACTION_NAMES = frozenset({"CleanResult", "CleaningJob", "CleaningOutcome", "SegmentFile", "SegmentOutcome",
                               "clean_log", "run_cleaning"})


def __getattr__(name: str):
    if name in _COMPACTION_NAMES:
        from . import compaction

        return getattr(compaction, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ------------------------------------------------------------------ checkpoints
def read_cleaner_checkpoint(log_dir: Path) -> dict[tuple[str, int], int]:
    """The log dir's cleaner-offset-checkpoint; empty when missing or unreadable (then every
    compacted log is dirty from its start, as in Kafka)."""
    try:
        return read_offset_checkpoint(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT)
    except (CheckpointError, OSError) as exc:
        log.warning("ignoring unreadable cleaner checkpoint: %s", exc)
        return {}


class LogCleaner:
    """One background thread compacting every compactable log every log.cleaner.backoff.ms,
    the filtering done in a worker process (`worker="process"`) or in the thread itself
    (`worker="thread"`, with short sleeps so request handling keeps the GIL)."""

    def __init__(self, logs: Callable[[], Iterable[PartitionLog]], backoff_ms: int = 15000,
                 name: str = "kafkapy-log-cleaner", *, config: CleanerConfig | None = None,
                 all_logs: Callable[[], dict] | None = None, log_dirs: Iterable[Path] = (),
                 worker: str | None = None):
        self._logs = logs
        self.config = config or CleanerConfig(backoff_ms=backoff_ms)
        self.backoff_ms = self.config.backoff_ms
        self.name = name
        self._all_logs = all_logs
        self.log_dirs = [Path(d) for d in log_dirs]
        self.worker = worker or os.environ.get("KAFKAPY_CLEANER_WORKER", "process")
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Partitions with a checkpoint entry, and what each dir's file holds now.
        self._recorded: set[tuple[str, int]] = set()
        self._written: dict[Path, dict[tuple[str, int], int]] = {}
        self._checkpoint_lock = threading.Lock()

    # -------------------------------------------------------------- checkpoints
    def load_checkpoint(self, log_dir: Path) -> dict[tuple[str, int], int]:
        offsets = read_cleaner_checkpoint(log_dir)
        self._written[Path(log_dir)] = dict(offsets)
        self._recorded.update(offsets)
        return offsets

    def forget(self, topic: str, partition: int) -> None:
        """The partition was deleted: its entry goes from the file."""
        self._recorded.discard((topic, partition))
        self.write_checkpoints()

    def write_checkpoints(self) -> None:
        """Rewrite every log dir's cleaner-offset-checkpoint whose content changed."""
        if self._all_logs is None:
            return
        with self._checkpoint_lock:
            logs = self._all_logs()
            wanted: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
            for key in self._recorded:
                plog = logs.get(key)
                if plog is None or getattr(plog, "cleaner_checkpoint", None) is None:
                    continue
                wanted.setdefault(plog.dir.parent, {})[key] = plog.cleaner_checkpoint
            for log_dir, offsets in wanted.items():
                if self._written.get(log_dir, {}) == offsets:
                    continue
                try:
                    write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, offsets)
                    self._written[log_dir] = offsets
                except OSError as exc:
                    log.error("could not write %s in %s: %s", CLEANER_OFFSET_CHECKPOINT, log_dir, exc)

    # -------------------------------------------------------------- running
    def start(self) -> None:
        if self._thread is None and self.config.enable and self.config.threads > 0:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        pool, self._pool = self._pool, None
        if pool is not None:
            # A cleaning in progress is dropped (as Kafka's shutdown aborts it): its
            # .cleaned file is removed by the waiting thread, or by recovery.
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        self.write_checkpoints()

    @staticmethod
    def _new_pool() -> concurrent.futures.ProcessPoolExecutor:
        import multiprocessing  # only for log.cleaner workers in a process (a few ms of start-up otherwise)

        from .compaction import lower_priority

        return concurrent.futures.ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=lower_priority,
            initargs=(os.getpid(),))

    def _run_job(self, job: CleaningJob) -> CleaningOutcome | None:
        from .compaction import CleaningAborted, run_cleaning
        from .segment import CLEANED_SUFFIX

        if self.worker != "process":
            return run_cleaning(job)
        if self._stop.is_set():
            raise CleaningAborted("the cleaner is stopping")
        try:
            if self._pool is None:
                self._pool = self._new_pool()
            pool = self._pool
            future = pool.submit(run_cleaning, job)
        except (OSError, ImportError, NotImplementedError) as exc:
            log.warning("cannot start the log cleaner's worker process (%s): cleaning in the "
                        "broker's cleaner thread instead", exc)
            self.worker = "thread"
            self._pool = None
            return run_cleaning(job)
        try:
            return future.result()
        except (concurrent.futures.process.BrokenProcessPool, RuntimeError) as exc:
            for segment in job.segments:  # what a killed worker may have left
                try:
                    os.unlink(segment.path + CLEANED_SUFFIX)
                except OSError:
                    pass
            if self._pool is pool:
                self._pool = None
            raise CleaningAborted(f"the cleaner worker process stopped: {exc}") from exc

    def run_once(self, now_ms: int | None = None) -> int:
        """Clean every log that is due; returns how many were cleaned."""
        from .compaction import clean_log

        cleaned = 0
        yield_every = 0.002 if self.worker != "process" else 0.0
        for plog in list(self._logs()):
            if self._stop.is_set():
                break
            try:
                if clean_log(plog, now_ms, config=self.config, run=self._run_job,
                             yield_every_s=yield_every) is not None:
                    cleaned += 1
                    self._recorded.add((plog.topic, plog.partition))
                    self.write_checkpoints()
            except Exception:  # one bad log must not stop the cleaner
                log.exception("cleaning of %s failed", plog.dir.name)
        # Truncations may have lowered checkpoints since the last write.
        self.write_checkpoints()
        return cleaned

    def _run(self) -> None:
        while not self._stop.wait(self.backoff_ms / 1000):
            self.run_once()
