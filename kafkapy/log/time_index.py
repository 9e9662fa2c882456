"""The sparse time index of a segment: max timestamp (int64) -> relative offset (int32).

Entries are added together with offset index entries, and only when the segment's max
timestamp has grown, so timestamps strictly increase; the offset is the last offset of
the batch that carried that timestamp (Kafka 3.8+).
"""
from __future__ import annotations

import struct

from .sparse_index import CorruptIndexError, SparseIndex

_ENTRY = struct.Struct(">qi")


class TimeIndex(SparseIndex):
    """Timestamp -> offset lookups for one segment (12-byte entries)."""

    ENTRY_SIZE = 12
    __slots__ = ()

    def check(self, buf) -> None:
        if not buf:
            return
        entries = list(_ENTRY.iter_unpack(buf))
        timestamps = [e[0] for e in entries]
        offsets = [e[1] for e in entries]
        if offsets[0] < 0 or not all(a < b for a, b in zip(timestamps, timestamps[1:])) \
                or not all(a <= b for a, b in zip(offsets, offsets[1:])):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")

    def last_entry(self) -> tuple[int, int]:
        """The last (timestamp, offset), or (-1, base_offset) when empty."""
        raw = self._last_entry_bytes()
        if not raw:
            return -1, self.base_offset
        ts, rel = _ENTRY.unpack(raw)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        buf = self._buf
        if buf:
            last_ts, last_rel = _ENTRY.unpack_from(buf, len(buf) - 12)
            if timestamp <= last_ts or offset - self.base_offset < last_rel:
                return
        self._buf += _ENTRY.pack(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= `timestamp`, or (-1, base_offset)."""
        buf = self._load()
        n = len(buf) // 12
        unpack = _ENTRY.unpack_from
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * 12)[0] <= timestamp:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return -1, self.base_offset
        ts, rel = unpack(buf, (lo - 1) * 12)
        return ts, self.base_offset + rel

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        buf = self._load()
        n = len(buf) // 12
        target = offset - self.base_offset
        keep = n
        while keep > 0 and _ENTRY.unpack_from(buf, (keep - 1) * 12)[1] >= target:
            keep -= 1
        if keep < n:
            self.truncate_entries(keep)
