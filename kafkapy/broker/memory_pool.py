"""The broker-wide budget of request bytes held in memory (queued.max.request.bytes).

Kafka's SimpleMemoryPool reserves a request's whole announced size when its length prefix
arrives and mutes every channel while the pool is empty, so a few clients that announce 100 MB
and send slowly hold the whole budget and every other client waits. kafkapy charges the bytes it
has actually received (a partial frame is a list of the chunks read so far), so an announced size
costs nothing until it is sent. When the pool is over its capacity, a connection that holds more
than `SMALL_ALLOWANCE` bytes stops reading (transport.pause_reading) and waits in FIFO order;
connections holding less keep reading, so small requests (metadata, heartbeats, small produces)
are still served while large partial frames hold the budget. Released bytes resume the waiters,
a few at a time, so that the next reads cannot overshoot the budget by much.

Bound: capacity + (connections x (SMALL_ALLOWANCE + one read, at most 256 KiB with uvloop)).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections import deque
from typing import Protocol

# A connection holding at most this many bytes keeps reading when the pool is exhausted.
SMALL_ALLOWANCE = 64 * 1024
# The most one read (data_received) delivers: uvloop's read buffer.
READ_CHUNK = 256 * 1024
# kafkapy's bound when queued.max.request.bytes is -1 (Kafka: unbounded): an eighth of physical
# memory, at most 256 MiB, and never below socket.request.max.bytes (one largest request fits).
AUTO_MAX_BYTES = 256 * 1024 * 1024


def _malloc_trim():
    """glibc's malloc_trim, or None: gives freed heap pages back to the OS."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


class MemoryWaiter(Protocol):
    def resume_after_memory(self) -> None: ...


def physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def pool_capacity(queued_max_request_bytes: int, socket_request_max_bytes: int) -> int:
    """The budget for a queued.max.request.bytes setting: as set when positive, else kafkapy's bound."""
    if queued_max_request_bytes > 0:
        return queued_max_request_bytes
    physical = physical_memory_bytes()
    auto = AUTO_MAX_BYTES if physical is None else min(AUTO_MAX_BYTES, physical // 8)
    return max(auto, socket_request_max_bytes)


class MemoryPool:
    """Bytes of requests held by all connections, against one capacity."""

    __slots__ = ("capacity", "used", "peak", "_high", "_waiters")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.used = 0
        self.peak = 0
        self._high = False  # more than half the budget was in use since the last trim
        self._waiters: deque[MemoryWaiter] = deque()

    @property
    def exhausted(self) -> bool:
        return self.used > self.capacity

    def charge(self, n: int) -> None:
        used = self.used + n
        self.used = used
        if used > self.peak:
            self.peak = used
        if used > self.capacity // 2:
            self._high = True

    def release(self, n: int) -> None:
        self.used -= n
        if self._high and self.used < self.capacity // 8:
            # the budget was mostly used and is now mostly free: the allocator keeps freed request
            # buffers in its heap, so give them back to the OS (rare: once per such swing)
            self._high = False
            if _TRIM is not None:
                _TRIM(0)
        if self._waiters and self.used < self.capacity:
            # each resumed connection may read one more chunk before it is paused again
            room = self.capacity - self.used
            for _ in range(max(1, room // READ_CHUNK)):
                if not self._waiters:
                    break
                self._waiters.popleft().resume_after_memory()

    def wait(self, waiter: MemoryWaiter) -> None:
        """Queue a paused connection; it is resumed when memory is released."""
        self._waiters.append(waiter)

    def forget(self, waiter: MemoryWaiter) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    @property
    def waiting(self) -> int:
        return len(self._waiters)
