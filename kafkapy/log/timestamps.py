"""Timestamp lookups of a partition log (ListOffsets): first offset at or after a timestamp,
and the record with the largest timestamp."""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from kafkapy.protocol.errors import KafkaError
from kafkapy.protocol.records import TIMESTAMP_TYPE_MASK, BatchHeader, iter_records, read_batch_header

if TYPE_CHECKING:
    from .segment import LogSegment

log = logging.getLogger(__name__)

__all__ = ["TimestampLookups"]


class TimestampLookups:
    """PartitionLog's ListOffsets queries; only the batches they answer with are decoded."""

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`, or None."""
        self._check_online()
        start = self._log_start_offset
        for segment in list(self._segments):
            if segment.max_timestamp < timestamp or segment.next_offset <= start:
                continue
            _, ts_offset = segment.lookup_timestamp(timestamp)
            _, position = segment.lookup_offset(max(ts_offset, start))
            for header in segment.iter_headers(position):
                if header.max_timestamp >= timestamp and header.base_offset + header.last_offset_delta >= start:
                    return self._record_at_or_after(segment, header, timestamp, start)
        return None

    def _record_at_or_after(self, segment: LogSegment, header: BatchHeader, timestamp: int,
                            start: int) -> tuple[int, int]:
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return max(header.base_offset, start), header.max_timestamp
        try:
            data = os.pread(segment.file.fileno(), header.batch_length + 12, header.position)
            for record in iter_records(data, read_batch_header(data, 0)):
                if record.timestamp >= timestamp and record.offset >= start:
                    return record.offset, record.timestamp
        except KafkaError as exc:
            log.warning("cannot decode batch at offset %d of %s for a timestamp lookup: %s",
                        header.base_offset, self.dir.name, exc)
        return max(header.base_offset, start), header.max_timestamp

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3);
        (-1, -1) for an empty log."""
        self._check_online()
        best = None
        for segment in list(self._segments):
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None or best.max_timestamp < 0:
            return -1, -1
        ts = best.max_timestamp
        _, position = best.lookup_offset(best.offset_of_max_timestamp)
        for header in best.iter_headers(position):
            if header.max_timestamp == ts:
                if header.attributes & TIMESTAMP_TYPE_MASK:
                    return header.base_offset, ts
                offset, _ = self._record_at_or_after(best, header, ts, header.base_offset)
                return offset, ts
        return -1, -1
