"""A SASL listener's settings, with Kafka's listener and mechanism prefixes, and the mechanism
servers built from them.

A setting is looked up as `listener.name.<listener>.<mechanism>.<key>`, then
`listener.name.<listener>.<key>`, then `<key>` (listener and mechanism in lower case, as Kafka's
ListenerName.configPrefix writes them).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from . import MECHANISMS, SaslServer
from .jaas import JaasLoginModule, parse_jaas_config, plain_users
from .oauthbearer import OAuthBearerServer, TokenValidator, UnsecuredJwsValidator, load_validator
from .plain import PlainServer
from .scram import SCRAM_MECHANISMS, ScramCredential, ScramServer

__all__ = ["OAUTHBEARER_VALIDATOR_CONFIG", "SaslListenerConfig"]

log = logging.getLogger(__name__)

# kafkapy's pluggable OAUTHBEARER token validator: `module:function`, called with the token string
OAUTHBEARER_VALIDATOR_CONFIG = "kafkapy.oauthbearer.validator"
_warned: set[str] = set()


def _secret(value: Any) -> str | None:
    """A Password config's text (or a plain string), None when unset."""
    if value is None:
        return None
    return getattr(value, "value", value)


class SaslListenerConfig:
    """The SASL settings of one listener. `get(name)` reads a broker config (typed, or the raw
    string of a name the definition table does not know, such as a listener-prefixed one)."""

    def __init__(self, get: Callable[[str], Any], listener_name: str):
        self._get = get
        self.listener_name = listener_name

    def setting(self, key: str, mechanism: str | None = None) -> Any:
        prefix = f"listener.name.{self.listener_name.lower()}."
        names = ([f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []) + [prefix + key, key]
        for name in names:
            value = self._get(name)
            if value is not None:
                return value
        return None

    def enabled_mechanisms(self) -> list[str]:
        """`sasl.enabled.mechanisms` of this listener, limited to the mechanisms kafkapy implements."""
        raw = self.setting("sasl.enabled.mechanisms")
        names = [m.strip() for m in raw.split(",")] if isinstance(raw, str) else list(raw or [])
        names = [m for m in names if m]
        unsupported = [m for m in names if m not in MECHANISMS]
        if unsupported and self.listener_name not in _warned:
            _warned.add(self.listener_name)
            log.warning("listener %s: SASL mechanisms %s are not implemented by kafkapy and are not offered "
                        "(kafkapy implements %s)", self.listener_name, ", ".join(unsupported), ", ".join(MECHANISMS))
        return [m for m in names if m in MECHANISMS]

    def jaas(self, mechanism: str) -> JaasLoginModule | None:
        """The mechanism's login module (`listener.name.<l>.<mechanism>.sasl.jaas.config`, then
        `sasl.jaas.config`); ValueError when it does not parse."""
        text = _secret(self.setting("sasl.jaas.config", mechanism))
        return parse_jaas_config(text) if text else None

    def max_reauth_ms(self, mechanism: str) -> int:
        value = self.setting("connections.max.reauth.ms", mechanism)
        return int(value) if value is not None else 0

    def max_receive_size(self) -> int:
        value = self.setting("sasl.server.max.receive.size")
        return int(value) if value is not None else 524288

    def oauthbearer_validator(self) -> TokenValidator:
        spec = self.setting(OAUTHBEARER_VALIDATOR_CONFIG, "OAUTHBEARER")
        if spec:
            return load_validator(str(spec))
        module = self.jaas("OAUTHBEARER")
        options = module.options if module is not None else {}

        def option(jaas_key: str, config_key: str, default: Any) -> Any:
            if jaas_key in options:
                return options[jaas_key]
            value = self.setting(config_key, "OAUTHBEARER")
            return default if value is None else value

        skew_ms = option("unsecuredValidatorAllowableClockSkewMs", "sasl.oauthbearer.clock.skew.seconds", None)
        if skew_ms is not None and "unsecuredValidatorAllowableClockSkewMs" not in options:
            skew_ms = int(skew_ms) * 1000
        return UnsecuredJwsValidator(
            principal_claim=str(option("unsecuredValidatorPrincipalClaimName", "sasl.oauthbearer.sub.claim.name",
                                       "sub")),
            scope_claim=str(option("unsecuredValidatorScopeClaimName", "sasl.oauthbearer.scope.claim.name",
                                   "scope")),
            required_scopes=str(options.get("unsecuredValidatorRequiredScope", "")).split(),
            allowable_clock_skew_ms=int(skew_ms or 0))

    def create_server(self, mechanism: str,
                      scram_lookup: Callable[[str, str], ScramCredential | None]) -> SaslServer:
        """A fresh server for one exchange; `scram_lookup(user, mechanism)` reads stored credentials."""
        if mechanism == "PLAIN":
            module = self.jaas("PLAIN")
            return PlainServer(plain_users(module) if module is not None else {})
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(SCRAM_MECHANISMS[mechanism], lambda user: scram_lookup(user, mechanism))
        if mechanism == "OAUTHBEARER":
            return OAuthBearerServer(self.oauthbearer_validator())
        raise ValueError(f"unsupported SASL mechanism {mechanism}")
