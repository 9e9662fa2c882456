"""The sparse offset index of a segment: relative offset (int32) -> file position (int32).

One entry is added per index.interval.bytes of log; an entry maps the last offset of a
batch to the byte position where that batch starts, exactly as Kafka writes it.
"""
from __future__ import annotations

import struct
import sys
from array import array

from .sparse_index import CorruptIndexError, SparseIndex

_ENTRY = struct.Struct(">ii")


def _ints(buf) -> array:
    values = array("i")
    values.frombytes(bytes(buf))
    if sys.byteorder == "little":
        values.byteswap()
    return values


def _strictly_increasing(values) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))


class OffsetIndex(SparseIndex):
    """Offset -> position lookups for one segment (8-byte entries)."""

    ENTRY_SIZE = 8
    __slots__ = ()

    def check(self, buf) -> None:
        if not buf:
            return
        values = _ints(buf)
        offsets, positions = values[0::2], values[1::2]
        if offsets[0] < 0 or positions[0] < 0:
            raise CorruptIndexError(f"{self.path}: negative first entry")
        if not (_strictly_increasing(offsets) and _strictly_increasing(positions)):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")

    def append(self, offset: int, position: int) -> None:
        """Add an entry for absolute `offset` (callers append in increasing order)."""
        self._buf += _ENTRY.pack(offset - self.base_offset, position)

    def entry(self, n: int) -> tuple[int, int]:
        rel, pos = _ENTRY.unpack_from(self._load(), n * 8)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int]:
        """The last (offset, position), or (base_offset, 0) when empty."""
        raw = self._last_entry_bytes()
        if not raw:
            return self.base_offset, 0
        rel, pos = _ENTRY.unpack(raw)
        return self.base_offset + rel, pos

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= `offset`, or (base_offset, 0)."""
        buf = self._load()
        n = len(buf) >> 3
        target = offset - self.base_offset
        if n == 0:
            return self.base_offset, 0
        unpack = _ENTRY.unpack_from
        rel, pos = unpack(buf, (n - 1) << 3)
        if rel <= target:  # the common case: a consumer near the end
            return self.base_offset + rel, pos
        lo, hi = 0, n - 1  # answer index in [lo-1, hi-1]
        while lo < hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid << 3)[0] <= target:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return self.base_offset, 0
        rel, pos = unpack(buf, (lo - 1) << 3)
        return self.base_offset + rel, pos

    def lookup_position(self, position: int) -> tuple[int, int]:
        """Largest entry with position <= `position`, or (base_offset, 0)."""
        buf = self._load()
        n = len(buf) >> 3
        unpack = _ENTRY.unpack_from
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid << 3)[1] <= position:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return self.base_offset, 0
        rel, pos = unpack(buf, (lo - 1) << 3)
        return self.base_offset + rel, pos

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        buf = self._load()
        n = len(buf) >> 3
        target = offset - self.base_offset
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            if _ENTRY.unpack_from(buf, mid << 3)[0] < target:
                lo = mid + 1
            else:
                hi = mid
        if lo < n:
            self.truncate_entries(lo)
