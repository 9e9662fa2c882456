"""Mutation fuzzing: malformed requests (and responses) raise DecodeError and nothing else.

Seeded random rather than hypothesis, so hundreds of thousands of inputs fit in CI's time budget.
"""
from __future__ import annotations

import random
import struct
import time

import pytest

from kafkapy.protocol.errors import DecodeError
from kafkapy.protocol.headers import decode_request_header
from kafkapy.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES

from test_codec_values import random_message

HUGE = [struct.pack(">i", 0x7FFFFFFF), struct.pack(">i", -2), struct.pack(">h", 0x7FFF),
        b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x80\x80", b"\xfe\x01"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three random mutations of `data`."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        at = rng.randrange(len(buf) + 1)
        if kind == 0 and buf:                       # bit flip
            i = min(at, len(buf) - 1)
            buf[i] ^= 1 << rng.randrange(8)
        elif kind == 1 and buf:                     # random byte
            buf[min(at, len(buf) - 1)] = rng.randrange(256)
        elif kind == 2:                             # truncation
            del buf[at:]
        elif kind == 3:                             # inserted bytes
            buf[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == 4:                             # a huge or negative length / count
            value = rng.choice(HUGE)
            buf[at:at + len(value)] = value
        elif kind == 5 and buf:                     # deletion
            del buf[at:at + rng.randint(1, 8)]
        else:                                       # duplicated span
            span = buf[at:at + rng.randint(1, 16)]
            buf[at:at] = span
    return bytes(buf)


def _corpus(types: dict[int, type], rng: random.Random, per_version: int) -> list:
    corpus = []
    for cls in types.values():
        lo, hi = cls.VALID_VERSIONS
        for version in range(lo, hi + 1):
            for _ in range(per_version):
                corpus.append((cls, version, random_message(cls, version, rng).encode(version)))
    return corpus


def _fuzz(types: dict[int, type], seed: int, iterations: int) -> dict[str, int]:
    rng = random.Random(seed)
    corpus = _corpus(types, rng, per_version=3)
    outcomes = {"decoded": 0, "rejected": 0}
    deadline = time.monotonic() + 120
    for i in range(iterations):
        cls, version, valid = corpus[i % len(corpus)]
        data = mutate(valid, rng)
        try:
            cls.decode(data, version)
            outcomes["decoded"] += 1
        except DecodeError as exc:
            assert exc.api_key == cls.API_KEY and exc.api_version == version, exc
            assert exc.offset is not None and 0 <= exc.offset <= len(data) + 16, (exc, len(data))
            outcomes["rejected"] += 1
        except Exception as exc:   # pragma: no cover - the failure report
            pytest.fail(f"{cls.__name__} v{version} raised {exc!r} on {data.hex()}")
        if i % 1000 == 0:
            assert time.monotonic() < deadline, "fuzzing too slow: a decoder may be looping"
    return outcomes


def test_fuzz_request_decoders():
    outcomes = _fuzz(REQUEST_TYPES, seed=20240611, iterations=300_000)
    # both outcomes must be common, or the mutations are not exercising the decoders
    assert outcomes["rejected"] > 75_000 and outcomes["decoded"] > 25_000, outcomes


def test_fuzz_response_decoders():
    outcomes = _fuzz(RESPONSE_TYPES, seed=7, iterations=100_000)
    assert outcomes["rejected"] > 25_000, outcomes


def test_fuzz_request_header():
    rng = random.Random(11)
    seeds = []
    for key, cls in REQUEST_TYPES.items():
        lo, hi = cls.VALID_VERSIONS
        for version in (lo, hi, hi + 1):
            client = rng.choice([None, "", "kafka-python", "rdkafka-é"])
            raw = client.encode() if client is not None else None
            header = struct.pack(">hhih", key, version, rng.randrange(2**31),
                                 -1 if raw is None else len(raw)) + (raw or b"")
            seeds.append(header + b"\x00" + rng.randbytes(4))
    for i in range(50_000):
        data = mutate(seeds[i % len(seeds)], rng) if i % 10 else rng.randbytes(rng.randrange(24))
        try:
            header, pos = decode_request_header(data)
        except DecodeError as exc:
            assert exc.offset is not None
        else:
            assert 10 <= pos <= len(data)
