"""Aborted transactions of a partition log: what a read_committed fetch must report, and indexing
each ABORT marker as it is appended (Kafka's transaction index, txn_index.py)."""
from __future__ import annotations

import bisect
import os
from typing import TYPE_CHECKING

from kafkapy.protocol.control_records import ControlRecordType, read_control_batch_marker

from .txn_index import AbortedTxn

if TYPE_CHECKING:
    from kafkapy.protocol.records import BatchHeader

__all__ = ["AbortedTransactions"]


class AbortedTransactions:
    """PartitionLog's aborted-transaction index upkeep and lookups."""

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions a read_committed fetch of [start, end) must report."""
        index = self.txn_index
        if not index:
            return []
        if index._last_offsets[0] < self._log_start_offset:
            index.drop_before(self._log_start_offset)
        return index.collect(start, end)

    def _index_completed_txn(self, header: BatchHeader, completed, batch=None) -> None:
        """A control batch closed a transaction: index it if it was an abort (caller holds the
        lock; `batch` holds the control batch at `header.position`, else it is in the segment)."""
        if batch is not None:
            kind, _ = read_control_batch_marker(batch, header)
        else:
            segment = self._segments[max(bisect.bisect_right(self._bases, header.base_offset) - 1, 0)]
            data = os.pread(segment.file.fileno(), header.batch_length + 12, header.position)
            kind, _ = read_control_batch_marker(data)
        if kind != ControlRecordType.ABORT:
            return
        first_open = self.producer_state.first_undecided_offset()
        lso = header.next_offset if first_open is None else min(first_open, header.next_offset)
        segment_base = self._bases[max(bisect.bisect_right(self._bases, header.base_offset) - 1, 0)]
        self.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                         completed.last_offset, lso), segment_base)
