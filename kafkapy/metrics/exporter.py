"""The Prometheus exporter of one broker: a registry with the broker collector and the process
collectors (process_*, python_gc_*), served at /metrics when `kafkapy.metrics.listener` is set.

Only this module imports prometheus-client, and only when the listener is configured.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .http_endpoint import MetricsEndpoint

if TYPE_CHECKING:
    from .collectors import MetricsSource

log = logging.getLogger(__name__)

LISTENER_CONFIG = "kafkapy.metrics.listener"


class PrometheusExporter:
    """The broker's /metrics: collectors and the HTTP endpoint.

    A scrape reads broker state on the event loop into plain values (BrokerCollector.read; no locks
    needed) and builds and formats the metric families in a worker thread: that is nearly all of a
    scrape's cost (prometheus-client takes some 10-20 µs a sample; a 1,000-partition broker has
    ~12,000), and the loop keeps serving requests meanwhile.
    """

    def __init__(self, broker: MetricsSource, url: str):
        from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

        from .collectors import BrokerCollector

        self.broker = broker
        self.process_registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.process_registry)
        PlatformCollector(registry=self.process_registry)
        GCCollector(registry=self.process_registry)
        self.collector = BrokerCollector(broker, broker.metrics)
        self.endpoint = MetricsEndpoint(url, self.render)

    async def render(self, accept: str) -> tuple[bytes, str]:
        """The metrics in the format `accept` asks for (OpenMetrics or Prometheus text)."""
        import asyncio

        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept)
        state = self.collector.read()  # on the loop: broker state is read without locks
        # the schema registry's few families (kafkapy/schemaregistry, when it is on), read on the loop too
        registry = self.broker.schema_registry
        extra = registry.metric_families() if registry is not None else []
        tables = self.broker.tables  # topics as Iceberg tables (kafkapy/tables), when on
        if tables is not None:
            extra = extra + tables.metric_families()
        return await asyncio.to_thread(self._encode, encoder, state, extra), content_type

    def _encode(self, encoder, state, extra=()) -> bytes:
        from .collectors import families

        return encoder(_Snapshot(self.process_registry, families(state) + list(extra)))

    async def start(self) -> None:
        await self.endpoint.start()

    async def stop(self) -> None:
        await self.endpoint.stop()


class _Snapshot:
    """What the encoders need of a registry: collect(), over families already read."""

    def __init__(self, process_registry, families: list):
        self.process_registry = process_registry
        self.families = families

    def collect(self):
        yield from self.process_registry.collect()
        yield from self.families


async def start_exporter(broker: MetricsSource) -> PrometheusExporter | None:
    """Start the endpoint when `kafkapy.metrics.listener` is set (and turn on detailed metrics)."""
    url = broker.config.get(LISTENER_CONFIG)
    if not url:
        return None
    import asyncio

    exporter = PrometheusExporter(broker, url)
    try:
        await exporter.start()
    except OSError as exc:  # address in use, not an address of this host: one line, no traceback
        from ..metadata.errors import ConfigError

        raise ConfigError.invalid_value(LISTENER_CONFIG, url, f"cannot listen there: {exc.strerror or exc}") from None
    broker.metrics.detailed = True
    broker.metrics.start_probe(asyncio.get_running_loop())
    return exporter
