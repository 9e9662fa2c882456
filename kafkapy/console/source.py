"""What the console reads of its broker (ConsoleSource): the handler-facing bundle
(broker/interfaces.py) and the services the composition root attached (kafkapy/node.py)."""
from __future__ import annotations

from typing import Any, Protocol

from ..broker.interfaces import HandlerServices


class ConsoleSource(HandlerServices, Protocol):
    """The broker as the console sees it (Broker satisfies it)."""

    log_dirs: list[str]
    schema_registry: Any
    tables: Any
    console: Any
