"""HTTP basic authentication and authorization of the registry, with the broker's own users and ACLs.

On an https:// listener, a client certificate (mTLS, ssl.client.auth) is the principal,
`User:<subject DN>` mapped by ssl.principal.mapping.rules as on a Kafka SSL listener.
With `kafkapy.schema.registry.authentication=basic`, every other request needs `Authorization: Basic`
with a user the broker knows: a PLAIN user of a SASL listener's JAAS config (`user_<name>="..."`)
or a SCRAM user (SCRAM-SHA-256/512 credentials, checked against the stored salted key). A missing
or wrong login is answered 401 (error_code 40101) with `WWW-Authenticate: Basic`.

When the broker has an authorizer (`authorizer.class.name`), the principal `User:<name>` needs, on
the Topic resource named by `kafkapy.schema.registry.topic` (`_schemas`): DESCRIBE to read, WRITE to
register or delete, ALTER_CONFIGS to change a config or mode (super users may do everything). A
refusal is 403 (error_code 40301). Forwarded writes between registries carry the caller's
Authorization header, so the leader decides with the same principal.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time

from ..metadata.acls import AclOperation, ResourceType
from ..security.principal import KafkaPrincipal
from ..security.sasl.jaas import plain_users
from ..security.sasl.listener_config import SaslListenerConfig
from ..security.sasl.scram import SCRAM_MECHANISMS, ScramCredential
from .errors import RegistryError

__all__ = ["BasicAuth", "operation_for"]

CACHE_S = 60.0


class Unauthorized(RegistryError):
    def __init__(self, message: str = "Unauthorized"):
        super().__init__(401, 40101, message)


def operation_for(handler_name: str) -> AclOperation:
    if handler_name in ("put_config", "delete_config", "put_mode", "delete_mode"):
        return AclOperation.ALTER_CONFIGS
    if handler_name in ("register", "delete_version", "delete_subject"):
        return AclOperation.WRITE
    return AclOperation.DESCRIBE


class BasicAuth:
    def __init__(self, broker, topic: str, basic: bool = True):
        self.broker = broker
        self.topic = topic
        self.basic = basic  # False: an https listener's clients without a certificate are User:ANONYMOUS
        self._verified: dict[tuple[str, bytes], float] = {}  # (user, sha256 of password) -> until

    def _plain_password(self, user: str) -> str | None:
        config = self.broker.config
        for listener in config.listeners:
            if not listener.security_protocol.startswith("SASL"):
                continue
            try:
                module = SaslListenerConfig(config.get, listener.name).jaas("PLAIN")
            except ValueError:
                continue
            if module is not None and user in plain_users(module):
                return plain_users(module)[user]
        return None

    def _scram_ok(self, user: str, password: str) -> bool:
        try:
            stored = self.broker.metadata.scram_credentials(user)
        except Exception:
            return False
        for name, text in stored.items():
            mechanism = SCRAM_MECHANISMS.get(name)
            if mechanism is None:
                continue
            try:
                credential = ScramCredential.from_config(text)
            except ValueError:
                continue
            salted = mechanism.salted_password(password, credential.salt, credential.iterations)
            if hmac.compare_digest(ScramCredential.from_salted_password(
                    mechanism, credential.salt, salted, credential.iterations).stored_key, credential.stored_key):
                return True
        return False

    def principal(self, header: str | None) -> KafkaPrincipal:
        if not self.basic:
            return KafkaPrincipal.user("ANONYMOUS")
        if not header or not header.startswith("Basic "):
            raise Unauthorized()
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise Unauthorized() from None
        if not sep or not user:
            raise Unauthorized()
        key = (user, hashlib.sha256(password.encode()).digest())
        now = time.monotonic()
        if self._verified.get(key, 0) > now:
            return KafkaPrincipal.user(user)
        plain = self._plain_password(user)
        ok = hmac.compare_digest(plain.encode(), password.encode()) if plain is not None \
            else self._scram_ok(user, password)
        if not ok:
            raise Unauthorized()
        if len(self._verified) > 10_000:
            self._verified.clear()
        self._verified[key] = now + CACHE_S
        return KafkaPrincipal.user(user)

    def authorize(self, principal: KafkaPrincipal, host: str, handler_name: str) -> None:
        authorizer = self.broker.authorizer
        if authorizer is None:
            return
        operation = operation_for(handler_name)
        if not authorizer.authorize(principal, host, operation, ResourceType.TOPIC, self.topic):
            raise RegistryError(403, 40301, f"User {principal.name} is not authorized to "
                                            f"{operation.name} on the schema registry")
