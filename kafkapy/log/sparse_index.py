"""The file mechanics shared by the offset and time indexes: fixed-size big-endian entries.

Kafka preallocates an index file to segment.index.bytes, fills it through an mmap and
trims it to the used length when the segment stops being active. We keep the active
index's entries in a bytearray (appends are a struct pack, no syscall), write them to the
preallocated file when the segment is flushed or trimmed, and read inactive indexes
through a read-only mmap loaded on first use. After a crash the active segment's index
is rebuilt from the log anyway, so only flushed entries ever need to be on disk.
"""
from __future__ import annotations

import logging
import mmap
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)


class CorruptIndexError(Exception):
    """An index file whose entries are not monotonic or point outside their segment."""


class SparseIndex:
    """Fixed-size entries in one file; subclasses define the entry layout and lookups."""

    ENTRY_SIZE = 8  # overridden

    __slots__ = ("path", "base_offset", "max_entries", "_buf", "_fd", "_flushed", "_lock",
                 "_active", "_needs_fsync", "_mmap", "_trusted")

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, active: bool,
                 fresh: bool = False):
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // self.ENTRY_SIZE, 1)
        self._lock = threading.Lock()
        self._active = active
        self._fd = -1
        self._mmap: mmap.mmap | None = None
        self._needs_fsync = False
        self._flushed = 0
        self._buf: bytearray | bytes | mmap.mmap | None = None
        self._trusted = False  # entries we wrote ourselves need no ordering check
        if fresh:
            # Recovery rebuilds this index: whatever the file held is discarded.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))
            self._trusted = True
        if active:
            self._open_active()

    # ---------------------------------------------------------------- state
    def _open_active(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size % self.ENTRY_SIZE:
                raise CorruptIndexError(
                    f"{self.path}: size {size} is not a multiple of {self.ENTRY_SIZE}")
            existing = os.pread(fd, size, 0) if size else b""
            if not self._trusted:
                self.check(existing)
                self._trusted = True
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._buf = bytearray(existing)
        self._flushed = len(self._buf)
        # Preallocate like Kafka, so a data directory looks the same on disk.
        os.ftruncate(self._fd, max(self.max_entries * self.ENTRY_SIZE, len(self._buf)))

    def _load(self):
        """The entries of an inactive index, mapped on first use."""
        buf = self._buf
        if buf is None:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                raise CorruptIndexError(f"{self.path}: missing") from None
            try:
                size = os.fstat(fd).st_size
                if size % self.ENTRY_SIZE:
                    raise CorruptIndexError(
                        f"{self.path}: size {size} is not a multiple of {self.ENTRY_SIZE}")
                if size:
                    self._mmap = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
                    buf = self._mmap
                else:
                    buf = b""
            finally:
                os.close(fd)
            if not self._trusted:
                self.check(buf)
                self._trusted = True
            self._buf = buf
        return buf

    def _last_entry_bytes(self) -> bytes:
        """The last entry without mapping or checking the whole index (start-up fast path)."""
        buf = self._buf
        if buf is not None:
            n = len(buf)
            return bytes(buf[n - self.ENTRY_SIZE:n]) if n else b""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise CorruptIndexError(f"{self.path}: missing") from None
        try:
            size = os.fstat(fd).st_size
            if size % self.ENTRY_SIZE:
                raise CorruptIndexError(
                    f"{self.path}: size {size} is not a multiple of {self.ENTRY_SIZE}")
            return os.pread(fd, self.ENTRY_SIZE, size - self.ENTRY_SIZE) if size else b""
        finally:
            os.close(fd)

    def check(self, buf) -> None:
        """Raise CorruptIndexError unless the entries are well ordered (subclass hook)."""

    @property
    def entries(self) -> int:
        return len(self._load()) // self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self._active and len(self._buf) >= self.max_entries * self.ENTRY_SIZE

    @property
    def active(self) -> bool:
        return self._active

    def size_bytes(self) -> int:
        return len(self._load())

    def reset(self) -> None:
        """Drop every entry (the index is about to be rebuilt)."""
        self.truncate_entries(0)

    def truncate_entries(self, count: int) -> None:
        with self._lock:
            if self._active:
                del self._buf[count * self.ENTRY_SIZE:]
                self._flushed = min(self._flushed, len(self._buf))
                self._needs_fsync = True
            else:
                self._release_map()
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    os.ftruncate(fd, count * self.ENTRY_SIZE)
                finally:
                    os.close(fd)
                self._needs_fsync = True

    def replace_entries(self, data: bytes) -> None:
        """Swap in rebuilt entries (recovery)."""
        with self._lock:
            if self._active:
                self._buf = bytearray(data)
                self._flushed = 0
            else:
                self._release_map()
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
                self._buf = None
            self._trusted = True
            self._needs_fsync = True

    def _release_map(self) -> None:
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                # A lookup still holds a view; leave the map to the garbage collector.
                log.debug("index %s still referenced while remapping", self.path)
            self._mmap = None
        self._buf = None

    # ---------------------------------------------------------------- disk
    def _write_pending_locked(self) -> None:
        if not self._active or self._fd < 0:
            return
        end = len(self._buf)
        if end > self._flushed:
            data = bytes(self._buf[self._flushed:end])
            os.pwrite(self._fd, data, self._flushed)
            self._flushed = end
            self._needs_fsync = True

    def flush(self) -> None:
        """Write pending entries and fsync the file (called by the flusher thread)."""
        with self._lock:
            if self._active:
                if self._fd < 0:
                    return
                self._write_pending_locked()
                if self._needs_fsync:
                    os.fsync(self._fd)
                    self._needs_fsync = False
            elif self._needs_fsync:
                try:
                    fd = os.open(self.path, os.O_RDONLY)
                except FileNotFoundError:
                    return  # deleted or renamed meanwhile: nothing left to make durable
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self._needs_fsync = False

    def make_inactive(self) -> None:
        """Write every entry, trim the preallocated file to its used length, close the fd."""
        with self._lock:
            if not self._active:
                return
            self._write_pending_locked()
            os.ftruncate(self._fd, len(self._buf))
            os.close(self._fd)
            self._fd = -1
            self._active = False
            self._needs_fsync = True
            # Entries are mapped again on the next lookup; they need no re-check.
            self._buf = None
            self._trusted = True

    def make_active(self) -> None:
        """Reopen a trimmed index for appends (the last segment after a clean restart)."""
        with self._lock:
            if self._active:
                return
            self._release_map()
            self._active = True
            self._open_active()

    def close(self) -> None:
        """Trim (if active) and release the file."""
        if self._active:
            self.make_inactive()
        with self._lock:
            self._release_map()
