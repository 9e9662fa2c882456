"""Process entry point for `kafkapy serve`: event loop, signals, clean shutdown."""
from __future__ import annotations

import asyncio
import logging
import signal

from .broker import serve

log = logging.getLogger(__name__)


def run(config) -> None:
    """Run a broker in this process until SIGTERM or SIGINT, then shut down cleanly."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        uvloop = None
        log.warning("uvloop not available; using the default asyncio event loop")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, stop)

    if uvloop is not None:
        uvloop.run(main())
    else:
        asyncio.run(main())
