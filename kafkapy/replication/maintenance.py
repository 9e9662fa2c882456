"""The replica manager's upkeep of what it hosts (a mixin of ReplicaManager, replica_manager.py):
the two periodic tasks and what they write, apart from the appends and reads of the request path.
- High watermarks are restored from `<logdir>/replication-offset-checkpoint` at start (for the
  logs not led alone) and written there every replica.high.watermark.checkpoint.interval.ms once
  the first LeaderAndIsr arrived (Kafka's checkpointHighWatermarks).
- The ISR-shrink task runs every replica.lag.time.max.ms/2 over the partitions led here (Kafka's
  maybeShrinkIsr), and the controller's answers to ISR changes (AlterPartition) are applied here.

A mixin rather than a collaborator, so that ReplicaManager's own methods keep their lookups; it
reads the ReplicaManager's state: `config`, `metadata`, `_partitions`, `_log_store`, `_metrics`,
`_lag_ms`, the task fields, `_closed`, `_checkpointing`, and calls `_leads_alone` and
`high_watermark_changed`.
"""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..log.checkpoints import (
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from ..log.manager import OfflinePartitionLog
from ..protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .partition import IsrChange, Partition

    from ..log.partition_log import PartitionLog

__all__ = ["ReplicaMaintenance"]

log = logging.getLogger("kafkapy.replication.replica_manager")  # the replica manager's log lines, as before


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReplicaMaintenance:
    """High-watermark checkpoints and ISR maintenance of a ReplicaManager (its base class)."""

    def _ensure_shrink_task(self) -> None:
        if self._shrink_task is None and not self._closed:
            self._shrink_task = asyncio.get_running_loop().create_task(self._shrink_loop(), name="isr-shrink")

    def _ensure_checkpoint_task(self) -> None:
        # As Kafka: from the first LeaderAndIsr on, when there is something hosted to record.
        self._checkpointing = True
        if self._checkpoint_task is None and not self._closed:
            self._checkpoint_task = asyncio.get_running_loop().create_task(self._checkpoint_loop(),
                                                                           name="hw-checkpoint")

    # ------------------------------------------------------------------ high-watermark checkpoints
    def _online_logs(self) -> dict[tuple[str, int], PartitionLog]:
        return {key: plog for key, plog in self._log_store.all_logs().items()
                if not isinstance(plog, OfflinePartitionLog) and not plog.is_offline}

    def _restore_high_watermarks(self) -> None:
        """Every loaded log gets the high watermark it had (0 when unrecorded): in a cluster a
        log's end is not committed just because it is on disk."""
        logs = {key: plog for key, plog in self._online_logs().items() if not self._leads_alone(key)}
        self._checkpointing = True
        for log_dir in self._log_store.log_dirs:
            path = Path(log_dir) / REPLICATION_OFFSET_CHECKPOINT
            try:
                marks = read_offset_checkpoint(path)
            except (CheckpointError, OSError) as exc:
                log.warning("ignoring unreadable high-watermark checkpoint %s: %s", path, exc)
                marks = {}
            for key, plog in logs.items():
                if plog.log_dir == Path(log_dir):
                    plog.auto_high_watermark = False
                    plog.high_watermark = marks.get(key, 0)

    async def checkpoint_high_watermarks(self) -> None:
        """Write every log dir's replication-offset-checkpoint (on the log flusher's thread, which
        also writes the log manager's checkpoints, so the two never write the file at once)."""
        by_dir: dict[Path, dict[tuple[str, int], int]] = {Path(d): {} for d in self._log_store.log_dirs}
        for key, plog in self._online_logs().items():
            by_dir.setdefault(plog.log_dir, {})[key] = plog.high_watermark

        def write() -> None:
            for log_dir, marks in by_dir.items():
                try:
                    write_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, marks)
                except OSError as exc:
                    log.error("could not write %s: %s", log_dir / REPLICATION_OFFSET_CHECKPOINT, exc)

        # Shielded: cancelling the wrapper would cancel the flusher's Future, which its work
        # thread does not expect (it then fails to set the result and stops).
        await asyncio.shield(asyncio.wrap_future(self._log_store.flusher.submit(write)))

    async def _checkpoint_loop(self) -> None:
        interval_s = self.config.get("replica.high.watermark.checkpoint.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.checkpoint_high_watermarks()
            except Exception:
                log.exception("high-watermark checkpoint failed")

    # ------------------------------------------------------------------ ISR maintenance
    async def _shrink_loop(self) -> None:
        interval_s = self._lag_ms / 2 / 1000
        while True:
            await asyncio.sleep(interval_s)
            self.maybe_shrink_isrs()

    def maybe_shrink_isrs(self, now_ms: int | None = None) -> None:
        """One pass of the ISR-shrink task over the partitions led here."""
        now = _now_ms() if now_ms is None else now_ms
        for part in list(self._partitions.values()):
            if not part.is_leader:
                continue
            try:
                part.maybe_shrink_isr(now)
                # a replica that stopped being caught up no longer holds the high watermark back
                if part.maybe_increment_hw(now):
                    self.high_watermark_changed(part.topic, part.partition)
            except Exception:
                log.exception("ISR check of %s failed", part.name)

    def _is_eligible(self, replica_id: int) -> bool:
        return self.metadata.is_live(replica_id)

    def _isr_change_answered(self, part: Partition, change: IsrChange, error_code: int, data) -> bool:
        """The controller's answer to an ISR proposal; returns True to send it again."""
        from .partition import IsrChangeOutcome

        if data is not None and error_code == ErrorCode.NONE:
            outcome = part.apply_isr_change_result(change, error_code, isr=data.isr, leader_epoch=data.leader_epoch,
                                                   partition_epoch=data.partition_epoch, now_ms=_now_ms())
        else:
            outcome = part.apply_isr_change_result(change, error_code, now_ms=_now_ms())
        if outcome is IsrChangeOutcome.COMMITTED:
            self._metrics.isr_changed(change.expand)  # IsrShrinksPerSec / IsrExpandsPerSec
        if outcome in (IsrChangeOutcome.COMMITTED, IsrChangeOutcome.REVERTED):
            # the high watermark may have moved, and acks=all waiters re-check the ISR size
            self.high_watermark_changed(part.topic, part.partition)
        return outcome is IsrChangeOutcome.RETRY
