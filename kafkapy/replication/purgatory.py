"""Delayed operations: requests that wait until a watched partition changes or a deadline passes.

A fetch waiting for `min_bytes` parks here keyed by (topic, partition); an append to that
partition wakes it to re-check its condition.
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Hashable, Iterable


class Purgatory:
    """Waiters keyed by watched keys, completed by `notify(key)` or by their timeout."""

    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future]] = defaultdict(set)

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until any key is notified (True) or `timeout_s` passes (False)."""
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        keys = list(keys)
        for key in keys:
            self._watchers[key].add(fut)
        handle = loop.call_later(timeout_s, _expire, fut)
        try:
            return await fut
        finally:
            handle.cancel()
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(fut)
                    if not watchers:
                        del self._watchers[key]

    def notify(self, key: Hashable) -> None:
        """Wake every operation watching `key`."""
        watchers = self._watchers.pop(key, None)
        if watchers:
            for fut in watchers:
                if not fut.done():
                    fut.set_result(True)

    def wake_all(self) -> None:
        """Complete every waiter now (shutdown)."""
        for key in list(self._watchers):
            self.notify(key)

    def __len__(self) -> int:
        return sum(len(w) for w in self._watchers.values())


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)
