"""The built-in schema registry: Confluent Schema Registry's REST API served by the broker, with its
state kept in the compacted `_schemas` topic (`kafkapy.schema.registry.listener`;
docs/schema-registry.md).

Nothing here is imported unless the listener is set: the broker imports this package lazily, and
aiohttp, avro, jsonschema and protobuf are imported only by the modules that use them.
"""
from __future__ import annotations

__all__ = ["start_schema_registry", "SchemaRegistryService", "parse_registry_listener"]

# the name of the registry's TLS settings: listener.name.schema_registry.ssl.* win over ssl.* (as for
# a Kafka listener called SCHEMA_REGISTRY)
TLS_LISTENER_NAME = "SCHEMA_REGISTRY"


def parse_registry_listener(text: str) -> tuple[str, str, int]:
    """(scheme, host, port) of kafkapy.schema.registry.listener: http://host:port or https://host:port."""
    from ..metrics.http_endpoint import parse_listener_url

    text = (text or "").strip()
    scheme = "https" if text.lower().startswith("https://") else "http"
    host, port = parse_listener_url("http://" + text[len("https://"):] if scheme == "https" else text)
    return scheme, host, port


class SchemaRegistryService:
    """One broker's registry: the state, its `_schemas` store and the HTTP server."""

    def __init__(self, broker, listener: str):
        from .registry import Registry
        from .server import RegistryServer
        from .store import KafkaStore

        scheme, host, port = parse_registry_listener(listener)
        self.broker = broker
        self.registry = Registry()
        self.registry.broker = broker
        self.store = KafkaStore(broker, self.registry.apply, topic=broker.config.get("kafkapy.schema.registry.topic"),
                                replication_factor=broker.config.get("kafkapy.schema.registry.topic.replication.factor"))
        self.registry.store = self.store
        self.server = RegistryServer(self.registry, host, port)
        if scheme == "https":
            from types import SimpleNamespace

            from ..security.tls import client_ssl_context, server_ssl_context

            # the broker's key store (ssl.keystore.*), ssl.client.auth=required for mTLS; forwarded
            # writes go to the leader's https listener with the same trust and key stores
            self.server.ssl_context = server_ssl_context(
                broker.config, SimpleNamespace(name=TLS_LISTENER_NAME, security_protocol="SSL"))
            self.server.client_ssl_context = client_ssl_context(broker.config, TLS_LISTENER_NAME)
        self.server.store = self.store
        basic = broker.config.get("kafkapy.schema.registry.authentication") == "basic"
        if basic or scheme == "https":
            from .auth import BasicAuth

            self.server.auth = BasicAuth(broker, self.store.topic, basic=basic)
        self.elector = None

    @property
    def url(self) -> str:
        return self.server.url

    async def start(self) -> None:
        import asyncio
        import logging

        await self.server.start()  # the port is bound now; requests wait for the store (below)
        from .elector import LeaderElector

        self._ready = asyncio.get_running_loop().create_task(self._start_store())
        self.server.gate = self._ready
        self.elector = LeaderElector(self.broker, self.broker.config.get("kafkapy.schema.registry.group.id"),
                                     self.server.host, self.server.port,
                                     "https" if self.server.ssl_context is not None else "http")
        self.server.elector = self.elector
        logging.getLogger(__name__).info("schema registry on %s (topic %s)", self.url, self.store.topic)

    async def _start_store(self) -> None:
        """Read `_schemas` (creating it first if needed), retrying until it works: a cluster whose
        brokers are still starting gets a registry as soon as the topic can be read. Requests wait
        meanwhile (50002 after a minute)."""
        import asyncio
        import logging

        from ..net.client import BrokerConnectionError
        from .store import StoreError

        delay = 0.5
        while True:
            try:
                await self.store.start()
                break
            except (StoreError, BrokerConnectionError, OSError) as exc:
                logging.getLogger(__name__).warning("schema registry: cannot read %s yet (%s); retrying",
                                                    self.store.topic, exc)
            except Exception:
                logging.getLogger(__name__).exception("schema registry: cannot read %s; retrying", self.store.topic)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
        self.elector.start()  # joins the group once the registry has read the topic

    def metric_families(self) -> list:
        """The registry's metrics for the broker's /metrics (docs/schema-registry.md lists them)."""
        from .metrics import registry_families

        return registry_families(self)

    async def ready(self) -> None:
        await self._ready

    async def stop(self) -> None:
        ready = getattr(self, "_ready", None)
        if ready is not None and not ready.done():
            ready.cancel()
        if self.elector is not None:
            await self.elector.stop()
        await self.server.stop()
        await self.store.stop()


async def start_schema_registry(broker) -> SchemaRegistryService:
    """Start the registry of `broker` on its `kafkapy.schema.registry.listener` (on the running loop)."""
    service = SchemaRegistryService(broker, broker.config.get("kafkapy.schema.registry.listener"))
    await service.start()
    return service
