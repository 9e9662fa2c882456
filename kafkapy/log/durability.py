"""Durability of a partition log: group-commit fsync for acks (sync_until), full flushes that
advance the recovery point (flush, flush.ms), both run by the Flusher's threads (flusher.py).

Threading: the flusher threads call `_sync_data` and `_flush_to`; they take the log's `_lock` only to
pick the segments and to publish the new durable offset or recovery point, never while syncing.
"""
from __future__ import annotations

import bisect
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from .checkpoints import fsync_dir

if TYPE_CHECKING:
    from .segment import LogSegment

__all__ = ["LogDurability"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogDurability:
    """PartitionLog's fsync and flush rules (durable_offset, recovery_point)."""

    def sync_until(self, offset: int) -> Future:
        """A Future completed when everything through `offset` is fsynced (group commit)."""
        if offset < self.durable_offset:
            future: Future = Future()
            future.set_result(self.durable_offset)
            return future
        if offset >= self._log_end_offset:
            offset = self._log_end_offset - 1
        return self._flusher.request_sync(self, offset)

    def flush(self, offset: int | None = None) -> None:
        """fsync everything (indexes too) below `offset` (default: log end) now, and advance
        the recovery point. Blocks the caller."""
        self._flush_to(self._log_end_offset if offset is None else offset)

    def _segments_from(self, offset: int) -> list[LogSegment]:
        """Segments that may hold data at or after `offset` (caller holds the lock)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[max(i, 0):]

    def _sync_data(self) -> int:
        """Group commit (flusher thread): fdatasync the .log files of unsynced segments."""
        with self._lock:
            target = self._log_end_offset
            segments = [s for s in self._segments_from(self.durable_offset)
                        if s.durable_size < s.size or s.needs_dir_sync]
        self._sync_segments(segments, full=False)
        with self._lock:
            # A truncation meanwhile may have moved the end below `target`.
            target = min(target, self._log_end_offset)
            if target > self.durable_offset:
                self.durable_offset = target
        return self.durable_offset

    def _sync_segments(self, segments: list[LogSegment], full: bool) -> None:
        """fsync the chosen segments outside the lock: the directory first where a segment was
        created or renamed since, then each segment's .log (`full`: its indexes too). A segment
        deleted or closed meanwhile (retention, truncation, a dir move) is skipped."""
        if self.storage_faults is not None and segments:
            self._fault_check("fsync")
        if any(s.needs_dir_sync for s in segments):
            self._sync_dir()
            for s in segments:
                s.needs_dir_sync = False
        for segment in segments:
            try:
                segment.flush() if full else segment.sync_log()
            except (OSError, ValueError):
                if not segment.deleted and not segment.closed:
                    raise

    def _sync_dir(self) -> None:
        directory = self.dir
        try:
            fsync_dir(directory)
        except FileNotFoundError:
            # The log moved to another log dir meanwhile (dir_move.py syncs the new one).
            if directory not in self.moved_from:
                raise

    def _flush_to(self, offset: int) -> None:
        """Full flush (log and indexes) of everything below `offset`; advances the recovery point."""
        with self._lock:
            if self._closed and self.recovery_point >= self._log_end_offset:
                return
            offset = min(offset, self._log_end_offset)
            if offset <= self.recovery_point:
                return
            segments = [s for s in self._segments_from(self.recovery_point) if s.base_offset < offset]
        self._sync_segments(segments, full=True)
        with self._lock:
            if offset > self.recovery_point:
                self.recovery_point = offset
            if offset > self.durable_offset:
                self.durable_offset = offset
            self.last_flush_ms = _now_ms()

    def flush_if_due(self, now_ms: int) -> bool:
        """flush.ms: queue a background flush if the log has unflushed data older than flush.ms."""
        if self.recovery_point >= self._log_end_offset or self.offline_reason is not None:
            return False
        if now_ms - self.last_flush_ms < self.config.flush_ms:
            return False
        self._flusher.request_flush(self, self._log_end_offset)
        return True
