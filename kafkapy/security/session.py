"""A connection's security session: whether it has authenticated and what it may send before.

On PLAINTEXT and SSL listeners every request passes (the principal is ANONYMOUS, or the TLS
client certificate's). SASL listeners are filled in by the SASL implementation.
"""
from __future__ import annotations

__all__ = ["ConnectionSession"]


class ConnectionSession:
    """The authentication state of one client connection."""

    def __init__(self, connection) -> None:
        self.connection = connection

    def check_request(self, api_key: int, api_version: int) -> None:
        """Raise ConnectionClosed for a request the connection may not send in its state."""
