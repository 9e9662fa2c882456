"""Control batches: transaction markers built here read as Kafka/kafka-python expect."""
from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkapy.protocol.control_records import (
    ControlRecordType, build_control_batch, control_record_type, encode_end_txn_marker, marker_type,
    parse_control_record, read_control_batch_marker,
)
from kafkapy.protocol.errors import CorruptRecordError
from kafkapy.protocol.records import NO_SEQUENCE, Record, build_batch, iter_records, validate_batch


@pytest.mark.parametrize("marker,expected", [("commit", ControlRecordType.COMMIT), ("abort", ControlRecordType.ABORT),
                                             ("COMMIT", ControlRecordType.COMMIT), (True, ControlRecordType.COMMIT),
                                             (False, ControlRecordType.ABORT), (0, ControlRecordType.ABORT)])
def test_marker_type(marker, expected):
    assert marker_type(marker) is expected


@pytest.mark.parametrize("marker", ["prepare", 2, 9])
def test_bad_marker_type(marker):
    with pytest.raises(ValueError):
        marker_type(marker)


@pytest.mark.parametrize("marker", ["commit", "abort"])
def test_build_control_batch(marker):
    batch = build_control_batch(marker, producer_id=4000, producer_epoch=7, coordinator_epoch=12,
                                base_offset=55, timestamp=1_700_000_000_000, partition_leader_epoch=3)
    header = validate_batch(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4000, 7, NO_SEQUENCE)
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (55, 1, 0)
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_000
    assert header.partition_leader_epoch == 3
    (record,) = iter_records(batch)
    assert record.key == struct.pack(">hh", 0, 1 if marker == "commit" else 0)
    assert record.value == struct.pack(">hi", 0, 12)
    assert parse_control_record(record) == (marker_type(marker), 12)
    assert read_control_batch_marker(batch) == (marker_type(marker), 12)


@pytest.mark.parametrize("marker", ["commit", "abort"])
def test_kafka_python_reads_our_markers(marker):
    batch = build_control_batch(marker, 1, 0, 5)
    parsed = DefaultRecordBatch(batch)
    assert parsed.validate_crc() and parsed.is_control_batch and parsed.is_transactional
    (record,) = list(parsed)
    assert record.commit is (marker == "commit")
    assert record.abort is (marker == "abort")


def test_default_timestamp_is_now():
    import time
    before = int(time.time() * 1000)
    header = validate_batch(build_control_batch("abort", 1, 0, 0))
    assert before <= header.max_timestamp <= int(time.time() * 1000)


def test_newer_versions_are_read_by_their_prefix():
    record = Record(0, 0, struct.pack(">hh", 3, 1) + b"extra", struct.pack(">hi", 2, 9) + b"\x00tagged", [])
    assert parse_control_record(record) == (ControlRecordType.COMMIT, 9)


def test_other_control_types_have_no_epoch():
    assert parse_control_record(Record(0, 0, struct.pack(">hh", 0, 2), b"whatever", [])) == (
        ControlRecordType.LEADER_CHANGE, -1)
    assert control_record_type(struct.pack(">hh", 0, 77)) == 77


@pytest.mark.parametrize("key,value", [
    (None, struct.pack(">hi", 0, 1)),
    (b"\x00\x00\x00", struct.pack(">hi", 0, 1)),
    (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1)),
    (struct.pack(">hh", 0, 1), None),
    (struct.pack(">hh", 0, 0), b"\x00\x00\x00"),
    (struct.pack(">hh", 0, 1), struct.pack(">hi", -1, 1)),
])
def test_malformed_control_records(key, value):
    with pytest.raises(CorruptRecordError):
        parse_control_record(Record(0, 0, key, value, []))


def test_control_batch_without_records():
    batch = build_batch([], is_control=True, is_transactional=True, base_timestamp=0)
    with pytest.raises(CorruptRecordError):
        read_control_batch_marker(batch)


def test_encode_end_txn_marker():
    assert encode_end_txn_marker("commit", 3) == (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x03")


def test_kafka_python_built_records_parse_as_markers():
    # kafka-python cannot build control batches, so build the marker records through its
    # record encoder and flip the control bit ourselves.
    builder = DefaultRecordBatchBuilder(2, 0, True, 5, 0, 0, 1 << 20)
    key, value = encode_end_txn_marker("abort", 44)
    builder.append(0, 1000, key, value, [])
    (record,) = iter_records(bytes(builder.build()))
    assert parse_control_record(record) == (ControlRecordType.ABORT, 44)
