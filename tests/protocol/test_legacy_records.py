"""Legacy magic 0/1 message sets, cross-checked with kafka-python, and v2 conversions."""
from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkapy.protocol.compression import (
    GZIP, LZ4, NONE, SNAPPY, ZSTD, UnsupportedCompressionTypeError, compress, decompress, xxh32,
)
from kafkapy.protocol.control_records import build_control_batch
from kafkapy.protocol.errors import CorruptRecordError, ErrorCode
from kafkapy.protocol.legacy_records import (
    LegacyMessage, build_message_set, encode_message, iter_legacy_records, iter_message_set, legacy_to_v2,
    v2_to_legacy,
)
from kafkapy.protocol.records import NO_TIMESTAMP, Record, build_batch, iter_records, read_magic, validate_batch

LEGACY_CODECS = [NONE, GZIP, SNAPPY, LZ4]
keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=200)
timestamps = st.integers(min_value=0, max_value=1 << 45)
messages_strategy = st.lists(st.tuples(keys, values, timestamps), min_size=1, max_size=20)
fast = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def kafka_python_records(buf: bytes):
    """(offset, timestamp, timestamp_type, key, value) of every message, via kafka-python."""
    records = MemoryRecords(bytes(buf))
    out = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        for r in batch:
            assert r.validate_crc()
            out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value))
    return out


def our_records(buf: bytes):
    out = []
    for m in iter_legacy_records(buf):
        ts = None if m.magic == 0 else m.timestamp
        tt = None if m.magic == 0 else m.timestamp_type
        out.append((m.offset, ts, tt, m.key, m.value))
    return out


def kafka_python_can_read(magic: int, codec: int) -> bool:
    # kafka-python needs the xxhash package for magic-0 lz4, which is not installed.
    return not (magic == 0 and codec == LZ4)


# -- decoding and encoding ----------------------------------------------------------------------

@fast
@given(messages=messages_strategy, magic=st.sampled_from([0, 1]), codec=st.sampled_from(LEGACY_CODECS),
       base_offset=st.integers(min_value=0, max_value=1 << 40))
def test_round_trip_and_kafka_python_reads_ours(messages, magic, codec, base_offset):
    buf = build_message_set(messages, magic, compression=codec, base_offset=base_offset)
    decoded = list(iter_legacy_records(buf))
    assert [m.offset for m in decoded] == list(range(base_offset, base_offset + len(messages)))
    assert [(m.key, m.value) for m in decoded] == [(k, v) for k, v, _ in messages]
    assert [m.timestamp for m in decoded] == [ts if magic else NO_TIMESTAMP for _, _, ts in messages]
    assert {m.compression for m in decoded} == {codec}
    if kafka_python_can_read(magic, codec):
        assert kafka_python_records(buf) == our_records(buf)


@fast
@given(messages=messages_strategy, magic=st.sampled_from([0, 1]), codec=st.sampled_from(LEGACY_CODECS))
def test_we_read_kafka_python_message_sets(messages, magic, codec):
    if not kafka_python_can_read(magic, codec):
        return
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 30)
    for i, (key, value, ts) in enumerate(messages):
        builder.append(i, ts, key, value)
    buf = bytes(builder.build())
    assert our_records(buf) == kafka_python_records(buf)


@fast
@given(messages=messages_strategy, magic=st.sampled_from([0, 1]))
def test_uncompressed_bytes_identical_to_kafka_python(messages, magic):
    builder = LegacyRecordBatchBuilder(magic, 0, 1 << 30)
    for i, (key, value, ts) in enumerate(messages):
        builder.append(i, ts, key, value)
    assert build_message_set(messages, magic) == bytes(builder.build())


def test_magic1_inner_offsets_are_relative_to_the_wrapper():
    buf = build_message_set([(b"a", b"1", 5), (b"b", b"2", 9)], 1, compression=GZIP, base_offset=1000)
    (wrapper,) = iter_message_set(buf)
    assert wrapper.offset == 1001 and wrapper.compression == GZIP and wrapper.timestamp == 9
    inner = list(iter_message_set(decompress(GZIP, wrapper.value)))
    assert [m.offset for m in inner] == [0, 1]
    assert [m.offset for m in iter_legacy_records(buf)] == [1000, 1001]


def test_magic0_inner_offsets_are_absolute():
    buf = build_message_set([(b"a", b"1"), (b"b", b"2")], 0, compression=SNAPPY, base_offset=1000)
    (wrapper,) = iter_message_set(buf)
    assert wrapper.offset == 1001
    inner = list(iter_message_set(decompress(SNAPPY, wrapper.value)))
    assert [m.offset for m in inner] == [1000, 1001]
    assert [m.offset for m in iter_legacy_records(buf)] == [1000, 1001]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_log_append_time_wrapper_overrides_inner_timestamps(codec):
    buf = build_message_set([(b"a", b"1", 5), (b"b", b"2", 9)], 1, compression=codec, timestamp_type=1,
                            log_append_time=777)
    decoded = list(iter_legacy_records(buf))
    assert [(m.timestamp, m.timestamp_type) for m in decoded] == [(777, 1), (777, 1)]
    assert [(ts, tt) for _, ts, tt, _, _ in kafka_python_records(buf)] == [(777, 1), (777, 1)]


def test_magic0_lz4_uses_the_broken_header_checksum():
    buf = build_message_set([(b"a", b"1"), (b"b", b"2")], 0, compression=LZ4)
    (wrapper,) = iter_message_set(buf)
    frame = wrapper.value
    assert frame[6] == (xxh32(frame[0:6]) >> 8) & 0xFF
    with pytest.raises(CorruptRecordError):
        decompress(LZ4, frame)
    assert [m.value for m in iter_legacy_records(buf)] == [b"1", b"2"]


def test_magic1_lz4_uses_the_correct_header_checksum():
    buf = build_message_set([(b"a", b"1", 1)], 1, compression=LZ4)
    (wrapper,) = iter_message_set(buf)
    assert decompress(LZ4, wrapper.value)


def test_message_objects_keep_their_offsets():
    messages = [LegacyMessage(10, 1, b"a", b"1", 1), LegacyMessage(15, 2, b"b", b"2", 1)]
    for codec in LEGACY_CODECS:
        buf = build_message_set(messages, 1, compression=codec)
        assert [m.offset for m in iter_legacy_records(buf)] == [10, 15]


def test_empty_inputs():
    assert build_message_set([], 1) == b""
    assert list(iter_legacy_records(b"")) == []
    assert legacy_to_v2(b"") == b""


# -- malformed message sets ---------------------------------------------------------------------

def with_crc(message: bytearray) -> bytes:
    struct.pack_into(">I", message, 12, zlib.crc32(bytes(message[16:])))
    return bytes(message)


def wrapper_around(inner: bytes, magic: int = 1, codec: int = GZIP) -> bytes:
    return encode_message(0, magic, codec, 0, None, compress(codec, inner))


GOOD_V1 = encode_message(0, 1, 0, 5, b"k", b"v")


@pytest.mark.parametrize("buf,message", ids=[
    "truncated-prefix", "truncated-body", "bad-crc", "magic-2", "size-too-small", "field-overrun",
    "slack", "nested", "empty-wrapper", "null-wrapper", "garbage-wrapper"], argvalues=[
    (GOOD_V1[:10], "truncated"),
    (GOOD_V1[:-1], "past the end"),
    (GOOD_V1[:-1] + b"w", "CRC"),
    (with_crc(bytearray(GOOD_V1[:16] + b"\x02" + GOOD_V1[17:])), "magic"),
    (with_crc(bytearray(GOOD_V1[:8] + struct.pack(">i", 13) + GOOD_V1[12:25])), "size"),
    (with_crc(bytearray(GOOD_V1[:26] + struct.pack(">i", 50) + GOOD_V1[30:])), "overruns"),
    (with_crc(bytearray(GOOD_V1[:8] + struct.pack(">i", len(GOOD_V1) - 11) + GOOD_V1[12:] + b"\x00")), "fields end"),
    (wrapper_around(wrapper_around(GOOD_V1)), "compressed twice"),
    (wrapper_around(b""), "no messages"),
    (encode_message(0, 1, GZIP, 0, None, None), "null value"),
    (encode_message(0, 1, SNAPPY, 0, None, b"not snappy at all"), "snappy"),
])
def test_malformed_message_sets_raise_corrupt_record(buf, message):
    with pytest.raises(CorruptRecordError, match=message):
        list(iter_legacy_records(buf))


def test_inner_magic_may_differ_from_the_wrapper_as_the_broker_allows():
    buf = wrapper_around(encode_message(0, 0, 0, -1, b"k", b"v"), magic=1)
    (message,) = iter_legacy_records(buf)
    assert (message.magic, message.timestamp, message.key) == (0, NO_TIMESTAMP, b"k")


def test_producer_wrapper_offset_zero_keeps_inner_offsets_like_java():
    # kafka-python (and old librdkafka) leave the magic-1 wrapper offset at 0.
    inner = encode_message(0, 1, 0, 1, b"a", b"1") + encode_message(1, 1, 0, 2, b"b", b"2")
    buf = encode_message(0, 1, GZIP, 2, None, compress(GZIP, inner))
    assert [m.offset for m in iter_legacy_records(buf)] == [0, 1]


def test_zstd_wrapper_is_unsupported():
    buf = encode_message(0, 1, ZSTD, 0, None, compress(ZSTD, GOOD_V1))
    with pytest.raises(UnsupportedCompressionTypeError) as info:
        list(iter_legacy_records(buf))
    assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(UnsupportedCompressionTypeError):
        build_message_set([(b"k", b"v")], 1, compression=ZSTD)


# -- legacy_to_v2 -------------------------------------------------------------------------------

@fast
@given(messages=messages_strategy, magic=st.sampled_from([0, 1]), codec=st.sampled_from(LEGACY_CODECS))
def test_legacy_to_v2(messages, magic, codec):
    buf = build_message_set(messages, magic, compression=codec, base_offset=500)
    assert read_magic(buf) == magic
    batch = legacy_to_v2(buf)
    header = validate_batch(batch)
    assert header.size == len(batch)
    assert header.compression == codec and header.timestamp_type == 0
    assert header.records_count == len(messages) and header.last_offset_delta == len(messages) - 1
    records = list(iter_records(batch))
    assert [r.offset for r in records] == list(range(len(messages)))
    assert [(r.key, r.value, r.headers) for r in records] == [(k, v, []) for k, v, _ in messages]
    expected_ts = [ts if magic else NO_TIMESTAMP for _, _, ts in messages]
    assert [r.timestamp for r in records] == expected_ts
    assert header.max_timestamp == max(expected_ts)


def test_legacy_to_v2_of_kafka_python_producer_output_reads_in_kafka_python():
    from kafka.record.default_records import DefaultRecordBatch
    for magic in (0, 1):
        for codec in LEGACY_CODECS:
            if not kafka_python_can_read(magic, codec):
                continue
            builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
            for i in range(5):
                builder.append(i, 1000 + i, b"key%d" % i, b"value%d" % i)
            batch = legacy_to_v2(bytes(builder.build()))
            parsed = DefaultRecordBatch(batch)
            assert parsed.validate_crc() and parsed.compression_type == codec
            assert [(r.offset, r.key, r.value) for r in parsed] == [
                (i, b"key%d" % i, b"value%d" % i) for i in range(5)]


def test_legacy_to_v2_several_wrappers_become_one_batch_with_the_last_codec():
    buf = (build_message_set([(b"a", b"1", 1)], 1)
           + build_message_set([(b"b", b"2", 2), (b"c", b"3", 3)], 1, compression=GZIP, base_offset=1)
           + build_message_set([(b"d", b"4", 4)], 1, compression=SNAPPY, base_offset=3))
    batch = legacy_to_v2(buf)
    assert validate_batch(batch).compression == SNAPPY
    assert [r.key for r in iter_records(batch)] == [b"a", b"b", b"c", b"d"]


def test_legacy_to_v2_rejects_corrupt_input():
    with pytest.raises(CorruptRecordError):
        legacy_to_v2(GOOD_V1[:-1] + b"w")


# -- v2_to_legacy -------------------------------------------------------------------------------

@fast
@given(records=st.lists(st.tuples(keys, values, st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)),
                                                          max_size=2), timestamps), min_size=1, max_size=15),
       magic=st.sampled_from([0, 1]), codec=st.sampled_from(LEGACY_CODECS),
       base_offset=st.integers(min_value=0, max_value=1 << 40))
def test_v2_to_legacy(records, magic, codec, base_offset):
    batch = build_batch(records, base_offset=base_offset, compression=codec)
    buf = v2_to_legacy(batch, magic)
    decoded = list(iter_legacy_records(buf))
    assert [m.offset for m in decoded] == list(range(base_offset, base_offset + len(records)))
    assert [(m.key, m.value) for m in decoded] == [(k, v) for k, v, _, _ in records]
    assert {m.compression for m in decoded} == {codec}
    assert {m.magic for m in decoded} == {magic}
    assert [m.timestamp for m in decoded] == [ts if magic else NO_TIMESTAMP for _, _, _, ts in records]
    if codec != NONE:
        assert len(list(iter_message_set(buf))) == 1  # one wrapper per batch
    if kafka_python_can_read(magic, codec):
        assert kafka_python_records(buf) == our_records(buf)


def test_v2_to_legacy_keeps_gaps_of_compacted_batches():
    batch = build_batch([Record(100, 1, b"a", b"1", []), Record(107, 2, b"b", b"2", [])], base_offset=100,
                        compression=GZIP)
    for magic in (0, 1):
        buf = v2_to_legacy(batch, magic)
        assert [r[0] for r in kafka_python_records(buf)] == [100, 107]


def test_v2_to_legacy_drops_control_batches_and_applies_first_offset_to_uncompressed_only():
    plain = build_batch([(b"a", b"1", (), 1), (b"b", b"2", (), 2), (b"c", b"3", (), 3)], base_offset=0)
    marker = build_control_batch("commit", 1, 0, 0, base_offset=3, timestamp=4)
    packed = build_batch([(b"d", b"4", (), 5), (b"e", b"5", (), 6)], base_offset=4, compression=SNAPPY)
    buf = v2_to_legacy(plain + marker + packed, 1, first_offset=2)
    assert [m.offset for m in iter_legacy_records(buf)] == [2, 4, 5]
    buf = v2_to_legacy(plain + marker + packed, 1, first_offset=5)
    assert [m.offset for m in iter_legacy_records(buf)] == [4, 5]  # compressed batches stay whole


def test_v2_to_legacy_log_append_time():
    batch = build_batch([(b"a", b"1", (), 1), (b"b", b"2", (), 2)], timestamp_type=1, max_timestamp=999)
    for codec in (NONE, GZIP):
        batch = build_batch([(b"a", b"1", (), 1), (b"b", b"2", (), 2)], timestamp_type=1, max_timestamp=999,
                            compression=codec)
        assert [(ts, tt) for _, ts, tt, _, _ in kafka_python_records(v2_to_legacy(batch, 1))] == [(999, 1)] * 2
        assert [(ts, tt) for _, ts, tt, _, _ in kafka_python_records(v2_to_legacy(batch, 0))] == [(None, None)] * 2


def test_v2_to_legacy_zstd_is_unsupported():
    batch = build_batch([(b"a", b"1")], compression=ZSTD)
    with pytest.raises(UnsupportedCompressionTypeError):
        v2_to_legacy(batch, 1)


def test_v2_to_legacy_rejects_bad_magic_and_skips_empty_batches():
    with pytest.raises(ValueError):
        v2_to_legacy(b"", 2)
    assert v2_to_legacy(build_batch([], base_timestamp=0), 1) == b""


def test_legacy_v2_legacy_round_trip():
    for codec in LEGACY_CODECS:
        original = build_message_set([(b"k%d" % i, b"v%d" % i, 100 + i) for i in range(10)], 1, compression=codec)
        back = v2_to_legacy(legacy_to_v2(original), 1)
        assert [(m.offset, m.timestamp, m.key, m.value) for m in iter_legacy_records(back)] == [
            (m.offset, m.timestamp, m.key, m.value) for m in iter_legacy_records(original)]
