"""The compaction itself (the log cleaner's work, see cleaner.py for the when and the why): the
offset map, Kafka's record filter, the rewritten segments and their swap into the log.

Imported on the first cleaning, in the broker's cleaner thread or in the cleaner's worker process:
a broker without compacted logs never loads it.
"""
from __future__ import annotations

import logging
import os
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kafkapy.protocol.records import (
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    build_batch,
    iter_batch_headers,
    iter_records,
)

from .checkpoints import fsync_dir
from .config import CleanerConfig
from .segment import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, LogSegment

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["CleanResult", "CleaningAborted", "CleaningJob", "CleaningOutcome", "clean_log", "lower_priority",
           "run_cleaning"]

_ABORT, _COMMIT = 0, 1
_CONTROL_TYPE = struct.Struct(">h")
_parent_pid: int | None = None  # in the worker process: the broker's pid


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


class CleaningAborted(Exception):
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
        raise CleaningAborted(f"cannot read {path}: {exc}") from exc
    if len(data) != size:
        raise CleaningAborted(f"{path} shrank while being read")
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
    except CleaningAborted as exc:
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
            raise CleaningAborted(f"{old} changed or left the log while it was cleaned")
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


def lower_priority(parent_pid: int) -> None:
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
