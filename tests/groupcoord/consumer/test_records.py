"""Consumer group (KIP-848) __consumer_offsets records against bytes built from Kafka's JSON schemas.

The expected bytes below are written field by field from group-coordinator/src/main/resources/
common/message/ConsumerGroup*.json (keys: int16 type then int16-length strings; values: int16
version 0, flexible: unsigned-varint length+1 compact strings/arrays, 16-byte uuids, a tagged-field
count after every struct), not from the encoder under test.
"""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.consumer.records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicMetadata,
    decode_consumer_key,
    decode_consumer_value,
    encode_key,
    encode_value,
    record,
)
from kafkapy.groupcoord.records import decode_key
from kafkapy.protocol.errors import CorruptRecordError

T1 = uuid.UUID("00000000-0000-0001-0000-000000000002")
T2 = uuid.UUID("ffffffff-ffff-fffe-0000-0000000000ff")


def i16(n): return struct.pack(">h", n)
def i32(n): return struct.pack(">i", n)
def i64(n): return struct.pack(">q", n)
def kstr(s): return i16(len(s.encode())) + s.encode()
def cstr(s): return b"\x00" if s is None else bytes([len(s.encode()) + 1]) + s.encode()


KEYS = [
    (ConsumerGroupMetadataKey("grp"), i16(3) + kstr("grp")),
    (ConsumerGroupPartitionMetadataKey("grp"), i16(4) + kstr("grp")),
    (ConsumerGroupMemberMetadataKey("grp", "m-1"), i16(5) + kstr("grp") + kstr("m-1")),
    (ConsumerGroupTargetAssignmentMetadataKey("grp"), i16(6) + kstr("grp")),
    (ConsumerGroupTargetAssignmentMemberKey("grp", "m-1"), i16(7) + kstr("grp") + kstr("m-1")),
    (ConsumerGroupCurrentMemberAssignmentKey("grp", "m-1"), i16(8) + kstr("grp") + kstr("m-1")),
    (ConsumerGroupRegularExpressionKey("grp", "t.*"), i16(16) + kstr("grp") + kstr("t.*")),
]


@pytest.mark.parametrize("key,expected", KEYS, ids=[type(k).__name__ for k, _ in KEYS])
def test_key_bytes(key, expected):
    assert encode_key(key) == expected
    assert decode_consumer_key(expected) == key
    assert decode_key(expected) == key  # the classic loader's entry point hands them over


def test_other_record_types_are_not_consumer_group_keys():
    for key_type in (0, 1, 2, 9, 10, 11, 12, 13, 14, 15, 17, 20, 99, -1):
        assert decode_consumer_key(i16(key_type) + kstr("grp") + kstr("x")) is None
    assert decode_key(i16(11) + kstr("share-group")) is None  # a share group record: skipped


def test_truncated_keys_raise_corrupt_record():
    for raw in (i16(3), i16(3) + i16(5) + b"ab", i16(5) + kstr("grp"), i16(8) + kstr("grp") + i16(9) + b"m"):
        with pytest.raises(CorruptRecordError):
            decode_consumer_key(raw)


def test_group_metadata_value_bytes():
    expected = i16(0) + i32(7) + b"\x00"
    assert encode_value(ConsumerGroupMetadataValue(7)) == expected
    assert decode_consumer_value(ConsumerGroupMetadataKey("g"), expected) == ConsumerGroupMetadataValue(7)


def test_group_metadata_value_with_kafka_4_1_tagged_fields_reads():
    # 4.1 adds MetadataHash (tag 0, int64) and later CreationTimeMs (tag 1): written only when not
    # default; a 4.0 reader skips them
    raw = i16(0) + i32(7) + b"\x02" + b"\x00\x08" + i64(123456789) + b"\x01\x08" + i64(1700000000000)
    assert decode_consumer_value(ConsumerGroupMetadataKey("g"), raw) == ConsumerGroupMetadataValue(7)


def test_partition_metadata_value_bytes():
    value = ConsumerGroupPartitionMetadataValue([
        TopicMetadata(T1, "orders", 12),
        TopicMetadata(T2, "é", 3, {0: ("r1", "r2"), 2: ()}),
    ])
    expected = (i16(0) + b"\x03"
                + T1.bytes + cstr("orders") + i32(12) + b"\x01" + b"\x00"
                + T2.bytes + cstr("é") + i32(3) + b"\x03"
                + i32(0) + b"\x03" + cstr("r1") + cstr("r2") + b"\x00"
                + i32(2) + b"\x01" + b"\x00"
                + b"\x00"
                + b"\x00")
    assert encode_value(value) == expected
    assert decode_consumer_value(ConsumerGroupPartitionMetadataKey("g"), expected) == value


def test_member_metadata_value_bytes():
    value = ConsumerGroupMemberMetadataValue(
        instance_id=None, rack_id="rack-a", client_id="cid", client_host="/127.0.0.1",
        subscribed_topic_names=["a", "b"], subscribed_topic_regex=None, rebalance_timeout_ms=300000,
        server_assignor="uniform")
    expected = (i16(0) + cstr(None) + cstr("rack-a") + cstr("cid") + cstr("/127.0.0.1")
                + b"\x03" + cstr("a") + cstr("b") + cstr(None) + i32(300000) + cstr("uniform") + b"\x00")
    assert encode_value(value) == expected
    assert decode_consumer_value(ConsumerGroupMemberMetadataKey("g", "m"), expected) == value


def test_member_metadata_value_with_classic_member_metadata_tag():
    value = ConsumerGroupMemberMetadataValue(
        instance_id="i-1", rack_id=None, client_id="c", client_host="h", subscribed_topic_names=[],
        subscribed_topic_regex="t.*", rebalance_timeout_ms=-1, server_assignor=None,
        classic_member_metadata=ClassicMemberMetadata(45000, [("range", b"\x00\x01"), ("cooperative-sticky", b"")]))
    struct_bytes = (i32(45000) + b"\x03"
                    + cstr("range") + b"\x03\x00\x01" + b"\x00"
                    + cstr("cooperative-sticky") + b"\x01" + b"\x00"
                    + b"\x00")
    expected = (i16(0) + cstr("i-1") + cstr(None) + cstr("c") + cstr("h") + b"\x01" + cstr("t.*") + i32(-1)
                + cstr(None) + b"\x01" + b"\x00" + bytes([len(struct_bytes)]) + struct_bytes)
    assert encode_value(value) == expected
    assert decode_consumer_value(ConsumerGroupMemberMetadataKey("g", "m"), expected) == value


def test_member_metadata_classic_tag_without_session_timeout_reads():
    # the 3.8 pre-release layout of ClassicMemberMetadata had no SessionTimeoutMs
    struct_bytes = b"\x02" + cstr("range") + b"\x02\x07" + b"\x00" + b"\x00"
    raw = (i16(0) + cstr(None) + cstr(None) + cstr("c") + cstr("h") + b"\x01" + cstr(None) + i32(1000) + cstr(None)
           + b"\x01\x00" + bytes([len(struct_bytes)]) + struct_bytes)
    got = decode_consumer_value(ConsumerGroupMemberMetadataKey("g", "m"), raw)
    assert got.classic_member_metadata == ClassicMemberMetadata(-1, [("range", b"\x07")])


def test_target_assignment_metadata_value_bytes():
    expected = i16(0) + i32(-1) + b"\x00"
    assert encode_value(ConsumerGroupTargetAssignmentMetadataValue(-1)) == expected
    assert decode_consumer_value(ConsumerGroupTargetAssignmentMetadataKey("g"), expected).assignment_epoch == -1


def test_target_assignment_member_value_bytes():
    value = ConsumerGroupTargetAssignmentMemberValue({T2: frozenset({5, 1}), T1: frozenset()})
    # topics by id bytes, partitions ascending
    expected = (i16(0) + b"\x03"
                + T1.bytes + b"\x01" + b"\x00"
                + T2.bytes + b"\x03" + i32(1) + i32(5) + b"\x00"
                + b"\x00")
    assert encode_value(value) == expected
    assert decode_consumer_value(ConsumerGroupTargetAssignmentMemberKey("g", "m"), expected) == value


def test_current_member_assignment_value_bytes():
    value = ConsumerGroupCurrentMemberAssignmentValue(11, 10, 1, {T1: frozenset({0, 2})}, {T2: frozenset({3})})
    expected = (i16(0) + i32(11) + i32(10) + b"\x01"
                + b"\x02" + T1.bytes + b"\x03" + i32(0) + i32(2) + b"\x00"
                + b"\x02" + T2.bytes + b"\x02" + i32(3) + b"\x00"
                + b"\x00")
    assert encode_value(value) == expected
    assert decode_consumer_value(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), expected) == value


def test_current_member_assignment_with_later_assignment_epochs_tag_reads():
    # KIP-1251 adds AssignmentEpochs (tag 0 of TopicPartitions): skipped
    tagged = b"\x01" + b"\x00" + bytes([1 + 4]) + b"\x02" + i32(9)
    raw = (i16(0) + i32(3) + i32(2) + b"\x00"
           + b"\x02" + T1.bytes + b"\x02" + i32(4) + tagged
           + b"\x01" + b"\x00")
    got = decode_consumer_value(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), raw)
    assert got == ConsumerGroupCurrentMemberAssignmentValue(3, 2, 0, {T1: frozenset({4})}, {})


def test_regular_expression_value_bytes():
    value = ConsumerGroupRegularExpressionValue(["t1", "t2"], 42, 1700000000000)
    expected = i16(0) + b"\x03" + cstr("t1") + cstr("t2") + i64(42) + i64(1700000000000) + b"\x00"
    assert encode_value(value) == expected
    assert decode_consumer_value(ConsumerGroupRegularExpressionKey("g", "t.*"), expected) == value


def test_tombstone_and_decode_key():
    key = ConsumerGroupTargetAssignmentMemberKey("g", "m")
    raw_key, raw_value = record(key, None)
    assert raw_value is None
    assert decode_consumer_key(raw_key) == key
    assert decode_consumer_key(i16(1) + kstr("g") + kstr("t") + i32(0)) is None


def test_large_varint_lengths():
    name = "x" * 300  # a length+1 of 301 takes two varint bytes
    value = ConsumerGroupRegularExpressionValue([name], 0, 0)
    raw = encode_value(value)
    assert raw[:5] == i16(0) + b"\x02" + bytes([301 & 0x7F | 0x80, 301 >> 7])
    assert decode_consumer_value(ConsumerGroupRegularExpressionKey("g", "r"), raw) == value


@pytest.mark.parametrize("cut", [3, 6, 10, 25])
def test_truncated_values_raise_corrupt_record(cut):
    raw = encode_value(ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, {T1: frozenset({1, 2})}, {}))
    with pytest.raises(CorruptRecordError):
        decode_consumer_value(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), raw[:cut])


def test_kafka_3_7_early_access_layouts_are_refused():
    # 3.7 wrote KIP-848 values under version 0 in layouts 3.8 dropped (Kafka 3.8+ cannot read
    # them either): CurrentMemberAssignment had TargetMemberEpoch, a third partition list, Error,
    # MetadataVersion and MetadataBytes; PartitionMetadata began with the group Epoch
    current_3_7 = (i16(0) + i32(3) + i32(2) + i32(3) + b"\x01" + b"\x01" + b"\x01" + b"\x00"
                   + i16(0) + b"\x01" + b"\x00")
    with pytest.raises(CorruptRecordError):
        decode_consumer_value(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), current_3_7)
    partition_metadata_3_7 = i16(0) + i32(5) + b"\x02" + T1.bytes + cstr("t") + i32(3) + b"\x01" + b"\x00" + b"\x00"
    with pytest.raises(CorruptRecordError):
        decode_consumer_value(ConsumerGroupPartitionMetadataKey("g"), partition_metadata_3_7)


def test_trailing_bytes_raise_corrupt_record():
    raw = encode_value(ConsumerGroupMetadataValue(1))
    with pytest.raises(CorruptRecordError):
        decode_consumer_value(ConsumerGroupMetadataKey("g"), raw + b"\x00")


def test_unknown_value_version_raises_corrupt_record():
    with pytest.raises(CorruptRecordError):
        decode_consumer_value(ConsumerGroupMetadataKey("g"), i16(1) + i32(1) + b"\x00")


# -- round trips -----------------------------------------------------------------------------
texts = st.text(max_size=20)
opt_texts = st.none() | texts
uuids = st.uuids()
assignments = st.dictionaries(uuids, st.frozensets(st.integers(0, 2**31 - 1), min_size=1, max_size=8), max_size=4)
epochs = st.integers(-2**31, 2**31 - 1)

values = st.one_of(
    st.builds(lambda e: (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(e)), epochs),
    st.builds(lambda ts: (ConsumerGroupPartitionMetadataKey("g"), ConsumerGroupPartitionMetadataValue(ts)),
              st.lists(st.builds(TopicMetadata, uuids, texts, st.integers(0, 10_000),
                                 st.dictionaries(st.integers(0, 100), st.lists(texts, max_size=3).map(tuple),
                                                 max_size=3)), max_size=4)),
    st.builds(lambda *a: (ConsumerGroupMemberMetadataKey("g", "m"), ConsumerGroupMemberMetadataValue(*a)),
              opt_texts, opt_texts, texts, texts, st.lists(texts, max_size=5), opt_texts, epochs, opt_texts,
              st.none() | st.builds(ClassicMemberMetadata, epochs,
                                    st.lists(st.tuples(texts, st.binary(max_size=40)), max_size=3))),
    st.builds(lambda e: (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(e)),
              epochs),
    st.builds(lambda a: (ConsumerGroupTargetAssignmentMemberKey("g", "m"), ConsumerGroupTargetAssignmentMemberValue(a)),
              assignments),
    st.builds(lambda e, p, s, a, r: (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
                                     ConsumerGroupCurrentMemberAssignmentValue(e, p, s, a, r)),
              epochs, epochs, st.sampled_from([0, 1, 2, 127]), assignments, assignments),
    st.builds(lambda t, v, ts: (ConsumerGroupRegularExpressionKey("g", "r"), ConsumerGroupRegularExpressionValue(t, v, ts)),
              st.lists(texts, max_size=5), st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1)),
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_value_round_trip(pair):
    key, value = pair
    raw_key, raw_value = record(key, value)
    decoded_key = decode_consumer_key(raw_key)
    decoded_value = None if raw_value is None else decode_consumer_value(decoded_key, raw_value)
    assert decoded_key == key
    assert decoded_value == value


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([k for k, _ in KEYS]), texts, texts)
def test_key_round_trip(template, group, second):
    if isinstance(template, ConsumerGroupRegularExpressionKey):
        key = type(template)(group, second)
    elif hasattr(template, "member_id"):
        key = type(template)(group, second)
    else:
        key = type(template)(group)
    assert decode_consumer_key(encode_key(key)) == key


@settings(max_examples=300, deadline=None)
@given(values, st.binary(max_size=64))
def test_garbage_never_crashes(pair, noise):
    key, value = pair
    raw = encode_value(value)
    for data in (raw[: len(noise) % (len(raw) + 1)], raw[:2] + noise):
        try:
            decode_consumer_value(key, data)
        except CorruptRecordError:
            pass
