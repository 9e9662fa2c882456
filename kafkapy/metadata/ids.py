"""Kafka-style ids: cluster ids and topic ids (random UUIDs shown as 22-char URL-safe base64)."""
from __future__ import annotations

import base64
import uuid

__all__ = ["new_cluster_id", "new_topic_id", "uuid_from_kafka_str", "uuid_to_kafka_str"]

ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka reserves it for __cluster_metadata


def uuid_to_kafka_str(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka_str(text: str) -> uuid.UUID:
    """Inverse of uuid_to_kafka_str (Kafka's Uuid.fromString); raises ValueError on bad input."""
    if len(text) != 22:
        raise ValueError(f"Input string with prefix `{text[:22]}` is not a valid Kafka Uuid")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def _random_uuid() -> uuid.UUID:
    # Like Kafka's Uuid.randomUuid: never the reserved ids, never a string that starts with '-'
    # (it would look like a command-line option).
    while True:
        value = uuid.uuid4()
        if value not in (ZERO_UUID, METADATA_TOPIC_ID) and not uuid_to_kafka_str(value).startswith("-"):
            return value


def new_topic_id() -> uuid.UUID:
    return _random_uuid()


def new_cluster_id() -> str:
    return uuid_to_kafka_str(_random_uuid())
