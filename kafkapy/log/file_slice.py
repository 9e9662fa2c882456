"""A byte range of a segment file, handed to the broker so it can sendfile whole batches."""
from __future__ import annotations

import io
import os

from kafkapy.protocol.primitives import ExternalRecords

__all__ = ["FileSlice"]


class FileSlice(ExternalRecords):
    """`length` bytes at `position` of an open segment file; never decoded by the log.

    `file` is the segment's open file object (use `file.fileno()` with os.sendfile or
    loop.sendfile). The slice stays readable while the segment is deleted (the file is
    only closed after file.delete.delay.ms); bytes cut off by a truncation read as short.
    """

    __slots__ = ("file", "position", "length", "first_offset", "next_offset")

    def __init__(self, file: io.FileIO, position: int, length: int, first_offset: int = -1,
                 next_offset: int = -1):
        self.file = file
        self.position = position
        self.length = length
        # Base offset of the first batch and the offset after the last batch in the slice.
        self.first_offset = first_offset
        self.next_offset = next_offset

    def __len__(self) -> int:
        return self.length

    def __bool__(self) -> bool:
        return self.length > 0

    def fileno(self) -> int:
        return self.file.fileno()

    def tobytes(self) -> bytes:
        data = os.pread(self.file.fileno(), self.length, self.position)
        if len(data) != self.length:
            # The segment was truncated after this slice was made; callers expect whole bytes.
            raise EOFError(f"segment slice at {self.position}+{self.length} now reads {len(data)} bytes")
        return data

    def memoryview(self) -> memoryview:
        return memoryview(self.tobytes())

    def sendfile(self, out_fd: int) -> int:
        """Blocking helper: copy the slice to `out_fd` with os.sendfile; returns bytes sent."""
        sent = 0
        fd = self.file.fileno()
        while sent < self.length:
            n = os.sendfile(out_fd, fd, self.position + sent, self.length - sent)
            if n == 0:
                break
            sent += n
        return sent

    def __repr__(self) -> str:
        """Which bytes of which file; the offsets (first_offset, next_offset) are the batches' business."""
        name = getattr(self.file, "name", "?")
        return f"FileSlice({name!r}, position={self.position}, length={self.length})"
