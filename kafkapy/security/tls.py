"""TLS for SSL and SASL_SSL listeners: Kafka's ssl.* settings turned into an ssl.SSLContext."""
from __future__ import annotations

import ssl

__all__ = ["server_ssl_context"]

TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def server_ssl_context(config, listener) -> ssl.SSLContext | None:
    """The server context of `listener`, None for PLAINTEXT and SASL_PLAINTEXT listeners."""
    if listener.security_protocol not in TLS_PROTOCOLS:
        return None
    from ..broker.config import ConfigError

    raise ConfigError.invalid_value("listeners", str(listener), "SSL listeners are not supported yet")
