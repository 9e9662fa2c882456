"""Typed errors raised by the partition log, each carrying its Kafka error code."""
from __future__ import annotations

from kafkapy.protocol.errors import CorruptRecordError, ErrorCode, KafkaError

__all__ = [
    "CorruptRecordError",
    "InvalidConfigError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "LogOfflineError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "RecordListTooLargeError",
]


class OffsetOutOfRangeError(KafkaError):
    """A fetch or DeleteRecords offset outside [log start offset, log end offset]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class MessageTooLargeError(KafkaError):
    """A batch larger than max.message.bytes (Kafka's RecordTooLargeException)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLargeError(KafkaError):
    """An append larger than segment.bytes (Kafka's RecordBatchTooLargeException)."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(KafkaError):
    """A CreateTime timestamp outside message.timestamp.{before,after}.max.ms of now."""

    code = ErrorCode.INVALID_TIMESTAMP


class InvalidConfigError(KafkaError):
    """A topic config value that does not parse or is out of range."""

    code = ErrorCode.INVALID_CONFIG


class KafkaStorageError(KafkaError):
    """An I/O error on the log's files; the partition is offline until restart."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class LogOfflineError(KafkaStorageError):
    """The partition was marked offline (corrupt beyond repair or a failed write)."""
