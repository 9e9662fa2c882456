"""Partition logs: segments, indexes, recovery, retention, producer state.

The broker uses `LogManager` (all partitions of the broker) and `PartitionLog` (one
partition); see docs/durability.md for what each flush mode survives.

The names below are loaded when first used (PEP 562), so that importing one module of the
package does not import them all: a broker with no partition yet never imports the partition
log, recovery or the cleaner's compaction.
"""
from __future__ import annotations

from ..lazy_exports import lazy_exports

__all__ = ["AppendResult", "FileSlice", "LogConfig", "LogManager", "OffsetOutOfRangeError",
           "PartitionLog", "ReadResult"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "AppendResult": ".partition_log", "FileSlice": ".file_slice", "LogConfig": ".config",
    "LogManager": ".manager", "OffsetOutOfRangeError": ".errors", "PartitionLog": ".partition_log",
    "ReadResult": ".partition_log"})
