"""Process entry point for `kafkapy serve`: listen first, then load the broker; signals; clean shutdown."""
from __future__ import annotations

import asyncio
import logging
import signal

from .listener import bind_listener

log = logging.getLogger(__name__)


def run(config, on_ready=None) -> None:
    """Run a broker in this process until SIGTERM or SIGINT, then shut down cleanly."""
    # every listener, in the order of `listeners` (the first is the broker's main address)
    sockets = {listener.name: bind_listener(listener.bind_host, listener.port) for listener in config.listeners}
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        uvloop = None
        log.warning("uvloop not available; using the default asyncio event loop")
    from .broker import serve

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(config, stop, sockets=sockets, on_ready=on_ready)

    if uvloop is not None:
        uvloop.run(main())
    else:
        asyncio.run(main())
