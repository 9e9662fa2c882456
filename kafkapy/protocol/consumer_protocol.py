"""The consumer protocol carried inside classic JoinGroup/SyncGroup: ConsumerProtocolSubscription
(topics, user data, owned partitions, generation, rack; versions 0-3) and ConsumerProtocolAssignment,
as Kafka's ConsumerProtocol reads and writes them.

One codec for everyone who looks inside those bytes: the classic coordinator (the subscribed topics
decide which offsets may expire or be deleted while a group is active), a KIP-848 consumer group
serving classic-protocol members and converting groups (groupcoord/consumer/classic_members.py,
migration.py), and the client side (kafkapy.admin's group member, the console, tests). Sans-I/O.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_H = struct.Struct(">h")
_I = struct.Struct(">i")

# ConsumerProtocolSubscription/Assignment versions Kafka 4.0 knows; a newer version is read
# (and an assignment written) as the newest known one, as Kafka's ConsumerProtocol does
HIGHEST_SUBSCRIPTION_VERSION = 3
HIGHEST_ASSIGNMENT_VERSION = 3


class MalformedSubscription(ValueError):
    """Member metadata that is not a ConsumerProtocolSubscription (Kafka's SchemaException)."""


@dataclass(frozen=True, slots=True)
class ClassicSubscription:
    """A decoded ConsumerProtocolSubscription."""

    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise MalformedSubscription(f"buffer underflow at byte {self.pos} (need {n})")

    def int16(self) -> int:
        self._need(2)
        (value,) = _H.unpack_from(self.buf, self.pos)
        self.pos += 2
        return value

    def int32(self) -> int:
        self._need(4)
        (value,) = _I.unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def string(self, nullable: bool = False) -> str | None:
        length = self.int16()
        if length < 0:
            if nullable:
                return None
            raise MalformedSubscription(f"null string at byte {self.pos - 2}")
        self._need(length)
        raw = self.buf[self.pos:self.pos + length]
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedSubscription(f"string at byte {self.pos - length} is not UTF-8") from exc

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        if length < 0:
            return None
        self._need(length)
        raw = self.buf[self.pos:self.pos + length]
        self.pos += length
        return raw

    def count(self) -> int:
        n = self.int32()
        if n < 0:
            raise MalformedSubscription(f"null array at byte {self.pos - 4}")
        # every element takes at least 2 bytes: refuse counts the buffer cannot hold
        self._need(min(n, len(self.buf)) * 2 if n else 0)
        return n


def subscription_version(metadata: bytes) -> int:
    """The version header of a ConsumerProtocolSubscription (MalformedSubscription if absent/negative)."""
    if len(metadata) < 2:
        raise MalformedSubscription("no version header")
    (version,) = _H.unpack_from(metadata, 0)
    if version < 0:
        raise MalformedSubscription(f"negative version {version}")
    return version


def parse_subscription(metadata: bytes) -> ClassicSubscription:
    """Decode a ConsumerProtocolSubscription of any version; MalformedSubscription if it does not parse.

    Fields of versions newer than 3 are ignored (Kafka reads such bytes as version 3).
    """
    buf = bytes(metadata)
    version = subscription_version(buf)
    reader = _Reader(buf)
    reader.pos = 2
    topics = [reader.string() for _ in range(reader.count())]
    user_data = reader.nullable_bytes()
    owned: dict[str, list[int]] = {}
    generation_id = -1
    rack_id = None
    effective = min(version, HIGHEST_SUBSCRIPTION_VERSION)
    if effective >= 1:
        for _ in range(reader.count()):
            topic = reader.string()
            owned.setdefault(topic, []).extend(reader.int32() for _ in range(reader.count()))
    if effective >= 2:
        generation_id = reader.int32()
    if effective >= 3:
        rack_id = reader.string(nullable=True)
    return ClassicSubscription(version, topics, user_data, owned, generation_id, rack_id)


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _H.pack(len(raw)) + raw


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int = 0,
                      user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolAssignment (the layout is the same in versions 0-3; the header says which).

    Topics sorted by name and partitions ascending, so the same assignment gives the same bytes;
    a topic with no partitions is written as given (callers leave out what they do not want sent).
    """
    version = max(0, min(version, HIGHEST_ASSIGNMENT_VERSION))
    items = sorted((topic, sorted(set(parts))) for topic, parts in partitions.items())
    out = bytearray(_H.pack(version))
    out += _I.pack(len(items))
    for topic, parts in items:
        out += _string(topic)
        out += _I.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
    out += _I.pack(-1) if user_data is None else _I.pack(len(user_data)) + user_data
    return bytes(out)


def decode_assignment(assignment: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a ConsumerProtocolAssignment; b"" is no assignment.
    MalformedSubscription if the bytes do not parse."""
    buf = bytes(assignment)
    if not buf:
        return {}
    reader = _Reader(buf)
    if reader.int16() < 0:
        raise MalformedSubscription("negative assignment version")
    result: dict[str, list[int]] = {}
    for _ in range(reader.count()):
        topic = reader.string()
        result.setdefault(topic, []).extend(reader.int32() for _ in range(reader.count()))
    reader.nullable_bytes()
    return result


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version); None if the bytes don't parse."""
    try:
        return set(parse_subscription(subscription).topics)
    except MalformedSubscription:
        return None


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None, version: int = 0,
                        owned: Mapping[str, Iterable[int]] | None = None, generation_id: int = -1,
                        rack_id: str | None = None) -> bytes:
    """A ConsumerProtocolSubscription of `version` (fields the version lacks are left out)."""
    version = max(0, version)
    topics = list(topics)
    out = bytearray(_H.pack(version))
    out += _I.pack(len(topics))
    for topic in topics:
        out += _string(topic)
    out += _I.pack(-1) if user_data is None else _I.pack(len(user_data)) + user_data
    if version >= 1:
        items = sorted((owned or {}).items())
        out += _I.pack(len(items))
        for topic, parts in items:
            parts = sorted(parts)
            out += _string(topic)
            out += _I.pack(len(parts))
            out += struct.pack(f">{len(parts)}i", *parts)
    if version >= 2:
        out += _I.pack(generation_id)
    if version >= 3:
        out += _H.pack(-1) if rack_id is None else _string(rack_id)
    return bytes(out)
