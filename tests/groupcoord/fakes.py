"""Test doubles for the group coordinator: a manual clock/scheduler and an in-memory partition log."""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from kafkapy.protocol.records import iter_batch_headers, set_base_offset


class TimerHandle:
    def __init__(self, when: float, fn, args):
        self.when = when
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """call_later-compatible scheduler whose time moves only when a test says so."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self.now_ms = start_ms
        self._heap: list = []
        self._seq = itertools.count()

    def clock_ms(self) -> int:
        return self.now_ms

    def call_later(self, delay_s: float, fn, *args) -> TimerHandle:
        handle = TimerHandle(self.now_ms + delay_s * 1000, fn, args)
        heapq.heappush(self._heap, (handle.when, next(self._seq), handle))
        return handle

    def pending(self) -> int:
        return sum(1 for _, _, h in self._heap if not h.cancelled)

    def advance(self, ms: float) -> None:
        """Move time forward by `ms`, running every timer that falls due, in order."""
        target = self.now_ms + ms
        while self._heap and self._heap[0][0] <= target:
            when, _, handle = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            self.now_ms = max(self.now_ms, int(when))
            handle.fn(*handle.args)
        self.now_ms = int(target)


@dataclass
class ReadResult:
    records: bytes


class MemoryPartitionLog:
    """Just enough of PartitionLog for the coordinator: append whole batches, read them back."""

    def __init__(self):
        self.batches: list[tuple[int, int, bytes]] = []  # (base, next offset, bytes)
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.fail_with = None

    def append(self, buf, *, leader_epoch: int = 0, validated=None):
        if self.fail_with is not None:
            raise self.fail_with
        buf = bytearray(buf)
        for header in iter_batch_headers(buf, validate=True):
            set_base_offset(buf, self.log_end_offset, header.position)
            data = bytes(buf[header.position:header.position + header.size])
            nxt = self.log_end_offset + header.last_offset_delta + 1
            self.batches.append((self.log_end_offset, nxt, data))
            self.log_end_offset = nxt

    def read(self, offset: int, max_bytes: int, *, max_offset=None, min_one_batch=True):
        out = bytearray()
        for base, nxt, data in self.batches:
            if nxt <= offset:
                continue
            if max_offset is not None and base >= max_offset:
                break
            if out and len(out) + len(data) > max_bytes:
                break
            out += data
        return ReadResult(bytes(out))


class MemoryLogs:
    """Partition number -> MemoryPartitionLog, created on demand."""

    def __init__(self):
        self.logs: dict[int, MemoryPartitionLog] = {}

    def __call__(self, partition: int) -> MemoryPartitionLog:
        return self.logs.setdefault(partition, MemoryPartitionLog())
