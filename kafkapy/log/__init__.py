"""Partition logs: segments, indexes, recovery, retention, producer state.

The broker uses `LogManager` (all partitions of the broker) and `PartitionLog` (one
partition); see docs/durability.md for what each flush mode survives.

The names below are loaded when first used (PEP 562), so that importing one module of the
package does not import them all: a broker with no partition yet never imports the partition
log, recovery or the cleaner's compaction.
"""
from __future__ import annotations

import importlib

__all__ = ["AppendResult", "FileSlice", "LogConfig", "LogManager", "OffsetOutOfRangeError",
           "PartitionLog", "ReadResult"]

_WHERE = {"AppendResult": ".partition_log", "FileSlice": ".file_slice", "LogConfig": ".config",
          "LogManager": ".manager", "OffsetOutOfRangeError": ".errors", "PartitionLog": ".partition_log",
          "ReadResult": ".partition_log"}


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
