"""Server-side SASL mechanisms, sans-I/O: each consumes the client's bytes and returns the next
challenge, like Java's SaslServer. The broker's connection session (security/session.py) drives
them; nothing here reads a socket or the broker's config.

Errors are SaslAuthenticationError, whose text names the reason for the broker log and never
contains a password or a token; the client only ever gets a generic message (`client_message`).
"""
from __future__ import annotations

from typing import Protocol

__all__ = ["MECHANISMS", "SaslAuthenticationError", "SaslServer", "client_failure_message"]

# The mechanisms kafkapy implements (GSSAPI, Kafka's default, is not one of them).
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SaslAuthenticationError(Exception):
    """The client failed to authenticate; str() is the reason for the log (never a secret)."""


class SaslServer(Protocol):
    """One authentication exchange with one client."""

    mechanism: str
    complete: bool
    authorization_id: str | None
    # epoch ms after which the credential is no longer valid (OAUTHBEARER's token), else None
    credential_expiry_ms: int | None

    def evaluate(self, response: bytes) -> bytes:
        """Consume the client's next message; return the challenge (b"" once complete)."""


def client_failure_message(mechanism: str) -> str:
    """What a failed client is told (Kafka's wording; says nothing useful to an attacker)."""
    return ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{mechanism}")
