"""The checks a produce's batches pass before the replica manager appends them (the first half of
Kafka's ReplicaManager.appendRecords: analyzeAndValidateRecords, and LogValidator's record checks).

`analyze_batches` runs on every produced batch and reads only its 61-byte header and CRC
(`protocol/records.iter_batch_headers`): magic 0/1 message sets of Produce v0-2 are converted to a
v2 batch first, v3+ must carry exactly one batch per partition, a batch above max.message.bytes is
MESSAGE_TOO_LARGE, clients may not write control batches. It returns the record-level checks as a
callable only for the topics where Kafka's LogValidator must look at records: the keys on
compacted topics, each record's timestamp where message.timestamp.{before,after}.max.ms are set; the
replica manager's `append_records` runs it after the min.insync.replicas check, as Kafka does. An
invalid record fails its whole batch with per-record errors (Produce v8+: RecordValidationError).
"""
from __future__ import annotations

import time

from ..log.config import LONG_MAX
from ..protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from ..protocol.records import MAGIC_POS, NO_TIMESTAMP, iter_batch_headers, iter_records, keyless_record_indexes

__all__ = ["RecordValidationError", "analyze_batches"]

# Decompression bound for the key check of compacted topics (Kafka streams the records
# instead, unbounded); a batch that inflates beyond it is refused as corrupt.
_KEY_CHECK_MAX_DECOMPRESSED = 256 * 1024 * 1024


class RecordValidationError(KafkaError):
    """Some records of a batch are invalid (Kafka's RecordValidationException): the whole batch
    fails and the response lists each record's error (Produce v8+)."""

    def __init__(self, record_errors: list[tuple[int, str]], code: int = ErrorCode.INVALID_RECORD,
                 log_start_offset: int = -1):
        if code == ErrorCode.INVALID_TIMESTAMP:
            message = "One or more records have been rejected due to invalid timestamp"
        else:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
            message = (f"One or more records have been rejected due to {len(record_errors)} record errors in"
                       f" total, and only showing the first three errors at most: [{shown}]")
        super().__init__(message, code)
        self.record_errors = record_errors
        self.log_start_offset = log_start_offset


def _java_long(value: int) -> int:
    """Kafka prints the bounds as Java longs, which wrap (now + Long.MAX_VALUE is negative)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _timestamp_errors(buf, header, config) -> dict[int, str]:
    """CreateTime with message.timestamp.{before,after}.max.ms set: every record's timestamp
    (but NO_TIMESTAMP) must lie within them (LogValidator.validateTimestamp)."""
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    now = int(time.time() * 1000)
    errors = {}
    for i, record in enumerate(iter_records(buf, header, _KEY_CHECK_MAX_DECOMPRESSED)):
        ts = record.timestamp
        if ts != NO_TIMESTAMP and (now - ts > before or ts - now > after):
            errors[i] = (f"Timestamp {ts} of message with offset {record.offset} is out of range. The timestamp "
                         f"should be within [{_java_long(now - before)}, {_java_long(now + after)}]")
    return errors


def _validate_records(buf, headers, config, name: str, index: int, plog) -> None:
    """The record-level checks of Kafka's LogValidator, on the topics that need them: keys on
    compacted topics, timestamps where limits are set. Other topics' batches stay opaque."""
    compacted = "compact" in config.cleanup_policy and config.compact_enabled
    timestamps = (config.message_timestamp_before_max_ms != LONG_MAX
                  or config.message_timestamp_after_max_ms != LONG_MAX) \
        and config.message_timestamp_type == "CreateTime"
    if not (compacted or timestamps):
        return
    for header in headers:
        if header.is_control:
            continue
        errors = _timestamp_errors(buf, header, config) if timestamps else {}
        code = ErrorCode.INVALID_TIMESTAMP if errors else ErrorCode.INVALID_RECORD
        if compacted:
            message = f"Compacted topic cannot accept message without key in topic partition {name}-{index}."
            for i in keyless_record_indexes(buf, header, _KEY_CHECK_MAX_DECOMPRESSED):
                errors[i] = message  # a record's key error comes before its timestamp error
            if code == ErrorCode.INVALID_TIMESTAMP and not any(m.startswith("Timestamp") for m in errors.values()):
                code = ErrorCode.INVALID_RECORD
        if errors:
            raise RecordValidationError(sorted(errors.items()), code, plog.log_start_offset)


def _to_v2(records, version: int, max_size: int) -> bytearray:
    """Produce v0-2 carry magic 0/1 message sets; the log only stores magic 2."""
    if version <= 2 and len(records) > MAGIC_POS and records[MAGIC_POS] < 2:
        from ..protocol.legacy_records import legacy_to_v2  # only clients older than record batches

        return bytearray(legacy_to_v2(bytes(records), max_size=max_size))
    return bytearray(records)



def analyze_batches(part, records, version: int):
    """A produce's batches for partition `part` (led here): (the v2 buffer, its checked batch
    headers, the record-level checks to run before the append or None). Raises KafkaError with
    the partition's error code (CORRUPT_MESSAGE for a bad header or CRC)."""
    plog = part.log
    config = plog.config
    if records is None or len(records) == 0:
        raise CorruptRecordError("produce request carries no record batch")
    max_bytes = config.max_message_bytes
    buf = _to_v2(records, version, max_bytes * 4)
    headers = list(iter_batch_headers(buf, validate=True))
    if version >= 3 and len(headers) != 1:
        raise KafkaError("produce requests of v3 and later must carry exactly one record batch"
                         " per partition", ErrorCode.INVALID_RECORD)
    for header in headers:
        if header.size > max_bytes:
            raise KafkaError(f"batch of {header.size} bytes exceeds max.message.bytes {max_bytes}",
                             ErrorCode.MESSAGE_TOO_LARGE)
        if header.is_control:
            raise KafkaError(f"clients are not allowed to write control records to {part.topic}-{part.partition}",
                             ErrorCode.INVALID_RECORD)
    # (inline: most topics pay these three tests and nothing else)
    if ("compact" in config.cleanup_policy or config.message_timestamp_before_max_ms != LONG_MAX
            or config.message_timestamp_after_max_ms != LONG_MAX):
        return buf, headers, lambda: _validate_records(buf, headers, config, part.topic, part.partition, plog)
    return buf, headers, None
