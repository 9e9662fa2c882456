"""Differential tests: v2 batches we build read identically in kafka-python, and vice versa."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkapy.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafkapy.protocol.records import build_batch, iter_records, set_log_append_time, validate_batch

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
keys = st.none() | st.binary(max_size=40)
values = st.none() | st.binary(max_size=300)
header_lists = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=3)
timestamps = st.integers(min_value=0, max_value=1 << 45)
records_strategy = st.lists(st.tuples(keys, values, header_lists, timestamps), min_size=1, max_size=25)
fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def kafka_python_view(batch: bytes):
    parsed = DefaultRecordBatch(batch)
    assert parsed.validate_crc()
    fields = (parsed.base_offset, parsed.compression_type, parsed.timestamp_type, parsed.is_transactional,
              parsed.is_control_batch, parsed.first_timestamp, parsed.max_timestamp, parsed.producer_id,
              parsed.producer_epoch, parsed.base_sequence, parsed.last_offset_delta, parsed.records_count)
    records = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in parsed]
    return fields, records


def our_view(batch: bytes):
    h = validate_batch(batch)
    fields = (h.base_offset, h.compression, h.timestamp_type, h.is_transactional, h.is_control,
              h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence,
              h.last_offset_delta, h.records_count)
    records = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)]
    return fields, records


@fast
@given(records=records_strategy, codec=st.sampled_from(ALL_CODECS),
       base_offset=st.integers(min_value=0, max_value=1 << 40), idempotent=st.booleans())
def test_our_batches_read_identically_in_kafka_python(records, codec, base_offset, idempotent):
    producer = dict(producer_id=1234, producer_epoch=5, base_sequence=77) if idempotent else {}
    batch = build_batch(records, base_offset=base_offset, compression=codec, **producer)
    assert kafka_python_view(batch) == our_view(batch)


@fast
@given(records=records_strategy, codec=st.sampled_from(ALL_CODECS), transactional=st.booleans())
def test_kafka_python_batches_read_identically_here(records, codec, transactional):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=99 if transactional else -1,
                                        producer_epoch=3 if transactional else -1,
                                        base_sequence=0 if transactional else -1, batch_size=1 << 30)
    for i, (key, value, headers, ts) in enumerate(records):
        assert builder.append(i, ts, key, value, headers) is not None
    batch = bytes(builder.build())
    assert our_view(batch) == kafka_python_view(batch)


@fast
@given(records=records_strategy)
def test_uncompressed_bytes_identical_to_kafka_python(records):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, ts, key, value, headers)
    assert build_batch(records, partition_leader_epoch=0) == bytes(builder.build())


@fast
@given(records=records_strategy, codec=st.sampled_from(ALL_CODECS),
       append_time=st.integers(min_value=0, max_value=1 << 45))
def test_log_append_time_read_identically_in_kafka_python(records, codec, append_time):
    batch = bytearray(build_batch(records, compression=codec))
    set_log_append_time(batch, 0, append_time)
    fields, decoded = kafka_python_view(bytes(batch))
    assert fields[2] == 1
    assert {ts for _, ts, _, _, _ in decoded} == {append_time}
    assert our_view(bytes(batch)) == (fields, decoded)
