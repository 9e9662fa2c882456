"""Waiting for fsyncs from the event loop (fsync-on-ack mode).

The log's group commit hands every waiter of one fsync round the same concurrent Future.
Wrapping it once and letting all requests await that one asyncio future means one
cross-thread wake-up per round instead of one per acknowledged request.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import Future

_wrapped: dict[int, asyncio.Future] = {}


def _wrap_once(future: Future) -> asyncio.Future:
    key = id(future)
    wrapped = _wrapped.get(key)
    if wrapped is None:
        wrapped = asyncio.wrap_future(future)
        _wrapped[key] = wrapped
        # The concurrent future stays alive (wrapped references it) until this runs, so its id
        # cannot be reused by another future while the entry exists.
        wrapped.add_done_callback(lambda _done, key=key: _wrapped.pop(key, None))
    return wrapped


async def wait_durable(*futures: Future) -> None:
    """Wait until every given sync future (from PartitionLog.sync_until) has completed."""
    if len(futures) == 1:
        # shield: one cancelled request must not cancel the round shared with others
        await asyncio.shield(_wrap_once(futures[0]))
    elif futures:
        await asyncio.shield(asyncio.gather(*(_wrap_once(f) for f in futures)))
