"""kafkapy as a test broker, for any test framework:

    from kafkapy.testing import KafkaBroker

    with KafkaBroker() as broker:                      # in this process, its own event-loop thread
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

    with KafkaBroker(isolation="process", **{"num.partitions": 3}) as broker:   # a child process
        ...

Brokers listen on 127.0.0.1 on a free port and keep their data in a temporary directory that is
removed when they stop. Keyword arguments are Kafka broker properties (dots written as they are, so
pass them with `**{...}`). See docs/testing.md.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .broker import KafkaBroker, KafkaBrokerError
    from .cluster import KafkaCluster

__all__ = ["KafkaBroker", "KafkaBrokerError", "KafkaCluster"]

# Imported on first use: pytest imports this package at every start-up, through the pytest plugin
# (kafkapy.testing.pytest_plugin), in every project where kafkapy is installed, and the broker's
# modules take a fifth of a second to import.
_WHERE = {"KafkaBroker": ".broker", "KafkaBrokerError": ".broker", "KafkaCluster": ".cluster"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
