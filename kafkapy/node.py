"""The composition root: builds a Broker with the services that sit above the broker layer (the
web console, the schema registry, the tables service) attached, so that the broker never imports
them. Every launcher builds its broker here: `kafkapy serve` (cli.py), kafkapy.testing's in-process
and process brokers and kafkapy.devcluster (through devcluster/launcher.py).

Each service is imported only when its setting asks for it (start-up time: nothing of the console,
the registry or the tables is imported by a broker that does not use them)."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker.broker import Broker, BrokerService


class SchemaRegistryService:
    """kafkapy/schemaregistry when kafkapy.schema.registry.listener is set: bound before the Kafka
    listeners serve, so that it answers once the broker does (its requests wait until it has read
    the schemas topic through those listeners)."""

    phase = "listeners"

    async def start(self, broker: Broker) -> None:
        if broker.config.get("kafkapy.schema.registry.listener"):
            from .schemaregistry import start_schema_registry  # imported only when the registry is on

            broker.schema_registry = await start_schema_registry(broker)

    async def stop(self, broker: Broker) -> None:
        if broker.schema_registry is not None:
            await broker.schema_registry.stop()


class TablesWatch:
    """The tables service (kafkapy/tables: topics as Iceberg tables), started once a partition of a
    topic with kafkapy.iceberg.mode set is led here; until then nothing of it is imported."""

    phase = "started"

    async def start(self, broker: Broker) -> None:
        from .metadata.store import ChangeKind

        loop = asyncio.get_running_loop()

        def wanted(topic: str) -> bool:
            mode = (broker.metadata.topic_configs(topic) or {}).get("kafkapy.iceberg.mode")
            return bool(mode) and mode.strip() != "disabled"

        def ensure() -> None:
            if broker.tables is None and not broker.fatal_error.is_set():
                from .tables.service import TablesService

                broker.tables = TablesService(broker)
                broker.tables.start(loop)

        def on_leadership(topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
            if broker.tables is None and is_leader and wanted(topic):
                loop.call_soon_threadsafe(ensure)

        def on_change(change) -> None:
            if broker.tables is None and change.kind in (ChangeKind.TOPIC_CREATED, ChangeKind.TOPIC_CONFIGS_CHANGED) \
                    and change.topic is not None and wanted(change.topic.name):
                loop.call_soon_threadsafe(ensure)

        broker.replicas.leadership_listeners.append(on_leadership)
        broker.metadata.add_listener(on_change)
        if any(wanted(topic) for topic in broker.metadata.topic_names()):
            ensure()

    async def stop(self, broker: Broker) -> None:
        if broker.tables is not None:
            await broker.tables.stop()


class ConsoleService:
    """The web console (kafkapy/console) when kafkapy.console.listener is set; aiohttp is imported
    only then."""

    phase = "started"

    async def start(self, broker: Broker) -> None:
        if broker.config.get("kafkapy.console.listener"):
            from .console import start_console

            broker.console = await start_console(broker)

    async def stop(self, broker: Broker) -> None:
        if broker.console is not None:
            await broker.console.stop()


def services() -> list[BrokerService]:
    """The services of one broker, in the order they start (they stop in reverse)."""
    return [SchemaRegistryService(), TablesWatch(), ConsoleService()]


def build_broker(config, sockets: dict[str, list] | list | None = None) -> Broker:
    """A Broker over `config` with the services attached (not started)."""
    from .broker.broker import Broker

    return Broker(config, sockets, services())


async def serve(config, stop_event: asyncio.Event | None = None, sockets: list | None = None,
                on_ready=None) -> None:
    """kafkapy.broker.broker.serve with the services attached."""
    from .broker.broker import serve as serve_broker

    await serve_broker(config, stop_event, sockets, on_ready, services())


def run(config, on_ready=None) -> None:
    """Run a broker with the services attached in this process until SIGTERM or SIGINT
    (kafkapy.broker.server.run)."""
    from .broker.server import run as run_broker

    run_broker(config, on_ready, serve=serve)
