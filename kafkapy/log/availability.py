"""Whether a partition log takes reads and writes: offline after an I/O error (until the broker
restarts, as in Kafka), refusing writes while its log dir is full, the injected storage faults
of tests, and who hears of a failed write or fsync (the LogManager, manager.py)."""
from __future__ import annotations

import logging
import os

from .errors import KafkaStorageError, LogOfflineError

# the partition log's own logger: these lines were always its, operators filter on it
log = logging.getLogger("kafkapy.log.partition_log")

__all__ = ["LogAvailability"]


class LogAvailability:
    """PartitionLog's offline and write-refused states."""

    @property
    def is_offline(self) -> bool:
        return self.offline_reason is not None

    def _check_online(self) -> None:
        if self.offline_reason is not None:
            raise LogOfflineError(f"partition {self.dir.name} is offline: {self.offline_reason}")

    def _mark_offline(self, reason: str) -> None:
        if self.offline_reason is None:
            self.offline_reason = reason
            self.write_refused = reason
            log.error("partition %s is offline: %s", self.dir.name, reason)

    def refuse_writes(self, reason: str) -> None:
        """The log dir is full: appends fail with KAFKA_STORAGE_ERROR, reads go on."""
        if self.write_refused is None:
            self.write_refused = reason

    def resume_writes(self) -> None:
        """Space is back in the log dir: cut whatever a failed write left past the last whole
        batch (the file may be longer than the log if cutting failed then), make everything
        durable again (a failed fsync may have left pages unwritten), and take appends.
        Raises OSError when that fails; the log keeps refusing writes then."""
        if self.offline_reason is not None or self.write_refused is None:
            return
        with self._lock:
            segment = self._active
            on_disk = os.fstat(segment._fd).st_size
            if on_disk != segment.size:
                log.warning("%s: cutting %d byte(s) a failed write left after offset %d", self.dir.name,
                            on_disk - segment.size, self._log_end_offset)
                os.ftruncate(segment._fd, segment.size)
        self._flush_to(self._log_end_offset)
        self.write_refused = None
        log.info("partition %s takes writes again at offset %d", self.dir.name, self._log_end_offset)

    def _check_writable(self) -> None:
        self._check_online()
        if self.write_refused is not None:
            raise KafkaStorageError(f"partition {self.dir.name} refuses writes: {self.write_refused}")

    def _io_failed(self, what: str, exc: BaseException) -> None:
        """A write or fsync failed: the LogManager takes the log dir offline (or marks it full);
        a log without a manager goes offline alone."""
        reason = f"{what} failed: {exc}"
        handler = self.io_error_handler
        if handler is not None and isinstance(exc, OSError):
            try:
                handler(self, reason, exc)
                return
            except Exception:
                log.exception("handling the I/O error of %s failed", self.dir.name)
        self._mark_offline(reason)

    def _fault_check(self, operation: str) -> None:
        faults = self.storage_faults
        if faults is not None and faults.active:
            faults.check(self.dir.parent, self.topic, self.partition, operation)
