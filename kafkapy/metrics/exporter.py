"""The Prometheus exporter of one broker: a registry with the broker collector and the process
collectors (process_*, python_gc_*), served at /metrics when `kafkapy.metrics.listener` is set.

Only this module imports prometheus-client, and only when the listener is configured.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .http_endpoint import MetricsEndpoint

if TYPE_CHECKING:
    from ..broker.broker import Broker

log = logging.getLogger(__name__)

LISTENER_CONFIG = "kafkapy.metrics.listener"


class PrometheusExporter:
    """The broker's /metrics: registry, collectors and the HTTP endpoint."""

    def __init__(self, broker: Broker, url: str):
        from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

        from .collectors import BrokerCollector

        self.broker = broker
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.registry.register(BrokerCollector(broker, broker.metrics))
        self.endpoint = MetricsEndpoint(url, self.render)

    def render(self, accept: str) -> tuple[bytes, str]:
        """The registry in the format `accept` asks for (OpenMetrics or Prometheus text)."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    async def start(self) -> None:
        await self.endpoint.start()

    async def stop(self) -> None:
        await self.endpoint.stop()


async def start_exporter(broker: Broker) -> PrometheusExporter | None:
    """Start the endpoint when `kafkapy.metrics.listener` is set (and turn on detailed metrics)."""
    url = broker.config.get(LISTENER_CONFIG)
    if not url:
        return None
    import asyncio

    exporter = PrometheusExporter(broker, url)
    await exporter.start()
    broker.metrics.detailed = True
    broker.metrics.start_probe(asyncio.get_running_loop())
    return exporter
