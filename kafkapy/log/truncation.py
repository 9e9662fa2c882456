"""Replication-side operations of a partition log: follower appends, truncation to an
offset, full truncation, leader epochs, and replaying producer state from batch headers."""
from __future__ import annotations

import bisect
import logging
import time

from kafkapy.protocol.errors import KafkaError
from kafkapy.protocol.records import BatchHeader, iter_batch_headers

from .segment import INT32_MAX, LogSegment


def _now_ms() -> int:
    return time.time_ns() // 1_000_000

log = logging.getLogger(__name__)

__all__ = ["LogTruncation"]


class LogTruncation:
    """PartitionLog's follower appends, truncation and epoch queries."""

    def append_as_follower(self, batches, validated: list[BatchHeader] | None = None) -> None:
        """Append batches that already carry their offsets (replication); no producer checks."""
        self._check_online()
        if validated is None:
            validated = list(iter_batch_headers(batches, validate=True))
        if not validated:
            return
        with self._lock:
            first = validated[0].base_offset
            if first < self._log_end_offset:
                raise KafkaError(f"follower append at {first} below log end {self._log_end_offset}")
            if first > self._log_end_offset and self._active.size == 0:
                self._truncate_fully_locked(first)
            last = validated[-1]
            next_offset = last.base_offset + last.last_offset_delta + 1
            segment = self._active
            if segment.size + len(batches) > self.config.segment_bytes or segment.index_full \
                    or next_offset - 1 - segment.base_offset > INT32_MAX:
                segment = self._roll_locked()
            for header in validated:
                epoch = header.partition_leader_epoch
                if epoch >= 0 and epoch > self.leader_epochs.latest_epoch:
                    self.leader_epochs.assign(epoch, header.base_offset)
            old_size = segment.size
            try:
                segment.append(batches, validated)
            except OSError as exc:
                self._write_failed(segment, old_size, exc)
            self._log_end_offset = next_offset
            for header in validated:
                if header.producer_id >= 0:
                    completed = self.producer_state.update(header)
                    if completed is not None:
                        self._index_completed_txn(header, completed, batches)

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        with self._lock:
            self.leader_epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; (-1, -1) when unknown."""
        return self.leader_epochs.end_offset_for_epoch(epoch)

    def truncate_to(self, offset: int) -> None:
        """Remove every batch with an offset >= `offset` (a batch containing it goes whole)."""
        self._check_online()
        with self._lock:
            if offset >= self._log_end_offset:
                # No batch to remove, but (as Kafka's UnifiedLog.truncateTo) the epoch cache still
                # drops entries at the log end: one recorded on becoming leader with no batch
                # written would else stay the follower's last fetched epoch, and every fetch
                # would diverge again.
                self.leader_epochs.truncate_from_end(self._log_end_offset)
                return
            if offset < self._segments[0].base_offset:
                self._truncate_fully_locked(offset)
                return
            keep = bisect.bisect_right(self._bases, offset)
            removed = self._segments[keep:]
            if removed:
                del self._segments[keep:]
                del self._bases[keep:]
                self._schedule_deletion(removed)
            segment = self._segments[-1]
            if not segment.offset_index.active:
                segment.make_active()
            segment.truncate_to(offset)
            self._active = segment
            self._after_truncation(segment.next_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at `offset` (replication)."""
        with self._lock:
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        removed = self._segments
        segment = LogSegment(self.dir, offset, max_index_size=self.config.segment_index_bytes,
                             active=True, now_ms=_now_ms(), index_interval=self.config.index_interval_bytes,
                             jitter_ms=self.config.segment_jitter_ms, fresh_indexes=True,
                             new_file=True) if all(s.base_offset != offset for s in removed) else None
        if segment is None:
            # The new base collides with an existing file: empty that segment and keep it.
            segment = next(s for s in removed if s.base_offset == offset)
            removed = [s for s in removed if s is not segment]
            if not segment.offset_index.active:
                segment.make_active()
            segment.truncate_to(offset)
        self._segments = [segment]
        self._bases = [offset]
        self._active = segment
        segment.next_offset = offset
        self._schedule_deletion(removed)
        self._log_start_offset = offset
        self.leader_epochs.clear()
        self.producer_state.truncate_fully_and_start_at(offset)
        self.txn_index.clear([offset])
        self.cleaner_checkpoint = min(self.cleaner_checkpoint, offset)  # Kafka's maybeTruncateCheckpoint
        self._log_end_offset = offset
        self._high_watermark = offset
        self.recovery_point = offset
        self.durable_offset = offset
        self._flusher.cancel_waiters(self, offset, KafkaError("log was truncated"))
        log.info("%s truncated fully, now starting at offset %d", self.dir.name, offset)

    def _after_truncation(self, end_offset: int) -> None:
        self._log_end_offset = end_offset
        self._high_watermark = min(self._high_watermark, end_offset)
        self.recovery_point = min(self.recovery_point, end_offset)
        self.durable_offset = min(self.durable_offset, end_offset)
        if self._log_start_offset > end_offset:
            self._log_start_offset = end_offset
        self.leader_epochs.truncate_from_end(end_offset)
        self.txn_index.truncate_to(end_offset)
        self.cleaner_checkpoint = min(self.cleaner_checkpoint, end_offset)  # Kafka's maybeTruncateCheckpoint
        replay_from = self.producer_state.truncate_to(end_offset, self._log_start_offset)
        self.replay_producer_state(replay_from, end_offset)
        self._flusher.cancel_waiters(self, end_offset, KafkaError("log was truncated"))
        log.info("%s truncated to offset %d", self.dir.name, end_offset)

    def replay_producer_state(self, start: int, end: int) -> None:
        """Feed the headers of batches in [start, end) to the producer state (recovery)."""
        if start >= end:
            return
        update = self.producer_state.update
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        for segment in self._segments[i:]:
            if segment.base_offset >= end:
                break
            header = segment.find_batch(start)
            if header is None:
                continue
            for header in segment.iter_headers(header.position):
                if header.base_offset >= end:
                    break
                if header.producer_id >= 0:
                    completed = update(header)
                    if completed is not None:
                        # rebuilds index entries a crash may have lost (known ones are skipped)
                        self._index_completed_txn(header, completed)
        self.producer_state.update_map_end_offset(end)
