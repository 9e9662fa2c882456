"""Client quota entities and values as Kafka stores them (KIP-55): the model the metadata stores
keep (/config/users, /config/clients in ZooKeeper; the embedded store's JSON) and AlterClientQuotas
validates. Enforcement (rates, throttling) is security/quotas.py.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

log = logging.getLogger(__name__)

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
# Kafka's QuotaConfigs: the byte rates are LONG configs, the other two DOUBLE.
INTEGER_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})


class QuotaError(ValueError):
    """An entity or quota an AlterClientQuotas request may not set (INVALID_REQUEST)."""


class QuotaEntity(NamedTuple):
    """A quota entity: which of user and client-id it names, each a name or None for `<default>`."""

    components: tuple[tuple[str, str | None], ...]  # sorted by type: ("client-id", ...), ("user", ...)

    @classmethod
    def of(cls, components: Mapping[str, str | None]) -> QuotaEntity:
        return cls(tuple(sorted(components.items())))

    @classmethod
    def user(cls, name: str | None) -> QuotaEntity:
        return cls(((USER, name),))

    @classmethod
    def client(cls, name: str | None) -> QuotaEntity:
        return cls(((CLIENT_ID, name),))

    @classmethod
    def user_client(cls, user: str | None, client_id: str | None) -> QuotaEntity:
        return cls(((CLIENT_ID, client_id), (USER, user)))

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.components)

    def __str__(self) -> str:
        return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in self.components) or "(empty)"

    def validate(self) -> None:
        """Kafka's rules: user and/or client-id, each at most once (ip entities are not supported)."""
        types = [t for t, _ in self.components]
        if not types:
            raise QuotaError("Invalid empty client quota entity")
        if len(set(types)) != len(types):
            raise QuotaError(f"Duplicate entity type in {self}")
        for entity_type in types:
            if entity_type == IP:
                raise QuotaError("IP connection quotas (connection_creation_rate) are not supported by kafkapy")
            if entity_type not in (USER, CLIENT_ID):
                raise QuotaError(f"Unhandled client quota entity type: {entity_type}")


def validate_quota(key: str, value: float) -> None:
    if key not in QUOTA_KEYS:
        raise QuotaError(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise QuotaError(f"Invalid value {value} for {key}: quotas must be positive")
    if key in INTEGER_KEYS and value != int(value):
        raise QuotaError(f"Configuration {key} must be a Long value")


def quota_values(raw: Mapping[str, str]) -> dict[str, float]:
    """Quota overrides as stored in ZooKeeper (strings) -> floats; unknown keys are kept out."""
    values = {}
    for key, value in raw.items():
        if key in QUOTA_KEYS:
            try:
                values[key] = float(value)
            except ValueError:
                log.warning("ignoring malformed quota %s=%r", key, value)
    return values


def format_quota_value(key: str, value: float) -> str:
    """A quota as Kafka writes it to ZooKeeper: LONG keys without a fraction."""
    if key in INTEGER_KEYS or value == int(value):
        return str(int(value))
    return repr(value)


def apply_quota_ops(current: Mapping[str, float], ops: Iterable[tuple[str, float | None]]) -> dict[str, float]:
    """The entity's quotas after setting (value) or removing (None) keys."""
    updated = dict(current)
    for key, value in ops:
        if value is None:
            updated.pop(key, None)
        else:
            updated[key] = value
    return updated
