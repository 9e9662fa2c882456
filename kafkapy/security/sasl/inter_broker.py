"""SASL between brokers: when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL, every
BrokerConnection authenticates with `sasl.mechanism.inter.broker.protocol` (PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512) as the `username`/`password` of that listener's JAAS config, as Kafka's
inter-broker clients do. This module says who logs in (`SaslLogin`); the exchange on the wire is
the client's (kafkapy/net/sasl_client.py): pass `sasl=inter_broker_sasl_login(config)` to
BrokerConnection next to `ssl_context=inter_broker_ssl_context(config)`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .listener_config import SaslListenerConfig
from .scram import SCRAM_MECHANISMS

__all__ = ["SaslLogin", "inter_broker_sasl_login"]

_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
_cache: dict[int, tuple[object, "SaslLogin | None"]] = {}


@dataclass(frozen=True, slots=True)
class SaslLogin:
    """Who a broker logs in as towards the others: mechanism, user name and password (never shown)."""

    mechanism: str
    username: str
    password: str = field(repr=False)


def _inter_broker_listener(config):
    wanted = config.get("inter.broker.listener.name")
    if wanted:
        return next((lst for lst in config.listeners if lst.name == wanted.upper()), None)
    protocol = config.get("security.inter.broker.protocol")
    return next((lst for lst in config.listeners if lst.security_protocol == protocol), None)


def inter_broker_sasl_login(config) -> SaslLogin | None:
    """The SASL login of this broker's inter-broker listener; None when that listener is not SASL. ValueError (naming the setting, not the secret) when misconfigured."""
    cached = _cache.get(id(config))
    if cached is not None and cached[0] is config:
        return cached[1]
    listener = _inter_broker_listener(config)
    if listener is None or listener.security_protocol not in _SASL_PROTOCOLS:
        result = None
    else:
        mechanism = str(config.get("sasl.mechanism.inter.broker.protocol"))
        if mechanism != "PLAIN" and mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"sasl.mechanism.inter.broker.protocol={mechanism}: kafkapy's inter-broker client "
                             "speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512")
        module = SaslListenerConfig(config.get, listener.name).jaas(mechanism)
        options = module.options if module is not None else {}
        if "username" not in options or "password" not in options:
            raise ValueError(f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config needs "
                             "username and password for inter-broker SASL")
        result = SaslLogin(mechanism, options["username"], options["password"])
    _cache[id(config)] = (config, result)
    return result
