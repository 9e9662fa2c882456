"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured JWS validator, or a pluggable one.

The client's initial response is `n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01`.
A token the validator refuses gets RFC 7628's error challenge (`{"status":"invalid_token"}`); the
client answers `\\x01` and the exchange fails, as in Kafka's OAuthBearerSaslServer.
"""
from __future__ import annotations

import base64
import binascii
import importlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import SaslAuthenticationError

__all__ = [
    "OAuthBearerServer", "OAuthBearerToken", "OAuthBearerValidationError", "TokenValidator",
    "UnsecuredJwsValidator", "load_validator", "parse_client_initial_response",
]


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """A validated token: who it names, until when (epoch ms), and its scopes."""

    principal: str
    lifetime_ms: int | None = None
    scopes: frozenset[str] = field(default_factory=frozenset)


class OAuthBearerValidationError(Exception):
    """A token was refused; `status` (and `scope`) go into the RFC 7628 error challenge."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(reason)
        self.status = status
        self.scope = scope


TokenValidator = Callable[[str], OAuthBearerToken]

_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7E \t\r\n]*")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
_SASLNAME = re.compile(r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+")


def parse_client_initial_response(data: bytes) -> tuple[str | None, str, dict[str, str]]:
    """(authzid or None, token, extensions); ValueError on anything malformed (never echoing the token)."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("client initial response is not UTF-8") from None
    header, sep, rest = text.partition("\x01")
    if not sep:
        raise ValueError("client initial response has no key/value section")
    parts = header.split(",")
    if len(parts) != 3 or parts[0] != "n" or parts[2] != "":
        raise ValueError("invalid gs2 header (channel binding is not supported)")
    authzid = None
    if parts[1]:
        if not parts[1].startswith("a=") or not _SASLNAME.fullmatch(parts[1][2:]):
            raise ValueError("invalid authorization id in the gs2 header")
        authzid = parts[1][2:].replace("=2C", ",").replace("=3D", "=")
    if not rest.endswith("\x01"):
        raise ValueError("client initial response does not end with \\x01\\x01")
    pairs = rest[:-1].split("\x01")
    if pairs[-1] != "":
        raise ValueError("client initial response does not end with \\x01\\x01")
    values: dict[str, str] = {}
    for pair in pairs[:-1]:
        key, eq, value = pair.partition("=")
        if not eq or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value) or key in values:
            raise ValueError("invalid key/value pair in the client initial response")
        values[key] = value
    auth = values.pop("auth", None)
    if auth is None:
        raise ValueError("client initial response has no auth value")
    match = _AUTH.fullmatch(auth)
    if match is None or match["scheme"].lower() != "bearer":
        raise ValueError("auth value is not 'Bearer <token>'")
    return authzid, match["token"], values


def _b64url_json(part: str, what: str) -> dict:
    try:
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(decoded)
    except (binascii.Error, ValueError):
        raise OAuthBearerValidationError(f"unsecured JWS {what} is not base64url JSON") from None
    if not isinstance(value, dict):
        raise OAuthBearerValidationError(f"unsecured JWS {what} is not a JSON object")
    return value


def _number(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OAuthBearerValidationError(f"claim {name!r} is not a number")
    return float(value)


class UnsecuredJwsValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: `alg: none`, a principal claim, `exp`
    (required), `iat` (optional), required scopes, an allowable clock skew. For development only:
    anyone can mint such a token."""

    def __init__(self, principal_claim: str = "sub", scope_claim: str = "scope",
                 required_scopes: Sequence[str] = (), allowable_clock_skew_ms: int = 0,
                 clock: Callable[[], float] = time.time):
        self.principal_claim = principal_claim
        self.scope_claim = scope_claim
        self.required_scopes = frozenset(required_scopes)
        self.allowable_clock_skew_ms = allowable_clock_skew_ms
        self.clock = clock

    def __call__(self, token: str) -> OAuthBearerToken:
        parts = token.split(".")
        if len(parts) != 3 or parts[2] != "":
            raise OAuthBearerValidationError("not an unsecured JWS (three parts, empty signature)")
        header = _b64url_json(parts[0], "header")
        if header.get("alg") != "none":
            raise OAuthBearerValidationError("unsecured JWS header's alg is not 'none'")
        claims = _b64url_json(parts[1], "payload")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise OAuthBearerValidationError(f"no principal claim {self.principal_claim!r}")
        now_ms = self.clock() * 1000
        skew = self.allowable_clock_skew_ms
        exp = _number(claims, "exp")
        if exp is None:
            raise OAuthBearerValidationError("no expiration time (exp)")
        if now_ms - skew >= exp * 1000:
            raise OAuthBearerValidationError("the token has expired (exp)")
        iat = _number(claims, "iat")
        if iat is not None:
            if iat * 1000 > now_ms + skew:
                raise OAuthBearerValidationError("the token was issued in the future (iat)")
            if exp <= iat:
                raise OAuthBearerValidationError("the expiration time is not after the issued-at time")
        raw_scope = claims.get(self.scope_claim)
        if raw_scope is None:
            scopes: frozenset[str] = frozenset()
        elif isinstance(raw_scope, str):
            scopes = frozenset(raw_scope.split())
        elif isinstance(raw_scope, list) and all(isinstance(s, str) for s in raw_scope):
            scopes = frozenset(raw_scope)
        else:
            raise OAuthBearerValidationError(f"scope claim {self.scope_claim!r} is not a string or list of strings")
        missing = self.required_scopes - scopes
        if missing:
            raise OAuthBearerValidationError("the token lacks a required scope", "insufficient_scope",
                                             " ".join(sorted(self.required_scopes)))
        return OAuthBearerToken(principal, int(exp * 1000), scopes)


def load_validator(spec: str) -> TokenValidator:
    """`module:function` -> the callable; ValueError naming what is wrong."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected module:function, got {spec!r}")
    target = importlib.import_module(module_name)
    for name in attr.split("."):
        target = getattr(target, name)
    if not callable(target):
        raise ValueError(f"{spec} is not callable")
    return target


class OAuthBearerServer:
    """One OAUTHBEARER exchange; `validator(token)` returns an OAuthBearerToken (or a principal name)."""

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator):
        self._validator = validator
        self._failed_reason: str | None = None
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms: int | None = None

    def evaluate(self, response: bytes) -> bytes:
        if self._failed_reason is not None:
            # the client's answer to the error challenge (RFC 7628: a single %x01)
            reason, self._failed_reason = self._failed_reason, ""
            if reason == "":
                raise SaslAuthenticationError("OAUTHBEARER: unexpected message after the failure")
            raise SaslAuthenticationError(f"OAUTHBEARER: {reason}")
        if self.complete:
            raise SaslAuthenticationError("OAUTHBEARER: unexpected message after authentication completed")
        try:
            authzid, token, _extensions = parse_client_initial_response(response)
        except ValueError as exc:
            raise SaslAuthenticationError(f"OAUTHBEARER: {exc}") from None
        try:
            validated = self._validator(token)
        except OAuthBearerValidationError as exc:
            return self._error_challenge(str(exc), exc.status, exc.scope)
        except Exception as exc:  # a pluggable validator's own failure: refuse the token, say why
            return self._error_challenge(f"validator raised {exc.__class__.__name__}", "invalid_token", None)
        if isinstance(validated, str):
            validated = OAuthBearerToken(validated)
        if not isinstance(validated, OAuthBearerToken) or not validated.principal:
            return self._error_challenge("validator returned no principal", "invalid_token", None)
        if authzid is not None and authzid != validated.principal:
            raise SaslAuthenticationError("OAUTHBEARER: authorization id differs from the token's principal")
        self.authorization_id = validated.principal
        self.credential_expiry_ms = validated.lifetime_ms
        self.complete = True
        return b""

    def _error_challenge(self, reason: str, status: str, scope: str | None) -> bytes:
        self._failed_reason = reason
        text = f'{{"status":"{status}"'
        if scope is not None:
            text += f', "scope":"{scope}"'
        return (text + "}").encode()
