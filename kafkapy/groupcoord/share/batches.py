"""Offset ranges of the record batches a share fetch read, from their headers only.

A share-partition needs to know which offsets a read covers and which of them a consumer may
see; the batches themselves go to the client untouched. From each v2 batch header (Kafka's
DefaultRecordBatch: baseOffset at 0, batchLength at 8, magic at 16, attributes at 21,
lastOffsetDelta at 23, producerId at 43) come the first and last offset, whether it is a
control batch (transaction markers, never delivered) and whether it belongs to an aborted
transaction (never delivered under read_committed).
"""
from __future__ import annotations

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
