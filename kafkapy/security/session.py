"""A connection's security session: whether it has authenticated and what it may send before.

On PLAINTEXT and SSL listeners every request passes (the principal is ANONYMOUS, or the TLS
client certificate's). On SASL_PLAINTEXT and SASL_SSL listeners the session is Kafka's
SaslServerAuthenticator: before authentication only ApiVersions, SaslHandshake and
SaslAuthenticate pass (anything else closes the connection); SaslHandshake v0 switches to raw
SASL tokens (4-byte length + bytes, no request header); after authentication a session lifetime
(`connections.max.reauth.ms`, an OAUTHBEARER token's expiry) closes a connection that has not
re-authenticated by its next request (KIP-368).
"""
from __future__ import annotations

import asyncio
import logging
import time
from enum import Enum
from typing import TYPE_CHECKING

from ..protocol.errors import ConnectionClosed, ErrorCode
from ..protocol.messages import REQUEST_TYPES
from .principal import KafkaPrincipal
from .sasl import SaslAuthenticationError, SaslServer, client_failure_message

if TYPE_CHECKING:  # the mechanisms are imported once a SASL listener needs them
    from .sasl.listener_config import SaslListenerConfig
    from .sasl.scram import ScramCredential

__all__ = ["ConnectionSession", "SASL_PROTOCOLS", "SaslState"]

log = logging.getLogger(__name__)

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 18, 17, 36


class SaslState(Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "waiting for SaslAuthenticate"
    RAW_TOKEN = "waiting for a raw SASL token"
    COMPLETE = "authenticated"
    FAILED = "failed"


def _closed(message: str) -> Exception:
    return ConnectionClosed(message)


class ConnectionSession:
    """The authentication state of one client connection."""

    def __init__(self, connection) -> None:
        self.connection = connection
        listener = getattr(connection, "listener", None)
        self.sasl = listener is not None and listener.security_protocol in SASL_PROTOCOLS
        self.state = SaslState.HANDSHAKE if self.sasl else SaslState.COMPLETE
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        # SaslAuthenticate version of the first authentication: v1+ clients can re-authenticate
        self.authenticate_version: int | None = None
        self.reauthenticating = False
        self.expires_at: float | None = None  # time.monotonic() deadline of the session
        self._lifetime_ms = 0  # the session lifetime told to the client (SaslAuthenticate v1+)
        self._config: SaslListenerConfig | None = None

    # -- what the broker asks -----------------------------------------------------------------
    @property
    def listener_config(self) -> SaslListenerConfig:
        if self._config is None:
            from .sasl.listener_config import SaslListenerConfig

            self._config = SaslListenerConfig(self.connection.services.config.get, self.connection.listener.name)
        return self._config

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    def check_request(self, api_key: int, api_version: int) -> None:
        """Raise ConnectionClosed for a request the connection may not send in its state."""
        state = self.state
        if state is SaslState.COMPLETE:
            if self.expires_at is not None and api_key != _SASL_HANDSHAKE and time.monotonic() >= self.expires_at:
                self.state = SaslState.FAILED
                raise _closed(f"SASL session of {self.connection.principal} on listener {self._listener_name()} "
                              "expired without re-authentication (connections.max.reauth.ms)")
            return
        if state is SaslState.FAILED:
            raise _closed("")  # the failure was logged already
        allowed = (_API_VERSIONS, _SASL_HANDSHAKE) if state is SaslState.HANDSHAKE else (_SASL_AUTHENTICATE,)
        if api_key not in allowed:
            self.state = SaslState.FAILED
            request_type = REQUEST_TYPES.get(api_key)
            name = request_type.__name__.removesuffix("Request") if request_type is not None else "unknown"
            raise _closed(f"unexpected {name} request (api key {api_key} v{api_version}) on SASL listener "
                          f"{self._listener_name()} while {state.value}")

    def expects_raw_frame(self, size: int) -> bool:
        """True when the next frame is not a Kafka request for handle_frame: a raw SASL token after
        SaslHandshake v0, or a frame above sasl.server.max.receive.size before authentication."""
        if not self.sasl or self.state is SaslState.COMPLETE:
            return False
        return self.state is SaslState.RAW_TOKEN or size > self.listener_config.max_receive_size()

    async def handle_raw_frame(self, frame: bytes) -> list[bytes]:
        """Answer a raw SASL token with the raw challenge; raise ConnectionClosed on failure."""
        limit = self.listener_config.max_receive_size()
        if len(frame) > limit:
            self.state = SaslState.FAILED
            raise _closed(f"SASL frame of {len(frame)} bytes before authentication is above "
                          f"sasl.server.max.receive.size={limit}")
        if self.state is not SaslState.RAW_TOKEN:
            raise _closed(f"unexpected raw SASL token while {self.state.value}")
        try:
            return [await self._evaluate(frame, None)]
        except SaslAuthenticationError as exc:
            raise _closed(self._failure_line(exc)) from None

    # -- SaslHandshake / SaslAuthenticate -------------------------------------------------------
    def handshake(self, mechanism: str, version: int) -> tuple[int, list[str]]:
        """(error code, enabled mechanisms) for a SaslHandshake; the connection closes after an error
        the exchange cannot recover from (unsupported mechanism), as in Kafka."""
        if not self.sasl:
            return ErrorCode.ILLEGAL_SASL_STATE, []
        enabled = self.listener_config.enabled_mechanisms()
        if self.state is SaslState.COMPLETE:
            if (self.authenticate_version or 0) < 1 or version < 1:
                return ErrorCode.ILLEGAL_SASL_STATE, enabled  # the client cannot re-authenticate (KIP-368)
            if mechanism != self.mechanism:
                self._fail_later(f"re-authentication with {mechanism} instead of {self.mechanism}")
                return ErrorCode.ILLEGAL_SASL_STATE, enabled
            self.reauthenticating = True
        elif self.state is not SaslState.HANDSHAKE:
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if mechanism not in enabled:
            self._fail_later(f"unsupported SASL mechanism {mechanism[:64]!r} (enabled: {', '.join(enabled)})")
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        try:
            self._server = self.listener_config.create_server(mechanism, self._scram_credential)
        except Exception as exc:  # a JAAS config or validator that does not load: say which, not the secret
            detail = f": {exc}" if isinstance(exc, ValueError) else ""  # ours never quote a secret
            self._fail_later(f"cannot set up SASL mechanism {mechanism}: {exc.__class__.__name__}{detail}")
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        self.mechanism = mechanism
        self.state = SaslState.RAW_TOKEN if version == 0 else SaslState.AUTHENTICATE
        return ErrorCode.NONE, enabled

    async def authenticate(self, auth_bytes: bytes, version: int) -> tuple[int, str | None, bytes, int]:
        """(error code, error message, auth bytes, session lifetime ms) for a SaslAuthenticate."""
        if self.state is not SaslState.AUTHENTICATE:
            message = ("SaslAuthenticate request received after successful authentication"
                       if self.state is SaslState.COMPLETE else "SaslAuthenticate before SaslHandshake")
            return ErrorCode.ILLEGAL_SASL_STATE, message, b"", 0
        if len(auth_bytes) > self.listener_config.max_receive_size():
            self._fail_later(f"SASL token of {len(auth_bytes)} bytes is above sasl.server.max.receive.size")
            return ErrorCode.SASL_AUTHENTICATION_FAILED, client_failure_message(self.mechanism), b"", 0
        try:
            out = await self._evaluate(auth_bytes, version)
        except SaslAuthenticationError as exc:
            self._fail_later(self._failure_line(exc))
            return ErrorCode.SASL_AUTHENTICATION_FAILED, client_failure_message(self.mechanism), b"", 0
        lifetime = self._lifetime_ms if self.state is SaslState.COMPLETE else 0
        return ErrorCode.NONE, None, out, lifetime

    # -- internals -----------------------------------------------------------------------------
    async def _evaluate(self, token: bytes, version: int | None) -> bytes:
        server = self._server
        # in a thread: a SCRAM lookup may read ZooKeeper, a pluggable token validator may block
        out = await asyncio.to_thread(server.evaluate, bytes(token))
        if server.complete:
            self._complete(server, version)
        return out

    def _complete(self, server: SaslServer, version: int | None) -> None:
        connection = self.connection
        principal = KafkaPrincipal.user(server.authorization_id)
        if self.reauthenticating and principal != connection.principal:
            raise SaslAuthenticationError(f"re-authentication as {principal} on a connection of "
                                          f"{connection.principal}")
        connection.principal = principal
        if self.authenticate_version is None:
            self.authenticate_version = version if version is not None else 0
        now_ms = time.time() * 1000
        candidates = [self.listener_config.max_reauth_ms(server.mechanism)]
        if server.credential_expiry_ms is not None:
            candidates.append(max(int(server.credential_expiry_ms - now_ms), 1))
        positive = [c for c in candidates if c > 0]
        self._lifetime_ms = min(positive) if positive else 0
        self.expires_at = time.monotonic() + self._lifetime_ms / 1000 if self._lifetime_ms else None
        log.debug(
                "%s %s from %s on listener %s with %s%s", "re-authenticated" if self.reauthenticating
                else "authenticated", principal, connection.peer, self._listener_name(), server.mechanism,
                f" (session lifetime {self._lifetime_ms} ms)" if self._lifetime_ms else "")
        self.reauthenticating = False
        self._server = None
        self.state = SaslState.COMPLETE

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        stored = self.connection.services.metadata.scram_credentials(user).get(mechanism)
        if stored is None:
            return None
        from .sasl.scram import ScramCredential

        try:
            return ScramCredential.from_config(stored)
        except ValueError as exc:
            log.warning("stored %s credential of user %r is unreadable: %s", mechanism, user, exc)
            return None

    def _failure_line(self, exc: Exception) -> str:
        self.state = SaslState.FAILED
        return (f"SASL authentication failed from {self.connection.peer} on listener {self._listener_name()} "
                f"with {self.mechanism}: {exc}")

    def _fail_later(self, reason: str) -> None:
        """Log one line, refuse everything after, and close once the response is written."""
        self.state = SaslState.FAILED
        connection = self.connection
        line = reason if reason.startswith("SASL authentication failed") else (
            f"closing connection from {connection.peer} on listener {self._listener_name()}: {reason}")
        log.warning("%s", line)
        # the response is written when the handler returns; as Kafka, close only after
        # connection.failed.authentication.delay.ms, so the client reads it before the close
        delay_ms = connection.services.config.get("connection.failed.authentication.delay.ms") or 0
        asyncio.get_running_loop().call_later(delay_ms / 1000, connection.close)

    def _listener_name(self) -> str:
        listener = getattr(self.connection, "listener", None)
        return listener.name if listener is not None else "?"
