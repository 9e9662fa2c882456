"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka implements them.

Credentials are stored as Kafka stores them (ScramCredentialUtils): salt, StoredKey, ServerKey and
the iteration count, written `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`; the
password itself is never kept. Channel binding is not supported (gs2 header `n,,` or
`n,a=<user>,`); the `tokenauth` extension (delegation tokens) is refused.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from . import SaslAuthenticationError

__all__ = [
    "MAX_ITERATIONS", "MIN_ITERATIONS", "SCRAM_MECHANISMS", "ScramCredential", "ScramMechanism", "ScramServer",
    "mechanism_by_type",
]

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # AlterUserScramCredentials' upper bound (Kafka's ScramMechanism)


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """One SCRAM mechanism: its SASL name, hash, and type code in the SCRAM admin APIs."""

    name: str
    hash_name: str
    type_code: int

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_MECHANISMS: dict[str, ScramMechanism] = {
    "SCRAM-SHA-256": ScramMechanism("SCRAM-SHA-256", "sha256", 1),
    "SCRAM-SHA-512": ScramMechanism("SCRAM-SHA-512", "sha512", 2),
}


def mechanism_by_type(type_code: int) -> ScramMechanism | None:
    """The mechanism of an AlterUserScramCredentials/DescribeUserScramCredentials type code."""
    for mechanism in SCRAM_MECHANISMS.values():
        if mechanism.type_code == type_code:
            return mechanism
    return None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a SCRAM password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(salt, mechanism.digest(client_key), mechanism.hmac(salted_password, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(16)
        return cls.from_salted_password(mechanism, salt, mechanism.salted_password(password, salt, iterations),
                                        iterations)

    def to_config(self) -> str:
        """Kafka's stored form (the value of the `SCRAM-SHA-256` entry in /config/users/<user>)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        """Parse the stored form; ValueError when a field is missing or malformed."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, binascii.Error) as exc:
            raise ValueError(f"invalid SCRAM credential: {exc.__class__.__name__} {exc}") from None


# RFC 5802 grammar, as Kafka's ScramMessages parses it
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"                 # value-char: any but NUL and ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"             # nonce: printable but ','
_BASE64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")


def _sasl_name_to_user(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """The server side of one SCRAM exchange: client-first -> server-first -> client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], ScramCredential | None],
                 nonce: Callable[[], str] | None = None):
        self.mechanism = mechanism.name
        self._scram = mechanism
        self._lookup = lookup
        self._nonce = nonce or (lambda: base64.urlsafe_b64encode(secrets.token_bytes(24)).decode())
        self._state = "client-first"
        self._gs2_header = b""
        self._client_first_bare = ""
        self._server_first = ""
        self._server_nonce = ""
        self._credential: ScramCredential | None = None
        self._username = ""
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms: int | None = None

    def evaluate(self, response: bytes) -> bytes:
        state = self._state
        self._state = "failed"  # until this step succeeds: any error ends the exchange for good
        try:
            text = bytes(response).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError(f"{self.mechanism}: message is not UTF-8") from None
        if state == "client-first":
            out = self._client_first(text)
            self._state = "client-final"
            return out
        if state == "client-final":
            out = self._client_final(text)
            self._state = "complete"
            self.complete = True
            return out
        raise SaslAuthenticationError(f"{self.mechanism}: unexpected message in state {state}")

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            what = "channel binding is not supported" if text[:1] in ("y", "p") else "invalid client-first message"
            raise SaslAuthenticationError(f"{self.mechanism}: {what}")
        username = _sasl_name_to_user(match["saslname"])
        authzid = match["authzid"]
        if authzid is not None and _sasl_name_to_user(authzid) != username:
            raise SaslAuthenticationError(f"{self.mechanism}: authorization id differs from the username")
        extensions = dict(e.split("=", 1) for e in match["extensions"].split(",")[1:])
        if extensions.get("tokenauth", "false").lower() == "true":
            raise SaslAuthenticationError(f"{self.mechanism}: delegation tokens (tokenauth) are not supported")
        credential = self._lookup(username)
        if credential is None:
            raise SaslAuthenticationError(f"{self.mechanism}: unknown user {username[:64]!r}")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslAuthenticationError(f"{self.mechanism}: stored iterations {credential.iterations} below "
                                          f"{MIN_ITERATIONS}")
        self._username = username
        self._credential = credential
        self._gs2_header = text[: match.start("bare")].encode()
        self._client_first_bare = match["bare"]
        self._server_nonce = match["nonce"] + self._nonce()
        self._server_first = (f"r={self._server_nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslAuthenticationError(f"{self.mechanism}: invalid client-final message")
        if base64.b64decode(match["channel"]) != self._gs2_header:
            raise SaslAuthenticationError(f"{self.mechanism}: channel binding differs from the client-first header")
        if not hmac.compare_digest(match["nonce"].encode(), self._server_nonce.encode()):
            raise SaslAuthenticationError(f"{self.mechanism}: invalid nonce in the client-final message")
        proof = base64.b64decode(match["proof"])
        scram = self._scram
        credential = self._credential
        if len(proof) != scram.digest_size:
            raise SaslAuthenticationError(f"{self.mechanism}: client proof of the wrong length")
        auth_message = f"{self._client_first_bare},{self._server_first},{match['without_proof']}".encode()
        signature = scram.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(scram.digest(client_key), credential.stored_key):
            raise SaslAuthenticationError(f"{self.mechanism}: invalid credentials for user {self._username[:64]!r}")
        self.authorization_id = self._username
        server_signature = scram.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side of one exchange (inter-broker SASL): first() -> final(server_first) -> verify(server_final)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None):
        self._scram = mechanism
        self._username = username.replace("=", "=3D").replace(",", "=2C")
        self._password = password
        self._nonce = nonce or base64.urlsafe_b64encode(secrets.token_bytes(24)).decode()
        self._server_key = b""
        self._auth_message = b""

    def first(self) -> bytes:
        self._bare = f"n={self._username},r={self._nonce}"
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            text = server_first.decode("utf-8")
            fields = dict(part.split("=", 1) for part in text.split(","))
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        except (UnicodeDecodeError, ValueError, KeyError, binascii.Error):
            raise SaslAuthenticationError(f"{self._scram.name}: invalid server-first message") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslAuthenticationError(f"{self._scram.name}: the server nonce does not extend ours")
        if iterations < MIN_ITERATIONS:
            raise SaslAuthenticationError(f"{self._scram.name}: {iterations} iterations is below {MIN_ITERATIONS}")
        scram = self._scram
        salted = scram.salted_password(self._password, salt, iterations)
        client_key = scram.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = scram.hmac(scram.digest(client_key), self._auth_message)
        self._server_key = scram.hmac(salted, b"Server Key")
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server signature: the server knew the credential too."""
        expected = b"v=" + base64.b64encode(self._scram.hmac(self._server_key, self._auth_message))
        if not hmac.compare_digest(bytes(server_final), expected):
            raise SaslAuthenticationError(f"{self._scram.name}: invalid server signature")
