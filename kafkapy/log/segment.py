"""One log segment: the .log file of batches plus its .index and .timeindex.

Files are named after the segment's base offset with 20 digits, exactly as Kafka does.
Batches are stored back to back as they were appended; the segment only ever reads their
headers (to translate offsets to positions) except in `recover`, which checks every CRC.
"""
from __future__ import annotations

import io
import logging
import os
import random
from pathlib import Path
from typing import Callable, Iterator

from kafkapy.protocol.records import (
    ATTRIBUTES_POS,
    HEADER_SIZE,
    BatchHeader,
    read_batch_header,
)
from kafkapy.protocol.errors import CorruptRecordError

from .offset_index import OffsetIndex
from .sparse_index import CorruptIndexError
from .time_index import TimeIndex

log = logging.getLogger(__name__)


def crc32c(data) -> int:
    """The CRC-32C of `data`; imports crc32c on first use and rebinds this name to its C function
    (as protocol.records.crc32c, which see)."""
    global crc32c
    from crc32c import crc32c

    return crc32c(data)


LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"  # a segment being written by the log cleaner
SWAP_SUFFIX = ".swap"  # a complete cleaned segment about to replace the original
INT32_MAX = 2147483647
# roll_at_ts before it is known (and for segments without timestamps, rolled by the clock).
ROLL_UNKNOWN = -(1 << 63)

_HEADER_CHUNK = 16384
_RECOVERY_CHUNK = 4 << 20
# What reopen_copy carries over to the copy of a segment besides its files.
_MOVED_STATE = ("next_offset", "_max_ts", "_offset_of_max_ts", "_since_index", "roll_jitter_ms",
                "_first_batch_ts", "index_full", "roll_at_ts")

__all__ = ["LogSegment", "segment_file_name", "INT32_MAX", "LOG_SUFFIX", "INDEX_SUFFIX",
           "TIME_INDEX_SUFFIX", "DELETED_SUFFIX", "CLEANED_SUFFIX", "SWAP_SUFFIX"]


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A contiguous range of a partition's batches in one set of files."""

    __slots__ = ("dir", "base_offset", "file", "_fd", "size", "next_offset", "offset_index",
                 "time_index", "_max_ts", "_offset_of_max_ts", "_since_index", "created_ms",
                 "roll_jitter_ms", "_first_batch_ts", "closed", "deleted", "needs_dir_sync",
                 "durable_size", "flushed_size", "index_interval", "index_full", "roll_at_ts", "rewrites")

    def __init__(self, directory: Path, base_offset: int, *, max_index_size: int, active: bool,
                 now_ms: int, index_interval: int = 4096, jitter_ms: int = 0,
                 fresh_indexes: bool = False, new_file: bool = False):
        self.dir = Path(directory)
        self.index_interval = index_interval
        self.base_offset = base_offset
        self.closed = False
        self.deleted = False
        self.needs_dir_sync = new_file
        path = self.path(LOG_SUFFIX)
        self.file = io.FileIO(path, "a+")  # O_RDWR | O_APPEND | O_CREAT
        self._fd = self.file.fileno()
        try:
            self.size = os.fstat(self._fd).st_size
            self.offset_index = OffsetIndex(self.path(INDEX_SUFFIX), base_offset, max_index_size,
                                            active=active, fresh=fresh_indexes)
            self.time_index = TimeIndex(self.path(TIME_INDEX_SUFFIX), base_offset, max_index_size,
                                        active=active, fresh=fresh_indexes)
        except BaseException:
            self.file.close()
            raise
        self.next_offset = base_offset  # set properly by whoever loads or appends
        self._max_ts: int | None = None if not (fresh_indexes or new_file) else -1
        self._offset_of_max_ts = base_offset
        self._since_index = 0
        self.index_full = False
        self.created_ms = now_ms
        self.roll_jitter_ms = random.randrange(jitter_ms) if jitter_ms > 0 else 0
        self._first_batch_ts: int | None = None
        # Batches with a max timestamp above this may need a time-based roll.
        self.roll_at_ts = ROLL_UNKNOWN
        # Bytes known to be on disk: `durable_size` by fdatasync of the .log alone (group
        # commit), `flushed_size` with indexes too (what a recovery point may rely on).
        self.durable_size = self.size if not new_file else 0
        self.flushed_size = self.durable_size
        # Bumped whenever bytes already written are changed or removed (truncation, index
        # rebuild), so that a copy of the files (dir_move.py) knows it is stale.
        self.rewrites = 0

    def path(self, suffix: str) -> Path:
        return self.dir / segment_file_name(self.base_offset, suffix)

    def __repr__(self) -> str:
        """Which segment and how big: the rest is open files, indexes and bookkeeping."""
        return f"LogSegment({self.dir.name}/{self.base_offset:020d}, size={self.size})"

    # ---------------------------------------------------------------- timestamps
    @property
    def max_timestamp(self) -> int:
        """Largest batch max timestamp in the segment (-1 if none)."""
        if self._max_ts is None:
            self._max_ts, self._offset_of_max_ts = self.time_index.last_entry()
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        self.max_timestamp  # noqa: B018  (loads lazily)
        return self._offset_of_max_ts

    def largest_timestamp(self) -> int:
        """Kafka's LogSegment.largestTimestamp: max timestamp, else the file's mtime."""
        ts = self.max_timestamp
        if ts >= 0:
            return ts
        try:
            return int(os.stat(self.path(LOG_SUFFIX)).st_mtime * 1000)
        except FileNotFoundError:
            return -1

    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch (Kafka's rolling-based timestamp), -1 if empty."""
        if self._first_batch_ts is None:
            if self.size < HEADER_SIZE:
                return -1
            self._first_batch_ts = read_batch_header(os.pread(self._fd, HEADER_SIZE, 0)).max_timestamp
        return self._first_batch_ts

    # ---------------------------------------------------------------- append
    def append(self, buf, headers: list[BatchHeader]) -> None:
        """Write `buf` (whole batches with offsets assigned) in one write; index it."""
        position = self.size
        if position == 0:
            self._first_batch_ts = headers[0].max_timestamp
        written = os.write(self._fd, buf)
        total = len(buf)
        if written != total:
            self.finish_write(buf, written)
        # Indexing, inlined from _index: this runs once per produce request.
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self.max_timestamp
        since = self._since_index
        interval = self.index_interval
        for h in headers:
            last_offset = h.base_offset + h.last_offset_delta
            if h.max_timestamp > max_ts:
                max_ts = self._max_ts = h.max_timestamp
                self._offset_of_max_ts = last_offset
            if since > interval:
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(max_ts, self._offset_of_max_ts)
                self.index_full = self.offset_index.is_full or self.time_index.is_full
                since = 0
            size = h.batch_length + 12
            position += size
            since += size
        self._since_index = since
        self.size = position
        self.next_offset = last_offset + 1

    def finish_write(self, buf, written: int) -> None:
        """Complete a short write (a full disk or a signal); raises OSError if impossible."""
        view = memoryview(buf)
        while written < len(buf):
            n = os.write(self._fd, view[written:])
            if n <= 0:
                raise OSError("short write to segment")
            written += n

    def add_index_entry(self, last_offset: int, position: int, max_ts: int) -> None:
        self.offset_index.append(last_offset, position)
        self.time_index.maybe_append(max_ts, self._offset_of_max_ts)
        self.index_full = self.offset_index.is_full or self.time_index.is_full

    def _index(self, headers, position: int) -> None:
        index_interval = self.index_interval
        max_ts = self.max_timestamp
        max_off = self._offset_of_max_ts
        since = self._since_index
        for h in headers:
            last_offset = h.base_offset + h.last_offset_delta
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                max_off = last_offset
            if since > index_interval:
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(max_ts, max_off)
                self.index_full = self.offset_index.is_full or self.time_index.is_full
                since = 0
            size = h.batch_length + 12
            position += size
            since += size
        self._since_index = since
        self._max_ts = max_ts
        self._offset_of_max_ts = max_off

    def _update_index_full(self) -> None:
        self.index_full = self.offset_index.is_full or self.time_index.is_full

    # ---------------------------------------------------------------- reading headers
    def iter_headers(self, position: int, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the batches from `position` (a batch start) up to `end` (default: size).

        Raises CorruptRecordError on an unreadable header or a batch running past `end`.
        """
        end = self.size if end is None else end
        fd = self._fd
        chunk = b""
        chunk_pos = position
        while position < end:
            off = position - chunk_pos
            if off + HEADER_SIZE > len(chunk):
                chunk = os.pread(fd, min(_HEADER_CHUNK, max(end - position, HEADER_SIZE)), position)
                chunk_pos = position
                off = 0
            header = read_batch_header(chunk, off)
            header.position = position
            position += header.batch_length + 12
            if position > end:
                raise CorruptRecordError(
                    f"{self.path(LOG_SUFFIX)}: batch at byte {header.position} runs past byte {end}")
            yield header

    # ---------------------------------------------------------------- index lookups
    # A damaged index found on first use is rebuilt from the batch headers, once.
    def lookup_offset(self, offset: int) -> tuple[int, int]:
        """Largest offset index entry <= `offset` as (offset, position)."""
        try:
            return self.offset_index.lookup(offset)
        except CorruptIndexError as exc:
            self._index_failed(exc)
            return self.offset_index.lookup(offset)

    def lookup_position(self, position: int) -> tuple[int, int]:
        try:
            return self.offset_index.lookup_position(position)
        except CorruptIndexError as exc:
            self._index_failed(exc)
            return self.offset_index.lookup_position(position)

    def lookup_timestamp(self, timestamp: int) -> tuple[int, int]:
        """Largest time index entry with timestamp <= `timestamp` as (timestamp, offset)."""
        try:
            return self.time_index.lookup(timestamp)
        except CorruptIndexError as exc:
            self._index_failed(exc)
            return self.time_index.lookup(timestamp)

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch with last offset >= `offset`, or None past the segment's end."""
        entry_offset, position = self.lookup_offset(offset)
        check = position > 0
        try:
            for header in self.iter_headers(position):
                if check:
                    check = False
                    if header.base_offset + header.last_offset_delta != entry_offset:
                        raise CorruptIndexError(f"entry {entry_offset}@{position} does not match")
                if header.base_offset + header.last_offset_delta >= offset:
                    return header
        except (CorruptIndexError, CorruptRecordError) as exc:
            if position == 0:
                raise
            self._index_failed(exc)
            return self.find_batch(offset)
        return None

    def boundary_at_or_before(self, limit: int, start: int) -> tuple[int, int]:
        """(end position, next offset) of the last whole batch ending at or before byte `limit`,
        scanning from batch start `start`; (start, -1) if the first batch does not fit."""
        entry_offset, entry_pos = self.lookup_position(limit)
        scan_from = entry_pos if entry_pos > start else start
        end, next_offset = scan_from, -1
        try:
            for header in self.iter_headers(scan_from):
                if header.position == scan_from:
                    next_offset = header.base_offset
                    if scan_from == entry_pos and entry_pos > start \
                            and header.base_offset + header.last_offset_delta != entry_offset:
                        raise CorruptIndexError(f"entry {entry_offset}@{entry_pos} does not match")
                batch_end = header.position + header.batch_length + 12
                if batch_end > limit:
                    break
                end, next_offset = batch_end, header.base_offset + header.last_offset_delta + 1
        except CorruptIndexError as exc:
            self._index_failed(exc)
            return self.boundary_at_or_before(limit, start)
        return end, next_offset

    def _index_failed(self, exc: Exception) -> None:
        log.warning("rebuilding index of segment %s: %s", self.path(LOG_SUFFIX), exc)
        self.rebuild_indexes()

    def rebuild_indexes(self) -> None:
        """Recreate both indexes from the batch headers (no CRC check)."""
        self.rewrites += 1
        self._since_index = 0
        self._max_ts = -1
        self._offset_of_max_ts = self.base_offset
        self.offset_index.replace_entries(b"")
        self.time_index.replace_entries(b"")
        headers = list(self.iter_headers(0))
        if not self.offset_index.active:
            self.offset_index.make_active()
            self.time_index.make_active()
            self._index(headers, 0)
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts)
            self.offset_index.make_inactive()
            self.time_index.make_inactive()
        else:
            self._index(headers, 0)

    # ---------------------------------------------------------------- recovery
    def recover(self, accept: Callable[[BatchHeader], bool]) -> int:
        """Check every batch (header, length, CRC32C) and rebuild the indexes from them.

        `accept(header)` may reject a batch whose offsets or epoch do not follow the previous
        one. Everything from the first bad or rejected batch on is cut off. Returns the number
        of bytes truncated.
        """
        fd = self._fd
        size = os.fstat(fd).st_size
        self.offset_index.replace_entries(b"")
        self.time_index.replace_entries(b"")
        self._since_index = 0
        self._max_ts = -1
        self._offset_of_max_ts = self.base_offset
        self._first_batch_ts = None
        position = 0
        chunk = b""
        chunk_pos = 0
        good: list[BatchHeader] = []
        next_offset = self.base_offset
        reason = None
        while position < size:
            if size - position < HEADER_SIZE:
                reason = f"{size - position} trailing bytes, less than a batch header"
                break
            off = position - chunk_pos
            if off < 0 or off + HEADER_SIZE > len(chunk):
                chunk = os.pread(fd, min(_RECOVERY_CHUNK, size - position), position)
                chunk_pos, off = position, 0
            try:
                header = read_batch_header(chunk, off)
            except CorruptRecordError as exc:
                reason = str(exc)
                break
            batch_size = header.batch_length + 12
            if position + batch_size > size:
                reason = f"batch of {batch_size} bytes runs past the end of the file"
                break
            if off + batch_size > len(chunk):
                chunk = os.pread(fd, max(_RECOVERY_CHUNK, batch_size), position)
                chunk_pos, off = position, 0
            if crc32c(memoryview(chunk)[off + ATTRIBUTES_POS: off + batch_size]) != header.crc:
                reason = "CRC mismatch"
                break
            if header.records_count < 0 or header.last_offset_delta < 0 \
                    or header.base_offset < self.base_offset \
                    or header.base_offset + header.last_offset_delta - self.base_offset > INT32_MAX:
                reason = f"impossible offsets (base {header.base_offset})"
                break
            header.position = position
            if not accept(header):
                reason = f"batch at offset {header.base_offset} does not follow the previous one"
                break
            good.append(header)
            next_offset = header.base_offset + header.last_offset_delta + 1
            position += batch_size
            if len(good) >= 4096:
                self._index(good, good[0].position)
                good.clear()
        if good:
            self._index(good, good[0].position)
        truncated = size - position
        if truncated:
            log.warning("%s: truncating %d bytes at byte %d: %s", self.path(LOG_SUFFIX), truncated,
                        position, reason)
            os.ftruncate(fd, position)
        self.size = position
        self.next_offset = next_offset
        self.durable_size = self.flushed_size = 0  # recovered data is fsynced by the caller
        return truncated

    def load_next_offset(self) -> None:
        """Find the segment's end by scanning headers from the last index entry (clean start)."""
        last_offset, position = self.offset_index.last_entry()
        self.next_offset = self.base_offset
        if position < 0 or position > self.size:
            raise CorruptIndexError(f"{self.offset_index.path}: entry past the end of the log")
        for header in self.iter_headers(position):
            self.next_offset = header.base_offset + header.last_offset_delta + 1
        if self.size and self.next_offset == self.base_offset:
            raise CorruptIndexError(f"{self.path(LOG_SUFFIX)}: no batch found")

    def check_index_consistency(self) -> None:
        """Cheap start-up sanity check of a clean segment (Kafka's sanityCheck, plus one read)."""
        last_offset, position = self.offset_index.last_entry()
        if position == 0 and last_offset == self.base_offset:
            return
        if position < 0 or last_offset < self.base_offset or position >= self.size:
            raise CorruptIndexError(f"{self.offset_index.path}: entry {position} past log end {self.size}")
        header = read_batch_header(os.pread(self._fd, HEADER_SIZE, position))
        if header.base_offset + header.last_offset_delta != last_offset:
            raise CorruptIndexError(f"{self.offset_index.path}: last entry does not match its batch")
        ts, ts_offset = self.time_index.last_entry()
        if ts >= 0 and ts_offset < self.base_offset:
            raise CorruptIndexError(f"{self.time_index.path}: last entry before the base offset")

    # ---------------------------------------------------------------- truncation
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; returns bytes removed."""
        header = self.find_batch(offset)
        if header is None:
            return 0
        position = header.position
        removed = self.size - position
        self.rewrites += 1
        # Entries are last offsets of batches, so this drops the entry of every removed batch.
        try:
            self.offset_index.truncate_to(header.base_offset)
            self.time_index.truncate_to(header.base_offset)
        except CorruptIndexError as exc:
            self._index_failed(exc)
            self.offset_index.truncate_to(header.base_offset)
            self.time_index.truncate_to(header.base_offset)
        os.ftruncate(self._fd, position)
        self.size = position
        self.next_offset = header.base_offset
        self.durable_size = min(self.durable_size, position)
        self.flushed_size = min(self.flushed_size, position)
        self._since_index = 0
        self._update_index_full()
        if position == 0:
            self._first_batch_ts = None
            self.roll_at_ts = ROLL_UNKNOWN
            self._max_ts, self._offset_of_max_ts = -1, self.base_offset
        else:
            self._recompute_max_timestamp()
        return removed

    def _recompute_max_timestamp(self) -> None:
        # The last time index entry holds the max timestamp up to the last offset index
        # entry's batch (both are written together), so only later batches need reading.
        _, start = self.offset_index.last_entry()
        ts, ts_off = self.time_index.last_entry()
        for header in self.iter_headers(start):
            if header.max_timestamp > ts:
                ts, ts_off = header.max_timestamp, header.base_offset + header.last_offset_delta
        self._max_ts, self._offset_of_max_ts = ts, ts_off

    # ---------------------------------------------------------------- moving
    def reopen_copy(self, directory: Path, max_index_size: int) -> LogSegment:
        """This segment opened from a byte copy of its files in `directory` (a move to another
        log dir), with the same in-memory state. The copy of the .log must be complete, and for
        an inactive segment that of the indexes too; an active segment's index entries are
        written there from memory. Everything is fsynced."""
        active = self.offset_index.active
        copy = LogSegment(directory, self.base_offset, max_index_size=max_index_size, active=active,
                          now_ms=self.created_ms, index_interval=self.index_interval,
                          fresh_indexes=active)
        try:
            if copy.size != self.size:
                raise OSError(f"{copy.path(LOG_SUFFIX)} holds {copy.size} bytes, {self.size} expected")
            for name in _MOVED_STATE:
                setattr(copy, name, getattr(self, name))
            if active:
                copy.offset_index.replace_entries(bytes(self.offset_index._load()))
                copy.time_index.replace_entries(bytes(self.time_index._load()))
                copy.flush()
            copy.durable_size = copy.flushed_size = copy.size
        except BaseException:
            copy.close()
            raise
        return copy

    def dir_renamed(self, directory: Path) -> None:
        """The segment's directory was renamed to `directory` (its open files stay valid)."""
        self.dir = Path(directory)
        self.offset_index.path = self.path(INDEX_SUFFIX)
        self.time_index.path = self.path(TIME_INDEX_SUFFIX)

    # ---------------------------------------------------------------- lifecycle
    def sync_log(self) -> None:
        """fdatasync the .log file (group commit); called from the flusher thread."""
        size = self.size
        if self.closed:
            return
        os.fdatasync(self._fd)
        if size > self.durable_size:
            self.durable_size = size

    def flush(self) -> None:
        """fsync the .log and both indexes (what a recovery point relies on)."""
        size = self.size
        if self.closed:
            return
        os.fdatasync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        if size > self.durable_size:
            self.durable_size = size
        if size > self.flushed_size:
            self.flushed_size = size

    def make_inactive(self) -> None:
        """The segment stops being active: record its max timestamp and trim the indexes."""
        if self._max_ts is not None and self._max_ts >= 0:
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts)
        self.offset_index.make_inactive()
        self.time_index.make_inactive()

    def make_active(self) -> None:
        self.max_timestamp  # noqa: B018  (load before the time index becomes writable)
        self.offset_index.make_active()
        self.time_index.make_active()
        self._update_index_full()

    def close(self) -> None:
        if self.closed:
            return
        if self.offset_index.active:
            self.make_inactive()
        self.offset_index.close()
        self.time_index.close()
        self.closed = True
        self.file.close()

    def rename_for_deletion(self) -> None:
        """Rename every file to `<name>.deleted` (Kafka's asynchronous delete, step one)."""
        self.deleted = True
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            src = self.path(suffix)
            try:
                os.rename(src, str(src) + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        self.offset_index.path = Path(str(self.path(INDEX_SUFFIX)) + DELETED_SUFFIX)
        self.time_index.path = Path(str(self.path(TIME_INDEX_SUFFIX)) + DELETED_SUFFIX)

    def delete_files(self) -> None:
        """Close and unlink (step two, after file.delete.delay.ms)."""
        self.close()
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            names = (Path(str(self.path(suffix)) + DELETED_SUFFIX),)
            if not self.deleted:
                # Once renamed, the plain names may belong to a newer segment with the same
                # base offset (the log cleaner's replacement), which must survive.
                names = (self.path(suffix),) + names
            for name in names:
                try:
                    os.unlink(name)
                except FileNotFoundError:
                    pass
