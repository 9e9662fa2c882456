"""The leader epoch cache of a partition: which epoch started at which offset.

Kept in `<partition dir>/leader-epoch-checkpoint` (Kafka's format), rewritten atomically
on every change, as Kafka's LeaderEpochFileCache does. OffsetForLeaderEpoch and follower
truncation read it through `end_offset_for_epoch`.
"""
from __future__ import annotations

import bisect
import logging
from pathlib import Path
from typing import Callable

from .checkpoints import LEADER_EPOCH_CHECKPOINT, read_epoch_checkpoint, write_epoch_checkpoint

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

__all__ = ["LeaderEpochCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]


class LeaderEpochCache:
    """(epoch, start offset) entries with strictly increasing epochs and start offsets."""

    def __init__(self, partition_dir: Path, log_end_offset: Callable[[], int]):
        self.path = Path(partition_dir) / LEADER_EPOCH_CHECKPOINT
        self._log_end_offset = log_end_offset
        self._epochs: list[int] = []
        self._starts: list[int] = []

    # ---------------------------------------------------------------- persistence
    def load(self) -> None:
        """Read the checkpoint; raises CheckpointError if it is malformed or not monotonic."""
        from .checkpoints import CheckpointError

        entries = read_epoch_checkpoint(self.path)
        for (e1, s1), (e2, s2) in zip(entries, entries[1:]):
            if e2 <= e1 or s2 < s1:
                raise CheckpointError(f"{self.path}: entries not increasing")
        if any(e < 0 or s < 0 for e, s in entries):
            raise CheckpointError(f"{self.path}: negative entry")
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]

    def flush(self) -> None:
        write_epoch_checkpoint(self.path, self.entries())

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    def clear(self, flush: bool = True) -> None:
        self._epochs.clear()
        self._starts.clear()
        if flush:
            self.flush()

    # ---------------------------------------------------------------- queries
    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_epoch(self) -> int:
        return self._epochs[0] if self._epochs else UNDEFINED_EPOCH

    def __len__(self) -> int:
        return len(self._epochs)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range contains `offset`, or -1 before the first entry."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's LeaderEpochFileCache.endOffsetFor answers it.

        The end offset is the start offset of the first epoch above `epoch` (the log end
        offset for the latest epoch); (-1, -1) for an unknown epoch above the latest.
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, self._log_end_offset()
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher >= len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # ---------------------------------------------------------------- changes
    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; returns True if the cache changed."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        # Drop entries that would break monotonicity (a higher or equal epoch, or a later start).
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed = (self._epochs.pop(), self._starts.pop())
            log.info("%s: removing epoch entry %s superseded by epoch %d at %d",
                     self.path.parent.name, removed, epoch, start_offset)
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if flush:
            self.flush()
        return True

    assign_epoch = assign

    def truncate_from_end(self, end_offset: int, flush: bool = True) -> None:
        """Remove entries starting at or after `end_offset` (the log was truncated there)."""
        changed = False
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
            changed = True
        if changed and flush:
            self.flush()

    def truncate_from_start(self, start_offset: int, flush: bool = True) -> None:
        """The log now starts at `start_offset`: drop earlier entries, keeping the epoch
        that covers `start_offset` (moved to start there)."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return
        epoch = self._epochs[i - 1]
        del self._epochs[:i]
        del self._starts[:i]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        if flush:
            self.flush()
