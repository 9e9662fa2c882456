"""The hand-written __consumer_offsets codecs agree with the declarative layouts (layouts.py),
for every schema version Kafka has: the same bytes for what kafkapy writes, the same values for
what any version decodes to; and records in Kafka's format decode."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from kafkapy.groupcoord.layouts import GROUP_METADATA_KEY, GROUP_METADATA_VALUE, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE
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

texts = st.text(max_size=20)
nullable_texts = st.none() | texts
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
blobs = st.binary(max_size=40)
FAST = settings(max_examples=60, deadline=None)


@FAST
@given(texts, texts, int32s)
def test_offset_commit_key_matches_the_layout(group, topic, partition):
    written = offset_commit_key(group, topic, partition)
    assert written == OFFSET_COMMIT_KEY[1].build({"group": group, "topic": topic, "partition": partition})
    for version in (0, 1):
        raw = OFFSET_COMMIT_KEY[version].build({"group": group, "topic": topic, "partition": partition})
        assert decode_key(raw) == OffsetCommitKey(group, topic, partition)


@FAST
@given(texts)
def test_group_metadata_key_matches_the_layout(group):
    assert group_metadata_key(group) == GROUP_METADATA_KEY.build({"group": group})
    assert decode_key(GROUP_METADATA_KEY.build({"group": group})) == GroupMetadataKey(group)


@FAST
@given(int64s, int32s, texts, int64s, st.integers(0, 2**62))
def test_offset_commit_values_kafkapy_writes_match_the_layout(offset, epoch, metadata, commit_ts, expire_ts):
    plain = OffsetAndMetadata(offset, epoch, metadata, commit_ts)
    assert offset_commit_value(plain) == OFFSET_COMMIT_VALUE[3].build(
        {"offset": offset, "leader_epoch": epoch, "metadata": metadata, "commit_timestamp": commit_ts})
    assert decode_offset_commit_value(offset_commit_value(plain)) == plain
    expiring = OffsetAndMetadata(offset, -1, metadata, commit_ts, expire_ts)
    assert offset_commit_value(expiring) == OFFSET_COMMIT_VALUE[1].build(
        {"offset": offset, "metadata": metadata, "commit_timestamp": commit_ts, "expire_timestamp": expire_ts})
    assert decode_offset_commit_value(offset_commit_value(expiring)) == expiring


@FAST
@given(st.integers(0, 4), int64s, int32s, nullable_texts, int64s, int64s)
def test_every_offset_commit_value_version_decodes_as_the_layout_says(version, offset, epoch, metadata,
                                                                      commit_ts, expire_ts):
    if version < 4 and metadata is None:
        metadata = ""  # a non-flexible version's string is not nullable
    fields = {"offset": offset, "leader_epoch": epoch, "metadata": metadata, "commit_timestamp": commit_ts,
              "expire_timestamp": expire_ts}
    raw = OFFSET_COMMIT_VALUE[version].build(fields)
    parsed = OFFSET_COMMIT_VALUE[version].parse(raw)
    decoded = decode_offset_commit_value(raw)
    assert decoded == OffsetAndMetadata(
        parsed.offset, parsed.get("leader_epoch", -1), parsed.metadata or "", parsed.commit_timestamp,
        parsed.get("expire_timestamp", -1))


members = st.lists(st.fixed_dictionaries({
    "member_id": texts, "group_instance_id": nullable_texts, "client_id": texts, "client_host": texts,
    "rebalance_timeout": st.integers(0, 2**31 - 1), "session_timeout": st.integers(0, 2**31 - 1),
    "subscription": blobs, "assignment": blobs}), max_size=4)


@FAST
@given(st.integers(0, 4), texts, int32s, nullable_texts, nullable_texts, int64s, members)
def test_every_group_metadata_value_version_decodes_as_the_layout_says(version, protocol_type, generation,
                                                                       protocol, leader, timestamp, stored):
    raw = GROUP_METADATA_VALUE[version].build({
        "protocol_type": protocol_type, "generation": generation, "protocol": protocol, "leader": leader,
        "current_state_timestamp": timestamp, "members": stored})
    value = decode_group_metadata_value(raw)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == \
        (protocol_type, generation, protocol, leader)
    assert value.current_state_timestamp == (timestamp if version >= 2 else -1)
    assert len(value.members) == len(stored)
    for got, want in zip(value.members, stored):
        assert (got.member_id, got.client_id, got.client_host, got.session_timeout_ms, got.subscription,
                got.assignment) == (want["member_id"], want["client_id"], want["client_host"],
                                    want["session_timeout"], want["subscription"], want["assignment"])
        assert got.group_instance_id == (want["group_instance_id"] if version >= 3 else None)
        # v0 has no rebalance timeout: Kafka takes the session timeout
        assert got.rebalance_timeout_ms == (want["rebalance_timeout"] if version >= 1 else want["session_timeout"])


def _group(stored) -> tuple[GroupMetadata, dict[str, bytes]]:
    group = GroupMetadata("g", GroupState.STABLE, 0)
    group.protocol_type, group.generation_id, group.protocol_name = "consumer", 7, "range"
    group.current_state_timestamp = 1234
    for m in stored:
        group.add(MemberMetadata(
            member_id=m["member_id"], group_instance_id=m["group_instance_id"], client_id=m["client_id"],
            client_host=m["client_host"], rebalance_timeout_ms=m["rebalance_timeout"],
            session_timeout_ms=m["session_timeout"], protocol_type="consumer",
            supported_protocols=[("range", m["subscription"])], assignment=b""))
    group.leader_id = next(iter(group.members), None)
    return group, {m["member_id"]: m["assignment"] for m in stored}


@FAST
@given(members.filter(lambda ms: len({m["member_id"] for m in ms}) == len(ms) and len(
    [m["group_instance_id"] for m in ms if m["group_instance_id"] is not None]) == len(
    {m["group_instance_id"] for m in ms if m["group_instance_id"] is not None})))
def test_group_metadata_kafkapy_writes_round_trips(stored):
    group, assignment = _group(stored)
    raw = group_metadata_value(group, assignment)
    value = decode_group_metadata_value(raw)
    assert (value.protocol_type, value.generation, value.protocol, value.leader, value.current_state_timestamp) \
        == ("consumer", 7, "range", group.leader_id, 1234)
    assert [(m.member_id, m.group_instance_id, m.subscription, m.assignment) for m in value.members] == \
        [(m["member_id"], m["group_instance_id"], m["subscription"], m["assignment"]) for m in stored]
    assert GROUP_METADATA_VALUE[3].build({
        "protocol_type": "consumer", "generation": 7, "protocol": "range", "leader": group.leader_id,
        "current_state_timestamp": 1234, "members": [
            {"member_id": m["member_id"], "group_instance_id": m["group_instance_id"], "client_id": m["client_id"],
             "client_host": m["client_host"], "rebalance_timeout": m["rebalance_timeout"],
             "session_timeout": m["session_timeout"], "subscription": m["subscription"],
             "assignment": m["assignment"]} for m in stored]}) == raw


# -- records in Kafka's format (test vectors of LinkedIn Burrow's __consumer_offsets decoder) ----
def test_kafka_offset_commit_records_decode():
    key = b"\x00\x01" + b"\x00\x09testgroup\x00\x09testtopic\x00\x00\x00\x0b"
    assert decode_key(key) == OffsetCommitKey("testgroup", "testtopic", 11)
    v0 = b"\x00\x00" + b"\x00\x00\x00\x00\x00\x00\x20\xb4\x00\x08testdata\x00\x00\x00\x00\x00\x00\x06\x65"
    assert decode_offset_commit_value(v0) == OffsetAndMetadata(8372, -1, "testdata", 1637, -1)
    v3 = b"\x00\x03" + b"\x00\x00\x00\x00\x00\x00\x20\xb4\x00\x00\x00\x00\x00\x08testdata\x00\x00\x00\x00\x00\x00\x06\x65"
    assert decode_offset_commit_value(v3) == OffsetAndMetadata(8372, 0, "testdata", 1637, -1)
    assert offset_commit_value(OffsetAndMetadata(8372, 0, "testdata", 1637)) == v3


def test_kafka_group_metadata_record_decodes():
    assert decode_key(b"\x00\x02\x00\x09testgroup") == GroupMetadataKey("testgroup")
    assignment = b"\x00\x00\x00\x00\x00\x01\x00\x06topic1\x00\x00\x00\x01\x00\x00\x00\x0b\x00\x00\x00\x00"
    v1 = (b"\x00\x01\x00\x08consumer\x00\x00\x00\x01\x00\x0ctestprotocol\x00\x0atestleader\x00\x00\x00\x01"
          b"\x00\x0ctestmemberid\x00\x0ctestclientid\x00\x0etestclienthost\x00\x00\x00\x04\x00\x00\x00\x08"
          b"\x00\x00\x00\x00\x00\x00\x00\x1a" + assignment)
    value = decode_group_metadata_value(v1)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == \
        ("consumer", 1, "testprotocol", "testleader")
    [member] = value.members
    assert (member.member_id, member.client_id, member.client_host, member.rebalance_timeout_ms,
            member.session_timeout_ms, member.subscription, member.assignment) == \
        ("testmemberid", "testclientid", "testclienthost", 4, 8, b"", assignment)
    assert GROUP_METADATA_VALUE[1].build(GROUP_METADATA_VALUE[1].parse(v1)) == v1


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x03\x00", b"\x00\x03" + b"\x00" * 12 + b"\x00\x09ab",
                                 b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00" + b"\x00" * 8])
def test_truncated_offset_commit_values_are_corrupt(raw):
    with pytest.raises(CorruptRecordError):
        decode_offset_commit_value(raw)


@pytest.mark.parametrize("raw", [b"\x00", b"\x00\x01\x00\x05ab", b"\x00\x01\x00\x01a\x00\x01b\x00",
                                 b"\x00\x01\xff\xff"])
def test_truncated_keys_are_corrupt(raw):
    with pytest.raises(CorruptRecordError):
        decode_key(raw)
