"""Fuzzing: mutated batches and message sets fail only with typed Kafka errors.

Mutations are bit flips, byte overwrites, truncations, insertions and deletions.
"Resealed" cases get their length and CRC fixed after mutating so that decoding
reaches the records and the compressed payload instead of stopping at the CRC.
"""
from __future__ import annotations

import random
import struct
import time
import zlib

from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, UnsupportedCompressionTypeError, compress
from kafkapy.protocol.errors import CorruptRecordError
from kafkapy.protocol.legacy_records import (
    build_message_set, encode_message, iter_legacy_records, legacy_to_v2, v2_to_legacy,
)
from kafkapy.protocol.records import (
    build_batch, decode_records, iter_batch_headers, iter_records, read_batch_header, validate_batch,
)

MAX_SIZE = 1 << 20
SEED = 20240611


def sample_records(rng: random.Random, n: int):
    out = []
    for i in range(n):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(12))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(60))
        headers = [("h%d" % j, None if rng.random() < 0.3 else rng.randbytes(rng.randrange(6)))
                   for j in range(rng.randrange(3))]
        out.append((key, value, headers, 1_700_000_000_000 + rng.randrange(-5000, 5000)))
    return out


def mutate(buf: bytes, rng: random.Random) -> bytearray:
    out = bytearray(buf)
    for _ in range(rng.randrange(1, 4)):
        kind = rng.randrange(6)
        if not out:
            break
        pos = rng.randrange(len(out))
        if kind == 0:
            out[pos] ^= 1 << rng.randrange(8)
        elif kind == 1:
            out[pos] = rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif kind == 2:
            del out[pos:]
        elif kind == 3:
            out[pos:pos] = rng.randbytes(rng.randrange(1, 8))
        elif kind == 4:
            del out[pos : pos + rng.randrange(1, 8)]
        else:
            out[pos : pos + 4] = rng.choice((b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00"))
    return out


def reseal_v2(buf: bytearray) -> bytearray:
    """Give a (mutated) single batch a matching length field and a valid CRC."""
    if len(buf) >= 61:
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return buf


def reseal_legacy(buf: bytearray) -> bytearray:
    """Fix size and CRC of a (mutated) message set holding one top-level message."""
    if len(buf) >= 17:
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])))
    return buf


def v2_corpus(rng: random.Random):
    corpus = []
    for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        for n in (0, 1, 3, 12):
            corpus.append(build_batch(sample_records(rng, n), base_offset=rng.randrange(1 << 40), compression=codec,
                                      producer_id=rng.choice((-1, 77)), producer_epoch=0, base_sequence=0))
    return corpus


def legacy_corpus(rng: random.Random):
    corpus = []
    for magic in (0, 1):
        for codec in (NONE, GZIP, SNAPPY, LZ4):
            for n in (1, 4):
                records = [(k, v, ts) for k, v, _, ts in sample_records(rng, n)]
                buf = build_message_set(records, magic, compression=codec, base_offset=rng.randrange(1000))
                if codec == NONE:
                    buf = buf[: len(buf) // n]  # one message, so reseal_legacy applies
                corpus.append(buf)
    return corpus


def consume_v2(buf) -> None:
    try:
        validate_batch(buf)
        for _ in iter_records(buf, max_size=MAX_SIZE):
            pass
    except CorruptRecordError:
        pass


def consume_v2_trusting_header(buf) -> None:
    # The broker hands iter_records a header it validated earlier; decode must not trust more than that.
    try:
        header = read_batch_header(buf)
        for _ in iter_records(buf, header, max_size=MAX_SIZE):
            pass
    except CorruptRecordError:
        pass


def consume_legacy(buf) -> None:
    try:
        for _ in iter_legacy_records(buf, max_size=MAX_SIZE):
            pass
    except (CorruptRecordError, UnsupportedCompressionTypeError):
        pass
    try:
        legacy_to_v2(buf, max_size=MAX_SIZE)
    except (CorruptRecordError, UnsupportedCompressionTypeError):
        pass


def test_mutated_v2_batches_raise_only_corrupt_record():
    rng = random.Random(SEED)
    corpus = v2_corpus(rng)
    started = time.monotonic()
    cases = 0
    for _ in range(8000):
        original = rng.choice(corpus)
        mutated = mutate(original, rng)
        consume_v2(bytes(mutated))  # CRC normally catches these
        resealed = reseal_v2(mutated)
        consume_v2(resealed)
        consume_v2_trusting_header(resealed)
        cases += 3
    assert cases >= 24000
    assert time.monotonic() - started < 30


def test_mutated_v2_headers_with_valid_crc_raise_only_corrupt_record():
    # Target the header fields the decoder relies on: attributes (codec 5-7, flags), counts, length.
    rng = random.Random(SEED + 1)
    corpus = [b for b in v2_corpus(rng) if len(b) > 61]
    for _ in range(3000):
        buf = bytearray(rng.choice(corpus))
        field = rng.choice(((21, 2), (23, 4), (57, 4), (8, 4)))
        buf[field[0] : field[0] + field[1]] = rng.randbytes(field[1])
        if field[0] != 8:
            struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
        consume_v2(buf)
        consume_v2_trusting_header(buf)
        try:
            v2_to_legacy(bytes(buf), rng.choice((0, 1)))
        except (CorruptRecordError, UnsupportedCompressionTypeError):
            pass


def test_mutated_legacy_message_sets_raise_only_typed_errors():
    rng = random.Random(SEED + 2)
    corpus = legacy_corpus(rng)
    started = time.monotonic()
    cases = 0
    for _ in range(5000):
        mutated = mutate(rng.choice(corpus), rng)
        consume_legacy(bytes(mutated))
        consume_legacy(reseal_legacy(mutated))
        cases += 2
    assert cases >= 10000
    assert time.monotonic() - started < 30


def test_mutated_inner_message_sets_raise_only_typed_errors():
    # Corrupt the inner message set, then wrap it validly: exercises inner parsing.
    rng = random.Random(SEED + 3)
    for _ in range(2000):
        magic = rng.choice((0, 1))
        inner = build_message_set([(k, v, ts) for k, v, _, ts in sample_records(rng, rng.randrange(1, 5))], magic)
        mutated = bytes(mutate(inner, rng))
        codec = rng.choice((GZIP, SNAPPY, LZ4))
        wrapped = compress(codec, mutated, legacy_lz4_checksum=magic == 0)
        consume_legacy(encode_message(rng.randrange(100), magic, codec, 0, None, wrapped))


def test_mutated_record_sections_inside_valid_compression_raise_only_corrupt_record():
    # Corrupt the uncompressed records, then compress and seal correctly: exercises record decoding.
    rng = random.Random(SEED + 4)
    for _ in range(3000):
        records = sample_records(rng, rng.randrange(1, 6))
        plain = build_batch(records, base_timestamp=0)
        mutated = bytes(mutate(plain[61:], rng))
        codec = rng.choice((NONE, GZIP, SNAPPY, LZ4, ZSTD))
        count = len(records) + rng.choice((0, 0, 0, -1, 1))
        batch = build_batch([(b"", b"")] * max(count, 0), records_payload=compress(codec, mutated),
                            compression=codec, base_timestamp=0)
        consume_v2(batch)


@settings(max_examples=400, deadline=None)
@given(payload=st.binary(max_size=200), count=st.integers(min_value=0, max_value=6),
       codec=st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]), compressed=st.booleans())
def test_arbitrary_record_bytes_raise_only_corrupt_record(payload, count, codec, compressed):
    data = compress(codec, payload) if compressed else payload
    batch = build_batch([(b"", b"")] * count, records_payload=data, compression=codec, base_timestamp=0)
    consume_v2(batch)
    try:
        decode_records(payload, count)
    except CorruptRecordError:
        pass


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_typed_errors(data):
    try:
        list(iter_batch_headers(data))
    except CorruptRecordError:
        pass
    consume_v2(data)
    consume_legacy(data)
