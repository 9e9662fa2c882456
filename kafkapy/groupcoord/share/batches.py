"""Offset ranges of the record batches a share fetch read, from their headers only.

A share-partition needs to know which offsets a read covers and which of them a consumer may
see; the batches themselves go to the client untouched. From each v2 batch header (Kafka's
DefaultRecordBatch: baseOffset at 0, batchLength at 8, magic at 16, attributes at 21,
lastOffsetDelta at 23, producerId at 43) come the first and last offset, whether it is a
control batch (transaction markers, never delivered) and whether it belongs to an aborted
transaction (never delivered under read_committed).
"""
from __future__ import annotations

import os
import struct

_HEAD = struct.Struct(">qi")          # baseOffset, batchLength
_ATTRS = struct.Struct(">hi")         # attributes, lastOffsetDelta (at 21)
_PID = struct.Struct(">q")            # producerId (at 43)
_CONTROL_MARKER_KEY = struct.Struct(">hh")  # a control record's key: version, type (0 abort, 1 commit)
BATCH_HEADER_SIZE = 61
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


class BatchRange:
    __slots__ = ("first", "last", "start", "end", "deliverable")

    def __init__(self, first: int, last: int, start: int, end: int, deliverable: bool) -> None:
        self.first, self.last = first, last
        self.start, self.end = start, end          # byte positions in the buffer
        self.deliverable = deliverable

    def __repr__(self) -> str:
        """first/last are the offsets (start/end are the byte positions of the batches in the log
        slice, of no use when reading a range's state)."""
        return f"BatchRange({self.first}, {self.last}, deliverable={self.deliverable})"


def batch_ranges(buf, aborted: list[tuple[int, int]] | None = None) -> list[BatchRange]:
    """The complete batches in `buf` (a partial batch at the end is left out, as consumers do).
    `aborted`: (producer id, first offset) of the aborted transactions a read_committed read
    returned; their data batches up to the producer's next control batch are not deliverable."""
    out: list[BatchRange] = []
    view = memoryview(buf)
    size = len(view)
    pending = sorted(aborted or [], key=lambda a: a[1])
    aborting: set[int] = set()
    pos = 0
    while pos + BATCH_HEADER_SIZE <= size:
        base, length = _HEAD.unpack_from(view, pos)
        end = pos + 12 + length
        if length < BATCH_HEADER_SIZE - 12 or end > size:
            break
        if view[pos + 16] != 2:
            break  # not a v2 batch: share groups only serve message format v2, as Kafka
        attributes, last_delta = _ATTRS.unpack_from(view, pos + 21)
        last = base + last_delta
        while pending and pending[0][1] <= last:
            aborting.add(pending.pop(0)[0])
        deliverable = True
        if attributes & _CONTROL:
            deliverable = False
            (pid,) = _PID.unpack_from(view, pos + 43)
            aborting.discard(pid)  # the marker ends the transaction
        elif attributes & _TRANSACTIONAL and aborting:
            (pid,) = _PID.unpack_from(view, pos + 43)
            if pid in aborting:
                deliverable = False
        out.append(BatchRange(base, last, pos, end, deliverable))
        pos = end
    return out


class LazyBatchRanges:
    """The batches of a read's records, their headers read one by one as they are asked for.

    A share fetch reads up to its partition's share of MaxBytes (megabytes) but acquires at most
    MaxRecords, often one batch: the records stay in the log segment (a FileSlice), only the
    headers of the batches looked at are read (pread, a chunk at a time when batches are small),
    and what is sent is a slice of the segment (payload()), as Kafka sends FileRecords. Records
    in memory (bytes) are scanned the same way. Iterating yields the batches from the first one
    again; `seen` holds those read so far."""

    _CHUNK = 16384

    def __init__(self, records, aborted: list[tuple[int, int]] | None = None) -> None:
        self.records = records
        self.seen: list[BatchRange] = []
        self._fd = records.fileno() if hasattr(records, "fileno") and hasattr(records, "position") else None
        self._base = records.position if self._fd is not None else 0
        if self._fd is None and not isinstance(records, (bytes, bytearray, memoryview)):
            self.records = records = records.tobytes()   # another ExternalRecords: read it whole
        self._view = memoryview(records) if self._fd is None else None
        self._size = len(records)
        self._pending = sorted(aborted or [], key=lambda a: a[1])
        self._aborting: set[int] = set()
        self._pos = 0
        self._done = False
        self._chunk = b""
        self._chunk_at = 0

    def _header(self, pos: int):
        """The buffer holding the BATCH_HEADER_SIZE bytes at `pos`, and where they start in it."""
        if self._view is not None:
            return self._view, pos
        if not (self._chunk_at <= pos and pos + BATCH_HEADER_SIZE <= self._chunk_at + len(self._chunk)):
            want = min(max(BATCH_HEADER_SIZE, self._CHUNK), self._size - pos)
            self._chunk = os.pread(self._fd, want, self._base + pos)
            self._chunk_at = pos
            if len(self._chunk) < BATCH_HEADER_SIZE:
                return None, 0
        return self._chunk, pos - self._chunk_at

    def _next(self) -> BatchRange | None:
        if self._done:
            return None
        pos = self._pos
        if pos + BATCH_HEADER_SIZE > self._size:
            self._done = True
            return None
        buf, at = self._header(pos)
        if buf is None:
            self._done = True
            return None
        base, length = _HEAD.unpack_from(buf, at)
        end = pos + 12 + length
        if length < BATCH_HEADER_SIZE - 12 or end > self._size or buf[at + 16] != 2:
            self._done = True   # a partial batch at the end (or not v2: share groups serve v2 only)
            return None
        attributes, last_delta = _ATTRS.unpack_from(buf, at + 21)
        last = base + last_delta
        pending = self._pending
        while pending and pending[0][1] <= last:
            self._aborting.add(pending.pop(0)[0])
        deliverable = True
        if attributes & _CONTROL:
            deliverable = False
            (pid,) = _PID.unpack_from(buf, at + 43)
            self._aborting.discard(pid)  # the marker ends the transaction
        elif attributes & _TRANSACTIONAL and self._aborting:
            (pid,) = _PID.unpack_from(buf, at + 43)
            if pid in self._aborting:
                deliverable = False
        batch = BatchRange(base, last, pos, end, deliverable)
        self.seen.append(batch)
        self._pos = end
        return batch

    def first(self) -> BatchRange | None:
        return self.seen[0] if self.seen else self._next()

    def __iter__(self):
        i = 0
        while True:
            if i < len(self.seen):
                yield self.seen[i]
            else:
                batch = self._next()
                if batch is None:
                    return
                yield batch
            i += 1

    def payload(self, start: int, end: int):
        """Bytes start..end of the records, as a slice of the segment when they are in one."""
        if self._view is not None:
            return self._view[start:end]
        return type(self.records)(self.records.file, self._base + start, end - start)
