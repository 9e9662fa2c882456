"""Partition logs: segments, indexes, recovery, retention, producer state.

The broker uses `LogManager` (all partitions of the broker) and `PartitionLog` (one
partition); see docs/durability.md for what each flush mode survives.
"""
from .config import LogConfig
from .errors import OffsetOutOfRangeError
from .file_slice import FileSlice
from .manager import LogManager
from .partition_log import AppendResult, PartitionLog, ReadResult

__all__ = ["AppendResult", "FileSlice", "LogConfig", "LogManager", "OffsetOutOfRangeError",
           "PartitionLog", "ReadResult"]
