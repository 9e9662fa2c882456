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
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from kafkapy.protocol.records import (
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    build_batch,
    iter_batch_headers,
    iter_records,
)

from .checkpoints import CheckpointError, fsync_dir, read_offset_checkpoint, write_offset_checkpoint
from .segment import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, LogSegment

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "CleanResult", "CleanerConfig", "CleaningJob", "LogCleaner",
           "clean_log", "run_cleaning"]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
OFFSET_MAP_ENTRY_BYTES = 24  # Kafka's SkimpyOffsetMap: a 16-byte MD5 of the key + an 8-byte offset
_ABORT, _COMMIT = 0, 1
_CONTROL_TYPE = struct.Struct(">h")
_parent_pid: int | None = None  # in the worker process: the broker's pid


@dataclass(slots=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings."""

    enable: bool = True
    threads: int = 1
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = float("inf")

    @property
    def max_map_entries(self) -> int:
        per_thread = min(self.dedupe_buffer_size // max(self.threads, 1), 2**31 - 1)
        return max(int(per_thread // OFFSET_MAP_ENTRY_BYTES * self.io_buffer_load_factor), 1)


@dataclass(slots=True)
class CleanResult:
    """What one cleaning of one log did."""

    segments_rewritten: int
    records_removed: int
    bytes_before: int
    bytes_after: int
    cleaned_up_to: int  # the new cleaner checkpoint


# ------------------------------------------------------------------ the work (any process)
@dataclass(slots=True)
class SegmentFile:
    base_offset: int
    path: str
    size: int
    next_offset: int


@dataclass(slots=True)
class CleaningJob:
    """Everything the filtering needs, picklable so it runs in a worker process."""

    name: str
    segments: list[SegmentFile]  # closed segments from the log start to the cleanable end
    first_dirty: int
    aborted: list[tuple[int, int, int]]  # (producer id, first offset, marker offset), by first offset
    last_records: dict[int, tuple[int, int]]  # producer id -> (last data offset or -1, epoch)
    now_ms: int
    delete_retention_ms: int
    max_map_entries: int
    io_max_bytes_per_second: float = float("inf")
    yield_every_s: float = 0.0  # in a thread: sleep this long after each slice of this much work


@dataclass(slots=True)
class SegmentOutcome:
    base_offset: int
    size_before: int
    size_after: int
    records_removed: int
    cleaned_path: str | None  # None: unchanged
    removed_abort_markers: list[int] = field(default_factory=list)  # offsets of dropped ABORT markers


@dataclass(slots=True)
class CleaningOutcome:
    end_offset: int  # the new checkpoint: one past the offset map's last offset
    segments: list[SegmentOutcome]


class _CleaningAborted(Exception):
    """The log changed under the cleaner (retention, truncation, close): try again later."""


class _Pacer:
    """log.cleaner.io.max.bytes.per.second (Kafka's Throttler), and in a thread, short sleeps
    so that the cleaner gives the GIL back to the event loop."""

    clock = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    def __init__(self, bytes_per_second: float, yield_every_s: float):
        self.rate = bytes_per_second
        self.yield_every = yield_every_s
        self.start = self.clock()
        self.done = 0
        self.slice_start = self.start
        self.ticks = 0

    def account(self, nbytes: int) -> None:
        self.done += nbytes
        if self.rate != float("inf") and self.rate > 0:
            ahead = self.done / self.rate - (self.clock() - self.start)
            if ahead > 0.005:
                self.sleep(ahead)
        self.tick()

    def tick(self) -> None:
        if _parent_pid is not None:
            self.ticks += 1
            if self.ticks % 256 == 0 and os.getppid() != _parent_pid:
                # The broker is gone (its own session no longer takes this worker down with
                # it): stop at once; recovery discards a half-written .cleaned file.
                os._exit(1)
        if self.yield_every:
            now = self.clock()
            if now - self.slice_start >= self.yield_every:
                self.sleep(self.yield_every)
                self.slice_start = self.clock()


def _read(path: str, size: int, pacer: _Pacer) -> tuple[bytes, list[BatchHeader]]:
    try:
        with open(path, "rb", buffering=0) as f:
            data = f.read(size)
    except OSError as exc:
        raise _CleaningAborted(f"cannot read {path}: {exc}") from exc
    if len(data) != size:
        raise _CleaningAborted(f"{path} shrank while being read")
    headers = []
    position = 0
    for header in iter_batch_headers(data, validate=False):
        header.position = position
        position += header.size
        headers.append(header)
    pacer.account(size)
    return data, headers


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata: which batches belong to aborted transactions, and
    whether a marker may go (no batch of its transaction was seen in this pass)."""

    __slots__ = ("pending", "ongoing_aborted", "ongoing_committed")

    def __init__(self, aborted: list[tuple[int, int, int]]):
        self.pending = deque(aborted)
        self.ongoing_aborted: dict[int, list] = {}  # pid -> [marker offset, batch seen]
        self.ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        pending = self.pending
        while pending and pending[0][1] <= offset:
            pid, _, marker = pending.popleft()
            self.ongoing_aborted.setdefault(pid, [marker, False])

    def on_batch(self, header: BatchHeader) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        entry = self.ongoing_aborted.get(header.producer_id)
        if entry is not None:
            entry[1] = True
            return True
        self.ongoing_committed.add(header.producer_id)
        return False

    def on_control(self, header: BatchHeader, kind: int | None) -> bool:
        """True when the marker may be discarded (after its delete horizon)."""
        self._consume_up_to(header.last_offset)
        if kind is None:
            return True  # an emptied control batch was cleaned already
        pid = header.producer_id
        if kind == _ABORT:
            entry = self.ongoing_aborted.pop(pid, None)
            return not (entry is not None and entry[1])
        if kind == _COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False


def _control_kind(data: bytes, header: BatchHeader) -> int | None:
    for record in iter_records(data, header, max_size=1 << 20):
        key = record.key
        if key is None or len(key) < 4:
            return -1
        return _CONTROL_TYPE.unpack_from(key, 2)[0]
    return None


def _build_offset_map(job: CleaningJob, pacer: _Pacer) -> tuple[dict[bytes, int], int]:
    """Key -> latest offset over the dirty section, and the map's last offset (-1: nothing)."""
    latest: dict[bytes, int] = {}
    last = -1
    txns = _TxnTracker([a for a in job.aborted if a[2] >= job.first_dirty])
    first_dirty = job.first_dirty
    full = False
    for segment in job.segments:
        if segment.next_offset <= first_dirty:
            continue
        data, headers = _read(segment.path, segment.size, pacer)
        for header in headers:
            if header.last_offset < first_dirty:
                continue
            if header.is_control:
                txns.on_control(header, _control_kind(data, header))
            elif not txns.on_batch(header):
                for record in iter_records(data, header):
                    if record.key is not None and record.offset >= first_dirty:
                        latest[record.key] = record.offset
            last = header.last_offset
            if len(latest) >= job.max_map_entries:
                full = True
                break
            pacer.tick()
        if full:
            log.info("offset map of %s full (%d keys): cleaning up to offset %d", job.name, len(latest), last)
            break
        last = segment.next_offset - 1
    return latest, last


def _filter_segment(job: CleaningJob, data: bytes, headers: list[BatchHeader], latest: dict[bytes, int],
                    map_end: int, txns: _TxnTracker, pacer: _Pacer) -> tuple[list, int, list[int], bool]:
    """Kafka's cleanInto record filter over one segment: (parts, records removed, dropped
    abort marker offsets, changed)."""
    parts = []
    removed = 0
    dropped_aborts: list[int] = []
    changed = False
    now = job.now_ms
    last_index = len(headers) - 1
    for i, header in enumerate(headers):
        pacer.tick()
        has_horizon = bool(header.attributes & DELETE_HORIZON_MASK)
        horizon = header.base_timestamp if has_horizon else None
        kind = None
        if header.is_control:
            kind = _control_kind(data, header)
            can_discard = txns.on_control(header, kind)
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = discard_records = txns.on_batch(header)
        retain_empty = False
        if header.producer_id >= 0:
            last_record = job.last_records.get(header.producer_id)
            if last_record is not None:
                last_data, epoch = last_record
                retain_empty = header.last_offset == last_data if last_data >= 0 else \
                    header.is_control and header.producer_epoch == epoch
        segment_end = i == last_index and not retain_empty
        records = list(iter_records(data, header))
        if discard_records:
            kept = []
        elif header.is_control:
            kept = records
        else:
            kept = []
            for record in records:
                key = record.key
                if key is None:
                    continue
                if record.offset > map_end:
                    kept.append(record)
                    continue
                if record.offset < latest.get(key, -1):
                    continue
                if record.value is None and horizon is not None and now >= horizon:
                    continue
                kept.append(record)
        needs_horizon = horizon is None and (
            (header.is_control and can_discard) or any(r.value is None for r in kept))
        if len(kept) == len(records) and not needs_horizon and (
                kept or retain_empty or (segment_end and header.producer_id < 0)):
            parts.append(data[header.position:header.position + header.size])
            continue
        # (an empty batch goes unless it is the producer's last or a segment's end filler,
        # Kafka's DELETE_EMPTY)
        changed = True
        removed += len(records) - len(kept)
        if not kept and header.is_control and kind == _ABORT:
            dropped_aborts.append(header.base_offset)
        if not kept and not retain_empty:
            if segment_end:
                # Kept only so that the segment still ends where the next begins: an empty
                # batch of no producer, which neither the producer state nor a later
                # cleaning's transaction tracking will mistake for the producer's.
                parts.append(build_batch(
                    [], base_offset=header.base_offset, base_timestamp=header.base_timestamp,
                    attributes=header.attributes & TIMESTAMP_TYPE_MASK,
                    partition_leader_epoch=header.partition_leader_epoch,
                    max_timestamp=header.max_timestamp, last_offset_delta=header.last_offset_delta))
            continue
        attributes = header.attributes & ~COMPRESSION_MASK
        base_timestamp = header.base_timestamp
        if needs_horizon and kept:
            attributes |= DELETE_HORIZON_MASK
            base_timestamp = now + job.delete_retention_ms
        parts.append(build_batch(
            kept, base_offset=header.base_offset, base_timestamp=base_timestamp,
            attributes=attributes, compression=header.compression,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, partition_leader_epoch=header.partition_leader_epoch,
            max_timestamp=header.max_timestamp, last_offset_delta=header.last_offset_delta))
    return parts, removed, dropped_aborts, changed


def _write_file(path: str, parts: list, pacer: _Pacer) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    size = 0
    try:
        for part in parts:
            view = memoryview(part)
            size += len(view)
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    pacer.account(size)
    return size


def run_cleaning(job: CleaningJob) -> CleaningOutcome | None:
    """Build the offset map and write the cleaned segments (`<base>.log.cleaned`); runs in
    the worker process (or the cleaner thread). None when the dirty section is empty."""
    pacer = _Pacer(job.io_max_bytes_per_second, job.yield_every_s)
    latest, map_end = _build_offset_map(job, pacer)
    if map_end < job.first_dirty:
        return None
    end_offset = map_end + 1
    txns = _TxnTracker(job.aborted)
    outcomes = []
    written: list[str] = []
    try:
        for segment in job.segments:
            if segment.base_offset >= end_offset:
                break
            data, headers = _read(segment.path, segment.size, pacer)
            parts, removed, aborts, changed = _filter_segment(job, data, headers, latest, map_end, txns, pacer)
            if not changed:
                outcomes.append(SegmentOutcome(segment.base_offset, segment.size, segment.size, 0, None))
                continue
            cleaned = segment.path + CLEANED_SUFFIX
            written.append(cleaned)
            size = _write_file(cleaned, parts, pacer)
            outcomes.append(SegmentOutcome(segment.base_offset, segment.size, size, removed, cleaned, aborts))
    except BaseException:
        for path in written:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise
    return CleaningOutcome(end_offset, outcomes)


# ------------------------------------------------------------------ the broker side
def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def clean_log(plog: PartitionLog, now_ms: int | None = None, *, config: CleanerConfig | None = None,
              run: Callable[[CleaningJob], CleaningOutcome | None] = run_cleaning,
              yield_every_s: float = 0.0) -> CleanResult | None:
    """Compact `plog` once if it is due; None when there was nothing (allowed) to do.
    `run` does the filtering (run_cleaning here, or in a worker process)."""
    log_config = plog.config
    if not log_config.compact_enabled or plog.is_offline or plog._closed:
        return None
    cleaner_config = config or CleanerConfig()
    now_ms = _now_ms() if now_ms is None else now_ms
    with plog._lock:
        closed = plog._segments[:-1]
        log_start = plog._log_start_offset
        uncleanable = min(plog.last_stable_offset, plog._active.base_offset)
        checkpoint = plog.cleaner_checkpoint
        if checkpoint < log_start or checkpoint > plog._log_end_offset:
            # Kafka's cleanableOffsets: a checkpoint outside the log restarts at its start.
            if checkpoint > plog._log_end_offset:
                log.warning("cleaner checkpoint %d of %s is above its log end offset %d: "
                            "resetting it to the log start offset %d", checkpoint, plog.dir.name,
                            plog._log_end_offset, log_start)
            plog.cleaner_checkpoint = checkpoint = log_start
        first_dirty = checkpoint
        aborted = [(e.producer_id, e.first_offset, e.last_offset) for e in plog.txn_index.entries()
                   if e.first_offset < uncleanable]
        last_records = {pid: (entry.last_data_offset, entry.producer_epoch)
                        for pid, entry in plog.producer_state.active_producers().items()}
    aborted.sort(key=lambda a: a[1])
    # The cleanable range: closed segments below the first uncleanable offset and outside
    # min.compaction.lag.ms; the dirty section is its part at or after the checkpoint.
    clean_bytes = dirty_bytes = 0
    end = 0
    overdue = False
    for i, segment in enumerate(closed):
        if segment.next_offset <= first_dirty:
            clean_bytes += segment.size
            end = i + 1
            continue
        if segment.next_offset > uncleanable:
            break
        if log_config.min_compaction_lag_ms > 0 \
                and now_ms - segment.largest_timestamp() < log_config.min_compaction_lag_ms:
            break
        first_ts = segment.first_batch_timestamp()
        if first_ts >= 0 and now_ms - first_ts > log_config.max_compaction_lag_ms:
            overdue = True
        dirty_bytes += segment.size
        end = i + 1
    if dirty_bytes == 0:
        return None
    ratio = dirty_bytes / (clean_bytes + dirty_bytes)
    if ratio < log_config.min_cleanable_dirty_ratio and not overdue:
        return None
    to_clean = closed[:end]
    job = CleaningJob(
        name=plog.dir.name,
        segments=[SegmentFile(s.base_offset, str(s.path(LOG_SUFFIX)), s.size, s.next_offset) for s in to_clean],
        first_dirty=first_dirty, aborted=aborted, last_records=last_records, now_ms=now_ms,
        delete_retention_ms=log_config.delete_retention_ms, max_map_entries=cleaner_config.max_map_entries,
        io_max_bytes_per_second=cleaner_config.io_max_bytes_per_second, yield_every_s=yield_every_s)
    try:
        outcome = run(job)
        if outcome is None:
            return None
        return _apply(plog, to_clean, outcome)
    except _CleaningAborted as exc:
        log.info("cleaning of %s aborted, retried later: %s", plog.dir.name, exc)
        return None


def _apply(plog: PartitionLog, segments: list[LogSegment], outcome: CleaningOutcome) -> CleanResult:
    by_base = {s.base_offset: s for s in segments}
    rewritten = removed = before = after = 0
    pending = [o for o in outcome.segments if o.cleaned_path is not None]
    try:
        for result in outcome.segments:
            before += result.size_before
            after += result.size_after
            if result.cleaned_path is None:
                continue
            _swap_in(plog, by_base[result.base_offset], result)
            pending.remove(result)
            rewritten += 1
            removed += result.records_removed
    finally:
        for result in pending:
            try:
                os.unlink(result.cleaned_path)
            except OSError:
                pass
    cleaned_up_to = outcome.end_offset
    plog.cleaner_checkpoint = max(plog.cleaner_checkpoint, cleaned_up_to)
    log.info("cleaned %s up to offset %d: %d segment(s) rewritten, %d record(s) removed, %d -> %d bytes",
             plog.dir.name, cleaned_up_to, rewritten, removed, before, after)
    return CleanResult(rewritten, removed, before, after, cleaned_up_to)


def _swap_in(plog: PartitionLog, old: LogSegment, result: SegmentOutcome) -> None:
    """Replace `old` by its cleaned file: .cleaned (synced by the worker), .swap, then renames."""
    log_path = old.path(LOG_SUFFIX)
    cleaned = Path(result.cleaned_path)
    swap = log_path.with_name(log_path.name + SWAP_SUFFIX)
    with plog._lock:
        if plog._closed or old not in plog._segments or old is plog._active or old.size != result.size_before:
            raise _CleaningAborted(f"{old} changed or left the log while it was cleaned")
        os.rename(cleaned, swap)
        fsync_dir(plog.dir)  # the commit point: from here recovery completes the swap
        config = plog.config
        old.rename_for_deletion()
        os.rename(swap, log_path)
        new = LogSegment(plog.dir, old.base_offset, max_index_size=config.segment_index_bytes, active=True,
                         now_ms=old.created_ms, index_interval=config.index_interval_bytes,
                         fresh_indexes=True)
        new._index(list(new.iter_headers(0)), 0)
        new.make_inactive()
        new.next_offset = old.next_offset
        new.roll_jitter_ms = old.roll_jitter_ms
        new.flush()
        fsync_dir(plog.dir)
        plog._segments[plog._segments.index(old)] = new
        if result.removed_abort_markers:
            # Their transactions' batches are gone: a read_committed fetch must not be told
            # of an abort whose marker it will never see.
            plog.txn_index.remove_markers(result.removed_abort_markers)
        # Readers may hold FileSlices of the old file: delete it after file.delete.delay.ms.
        with plog._pending_lock:
            plog._pending_deletes.append((time.monotonic() + config.file_delete_delay_ms / 1000, old))
    if config.file_delete_delay_ms == 0:
        plog._run_pending_deletes(time.monotonic())


# ------------------------------------------------------------------ checkpoints
def read_cleaner_checkpoint(log_dir: Path) -> dict[tuple[str, int], int]:
    """The log dir's cleaner-offset-checkpoint; empty when missing or unreadable (then every
    compacted log is dirty from its start, as in Kafka)."""
    try:
        return read_offset_checkpoint(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT)
    except (CheckpointError, OSError) as exc:
        log.warning("ignoring unreadable cleaner checkpoint: %s", exc)
        return {}


def _lower_priority(parent_pid: int) -> None:
    """Make the worker process yield the CPU to the broker whenever both want it.

    Nice alone is not enough where the kernel groups tasks by session (autogroup, the
    default on desktop and many server kernels): a nice 19 worker in the broker's session
    still spends the session's share, and the broker waits behind other sessions (measured:
    produce p50 x7, p99 x3 with a CPU-bound worker). In a session of its own, with that
    session's autogroup at nice 19 and the process in the SCHED_IDLE class, the worker only
    gets the CPU time the broker leaves (bench/log/cleaner_latency.py)."""
    global _parent_pid
    _parent_pid = parent_pid
    try:
        os.setsid()
    except OSError:
        pass
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("19")
    except OSError:
        pass
    try:
        # Linux's idle class: preempted at once by any normal task that wakes up, such as
        # the broker's event loop when a request arrives.
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        os.nice(19)
    except OSError:
        pass


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

        return concurrent.futures.ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_lower_priority,
            initargs=(os.getpid(),))

    def _run_job(self, job: CleaningJob) -> CleaningOutcome | None:
        if self.worker != "process":
            return run_cleaning(job)
        if self._stop.is_set():
            raise _CleaningAborted("the cleaner is stopping")
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
            raise _CleaningAborted(f"the cleaner worker process stopped: {exc}") from exc

    def run_once(self, now_ms: int | None = None) -> int:
        """Clean every log that is due; returns how many were cleaned."""
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
