"""Retention of a partition log: retention.ms, retention.bytes, DeleteRecords.

Whole segments are deleted from the start of the log, never anything at or above the log
start offset, and the active segment only after a roll (Kafka's deleteOldSegments). Files
are renamed `.deleted` and removed after file.delete.delay.ms, so fetches still holding a
FileSlice of them complete.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from .errors import OffsetOutOfRangeError

if TYPE_CHECKING:
    from .segment import LogSegment

log = logging.getLogger(__name__)

__all__ = ["SegmentRetention"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SegmentRetention:
    """PartitionLog's retention and log-start-offset rules."""

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to `offset`; returns the new low watermark."""
        self._check_online()
        with self._lock:
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset of {self.dir.name} to {offset}: "
                    f"above the high watermark {self._high_watermark}")
            if offset > self._log_start_offset:
                self._set_log_start_offset(offset)
                self._delete_segments(lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset,
                                      "log start offset breach")
            return self._log_start_offset

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        if offset > self._high_watermark:
            self._high_watermark = offset
        if offset > self.recovery_point:
            self.recovery_point = offset
        self.leader_epochs.truncate_from_start(offset)
        log.info("log start offset of %s is now %d", self.dir.name, offset)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """One retention pass (retention.ms, retention.bytes, log start offset); returns how
        many segments were deleted. Also removes files whose deletion delay has passed."""
        if self.offline_reason is not None:
            return 0
        now_ms = _now_ms() if now_ms is None else now_ms
        with self._lock:
            deleted = self._delete_segments(
                lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset,
                "log start offset breach")
            config = self.config
            if config.delete_enabled and config.retention_ms >= 0:
                deleted += self._delete_segments(
                    lambda seg, nxt: now_ms - seg.largest_timestamp() > config.retention_ms,
                    f"retention.ms {config.retention_ms}")
            if config.delete_enabled and config.retention_bytes >= 0:
                excess = [self.size_bytes - config.retention_bytes]

                def too_big(seg: LogSegment, nxt) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_segments(too_big, f"retention.bytes {config.retention_bytes}")
        self._run_pending_deletes(time.monotonic())
        return deleted

    def _delete_segments(self, predicate, reason: str) -> int:
        """Kafka's deleteOldSegments: delete leading segments while `predicate` holds and they
        are below the high watermark; the active segment only if non-empty (after a roll)."""
        segments = self._segments
        deletable = []
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
            if nxt is None and segment.size == 0:
                break
            if self._high_watermark >= upper and predicate(segment, nxt):
                deletable.append(segment)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(segments):
            self._roll_locked()
        del self._segments[:len(deletable)]
        del self._bases[:len(deletable)]
        first = self._segments[0].base_offset
        if first > self._log_start_offset:
            self._set_log_start_offset(first)
        log.info("deleting %d segment(s) of %s (%s): %s", len(deletable), self.dir.name, reason,
                 ", ".join(str(s.base_offset) for s in deletable))
        self._schedule_deletion(deletable)
        return len(deletable)

    def _schedule_deletion(self, segments: list[LogSegment]) -> None:
        due = time.monotonic() + self.config.file_delete_delay_ms / 1000
        for segment in segments:
            try:
                segment.rename_for_deletion()
            except OSError as exc:
                log.warning("could not rename %s for deletion: %s", segment, exc)
            with self._pending_lock:
                self._pending_deletes.append((due, segment))
        if self.config.file_delete_delay_ms == 0:
            self._run_pending_deletes(time.monotonic())

    def _run_pending_deletes(self, now: float, force: bool = False) -> None:
        if not self._pending_deletes:
            return
        # The log cleaner's thread adds to the list too.
        with self._pending_lock:
            ready = [s for due, s in self._pending_deletes if force or due <= now]
            self._pending_deletes = [(due, s) for due, s in self._pending_deletes
                                     if not (force or due <= now)]
        if not ready:
            return

        def delete() -> None:
            for segment in ready:
                try:
                    segment.delete_files()
                except OSError as exc:
                    log.warning("could not delete files of %s: %s", segment, exc)

        if force or self._closed:
            delete()
        else:
            self._flusher.submit(delete)
