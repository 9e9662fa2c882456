"""The health of each log directory (Kafka's LogDirFailureChannel, and more).

As in Kafka, an I/O error in a log directory takes the whole directory offline: every partition
in it answers KAFKA_STORAGE_ERROR until the broker restarts, the other directories keep serving,
and the broker stops itself once every directory is offline. Beyond Kafka, a directory whose
writes failed only for lack of space (ENOSPC, EDQUOT) is "full" rather than offline: its
partitions refuse appends with KAFKA_STORAGE_ERROR while reads go on, and the LogManager probes it
periodically and brings it back online once space is free again.
"""
from __future__ import annotations

import errno
import time
from pathlib import Path

__all__ = ["FULL", "OFFLINE", "ONLINE", "LogDirState", "is_out_of_space"]

ONLINE = "online"
FULL = "full"
OFFLINE = "offline"


def is_out_of_space(exc: BaseException) -> bool:
    """An error that more free space would cure (no space left, or over a disk quota)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class LogDirState:
    """One log dir: its status, why, since when, and how often it failed and came back."""

    __slots__ = ("path", "status", "reason", "since", "failures", "recoveries", "last_probe")

    def __init__(self, path: Path, status: str = ONLINE, reason: str | None = None, since: float | None = None,
                 failures: int = 0, recoveries: int = 0, last_probe: float = 0.0):
        self.path = path
        self.status = status
        self.reason = reason
        self.since = time.time() if since is None else since
        self.failures = failures
        self.recoveries = recoveries
        self.last_probe = last_probe

    def __repr__(self) -> str:
        """The dir and its health; the timestamps (since, last_probe) say nothing without a clock."""
        return (f"LogDirState(path={self.path!r}, status={self.status!r}, reason={self.reason!r}, "
                f"failures={self.failures}, recoveries={self.recoveries})")

    @property
    def online(self) -> bool:
        return self.status == ONLINE
