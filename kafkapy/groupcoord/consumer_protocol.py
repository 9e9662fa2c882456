"""The consumer protocol's subscription and assignment bytes (ConsumerProtocolSubscription/Assignment).

The coordinator treats member metadata as opaque, except that Kafka reads the subscribed
topics out of consumer groups' subscriptions to decide which offsets may expire and which
may be deleted while the group is active. The encoders exist for tests and tools.
"""
from __future__ import annotations

import logging
import struct

log = logging.getLogger(__name__)

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = _H.unpack_from(buf, pos)
    pos += 2
    if length < 0 or pos + length > len(buf):
        raise ValueError(f"bad string length {length} at byte {pos - 2}")
    return buf[pos:pos + length].decode("utf-8"), pos + length


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version); None if the bytes don't parse."""
    try:
        buf = bytes(subscription)
        (version,) = _H.unpack_from(buf, 0)
        if version < 0:
            return None
        (count,) = _I.unpack_from(buf, 2)
        if count < 0 or count > len(buf):
            return None
        pos = 6
        topics = set()
        for _ in range(count):
            topic, pos = _read_string(buf, pos)
            topics.add(topic)
        return topics
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        log.debug("unparseable consumer subscription (%d bytes): %s", len(subscription), exc)
        return None


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _H.pack(len(raw)) + raw


def encode_subscription(topics: list[str], user_data: bytes | None = None, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription v0 (topics and user data; later fields left at defaults)."""
    out = bytearray(_H.pack(version))
    out += _I.pack(len(topics))
    for topic in topics:
        out += _string(topic)
    out += _I.pack(-1) if user_data is None else _I.pack(len(user_data)) + user_data
    if version >= 1:
        out += _I.pack(0)  # owned partitions
    if version >= 2:
        out += _I.pack(-1)  # generation id
    if version >= 3:
        out += _H.pack(-1)  # rack id
    return bytes(out)


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolAssignment v0."""
    out = bytearray(_H.pack(0))
    out += _I.pack(len(partitions))
    for topic, indexes in partitions.items():
        out += _string(topic)
        out += _I.pack(len(indexes))
        for index in indexes:
            out += _I.pack(index)
    out += _I.pack(-1) if user_data is None else _I.pack(len(user_data)) + user_data
    return bytes(out)


def decode_assignment(assignment: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a ConsumerProtocolAssignment; raises ValueError if malformed."""
    buf = bytes(assignment)
    if not buf:
        return {}
    try:
        pos = 2
        (count,) = _I.unpack_from(buf, pos)
        pos += 4
        result: dict[str, list[int]] = {}
        for _ in range(max(count, 0)):
            topic, pos = _read_string(buf, pos)
            (n,) = _I.unpack_from(buf, pos)
            pos += 4
            result[topic] = list(struct.unpack_from(f">{max(n, 0)}i", buf, pos))
            pos += 4 * max(n, 0)
        return result
    except struct.error as exc:
        raise ValueError(f"malformed consumer assignment: {exc}") from None
