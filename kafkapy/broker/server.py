"""Process entry point for `kafkapy serve`: listen first, then load the broker; signals; clean shutdown."""
from __future__ import annotations

import asyncio
import logging
import signal

from .listener import bind_listener

log = logging.getLogger(__name__)


def raise_fd_limit() -> None:
    """Raise the soft limit of open files to the hard limit, as the JVM does for Kafka
    (-XX:+MaxFDLimit): every client connection is a file descriptor."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ImportError, ValueError, OSError) as exc:  # pragma: no cover - platform dependent
        log.info("could not raise the open-files limit: %s", exc)


def run(config, on_ready=None, serve=None) -> None:
    """Run a broker in this process until SIGTERM or SIGINT, then shut down cleanly; `serve` is the
    composition root's (kafkapy/node.py: the broker with its services), else the bare broker's."""
    raise_fd_limit()
    # every listener, in the order of `listeners` (the first is the broker's main address)
    sockets = {listener.name: bind_listener(listener.bind_host, listener.port) for listener in config.listeners}
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        uvloop = None
        log.warning("uvloop not available; using the default asyncio event loop")
    if serve is None:
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
