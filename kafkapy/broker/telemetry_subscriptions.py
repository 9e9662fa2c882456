"""The KIP-714 client metrics subscriptions as the telemetry handlers see them: the CLIENT_METRICS
config resources of the metadata store, parsed and cached for a second on the broker's
ClientTelemetry, and forgotten when this broker alters them (handlers/configs.py)."""
from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)

# the stored subscriptions are read again at most this often (a ZooKeeper read otherwise)
_SUBSCRIPTIONS_TTL = 1.0


def subscriptions(telemetry, metadata) -> list:
    """The parsed subscriptions (metrics/client_telemetry.py Subscription), at most a second old."""
    from ..metrics.client_telemetry import Subscription, TelemetryError

    read_at, cached = telemetry.cached_subscriptions
    now = time.monotonic()
    if now - read_at < _SUBSCRIPTIONS_TTL:
        return cached
    parsed = []
    for name, configs in sorted(metadata.client_metrics_configs().items()):
        try:
            parsed.append(Subscription.from_configs(name, configs))
        except (TelemetryError, ValueError) as exc:  # validated when stored; never fail a client on it
            log.warning("ignoring client metrics subscription %s: %s", name, exc)
    telemetry.cached_subscriptions = (now, parsed)
    return parsed


def forget_subscriptions(telemetry) -> None:
    """After an alteration on this broker: the next request reads the store again."""
    if telemetry is not None:
        telemetry.cached_subscriptions = (float("-inf"), [])
