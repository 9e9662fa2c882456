"""The broker-wide budget of request bytes held in memory (queued.max.request.bytes).

Kafka's SimpleMemoryPool reserves a request's whole announced size when its length prefix
arrives (any room left in the pool is enough) and mutes every channel while the pool is empty.
kafkapy does the same for frames above SMALL_ALLOWANCE, so a request once started always
completes and many concurrent large requests make progress through a small budget, with two
differences: a reservation is bookkeeping, not an allocation (the frame is kept as the chunks
that arrived, so 100 MB announced and 1 MB sent costs 1 MB of RSS), and frames up to
SMALL_ALLOWANCE are never held up by reservations: a connection holding at most SMALL_ALLOWANCE
bytes outside a reservation keeps reading when the pool is full, so metadata, heartbeats and
small produce requests are still served while stalled large requests hold the budget. A large
frame that finds the pool full waits (reading paused, FIFO) holding only the bytes it read;
released bytes resume the waiters, a few at a time.

Bound on bookkeeping: capacity + socket.request.max.bytes (the last reservation may overshoot, as
in Kafka). Bound on RSS: the bytes actually received under that bookkeeping, plus for each
waiting connection what it read before pausing (one read, at most 256 KiB with uvloop), plus
SMALL_ALLOWANCE per connection for small frames.
"""
from __future__ import annotations

import os
from collections import deque
from functools import cache
from typing import Protocol

# A connection holding at most this many bytes keeps reading when the pool is exhausted.
SMALL_ALLOWANCE = 64 * 1024
# The most one read (data_received) delivers: uvloop's read buffer.
READ_CHUNK = 256 * 1024
# kafkapy's bound when queued.max.request.bytes is -1 (Kafka: unbounded): an eighth of physical
# memory, at most 256 MiB, and never below socket.request.max.bytes (one largest request fits).
AUTO_MAX_BYTES = 256 * 1024 * 1024


@cache
def malloc_trim():
    """glibc's malloc_trim, or None: gives freed heap pages back to the OS. Looked up on first use:
    ctypes and find_library (which may run ldconfig) cost some 10 ms of a broker's start-up."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


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
            trim = malloc_trim()
            if trim is not None:
                trim(0)
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
