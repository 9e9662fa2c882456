"""v2 record batches: record decoding, varints, building with options, LogAppendTime patching."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kafka_python_decode_varint

from kafkapy.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafkapy.protocol.errors import CorruptRecordError, KafkaError
from kafkapy.protocol.records import (
    HEADER_SIZE, NO_TIMESTAMP, Record, build_batch, decode_records, encode_record, encode_varint,
    iter_batch_headers, iter_records, read_batch_header, read_magic, read_varint, read_varlong,
    set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_batch,
)

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=300)
header_lists = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=3)
timestamps = st.integers(min_value=0, max_value=1 << 45)
records_strategy = st.lists(st.tuples(keys, values, header_lists, timestamps), max_size=25)


def varint_bytes(value: int) -> bytes:
    return encode_varint(value)


# -- varints -------------------------------------------------------------------------------------

@given(st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1))
def test_varint_round_trip_and_matches_kafka_python(value):
    encoded = varint_bytes(value) + b"tail"
    assert read_varint(encoded, 0) == (value, len(encoded) - 4)
    assert kafka_python_decode_varint(encoded, 0) == (value, len(encoded) - 4)


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varlong_round_trip(value):
    encoded = varint_bytes(value)
    assert read_varlong(b"xx" + encoded, 2) == (value, 2 + len(encoded))


def test_varint_fifth_byte_high_bits_dropped_like_java():
    assert read_varint(b"\xff\xff\xff\xff\x7f", 0) == (-(1 << 31), 5)
    assert read_varint(b"\xfe\xff\xff\xff\x0f", 0) == ((1 << 31) - 1, 5)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80\x80\x01"])
def test_malformed_varint_raises_corrupt_record(data):
    with pytest.raises(CorruptRecordError):
        read_varint(data, 0)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\x80" * 10 + b"\x01", b"\xff" * 9])
def test_malformed_varlong_raises_corrupt_record(data):
    with pytest.raises(CorruptRecordError):
        read_varlong(data, 0)


# -- build / iterate round trips -----------------------------------------------------------------

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_strategy, codec=st.sampled_from(ALL_CODECS),
       base_offset=st.integers(min_value=0, max_value=1 << 62), transactional=st.booleans())
def test_build_then_iter_round_trip(records, codec, base_offset, transactional):
    batch = build_batch(records, base_offset=base_offset, compression=codec, producer_id=7 if transactional else -1,
                        producer_epoch=1 if transactional else -1, is_transactional=transactional)
    header = validate_batch(batch)
    assert header.compression == codec
    assert header.is_transactional is transactional
    assert header.records_count == len(records)
    assert header.last_offset_delta == max(len(records) - 1, 0)
    if records:
        assert header.base_timestamp == records[0][3]
        assert header.max_timestamp == max(r[3] for r in records)
    decoded = list(iter_records(batch))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (k, v, list(h), ts) for k, v, h, ts in records]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    # a trusted header gives the same records
    assert list(iter_records(batch, header)) == decoded


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_records_objects_keep_offsets_and_gaps(codec):
    records = [Record(100, 5, b"a", b"1", []), Record(103, 9, None, b"2", [("h", None)]), Record(110, 7, b"c", None, [])]
    batch = build_batch(records, base_offset=100, compression=codec, last_offset_delta=12)
    header = validate_batch(batch)
    assert header.last_offset_delta == 12
    assert header.base_timestamp == 5 and header.max_timestamp == 9
    assert list(iter_records(batch)) == records


def test_explicit_base_timestamp_and_missing_record_timestamps():
    batch = build_batch([(b"k", b"v"), (b"k", b"v", None, 2000)], base_timestamp=1500)
    assert [r.timestamp for r in iter_records(batch)] == [1500, 2000]
    header = validate_batch(batch)
    assert header.base_timestamp == 1500 and header.max_timestamp == 2000


def test_max_timestamp_is_max_of_records_even_below_base():
    batch = build_batch([(b"k", b"v", (), 10), (b"k", b"v", (), 20)], base_timestamp=100)
    assert validate_batch(batch).max_timestamp == 20


def test_magic0_style_no_timestamps():
    batch = build_batch([(b"k", b"v", (), NO_TIMESTAMP)] * 3)
    header = validate_batch(batch)
    assert header.base_timestamp == NO_TIMESTAMP and header.max_timestamp == NO_TIMESTAMP
    assert {r.timestamp for r in iter_records(batch)} == {NO_TIMESTAMP}


def test_empty_batch():
    batch = build_batch([], base_timestamp=1)
    header = validate_batch(batch)
    assert header.records_count == 0 and header.size == HEADER_SIZE
    assert list(iter_records(batch)) == []


def test_header_keys_that_are_not_utf8_round_trip_byte_for_byte():
    raw = b"\xff\xfekey"
    record = encode_record(0, 0, b"k", b"v", [(raw, b"x")])
    batch = build_batch([(b"", b"")], records_payload=record, base_timestamp=0)
    (decoded,) = iter_records(batch)
    assert decoded.headers[0][0].encode("utf-8", "surrogateescape") == raw
    rebuilt = build_batch([decoded], base_timestamp=0)
    assert rebuilt == batch


def test_flags_and_timestamp_type():
    batch = build_batch([(b"k", b"v", (), 10)], is_control=True, is_transactional=True,
                        timestamp_type=1, max_timestamp=99, producer_id=1, producer_epoch=0)
    header = validate_batch(batch)
    assert header.is_control and header.is_transactional and header.timestamp_type == 1
    assert header.max_timestamp == 99
    assert [r.timestamp for r in iter_records(batch)] == [99]


def test_precompressed_records_payload():
    raw = b"".join(encode_record(i, 0, b"k%d" % i, b"v") for i in range(3))
    from kafkapy.protocol.compression import compress
    batch = build_batch([(b"", b"")] * 3, records_payload=compress(ZSTD, raw), compression=ZSTD, base_timestamp=5)
    assert [r.key for r in iter_records(batch)] == [b"k0", b"k1", b"k2"]


def test_iter_records_of_a_batch_inside_a_larger_buffer():
    first = build_batch([(b"a", b"1")], base_offset=0, base_timestamp=1)
    second = build_batch([(b"b", b"2"), (b"c", b"3")], base_offset=1, compression=LZ4, base_timestamp=2)
    buf = first + second
    headers = list(iter_batch_headers(buf))
    assert [r.offset for r in iter_records(buf, headers[1])] == [1, 2]
    assert [r.key for r in iter_records(buf, headers[0])] == [b"a"]


def test_decode_records_helper():
    raw = b"".join(encode_record(i, i, b"k", None) for i in range(4))
    assert [(r.offset, r.timestamp) for r in decode_records(raw, 4, 10, 100)] == [
        (10, 100), (11, 101), (12, 102), (13, 103)]


def test_max_size_limits_decompression():
    batch = build_batch([(b"k", bytes(100_000))], compression=GZIP)
    with pytest.raises(CorruptRecordError):
        list(iter_records(batch, max_size=50_000))
    assert len(next(iter(iter_records(batch, max_size=200_000))).value) == 100_000


# -- malformed record sections ------------------------------------------------------------------

def batch_with_payload(payload: bytes, count: int, codec: int = NONE) -> bytes:
    from kafkapy.protocol.compression import compress
    return build_batch([(b"", b"")] * count, records_payload=compress(codec, payload), compression=codec,
                       base_timestamp=0)


def raw_record(body: bytes) -> bytes:
    return varint_bytes(len(body)) + body


GOOD = encode_record(0, 0, b"k", b"v", [("h", b"x")])


@pytest.mark.parametrize("codec", [NONE, SNAPPY])
@pytest.mark.parametrize("payload,count,message", ids=[
    "too-few", "too-many", "cut-short", "negative-headers", "null-header-key", "slack", "key-overrun",
    "negative-length", "bad-varint"], argvalues=[
    (GOOD, 2, "truncated"),  # fewer records than declared
    (GOOD + GOOD, 1, "remain"),  # more bytes than declared records
    (GOOD[:-1], 1, None),  # record cut short
    (raw_record(b"\x00\x00\x00\x02k\x02v\x01"), 1, "header count"),  # negative header count
    (raw_record(b"\x00\x00\x00\x02k\x02v\x02\x01\x01"), 1, "null key"),  # header key null
    (raw_record(b"\x00\x00\x00\x02k\x02v\x00\x00\x00"), 1, "expected to read"),  # slack inside record
    (raw_record(b"\x00\x00\x00\x7ek\x02v\x00"), 1, None),  # key overruns the record
    (b"\x01\x00", 1, "invalid length"),  # negative record length
    (b"\xff\xff\xff\xff\xff\xff", 1, "varint"),  # malformed length varint
])
def test_malformed_records_raise_corrupt_record(payload, count, message, codec):
    batch = batch_with_payload(payload, count, codec)
    with pytest.raises(CorruptRecordError, match=message):
        list(iter_records(batch))


def test_negative_record_count_is_rejected():
    batch = bytearray(batch_with_payload(GOOD, 1))
    batch[57:61] = b"\xff\xff\xff\xff"
    header = read_batch_header(batch)
    with pytest.raises(CorruptRecordError):
        list(iter_records(batch, header))


def test_iter_records_without_header_checks_crc():
    batch = bytearray(build_batch([(b"k", b"v")]))
    batch[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_records(batch))


def test_errors_are_kafka_errors():
    assert issubclass(CorruptRecordError, KafkaError)


# -- in-place patching --------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ALL_CODECS)
def test_set_log_append_time(codec):
    first = build_batch([(b"x", b"y")], base_timestamp=5)
    batch = bytearray(first + build_batch([(b"a", b"1", (), 10), (b"b", b"2", (), 20)], compression=codec))
    pos = len(first)
    set_log_append_time(batch, pos, 123456)
    header = validate_batch(batch, pos)  # CRC recomputed
    assert header.timestamp_type == 1 and header.max_timestamp == 123456
    assert header.base_timestamp == 10 and header.compression == codec
    assert [r.timestamp for r in iter_records(batch, header)] == [123456, 123456]
    assert validate_batch(batch, 0).timestamp_type == 0  # neighbour untouched


def test_set_log_append_time_rejects_impossible_length():
    batch = bytearray(build_batch([(b"x", b"y")]))
    with pytest.raises(CorruptRecordError):
        set_log_append_time(batch[:-1], 0, 1)


def test_existing_patchers_still_work():
    batch = bytearray(build_batch([(b"x", b"y")]))
    set_base_offset(batch, 42)
    set_partition_leader_epoch(batch, 3)
    header = validate_batch(batch)
    assert header.base_offset == 42 and header.partition_leader_epoch == 3
    assert next(iter(iter_records(batch))).offset == 42


def test_read_magic():
    assert read_magic(build_batch([(b"x", b"y")])) == 2
    with pytest.raises(CorruptRecordError):
        read_magic(b"\x00" * 16)
