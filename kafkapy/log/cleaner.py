"""The log cleaner: compaction of partitions whose cleanup.policy contains "compact".

As in Kafka, a log's closed segments are split at the cleaner checkpoint into a clean
section (already compacted) and a dirty section. When the dirty section is at least
min.cleanable.dirty.ratio of the closed segments (or holds a segment older than
max.compaction.lag.ms), an offset map (key -> latest offset) is built over the dirty
section and every closed segment up to its end is rewritten keeping only the latest
record of each key. Tombstones (null values) go too once they have been cleaned once and
their segment is older than delete.retention.ms; keyless records are dropped (Kafka
rejects them at produce time). The active segment and anything newer than
min.compaction.lag.ms or above the high watermark are never touched.

Offsets never change: a rewritten batch keeps its base offset, last offset delta,
producer fields and timestamps, so the log has offset gaps only where whole batches went;
the last batch of each segment is kept (empty if need be) so that every segment still
ends where the next one begins.

Each segment is rewritten to `<base>.log.cleaned`, synced, renamed `<base>.log.swap`
(the commit point: recovery completes a swap, discards a .cleaned), then the original is
renamed `.deleted` -- readers holding a FileSlice of it keep reading it until its delayed
deletion -- and the swap file becomes `<base>.log` with rebuilt indexes.

Not done (gaps): partitions holding transactional or control batches are skipped
entirely; the cleaner checkpoint is kept in memory (after a restart a log is dirty once
more); segments are not merged, so cleaned segments stay as many as before.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from kafkapy.protocol.records import COMPRESSION_MASK, BatchHeader, build_batch, iter_batch_headers, iter_records

from .checkpoints import fsync_dir
from .segment import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, LogSegment

if TYPE_CHECKING:
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["CleanResult", "LogCleaner", "clean_log"]


@dataclass(slots=True)
class CleanResult:
    """What one cleaning of one log did."""

    segments_rewritten: int
    records_removed: int
    bytes_before: int
    bytes_after: int
    cleaned_up_to: int  # the new cleaner checkpoint


class _CleaningAborted(Exception):
    """The log changed under the cleaner (retention, truncation, close): try again later."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _read_segment(segment: LogSegment) -> tuple[bytes, list[BatchHeader]]:
    size = segment.size
    try:
        data = os.pread(segment._fd, size, 0)
    except (OSError, ValueError) as exc:
        raise _CleaningAborted(f"cannot read {segment}: {exc}") from exc
    if len(data) != size:
        raise _CleaningAborted(f"{segment} shrank while being read")
    headers = []
    position = 0
    for header in iter_batch_headers(data, validate=False):
        header.position = position
        position += header.size
        headers.append(header)
    return data, headers


def clean_log(plog: PartitionLog, now_ms: int | None = None) -> CleanResult | None:
    """Compact `plog` once if it is due; None when there was nothing (allowed) to do."""
    config = plog.config
    if not config.compact_enabled or plog.is_offline or plog._closed:
        return None
    now_ms = _now_ms() if now_ms is None else now_ms
    with plog._lock:
        closed = plog._segments[:-1]
        high_watermark = plog._high_watermark
        first_dirty = max(plog.cleaner_checkpoint, plog._log_start_offset)
    # The cleanable range: closed segments below the high watermark and outside
    # min.compaction.lag.ms; the dirty section is its part at or after the checkpoint.
    clean_bytes = dirty_bytes = 0
    end = 0
    overdue = False
    for i, segment in enumerate(closed):
        if segment.next_offset <= first_dirty:
            clean_bytes += segment.size
            end = i + 1
            continue
        if segment.next_offset > high_watermark:
            break
        if config.min_compaction_lag_ms > 0 and now_ms - segment.largest_timestamp() < config.min_compaction_lag_ms:
            break
        first_ts = segment.first_batch_timestamp()
        if first_ts >= 0 and now_ms - first_ts > config.max_compaction_lag_ms:
            overdue = True
        dirty_bytes += segment.size
        end = i + 1
    if dirty_bytes == 0:
        return None
    ratio = dirty_bytes / (clean_bytes + dirty_bytes)
    if ratio < config.min_cleanable_dirty_ratio and not overdue:
        return None
    to_clean = closed[:end]
    try:
        return _clean_segments(plog, to_clean, first_dirty, now_ms)
    except _CleaningAborted as exc:
        log.info("cleaning of %s aborted, retried later: %s", plog.dir.name, exc)
        return None


def _clean_segments(plog: PartitionLog, segments: list[LogSegment], first_dirty: int,
                    now_ms: int) -> CleanResult | None:
    # One segment in memory at a time (plus the offset map): segments are read once for
    # their headers, the dirty ones once for the map, and each once more to rewrite it.
    config = plog.config
    for segment in segments:
        try:
            transactional = any(h.is_transactional or h.is_control for h in segment.iter_headers(0))
        except (OSError, ValueError) as exc:
            raise _CleaningAborted(f"cannot read {segment}: {exc}") from exc
        if transactional:
            if not plog.cleaner_skip_logged:
                plog.cleaner_skip_logged = True
                log.warning("not compacting %s: it holds transactional or control batches "
                            "(not supported by the kafkapy log cleaner)", plog.dir.name)
            return None
    # Offset map of the dirty section: key -> offset of its latest record.
    latest: dict[bytes, int] = {}
    for segment in segments:
        if segment.next_offset <= first_dirty:
            continue
        data, headers = _read_segment(segment)
        for header in headers:
            if header.base_offset + header.last_offset_delta < first_dirty:
                continue
            for record in iter_records(data, header):
                if record.key is not None and record.offset >= first_dirty:
                    latest[record.key] = record.offset
    rewritten = removed = before = after = 0
    for segment in segments:
        data, headers = _read_segment(segment)
        # Tombstones cleaned once (below the checkpoint) whose segment is older than
        # delete.retention.ms go (Kafka's delete horizon, by segment timestamp).
        drop_tombstones = now_ms - segment.largest_timestamp() > config.delete_retention_ms
        cleaned, dropped = _compact_segment(data, headers, latest, first_dirty, drop_tombstones)
        before += len(data)
        if not dropped:
            after += len(data)
            continue
        _swap_in(plog, segment, cleaned)
        rewritten += 1
        removed += dropped
        after += len(cleaned)
    cleaned_up_to = segments[-1].next_offset
    plog.cleaner_checkpoint = max(plog.cleaner_checkpoint, cleaned_up_to)
    log.info("cleaned %s up to offset %d: %d segment(s) rewritten, %d record(s) removed, %d -> %d bytes",
             plog.dir.name, cleaned_up_to, rewritten, removed, before, after)
    return CleanResult(rewritten, removed, before, after, cleaned_up_to)


def _compact_segment(data: bytes, headers: list[BatchHeader], latest: dict[bytes, int],
                     first_dirty: int, drop_tombstones: bool) -> tuple[bytes, int]:
    """The segment's batches keeping the retained records, and how many records went."""
    parts = []
    dropped = 0
    last = len(headers) - 1
    for i, header in enumerate(headers):
        kept = []
        records = list(iter_records(data, header))
        for record in records:
            key = record.key
            if key is None or latest.get(key, -1) > record.offset \
                    or (record.value is None and drop_tombstones and record.offset < first_dirty):
                continue
            kept.append(record)
        if len(kept) == len(records):
            parts.append(data[header.position:header.position + header.size])
            continue
        dropped += len(records) - len(kept)
        # The last batch of a segment and batches of idempotent producers stay (empty if
        # need be): segments must keep ending where the next begins, and the producer
        # state must be rebuildable from the log (Kafka's RETAIN_EMPTY).
        if not kept and i != last and header.producer_id < 0:
            continue
        parts.append(build_batch(
            kept, base_offset=header.base_offset, base_timestamp=header.base_timestamp,
            attributes=header.attributes & ~COMPRESSION_MASK, compression=header.compression,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, partition_leader_epoch=header.partition_leader_epoch,
            max_timestamp=header.max_timestamp, last_offset_delta=header.last_offset_delta))
    return b"".join(parts), dropped


def _swap_in(plog: PartitionLog, old: LogSegment, data: bytes) -> None:
    """Replace `old` by a segment holding `data`: .cleaned, synced, .swap, then renames."""
    log_path = old.path(LOG_SUFFIX)
    cleaned = log_path.with_name(log_path.name + CLEANED_SUFFIX)
    swap = log_path.with_name(log_path.name + SWAP_SUFFIX)
    fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    size = old.size
    with plog._lock:
        if plog._closed or old not in plog._segments or old is plog._active or old.size != size:
            os.unlink(cleaned)
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
        # Readers may hold FileSlices of the old file: delete it after file.delete.delay.ms.
        with plog._pending_lock:
            plog._pending_deletes.append((time.monotonic() + config.file_delete_delay_ms / 1000, old))
    if config.file_delete_delay_ms == 0:
        plog._run_pending_deletes(time.monotonic())


class LogCleaner:
    """One background thread compacting every compactable log every log.cleaner.backoff.ms."""

    def __init__(self, logs: Callable[[], Iterable[PartitionLog]], backoff_ms: int = 15000,
                 name: str = "kafkapy-log-cleaner"):
        self._logs = logs
        self.backoff_ms = backoff_ms
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def run_once(self, now_ms: int | None = None) -> int:
        """Clean every log that is due; returns how many were cleaned."""
        cleaned = 0
        for plog in list(self._logs()):
            if self._stop.is_set():
                break
            try:
                if clean_log(plog, now_ms) is not None:
                    cleaned += 1
            except Exception:  # one bad log must not stop the cleaner
                log.exception("cleaning of %s failed", plog.dir.name)
        return cleaned

    def _run(self) -> None:
        while not self._stop.wait(self.backoff_ms / 1000):
            self.run_once()
