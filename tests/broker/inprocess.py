"""A kafkapy Broker built in-process (no sockets; built by the broker launcher's build_broker) so that
tests can call its handlers directly."""
from __future__ import annotations

import asyncio
from pathlib import Path

from kafkapy.broker.dispatch import HANDLERS, RequestContext
from kafkapy.devcluster.launcher import build_broker
from kafkapy.protocol.headers import RequestHeader


class InProcessBroker:
    """Broker 0 over `data_dir` with its logs loaded; `call` runs one request through its handler."""

    def __init__(self, data_dir: Path, **props: object):
        self.broker = build_broker({"broker.id": "0", **props}, log_dir=data_dir)
        self.broker.logs.load()
        self.broker.partitions.sync_with_metadata()

    def call(self, request, version: int):
        """Encode `request` at `version`, decode it, handle it, and return the decoded response."""
        key = request.API_KEY
        assert key in self.broker.advertised_versions, f"api key {key} is not advertised"
        low, high = self.broker.advertised_versions[key]
        assert low <= version <= high, f"version {version} of api key {key} is not advertised ({low}-{high})"
        decoded = type(request).decode(request.encode(version), version)
        ctx = RequestContext(self.broker, None, RequestHeader(key, version, 1, "test-client"))
        response = asyncio.run(HANDLERS[key](ctx, decoded))
        return type(response).decode(response.encode(version), version)

    def create_topic(self, name: str, partitions: int = 1, **kwargs):
        return self.broker.partitions.create_topic(name, partitions, 1, **kwargs)

    def close(self) -> None:
        self.broker.group_coordinator.close()
        self.broker.logs.close()
        self.broker.metadata.close()
