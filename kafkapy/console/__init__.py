"""The built-in web console: server-rendered pages about this broker's topics, messages, consumer
groups and requests, on an opt-in HTTP listener (`kafkapy.console.listener`; docs/console.md).

Only `server.py` imports aiohttp and Jinja2, and only when the console is enabled: a broker without
the console never loads them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .source import ConsoleSource

__all__ = ["start_console"]


async def start_console(broker: ConsoleSource):
    """Start the console of `broker` on its `kafkapy.console.listener` (on the running loop) and
    return the ConsoleServer (stop it with `await server.stop()`)."""
    from .server import ConsoleServer

    server = ConsoleServer(broker, broker.config.get("kafkapy.console.listener"),
                           writes_enabled=bool(broker.config.get("kafkapy.console.writes.enable")))
    await server.start()
    return server
