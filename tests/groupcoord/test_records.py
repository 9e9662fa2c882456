"""__consumer_offsets key/value schemas and the group-to-partition mapping."""
from __future__ import annotations

import struct

import pytest

from kafkapy.groupcoord.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from kafkapy.groupcoord.offsets_topic import java_string_hash, partition_for
from kafkapy.groupcoord.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from kafkapy.protocol.errors import CorruptRecordError


@pytest.mark.parametrize("text,expected", [
    ("", 0), ("hello", 99162322), ("polygenelubricants", -2**31), ("Aa", 2112), ("BB", 2112),
    ("é", 233), ("😀", 0xD83D * 31 + 0xDE00),
])
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_partition_for_uses_kafka_abs():
    # hashCode == Integer.MIN_VALUE: Utils.abs gives 0, not a negative or overflowing value
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert all(0 <= partition_for(f"group-{i}", 50) < 50 for i in range(200))


def test_offset_commit_key_bytes():
    key = offset_commit_key("g", "t", 3)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetCommitKey("g", "t", 3)  # v0 key


def test_offset_commit_value_v3_bytes():
    value = offset_commit_value(OffsetAndMetadata(42, 7, "meta", 1000))
    assert value == (b"\x00\x03" + struct.pack(">qi", 42, 7) + b"\x00\x04meta" + struct.pack(">q", 1000))
    assert decode_offset_commit_value(value) == OffsetAndMetadata(42, 7, "meta", 1000, -1)


def test_offset_commit_value_v1_when_expiring():
    value = offset_commit_value(OffsetAndMetadata(42, 7, "", 1000, 5000))
    assert value[:2] == b"\x00\x01"
    assert decode_offset_commit_value(value) == OffsetAndMetadata(42, -1, "", 1000, 5000)


def test_offset_commit_value_v0_and_v4():
    v0 = b"\x00\x00" + struct.pack(">q", 9) + b"\x00\x00" + struct.pack(">q", 77)
    assert decode_offset_commit_value(v0) == OffsetAndMetadata(9, -1, "", 77, -1)
    # v4: flexible -- compact string (len+1 varint) and an empty tagged-field section
    v4 = b"\x00\x04" + struct.pack(">qi", 9, 2) + b"\x03hi" + struct.pack(">q", 77) + b"\x00"
    assert decode_offset_commit_value(v4) == OffsetAndMetadata(9, 2, "hi", 77, -1)


def _group() -> GroupMetadata:
    group = GroupMetadata("g", GroupState.EMPTY, 123)
    group.add(MemberMetadata("m1", "inst", "cid", "/1.2.3.4", 300, 45, "consumer", [("range", b"sub")],
                             assignment=b"asg"))
    group.protocol_name = "range"
    group.generation_id = 4
    group.current_state_timestamp = 555
    return group


def test_group_metadata_round_trip():
    value = group_metadata_value(_group(), {"m1": b"new"})
    assert value[:2] == b"\x00\x03"
    decoded = decode_group_metadata_value(value)
    assert (decoded.protocol_type, decoded.generation, decoded.protocol, decoded.leader) == \
        ("consumer", 4, "range", "m1")
    assert decoded.current_state_timestamp == 555
    [m] = decoded.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.client_host) == ("m1", "inst", "cid", "/1.2.3.4")
    assert (m.rebalance_timeout_ms, m.session_timeout_ms, m.subscription, m.assignment) == \
        (300, 45, b"sub", b"new")
    assert decode_key(group_metadata_key("g")) == GroupMetadataKey("g")


def test_group_metadata_v0_uses_session_timeout_as_rebalance_timeout():
    body = (b"\x00\x00" + b"\x00\x08consumer" + struct.pack(">i", 1) + b"\x00\x05range" + b"\x00\x02m1"
            + struct.pack(">i", 1) + b"\x00\x02m1" + b"\x00\x01c" + b"\x00\x01h" + struct.pack(">i", 10)
            + struct.pack(">i", 1) + b"s" + struct.pack(">i", 0))
    decoded = decode_group_metadata_value(body)
    assert decoded.members[0].rebalance_timeout_ms == 10 and decoded.current_state_timestamp == -1


def test_unknown_and_corrupt_records():
    assert decode_key(b"\x00\x0banything") is None  # share group (and unknown) record types are skipped
    with pytest.raises(CorruptRecordError):
        decode_offset_commit_value(b"\x00\x03\x00")
    with pytest.raises(CorruptRecordError):
        decode_group_metadata_value(b"\x00\x09")
