"""Waiting until this broker's metadata cache shows a change the controller made: CreateTopics,
DeleteTopics and CreatePartitions (handlers/topics.py) and ElectLeaders in a cluster
(cluster_member.py) answer only once the change is visible here, as Kafka's brokers do."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def wait_for_cache(done: Callable[[], bool], timeout_ms: int) -> bool:
    """Wait (polling the metadata cache, which UpdateMetadata fills) until `done()`; False on timeout."""
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    while not done():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True
