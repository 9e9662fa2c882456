"""How this broker connects to the others: TLS and SASL of the inter-broker listener."""
from __future__ import annotations

from typing import Any

from .sasl.inter_broker import inter_broker_sasl_login
from .tls import inter_broker_ssl_context

__all__ = ["inter_broker_options"]


def inter_broker_options(config) -> dict[str, Any]:
    """BrokerConnection keyword arguments for broker-to-broker connections: the inter-broker
    listener's TLS context (None unless SSL/SASL_SSL) and SASL login (None unless SASL_*)."""
    return {"ssl_context": inter_broker_ssl_context(config), "sasl": inter_broker_sasl_login(config)}
