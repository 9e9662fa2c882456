"""SASL/PLAIN (RFC 4616), checked against `user_<name>="<password>"` entries as Kafka's
PlainServerCallbackHandler does."""
from __future__ import annotations

import hmac
from collections.abc import Mapping

from . import SaslAuthenticationError

__all__ = ["PlainServer"]


class PlainServer:
    """`[authzid] NUL authcid NUL passwd`; the authzid must be empty or the username."""

    mechanism = "PLAIN"

    def __init__(self, passwords: Mapping[str, str]):
        self._passwords = passwords
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms: int | None = None

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("PLAIN: unexpected message after authentication completed")
        try:
            text = bytes(response).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("PLAIN: message is not UTF-8") from None
        tokens = text.split("\x00")
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"PLAIN: invalid message, expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("PLAIN: empty username")
        if not password:
            raise SaslAuthenticationError("PLAIN: empty password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("PLAIN: authorization id differs from the username")
        expected = self._passwords.get(username)
        # compare even for an unknown user, so the time taken does not tell which users exist
        ok = hmac.compare_digest((expected or "\x00").encode(), password.encode()) and expected is not None
        if not ok:
            raise SaslAuthenticationError(f"PLAIN: invalid username or password (user {username[:64]!r})")
        self.authorization_id = username
        self.complete = True
        return b""
