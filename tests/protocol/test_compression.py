"""Compression codecs: round trips, Java/librdkafka wire formats, bombs and garbage."""
from __future__ import annotations

import gzip
import os
import random
import struct
import zlib

import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_python_codec

from kafkapy.protocol import compression
from kafkapy.protocol.compression import (
    GZIP, LZ4, NONE, SNAPPY, ZSTD, UnsupportedCompressionTypeError, compress, decompress, xxh32,
)
from kafkapy.protocol.errors import CorruptRecordError, ErrorCode, KafkaError

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
SAMPLES = [
    b"",
    b"a",
    b"hello kafka " * 1000,
    bytes(range(256)) * 700,  # > 64 KiB and > 32 KiB: several lz4/xerial blocks
    random.Random(7).randbytes(150_000),  # incompressible
]


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}b")
def test_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(ALL_CODECS), data=st.binary(max_size=5000))
def test_round_trip_property(codec, data):
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, memoryview(compress(codec, data))) == data


@pytest.mark.parametrize("data", SAMPLES[1:], ids=lambda d: f"{len(d)}b")
def test_our_output_decodes_with_kafka_python(data):
    assert kafka_python_codec.gzip_decode(compress(GZIP, data)) == data
    assert kafka_python_codec.snappy_decode(compress(SNAPPY, data)) == data
    assert kafka_python_codec.lz4_decode(compress(LZ4, data)) == data
    assert kafka_python_codec.zstd_decode(compress(ZSTD, data)) == data


@pytest.mark.parametrize("data", SAMPLES[1:], ids=lambda d: f"{len(d)}b")
def test_kafka_python_output_decodes(data):
    assert decompress(GZIP, kafka_python_codec.gzip_encode(data)) == data
    assert decompress(SNAPPY, kafka_python_codec.snappy_encode(data)) == data
    assert decompress(SNAPPY, kafka_python_codec.snappy_encode(data, xerial_compatible=False)) == data
    assert decompress(LZ4, kafka_python_codec.lz4_encode(data)) == data
    assert decompress(ZSTD, kafka_python_codec.zstd_encode(data)) == data


# -- snappy framing ------------------------------------------------------------------------------

def java_xerial_snappy(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """What snappy-java's SnappyOutputStream writes (Kafka's snappy codec for every magic)."""
    out = [b"\x82SNAPPY\x00", struct.pack(">ii", 1, 1)]
    for start in range(0, len(data), block_size):
        block = snappy.compress(data[start : start + block_size])
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}b")
def test_java_xerial_snappy_decodes(data):
    assert decompress(SNAPPY, java_xerial_snappy(data)) == data
    assert decompress(SNAPPY, java_xerial_snappy(data, block_size=1000)) == data


def test_compress_snappy_writes_xerial_framing_like_java():
    data = SAMPLES[3]
    out = compress(SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    assert out == java_xerial_snappy(data)


def test_xerial_header_only_is_empty_and_concatenated_streams_decode():
    assert decompress(SNAPPY, java_xerial_snappy(b"")) == b""
    assert decompress(SNAPPY, java_xerial_snappy(b"abc") + java_xerial_snappy(b"def")) == b"abcdef"


def test_raw_snappy_as_librdkafka_writes_decodes():
    data = SAMPLES[2]
    assert decompress(SNAPPY, snappy.compress(data)) == data


@pytest.mark.parametrize("bad", [
    java_xerial_snappy(b"hello world")[:-1],  # truncated block
    java_xerial_snappy(b"hello world") + b"\x00\x00",  # dangling partial length
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x7f\xff\xff\xff",  # block length past end
    b"\x82SNAPPY\x00\x00\x00",  # header truncated
    b"",
    b"\xff\xff\xff\xff\xff\xff",  # raw with a malformed preamble
    b"\x05abc",  # raw, declares more than present
])
def test_snappy_garbage_is_corrupt(bad):
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, bad)


# -- lz4 framing ---------------------------------------------------------------------------------

def java_lz4_frame(data: bytes, broken_checksum: bool = False) -> bytes:
    """What Kafka's Lz4BlockOutputStream writes: FLG 0x60, BD 0x40, independent 64 KiB blocks."""
    descriptor = b"\x04\x22\x4d\x18" + bytes([0x60, 0x40])
    hashed = descriptor if broken_checksum else descriptor[4:]
    out = [descriptor, bytes([(xxh32(hashed) >> 8) & 0xFF])]
    for start in range(0, len(data), 64 * 1024):
        chunk = data[start : start + 64 * 1024]
        block = lz4.block.compress(chunk, store_size=False)
        if len(block) >= len(chunk):
            out.append(struct.pack("<I", len(chunk) | 0x80000000))  # stored uncompressed
            out.append(chunk)
        else:
            out.append(struct.pack("<I", len(block)))
            out.append(block)
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}b")
def test_java_lz4_frame_decodes(data):
    assert decompress(LZ4, java_lz4_frame(data)) == data


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}b")
def test_librdkafka_style_lz4_frame_with_content_size_and_checksum_decodes(data):
    frame = lz4.frame.compress(data, block_linked=False, store_size=True, content_checksum=True)
    assert decompress(LZ4, frame) == data


def test_compress_lz4_header_matches_java():
    out = compress(LZ4, SAMPLES[3])
    assert out[:7] == java_lz4_frame(b"")[:7]


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}b")
def test_magic0_lz4_broken_header_checksum(data):
    java_v0 = java_lz4_frame(data, broken_checksum=True)
    assert decompress(LZ4, java_v0, legacy_lz4_checksum=True) == data
    ours = compress(LZ4, data, legacy_lz4_checksum=True)
    assert ours[:7] == java_v0[:7]
    assert decompress(LZ4, ours, legacy_lz4_checksum=True) == data
    with pytest.raises(CorruptRecordError):
        decompress(LZ4, java_v0)  # the broken checksum is only tolerated for magic 0


def test_xxh32_known_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_xxh32_matches_lz4_header_checksums():
    # lz4 hashes the descriptor with the real xxh32; content sizes vary the 10 hashed bytes.
    for size in range(1, 3000, 7):
        frame = lz4.frame.compress(b"x" * size, store_size=True)
        assert frame[4] & 0x08  # content size present
        assert frame[14] == (xxh32(frame[4:14]) >> 8) & 0xFF


@pytest.mark.parametrize("bad", [
    b"",
    b"\x04\x22\x4d\x18",
    java_lz4_frame(b"hello" * 100)[:-2],  # end mark missing
    java_lz4_frame(b"hello" * 100) + b"junk",
    b"not an lz4 frame at all",
])
def test_lz4_garbage_is_corrupt(bad):
    with pytest.raises(CorruptRecordError):
        decompress(LZ4, bad)


def test_lz4_concatenated_frames_decode():
    assert decompress(LZ4, compress(LZ4, b"abc") + compress(LZ4, b"def")) == b"abcdef"


# -- zstd and gzip -------------------------------------------------------------------------------

def test_zstd_streaming_frames_without_content_size():
    data = SAMPLES[3]
    compressor = zstandard.ZstdCompressor(write_content_size=False)
    chunker = compressor.compressobj()
    frame = chunker.compress(data) + chunker.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, frame) == data


def test_zstd_multiple_frames_and_truncation():
    frames = compress(ZSTD, b"abc" * 1000) + compress(ZSTD, b"def" * 1000)
    assert decompress(ZSTD, frames) == b"abc" * 1000 + b"def" * 1000
    with pytest.raises(CorruptRecordError):
        decompress(ZSTD, frames[:-3])
    with pytest.raises(CorruptRecordError):
        decompress(ZSTD, b"")


def test_gzip_concatenated_members_and_trailing_bytes_like_java():
    data = gzip.compress(b"abc") + gzip.compress(b"def")
    assert decompress(GZIP, data) == b"abcdef"
    assert decompress(GZIP, data + b"\x00\x00garbage") == b"abcdef"
    with pytest.raises(CorruptRecordError):
        decompress(GZIP, gzip.compress(b"abc" * 100)[:-5])
    with pytest.raises(CorruptRecordError):
        decompress(GZIP, b"")


# -- bombs and garbage ---------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ALL_CODECS)
def test_decompression_is_capped(codec):
    data = bytes(4 * 1024 * 1024)
    blob = compress(codec, data)
    assert decompress(codec, blob, max_size=len(data)) == data
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, blob, max_size=len(data) - 1)
    with pytest.raises(CorruptRecordError):
        decompress(codec, blob, max_size=1000)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_bomb_rejected_without_expanding(codec):
    # 256 MiB of zeros; with a 1 MiB cap this must fail fast and without the memory.
    if codec == SNAPPY:
        block = snappy.compress(bytes(32 * 1024))
        blob = compression.XERIAL_HEADER + (struct.pack(">i", len(block)) + block) * 8192
    elif codec == ZSTD:
        blob = zstandard.ZstdCompressor(level=19).compress(bytes(256 * 1024 * 1024))
    else:
        blob = compress(codec, bytes(256 * 1024 * 1024))
    with pytest.raises(CorruptRecordError, match="more than 1048576"):
        decompress(codec, blob, max_size=1024 * 1024)


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from([GZIP, SNAPPY, LZ4, ZSTD]), data=st.binary(max_size=300))
def test_garbage_raises_only_corrupt_record(codec, data):
    try:
        decompress(codec, data, max_size=1 << 20)
    except CorruptRecordError:
        pass


def test_random_mutations_of_valid_blobs_raise_only_corrupt_record():
    rng = random.Random(1234)
    payload = b"".join(b"record-%d-" % i + rng.randbytes(rng.randrange(20)) for i in range(300))
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        blob = compress(codec, payload)
        for _ in range(500):
            mutated = bytearray(blob)
            for _ in range(rng.randrange(1, 4)):
                mutated[rng.randrange(len(mutated))] ^= 1 << rng.randrange(8)
            if rng.random() < 0.3:
                del mutated[rng.randrange(len(mutated)) :]
            try:
                decompress(codec, bytes(mutated), max_size=1 << 20)
            except CorruptRecordError:
                pass


def test_unknown_codec():
    with pytest.raises(CorruptRecordError):
        decompress(5, b"abc")
    with pytest.raises(UnsupportedCompressionTypeError) as info:
        compress(7, b"abc")
    assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert isinstance(info.value, KafkaError)


def test_codec_names():
    assert compression.codec_name(ZSTD) == "zstd"
    assert compression.CODECS_BY_NAME["snappy"] == SNAPPY
    with pytest.raises(CorruptRecordError):
        compression.codec_name(6)


def test_gzip_output_is_a_standard_gzip_member():
    out = compress(GZIP, b"payload")
    assert out[:2] == b"\x1f\x8b"
    assert gzip.decompress(out) == b"payload"
    assert zlib.decompress(out, 31) == b"payload"


def test_empty_input_of_each_codec_is_not_a_crash():
    for codec in ALL_CODECS:
        assert decompress(codec, compress(codec, b"")) == b""


def test_large_random_round_trip():
    data = os.urandom(1 << 20)
    for codec in ALL_CODECS:
        assert decompress(codec, compress(codec, data)) == data


def test_zstd_declared_content_size_above_cap_is_rejected_before_decoding():
    blob = compress(ZSTD, bytes(2_000_000))
    assert zstandard.frame_content_size(blob) == 2_000_000
    with pytest.raises(CorruptRecordError, match="more than 1000000"):
        decompress(ZSTD, blob, max_size=1_000_000)


@pytest.mark.parametrize("cap", [1 << 20, 64 << 20, 2 << 30])
def test_zstd_streaming_path_respects_every_cap_size(cap):
    # Frames without content size take the chunked path whose chunk size depends on the cap.
    chunker = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    blob = chunker.compress(bytes(3 << 20)) + chunker.flush()
    if cap < 3 << 20:
        with pytest.raises(CorruptRecordError):
            decompress(ZSTD, blob, max_size=cap)
    else:
        assert decompress(ZSTD, blob, max_size=cap) == bytes(3 << 20)
