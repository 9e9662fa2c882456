"""The aborted transactions of a partition: Kafka's per-segment `.txnindex` files.

A read_committed fetch returns, with its records, the aborted transactions that overlap them
(producer id and first offset), so that the consumer can drop their batches. Each abort marker
appended to the log adds one entry to the `.txnindex` file of the segment holding the marker,
in Kafka's format (34 bytes: int16 version 0, int64 producer id, first offset, last offset and
the last stable offset right after the marker), so Kafka's tools read these files and a log
directory copied from Kafka keeps its aborted transactions.

The whole index is also kept in memory, sorted by marker offset (an entry per aborted
transaction is small, and fetches ask for it constantly). Entries are fsynced as they are
written; recovery replays the log from the last producer snapshot and re-adds any entry the
files lost (duplicates are ignored).

Not thread-safe: the owning PartitionLog calls it under its own lock.
"""
from __future__ import annotations

import bisect
import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["AbortedTxn", "TransactionIndex", "TXN_INDEX_SUFFIX"]

TXN_INDEX_SUFFIX = ".txnindex"
_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
_NAME = re.compile(r"^(\d{20})\.txnindex$")


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    """One aborted transaction: its producer, first data offset and abort marker offset."""

    producer_id: int
    first_offset: int
    last_offset: int  # offset of the abort marker
    last_stable_offset: int  # the partition's LSO right after the marker was written

    def encode(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


class TransactionIndex:
    """Every aborted transaction of one partition still in its log, oldest marker first."""

    def __init__(self, directory: Path | str):
        self.dir = Path(directory)
        self._entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # entry.last_offset, for bisect
        self._segments: list[int] = []  # base offset of the segment file holding each entry
        self._load()

    def __len__(self) -> int:
        return len(self._entries)

    def _path(self, segment_base: int) -> Path:
        return self.dir / f"{segment_base:020d}{TXN_INDEX_SUFFIX}"

    def _load(self) -> None:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return
        loaded = []
        for base in sorted(int(m.group(1)) for m in map(_NAME.match, names) if m):
            path = self._path(base)
            try:
                data = path.read_bytes()
            except OSError as exc:
                log.warning("cannot read transaction index %s: %s", path, exc)
                continue
            usable = len(data) - len(data) % _ENTRY.size
            if usable != len(data):
                log.warning("%s: ignoring %d trailing bytes of a partial entry", path, len(data) - usable)
            for version, pid, first, last, lso in _ENTRY.iter_unpack(memoryview(data)[:usable]):
                if version != _VERSION:
                    log.warning("%s: unknown entry version %d; ignoring the rest of the file", path, version)
                    break
                loaded.append((last, base, AbortedTxn(pid, first, last, lso)))
        loaded.sort(key=lambda item: item[0])
        for last, base, entry in loaded:
            if self._last_offsets and self._last_offsets[-1] == last:
                continue
            self._entries.append(entry)
            self._last_offsets.append(last)
            self._segments.append(base)

    # ---------------------------------------------------------------- changes
    def append(self, entry: AbortedTxn, segment_base: int) -> bool:
        """Add an entry (in the file of the segment holding its marker); False if already known."""
        i = bisect.bisect_left(self._last_offsets, entry.last_offset)
        if i < len(self._last_offsets) and self._last_offsets[i] == entry.last_offset:
            return False
        self._entries.insert(i, entry)
        self._last_offsets.insert(i, entry.last_offset)
        self._segments.insert(i, segment_base)
        fd = os.open(self._path(segment_base), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.encode())
            # Aborts are rare and an entry lost to a crash would expose aborted data.
            os.fdatasync(fd)
        finally:
            os.close(fd)
        return True

    def truncate_to(self, offset: int) -> None:
        """Forget entries whose marker is at or after `offset` (the log was cut there)."""
        i = bisect.bisect_left(self._last_offsets, offset)
        if i >= len(self._entries):
            return
        touched = set(self._segments[i:])
        del self._entries[i:], self._last_offsets[i:], self._segments[i:]
        self._rewrite(touched)

    def remove_markers(self, marker_offsets: list[int]) -> None:
        """Forget the entries whose abort marker is at one of `marker_offsets` (the log cleaner
        removed those markers, their transactions' batches having gone earlier)."""
        gone = set(marker_offsets)
        touched = {b for e, b in zip(self._entries, self._segments) if e.last_offset in gone}
        if not touched:
            return
        keep = [i for i, e in enumerate(self._entries) if e.last_offset not in gone]
        self._entries = [self._entries[i] for i in keep]
        self._last_offsets = [self._last_offsets[i] for i in keep]
        self._segments = [self._segments[i] for i in keep]
        self._rewrite(touched)

    def _rewrite(self, segment_bases: set[int]) -> None:
        for base in segment_bases:
            kept = b"".join(e.encode() for e, b in zip(self._entries, self._segments) if b == base)
            path = self._path(base)
            try:
                if kept:
                    tmp = path.with_name(path.name + ".tmp")
                    tmp.write_bytes(kept)
                    os.replace(tmp, path)
                else:
                    path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("cannot rewrite transaction index %s: %s", path, exc)

    def clear(self, segment_bases: list[int] = ()) -> None:
        """Forget every entry (the log was emptied); `segment_bases` are the surviving segments,
        whose index files are removed."""
        self._entries.clear()
        self._last_offsets.clear()
        self._segments.clear()
        for base in segment_bases:
            self._path(base).unlink(missing_ok=True)

    def drop_before(self, offset: int) -> None:
        """Forget entries whose marker is below `offset` (their segments were deleted)."""
        i = bisect.bisect_left(self._last_offsets, offset)
        if i:
            del self._entries[:i], self._last_offsets[:i], self._segments[:i]

    # ---------------------------------------------------------------- queries
    def collect(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, end): marker at or after `start` and first
        offset below `end` -- what a fetch of that range must report (Kafka's collectAbortedTxns)."""
        entries = self._entries
        found = []
        for i in range(bisect.bisect_left(self._last_offsets, start), len(entries)):
            entry = entries[i]
            if entry.first_offset < end:
                found.append(entry)
            # Every transaction still open when this marker was written started at or after
            # its LSO, so no later entry can start below `end`.
            if entry.last_stable_offset >= end:
                break
        return found

    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)
