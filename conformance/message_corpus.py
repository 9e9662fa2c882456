"""Deterministic test messages (keys, values, headers, timestamps) with Kafka's edge cases.

Every message is a pure function of (seed, index), so a consumer can check what it
reads byte for byte without keeping the produced list around.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

Headers = list[tuple[str, bytes | None]]


@dataclass(slots=True, frozen=True)
class CorpusMessage:
    index: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


class MessageCorpus:
    """Message i of a corpus: null keys/values, empty blobs, duplicate and null headers, binary data."""

    def __init__(self, seed: int, base_timestamp_ms: int, max_value_size: int = 200) -> None:
        self.seed = seed
        self.base_timestamp_ms = base_timestamp_ms
        self.max_value_size = max_value_size
        rng = random.Random(seed)
        # One shared random blob that messages slice from: cheap for 100k messages.
        self._blob = rng.randbytes(1 << 20)

    def _slice(self, index: int, length: int) -> bytes:
        start = (index * 7919) % (len(self._blob) - length)
        return self._blob[start:start + length]

    def message(self, index: int) -> CorpusMessage:
        if index % 1000 == 999:
            key = None
        elif index % 1000 == 500:
            key = b""
        else:
            key = b"key-%d-%d" % (self.seed, index)
        if index % 4999 == 17:
            value = None                       # tombstone
        elif index % 997 == 3:
            value = b""
        else:
            value = self._slice(index, (index * 31) % self.max_value_size + 1)
        headers: Headers = []
        if index % 7 != 0:                     # some messages carry no headers at all
            headers.append(("i", str(index).encode()))
            headers.append(("bin", self._slice(index + 1, index % 23)))
        if index % 11 == 0:
            headers.append(("null-value", None))
        if index % 13 == 0:                    # Kafka allows repeated header keys; order matters
            headers.append(("dup", b"first"))
            headers.append(("dup", b"second"))
        return CorpusMessage(index, key, value, headers, self.base_timestamp_ms + index)
