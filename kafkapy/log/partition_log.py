"""The log of one partition: appends, reads, offset lookups, flushing, retention, truncation.

Threading: append/read/retention/truncation run on the broker's event-loop thread; the
flusher threads only fsync (and write checkpoints). Changes to the segment list are made
under `_lock`, which the flusher holds while it picks the segments to sync; an append
writes its data before publishing the new segment size and end offset, so the flusher
never reports more as durable than it synced.

PartitionLog is put together from one module per concern: offset lookups by time (timestamps.py),
retention (retention.py), the replication side (truncation.py), fsync and flush (durability.py),
the aborted-transaction index (aborted_txns.py), offline and full-disk states (availability.py).
This module keeps the state they share, opening, appending, reading and rolling: the one concern
of the segments under `_lock`, about 650 lines.
"""
from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kafkapy.protocol.control_records import build_control_batch
from kafkapy.protocol.errors import CorruptRecordError
from kafkapy.protocol.records import (
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    iter_batch_headers,
    set_log_append_time,
)

from .config import LONG_MAX, LogConfig
from .errors import (
    InvalidTimestampError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from .durability import LogDurability
from .file_slice import FileSlice
from .flusher import Flusher
from .leader_epoch import LeaderEpochCache
from .retention import SegmentRetention
from .segment import INT32_MAX, LOG_SUFFIX, ROLL_UNKNOWN, LogSegment
from .timestamps import TimestampLookups
from .truncation import LogTruncation
from .aborted_txns import AbortedTransactions
from .availability import LogAvailability
from .txn_index import TransactionIndex

if TYPE_CHECKING:
    from .producer_state import ProducerStateManager
    from .storage_faults import StorageFaults

log = logging.getLogger(__name__)

# baseOffset, batchLength, partitionLeaderEpoch: patched together in one pack.
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")

__all__ = ["AppendResult", "PartitionLog", "ReadResult"]


@dataclass(slots=True)
class AppendResult:
    """What the produce response needs about an append."""

    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False


@dataclass(slots=True)
class ReadResult:
    """Whole batches for a fetch: a FileSlice of one segment, or b"" when there is no data."""

    records: FileSlice | bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    # Offset after the last batch in `records` (the fetch offset when empty).
    next_offset: int


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog(TimestampLookups, SegmentRetention, LogTruncation, LogDurability, AbortedTransactions,
                   LogAvailability):
    """One partition's segments, with Kafka's offset, retention and durability rules."""

    def __init__(self, directory: Path, config: LogConfig, *, topic: str, partition: int,
                 segments: list[LogSegment], log_start_offset: int, recovery_point: int,
                 leader_epochs: LeaderEpochCache, producer_state: ProducerStateManager,
                 flusher: Flusher | None = None):
        self.dir = Path(directory)
        self.topic = topic
        self.partition = partition
        self._apply_config(config)
        self._lock = threading.Lock()  # never taken re-entrantly; see _roll_locked
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._active = segments[-1]
        self._log_end_offset = self._active.next_offset
        self._log_start_offset = log_start_offset
        self._high_watermark = self._log_end_offset
        self.recovery_point = recovery_point
        # Everything below this offset has been fdatasynced (group commit or full flush).
        self.durable_offset = recovery_point
        self.leader_epochs = leader_epochs
        self.producer_state = producer_state
        self._own_flusher = flusher is None
        self._flusher = flusher if flusher is not None else Flusher(f"kafkapy-flusher-{self.dir.name}")
        self.auto_high_watermark = True  # single node: the high watermark follows the end
        self.offline_reason: str | None = None
        # Why appends are refused: the log is offline, or its log dir is full (ENOSPC: reads go
        # on, and writes resume when the LogManager finds space again)
        self.write_refused: str | None = None
        # Set by the LogManager: the broker's injected storage faults (tests), and who hears of an
        # I/O error (a failed write or fsync takes the whole log dir offline, as in Kafka)
        self.storage_faults: StorageFaults | None = None
        self.io_error_handler: Callable[[PartitionLog, str, OSError], None] | None = None
        self._unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        self._pending_deletes: list[tuple[float, LogSegment]] = []
        self._pending_lock = threading.Lock()  # guards _pending_deletes only
        self._closed = False
        # The log cleaner's first dirty offset (LogManager loads it from and the cleaner
        # writes it to cleaner-offset-checkpoint; see cleaner.py).
        self.cleaner_checkpoint = log_start_offset
        # Partition dirs this log was moved away from (AlterReplicaLogDirs, dir_move.py).
        self.moved_from: set[Path] = set()
        # Aborted transactions, for read_committed fetches; entries past the recovered end
        # (index written, log data lost) or before the start (segments deleted) go.
        self.txn_index = TransactionIndex(self.dir)
        if self.txn_index:
            self.txn_index.truncate_to(self._log_end_offset)
            self.txn_index.drop_before(self._log_start_offset)

    @classmethod
    def open(cls, directory: Path | str, config: LogConfig | None = None, *,
             recovery_point: int = 0, log_start_offset: int | None = None,
             clean_shutdown: bool = False, flusher: Flusher | None = None) -> PartitionLog:
        """Open (creating if needed) and recover the log in `directory` (`<topic>-<partition>`)."""
        from .producer_state import ProducerStateManager
        from .recovery import log_loaded, recover_partition_dir

        directory = Path(directory)
        config = config or LogConfig()
        recovered = recover_partition_dir(directory, config, recovery_point=recovery_point,
                                          log_start_offset=log_start_offset, clean_shutdown=clean_shutdown)
        start, end_offset = recovered.log_start_offset, recovered.log_end_offset
        plog = cls(directory, config, topic=recovered.topic, partition=recovered.partition,
                   segments=recovered.segments, log_start_offset=start, recovery_point=end_offset,
                   leader_epochs=recovered.leader_epochs, producer_state=ProducerStateManager(directory),
                   flusher=flusher)
        recovered.leader_epochs._log_end_offset = lambda: plog.log_end_offset
        replay_from = plog.producer_state.load(start, end_offset)
        plog.replay_producer_state(replay_from, end_offset)
        log_loaded(directory, recovered, clean_shutdown)
        return plog

    # ---------------------------------------------------------------- properties
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = max(self._log_start_offset, min(offset, self._log_end_offset))

    @property
    def last_stable_offset(self) -> int:
        """High watermark bounded by the first offset of any open transaction."""
        first = self.producer_state.first_undecided_offset()
        hw = self._high_watermark
        return hw if first is None or first >= hw else first

    @property
    def log_dir(self) -> Path:
        return self.dir.parent

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def size_in_bytes(self) -> int:
        return self.size_bytes

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.dir.name}, start={self._log_start_offset}, "
                f"end={self._log_end_offset}, segments={len(self._segments)})")

    # ---------------------------------------------------------------- append
    def append(self, batches, *, leader_epoch: int = 0,
               validated: list[BatchHeader] | None = None, from_client: bool = True,
               coordinator_epoch: int | None = None) -> AppendResult:
        """Assign offsets to whole v2 batches and write them with one write.

        `validated` are the headers of `batches` (CRC already checked by the caller), in
        order; without it the batches are validated here. The headers are updated in place
        with the assigned offsets and epoch. `from_client=False` marks batches the broker's
        coordinators write (Kafka's COORDINATOR origin: transaction markers, transactional
        offset commits), which carry no sequence numbers; `coordinator_epoch` is that of the
        transaction markers among them.
        """
        if self.write_refused is not None:
            self._check_writable()
        if validated is None:
            validated = list(iter_batch_headers(batches, validate=True))
        if len(validated) != 1 or self._stamp_or_check_time or not from_client:
            return self._append_many(batches, validated, leader_epoch, from_client, coordinator_epoch)
        # The common case (one client batch, CreateTime, no timestamp limits) with the same
        # rules as _append_many but no loops: this is the produce hot path, so config limits
        # are read from fields precomputed by `_apply_config`.
        batch = batches
        header = validated[0]
        size = header.batch_length + 12
        if size != len(batch):
            raise CorruptRecordError(
                f"batch header covers {size} of {len(batch)} bytes appended to {self.dir.name}")
        if size > self._append_limit:
            self._check_size(header, self.config.max_message_bytes)
            raise RecordListTooLargeError(
                f"append of {size} bytes exceeds segment.bytes {self.config.segment_bytes} of {self.dir.name}")
        count = header.last_offset_delta + 1
        idempotent = header.producer_id >= 0
        # No `_lock` here: the flusher only reads the end offset and segment sizes, which
        # are stored after the data is written, so it never syncs less than it reports.
        # Changing the segment list (a roll) does take the lock.
        if idempotent:
            duplicate = self.producer_state.check(header)
            if duplicate is not None:
                return AppendResult(duplicate.base_offset, duplicate.last_offset, duplicate.timestamp,
                                    self._log_start_offset, duplicate=True)
        base_offset = self._log_end_offset
        segment = self._active
        old_size = segment.size
        if old_size + size > self._segment_bytes or segment.index_full \
                or base_offset + count - 1 - segment.base_offset > INT32_MAX \
                or (old_size > 0 and header.max_timestamp > segment.roll_at_ts
                    and self._time_to_roll(segment, -1, header.max_timestamp)):
            with self._lock:
                segment = self._roll_locked()
            old_size = 0
        if leader_epoch != self.leader_epochs.latest_epoch and leader_epoch >= 0:
            self.leader_epochs.assign(leader_epoch, base_offset)
        _OFFSET_LENGTH_EPOCH.pack_into(batch, 0, base_offset, header.batch_length, leader_epoch)
        header.base_offset = base_offset
        header.partition_leader_epoch = leader_epoch
        # LogSegment.append for one batch, inlined: this runs once per produce request.
        try:
            if self.storage_faults is not None and self.storage_faults.active:
                self._fault_check("write")
            written = os.write(segment._fd, batch)
            if written != size:
                segment.finish_write(batch, written)
        except OSError as exc:
            self._write_failed(segment, old_size, exc)
        if old_size == 0:
            segment._first_batch_ts = header.max_timestamp
        end = base_offset + count
        max_ts = segment._max_ts
        if max_ts is None:
            max_ts = segment.max_timestamp
        if header.max_timestamp > max_ts:
            max_ts = segment._max_ts = header.max_timestamp
            segment._offset_of_max_ts = end - 1
        if segment._since_index > segment.index_interval:
            segment.add_index_entry(end - 1, old_size, max_ts)
            segment._since_index = size
        else:
            segment._since_index += size
        segment.size = old_size + size
        segment.next_offset = end
        self._log_end_offset = end
        if self.auto_high_watermark:
            self._high_watermark = end
        if idempotent:
            self.producer_state.update(header)
        unflushed = self._unflushed_messages + count
        if unflushed >= self._flush_messages:
            unflushed = 0
            self._flusher.request_flush(self, end)
        self._unflushed_messages = unflushed
        return AppendResult(base_offset, end - 1, -1, self._log_start_offset)


    def _append_many(self, batches, validated: list[BatchHeader], leader_epoch: int, from_client: bool,
                     coordinator_epoch: int | None) -> AppendResult:
        """`append` of several batches, coordinator batches, or with LogAppendTime or
        timestamp limits."""
        if not validated:
            raise CorruptRecordError(f"append to {self.dir.name} carries no record batch")
        config = self.config
        total = len(batches)
        if total > config.segment_bytes:
            raise RecordListTooLargeError(
                f"append of {total} bytes exceeds segment.bytes {config.segment_bytes} of {self.dir.name}")
        max_message_bytes = config.max_message_bytes
        has_producer = False
        count = 0
        max_ts = -1
        for header in validated:
            if header.batch_length >= max_message_bytes - 12:
                self._check_size(header, max_message_bytes)
            if header.producer_id >= 0:
                has_producer = True
            count += header.last_offset_delta + 1
            if header.max_timestamp > max_ts:
                max_ts = header.max_timestamp
        log_append_time = now_ms = -1
        if self._stamp_or_check_time:
            if config.message_timestamp_type == "LogAppendTime":
                now_ms = log_append_time = max_ts = _now_ms()
            else:
                now_ms = _now_ms()
                self._check_timestamps(validated, now_ms)

        with self._lock:
            if self.write_refused is not None:
                self._check_writable()
            if has_producer:
                duplicate = self._check_producers(validated, from_client, coordinator_epoch)
                if duplicate is not None:
                    return AppendResult(duplicate.base_offset, duplicate.last_offset, duplicate.timestamp,
                                        self._log_start_offset, duplicate=True)
            base_offset = self._log_end_offset
            segment = self._active
            size = segment.size
            if size + total > config.segment_bytes or segment.index_full \
                    or base_offset + count - 1 - segment.base_offset > INT32_MAX \
                    or (size > 0 and self._time_to_roll(segment, now_ms, max_ts)):
                segment = self._roll_locked()
                size = segment.size
            if leader_epoch != self.leader_epochs.latest_epoch and leader_epoch >= 0:
                self.leader_epochs.assign(leader_epoch, base_offset)
            # Assign offsets: patch each batch's base offset and leader epoch in place.
            pack = _OFFSET_LENGTH_EPOCH.pack_into
            offset = base_offset
            position = 0
            for header in validated:
                pack(batches, position, offset, header.batch_length, leader_epoch)
                header.base_offset = offset
                header.partition_leader_epoch = leader_epoch
                if log_append_time >= 0:
                    set_log_append_time(batches, position, log_append_time)
                    header.attributes |= TIMESTAMP_TYPE_MASK
                    header.max_timestamp = log_append_time
                offset += header.last_offset_delta + 1
                position += header.batch_length + 12
            if position != total:
                raise CorruptRecordError(
                    f"batch headers cover {position} of {total} bytes appended to {self.dir.name}")
            try:
                if self.storage_faults is not None and self.storage_faults.active:
                    self._fault_check("write")
                segment.append(batches, validated)
            except OSError as exc:
                self._write_failed(segment, size, exc)
            self._log_end_offset = offset
            if self.auto_high_watermark:
                self._high_watermark = offset
            if has_producer:
                update = self.producer_state.update
                for header in validated:
                    if header.producer_id >= 0:
                        completed = update(header, coordinator_epoch=coordinator_epoch
                                           if header.is_control else None)
                        if completed is not None:
                            self._index_completed_txn(header, completed, batches)
        self._unflushed_messages += count
        if self._unflushed_messages >= config.flush_messages:
            self._unflushed_messages = 0
            self._flusher.request_flush(self, offset)
        return AppendResult(base_offset, offset - 1, log_append_time, self._log_start_offset)

    def _check_size(self, header: BatchHeader, max_message_bytes: int) -> None:
        if header.batch_length + 12 > max_message_bytes:
            raise MessageTooLargeError(
                f"batch of {header.batch_length + 12} bytes exceeds max.message.bytes "
                f"{max_message_bytes} of {self.dir.name}")

    def _check_timestamps(self, headers: list[BatchHeader], now_ms: int) -> None:
        before = self.config.message_timestamp_before_max_ms
        after = self.config.message_timestamp_after_max_ms
        for header in headers:
            if header.is_control:
                continue
            # records without a timestamp (-1, e.g. converted magic 0 messages) are not checked
            low = header.max_timestamp if header.base_timestamp == -1 else min(header.base_timestamp,
                                                                               header.max_timestamp)
            if low == -1:
                continue
            if now_ms - low > before or header.max_timestamp - now_ms > after:
                raise InvalidTimestampError(
                    f"timestamp of a batch for {self.dir.name} is out of range "
                    f"(message.timestamp.before.max.ms={before}, after.max.ms={after})")

    def _check_producers(self, headers: list[BatchHeader], from_client: bool = True,
                         coordinator_epoch: int | None = None):
        check = self.producer_state.check
        for header in headers:
            if header.producer_id >= 0:
                duplicate = check(header, from_client=from_client,
                                  coordinator_epoch=coordinator_epoch if header.is_control else None)
                if duplicate is not None:
                    return duplicate
        return None

    def _time_to_roll(self, segment: LogSegment, now_ms: int, max_ts: int) -> bool:
        """segment.ms: Kafka measures from the first batch's timestamp when it has one."""
        config = self.config
        # Kafka's LogConfig.maxSegmentMs: a compacted log rolls by max.compaction.lag.ms too,
        # so that its active segment becomes cleanable in time.
        segment_ms = min(config.segment_ms, config.max_compaction_lag_ms) if config.compact_enabled \
            else config.segment_ms
        roll_ms = segment_ms - segment.roll_jitter_ms
        first = segment._first_batch_ts
        if first is None:
            first = segment.first_batch_timestamp()
        if first >= 0:
            # Cached so the hot path compares one number; reset when the config changes.
            segment.roll_at_ts = first + roll_ms
            return max_ts - first > roll_ms
        return (now_ms if now_ms >= 0 else _now_ms()) - segment.created_ms > roll_ms

    def _write_failed(self, segment: LogSegment, old_size: int, exc: OSError):
        # the part of the batch that reached the file goes (a full disk writes some of it): the
        # segment ends with its last whole batch, and O_APPEND puts the next write right there
        try:
            os.ftruncate(segment.file.fileno(), old_size)
        except OSError:
            log.exception("could not cut the failed write off %s", segment)
            self._mark_offline(f"write to {segment.path(LOG_SUFFIX).name} failed and could not be cut off: {exc}")
        self._io_failed(f"write to {segment.path(LOG_SUFFIX).name}", exc)
        raise KafkaStorageError(f"write to {self.dir.name} failed: {exc}") from exc

    # ---------------------------------------------------------------- read
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        """Whole batches from the one containing `offset`, up to `max_bytes` and `max_offset`.

        Raises OffsetOutOfRangeError unless log_start_offset <= offset <= log_end_offset;
        offset == log_end_offset (or >= max_offset) returns empty records: no data yet.
        """
        self._check_online()
        end_offset = self._log_end_offset
        if offset < self._log_start_offset or offset > end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.dir.name} "
                f"[{self._log_start_offset}, {end_offset}]")
        upper = end_offset if max_offset is None or max_offset > end_offset else max_offset
        if offset >= upper:
            return self._empty(offset)
        segments = self._segments
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0:
            i = 0
        while True:
            segment = segments[i]
            header = segment.find_batch(offset)
            if header is not None:
                break
            i += 1
            if i >= len(segments):
                return self._empty(offset)
            offset = max(offset, segments[i].base_offset)
        if header.base_offset >= upper:
            return self._empty(offset)
        start = header.position
        if upper >= segment.next_offset:
            limit, limit_offset = segment.size, segment.next_offset
        else:
            stop = segment.find_batch(upper)
            if stop is None:
                limit, limit_offset = segment.size, segment.next_offset
            else:
                limit, limit_offset = stop.position, stop.base_offset
        if limit - start > max_bytes:
            limit, limit_offset = segment.boundary_at_or_before(start + max_bytes, start)
            if limit <= start:
                if not min_one_batch:
                    return self._empty(offset)
                limit = start + header.batch_length + 12
                limit_offset = header.base_offset + header.last_offset_delta + 1
        records = FileSlice(segment.file, start, limit - start, header.base_offset, limit_offset)
        return ReadResult(records, self._high_watermark, self._log_start_offset, end_offset, limit_offset)

    def _empty(self, offset: int) -> ReadResult:
        return ReadResult(b"", self._high_watermark, self._log_start_offset, self._log_end_offset, offset)

    # ---------------------------------------------------------------- transactions
    def append_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                          commit: bool, *, leader_epoch: int = 0,
                          timestamp: int | None = None) -> AppendResult:
        """Append a COMMIT or ABORT marker closing the producer's transaction (WriteTxnMarkers).

        Raises InvalidProducerEpochError for a marker older than the producer's epoch and
        TransactionCoordinatorFencedError for one from an older coordinator epoch.
        """
        batch = bytearray(build_control_batch(commit, producer_id, producer_epoch, coordinator_epoch,
                                              timestamp=timestamp))
        return self.append(batch, leader_epoch=leader_epoch, from_client=False,
                           coordinator_epoch=coordinator_epoch)

    # ---------------------------------------------------------------- leader epochs
    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        with self._lock:
            self.leader_epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; (-1, -1) when unknown."""
        return self.leader_epochs.end_offset_for_epoch(epoch)

    # ---------------------------------------------------------------- rolling
    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        with self._lock:
            return self._roll_locked()

    def _roll_locked(self) -> LogSegment:
        active = self._active
        new_base = self._log_end_offset
        if active.size == 0 and active.base_offset == new_base:
            return active
        path = self.dir / f"{new_base:020d}{LOG_SUFFIX}"
        if path.exists():
            if path.stat().st_size:
                self._mark_offline(f"cannot roll: {path.name} already exists")
                raise KafkaStorageError(f"cannot roll {self.dir.name}: {path.name} already exists")
            log.warning("%s: replacing empty leftover segment file %s", self.dir.name, path.name)
        config = self.config
        try:
            if self.storage_faults is not None and self.storage_faults.active:
                self._fault_check("write")
            active.make_inactive()
            segment = LogSegment(self.dir, new_base, max_index_size=config.segment_index_bytes,
                                 active=True, now_ms=_now_ms(), index_interval=config.index_interval_bytes,
                                 jitter_ms=config.segment_jitter_ms, fresh_indexes=True, new_file=True)
        except OSError as exc:
            self._io_failed(f"roll of {self.dir.name}", exc)
            raise KafkaStorageError(f"roll of {self.dir.name} failed: {exc}") from exc
        self._segments.append(segment)
        self._bases.append(new_base)
        self._active = segment
        if self.producer_state.active_producers():
            self.producer_state.snapshot(new_base)
        log.info("rolled %s to a new segment at offset %d", self.dir.name, new_base)
        # Kafka flushes the previous segments asynchronously on roll; so do we.
        self._flusher.request_flush(self, new_base)
        return segment

    # ---------------------------------------------------------------- moving between log dirs
    def _switch_dir_locked(self, directory: Path, segments: list[LogSegment]) -> list[LogSegment]:
        """Serve from `directory`, a complete, fsynced copy of this log's files whose segments are
        `segments` (reopened there, same base offsets); returns the segments left behind.
        The caller holds `_lock` on the event-loop thread, so no append runs meanwhile."""
        if [s.base_offset for s in segments] != self._bases:
            raise ValueError(f"segments of {directory} do not match those of {self.dir}")
        old = self._segments
        self._segments = segments
        self._active = segments[-1]
        self.dir = Path(directory)
        self.leader_epochs.path = self.dir / self.leader_epochs.path.name
        self.producer_state.dir = self.dir
        self.txn_index.dir = self.dir
        # Every copied file was fsynced, the active segment's indexes included.
        self.recovery_point = self.durable_offset = self._log_end_offset
        self._unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        return old

    # ---------------------------------------------------------------- config and lifecycle
    def _apply_config(self, config: LogConfig) -> None:
        self.config = config
        self._stamp_or_check_time = (config.message_timestamp_type == "LogAppendTime"
                                     or config.message_timestamp_before_max_ms != LONG_MAX
                                     or config.message_timestamp_after_max_ms != LONG_MAX)
        self._append_limit = min(config.max_message_bytes, config.segment_bytes)
        self._segment_bytes = config.segment_bytes
        self._flush_messages = config.flush_messages

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self._apply_config(config)
            for segment in self._segments:
                segment.roll_at_ts = ROLL_UNKNOWN
            for segment in self._segments:
                segment.index_interval = config.index_interval_bytes

    def close(self) -> None:
        """Flush, snapshot producer state, trim the active indexes and close every file."""
        if self._closed:
            return
        try:
            if self.offline_reason is None:
                self.flush()
                try:
                    self.producer_state.snapshot(self._log_end_offset)
                except OSError as exc:
                    log.warning("could not snapshot producer state of %s: %s", self.dir.name, exc)
        finally:
            with self._lock:
                self._closed = True
            self._flusher.forget(self)
            if self._own_flusher:
                self._flusher.stop()
            for segment in self._segments:
                try:
                    segment.close()
                except OSError as exc:
                    log.warning("closing %s failed: %s", segment, exc)
            self._run_pending_deletes(time.monotonic(), force=True)

    def abandon(self) -> None:
        """Close file descriptors without flushing or trimming (tests simulating a crash)."""
        with self._lock:
            self._closed = True
        self._flusher.forget(self)
        if self._own_flusher:
            self._flusher.stop()
        for segment in self._segments + [s for _, s in self._pending_deletes]:
            segment.closed = True
            try:
                segment.file.close()
            except OSError:
                pass
            for index in (segment.offset_index, segment.time_index):
                if index._fd >= 0:
                    os.close(index._fd)
                    index._fd = -1
