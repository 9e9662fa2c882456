"""Kafka-style ids: cluster ids and topic ids (random UUIDs shown as 22-char URL-safe base64).

`uuid` (and the `platform` module it imports) is loaded with the first id made or read, not when a
broker starts: ZERO_UUID and METADATA_TOPIC_ID are built on first access.
"""
from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uuid

__all__ = ["METADATA_TOPIC_ID", "ZERO_UUID", "new_cluster_id", "new_topic_id", "uuid_from_kafka_str",
           "uuid_to_kafka_str"]


def __getattr__(name: str) -> Any:
    if name in ("ZERO_UUID", "METADATA_TOPIC_ID"):
        import uuid

        # METADATA_TOPIC_ID: Kafka reserves it for __cluster_metadata
        globals().update(ZERO_UUID=uuid.UUID(int=0), METADATA_TOPIC_ID=uuid.UUID(int=1))
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def uuid_to_kafka_str(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka_str(text: str) -> uuid.UUID:
    """Inverse of uuid_to_kafka_str (Kafka's Uuid.fromString); raises ValueError on bad input."""
    import uuid

    if len(text) != 22:
        raise ValueError(f"Input string with prefix `{text[:22]}` is not a valid Kafka Uuid")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def _random_uuid() -> uuid.UUID:
    # Like Kafka's Uuid.randomUuid: never the reserved ids (0 and 1), never a string that starts
    # with '-' (it would look like a command-line option).
    import uuid

    while True:
        value = uuid.uuid4()
        if value.int > 1 and not uuid_to_kafka_str(value).startswith("-"):
            return value


def new_topic_id() -> uuid.UUID:
    return _random_uuid()


def new_cluster_id() -> str:
    """A random version-4 UUID in Kafka's string form, as `_random_uuid` makes, built from 16
    random bytes here: a fresh broker's first start formats its store before any topic exists, and
    needs no `uuid` module for it."""
    import os

    while True:
        raw = bytearray(os.urandom(16))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
        raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
        text = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
        if not text.startswith("-"):  # never 0 or 1 either: the version bits are set
            return text
