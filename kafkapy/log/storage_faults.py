"""Injected storage faults, for tests: make a log directory, or one partition in it, fail its
writes or its fsyncs with ENOSPC (no space left) or EIO (I/O error), until the fault is cleared.

The partition logs ask `check` just before they write or fsync (PartitionLog.append, a roll, the
flusher's syncs), so an injected fault takes exactly the path a real full or failing disk takes:
the OSError is raised where the system call would have raised it. The LogManager owns one
StorageFaults; the broker's fault injector (broker/faults.py) and its control endpoint drive it.
"""
from __future__ import annotations

import errno
import itertools
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["ERRORS", "OPERATIONS", "StorageFault", "StorageFaults"]

ERRORS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}
OPERATIONS = ("write", "fsync", "any")


class StorageFault:
    """One injected fault: `operation` ("write", "fsync" or "any") on `log_dir`, or on one
    partition (`topic`, `partition`) wherever it lives, fails with `error`."""

    __slots__ = ("id", "error", "operation", "log_dir", "topic", "partition", "hits")

    def __init__(self, id: int, error: str, operation: str, log_dir: str | None, topic: str | None,
                 partition: int | None, hits: int = 0):
        self.id = id
        self.error = error
        self.operation = operation
        self.log_dir = log_dir
        self.topic = topic
        self.partition = partition
        self.hits = hits

    def __repr__(self) -> str:
        return f"StorageFault({self.to_json()!r})"

    def matches(self, log_dir: Path, topic: str, partition: int, operation: str) -> bool:
        if self.operation != "any" and self.operation != operation:
            return False
        if self.log_dir is not None and os.path.abspath(log_dir) != self.log_dir:
            return False
        if self.topic is not None and self.topic != topic:
            return False
        return self.partition is None or self.partition == partition

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "error": self.error, "operation": self.operation, "log_dir": self.log_dir,
                "topic": self.topic, "partition": self.partition, "hits": self.hits}


class StorageFaults:
    """The active storage faults of one broker; `active` is False (one attribute read on the
    produce path) while there are none."""

    def __init__(self, log_dirs: list[Path]):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.active = False
        self._faults: list[StorageFault] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # the flusher thread checks too

    def inject(self, *, error: str = "ENOSPC", operation: str = "write", log_dir: str | os.PathLike | None = None,
               topic: str | None = None, partition: int | None = None) -> StorageFault:
        """Add a fault; a ValueError names what is wrong with the arguments."""
        error = str(error).upper()
        if error not in ERRORS:
            raise ValueError(f"error must be one of {', '.join(ERRORS)}, not {error!r}")
        if operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
        wanted = None
        if log_dir is not None:
            wanted = os.path.abspath(log_dir)
            if wanted not in self.log_dirs:
                raise ValueError(f"{log_dir} is not one of the log dirs ({', '.join(self.log_dirs)})")
        if partition is not None and topic is None:
            raise ValueError("a partition needs its topic")
        if log_dir is None and topic is None:
            raise ValueError("name a log_dir, a topic, or both")
        with self._lock:
            fault = StorageFault(next(self._ids), error, operation, wanted, topic,
                                 None if partition is None else int(partition))
            self._faults.append(fault)
            self.active = True
        return fault

    def clear(self, fault_id: int | None = None) -> int:
        """Remove one fault (by id) or all of them; how many went."""
        with self._lock:
            before = len(self._faults)
            self._faults = [] if fault_id is None else [f for f in self._faults if f.id != fault_id]
            self.active = bool(self._faults)
            return before - len(self._faults)

    def list(self) -> list[StorageFault]:
        with self._lock:
            return list(self._faults)

    def check(self, log_dir: Path, topic: str, partition: int, operation: str) -> None:
        """Raise the OSError of the first fault matching this write or fsync."""
        if not self.active:
            return
        with self._lock:
            for fault in self._faults:
                if fault.matches(log_dir, topic, partition, operation):
                    fault.hits += 1
                    code = ERRORS[fault.error]
                    raise OSError(code, f"{os.strerror(code)} (injected)")

    def blocks_dir(self, log_dir: Path) -> bool:
        """Whether a fault may still fail writes or fsyncs in `log_dir` (checked before a full
        directory is probed: a fault on one of its partitions keeps it full too)."""
        if not self.active:
            return False
        wanted = os.path.abspath(log_dir)
        with self._lock:
            return any(f.log_dir in (None, wanted) for f in self._faults)
