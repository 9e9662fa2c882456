"""Consumer group records (consumer/records.py) against declarative construct layouts of Kafka's
JSON schemas (group-coordinator/src/main/resources/common/message/ConsumerGroup*.json), as
tests/groupcoord/test_record_layouts.py does for the classic ones: for random values, the
hand-written encoder writes the bytes the layout builds, and decodes what the layout builds."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

construct = pytest.importorskip("construct")
from construct import Bytes, Const, Int8sb, Int16sb, Int32sb, Int64sb, Prefixed, Struct, VarInt  # noqa: E402

from kafkapy.groupcoord.consumer.records import (  # noqa: E402
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
)
from kafkapy.groupcoord.layouts import (  # noqa: E402
    CompactLength,
    compact_bytes,
    compact_nullable_string,
    string,
    tagged_fields,
)

# -- the layouts, field by field as the JSON schemas read ------------------------------------
cstring = compact_nullable_string


def carray(element) -> construct.Construct:
    """A compact (non-null) array: unsigned varint count + 1, then the elements."""
    return construct.PrefixedArray(CompactLength(VarInt), element)


uuid_ = construct.ExprAdapter(Bytes(16), lambda raw, ctx: uuid.UUID(bytes=bytes(raw)), lambda u, ctx: u.bytes)

KEYS = {
    3: Struct("type" / Const(3, Int16sb), "group" / string),
    4: Struct("type" / Const(4, Int16sb), "group" / string),
    5: Struct("type" / Const(5, Int16sb), "group" / string, "member" / string),
    6: Struct("type" / Const(6, Int16sb), "group" / string),
    7: Struct("type" / Const(7, Int16sb), "group" / string, "member" / string),
    8: Struct("type" / Const(8, Int16sb), "group" / string, "member" / string),
    16: Struct("type" / Const(16, Int16sb), "group" / string, "regex" / string),
}
VERSION = "version" / Const(0, Int16sb)
TOPIC_PARTITIONS = Struct("topic_id" / uuid_, "partitions" / carray(Int32sb), "tags" / tagged_fields)
METADATA_VALUE = Struct(VERSION, "epoch" / Int32sb, "tags" / tagged_fields)
PARTITION_METADATA_VALUE = Struct(VERSION, "topics" / carray(Struct(
    "topic_id" / uuid_, "name" / cstring, "num_partitions" / Int32sb,
    "partition_metadata" / carray(Struct("partition" / Int32sb, "racks" / carray(cstring), "tags" / tagged_fields)),
    "tags" / tagged_fields)), "tags" / tagged_fields)
CLASSIC_MEMBER_METADATA = Struct(
    "session_timeout_ms" / Int32sb,
    "supported_protocols" / carray(Struct("name" / cstring, "metadata" / compact_bytes, "tags" / tagged_fields)),
    "tags" / tagged_fields)
MEMBER_METADATA_VALUE = Struct(
    VERSION, "instance_id" / cstring, "rack_id" / cstring, "client_id" / cstring, "client_host" / cstring,
    "subscribed_topic_names" / carray(cstring), "subscribed_topic_regex" / cstring,
    "rebalance_timeout_ms" / Int32sb, "server_assignor" / cstring,
    # tagged fields: ClassicMemberMetadata is tag 0 when not null (nothing else is defined)
    "tags" / construct.PrefixedArray(VarInt, Struct("tag" / VarInt, "data" / Prefixed(VarInt, CLASSIC_MEMBER_METADATA))))
TARGET_METADATA_VALUE = Struct(VERSION, "assignment_epoch" / Int32sb, "tags" / tagged_fields)
TARGET_MEMBER_VALUE = Struct(VERSION, "topic_partitions" / carray(TOPIC_PARTITIONS), "tags" / tagged_fields)
CURRENT_ASSIGNMENT_VALUE = Struct(
    VERSION, "member_epoch" / Int32sb, "previous_member_epoch" / Int32sb, "state" / Int8sb,
    "assigned_partitions" / carray(TOPIC_PARTITIONS), "partitions_pending_revocation" / carray(TOPIC_PARTITIONS),
    "tags" / tagged_fields)
REGEX_VALUE = Struct(VERSION, "topics" / carray(cstring), "version_" / Int64sb, "timestamp" / Int64sb,
                     "tags" / tagged_fields)


def tps(assignment) -> list[dict]:
    """An assignment in the order the encoder writes it (topic id bytes, partitions ascending)."""
    return [{"topic_id": t, "partitions": sorted(p), "tags": {}}
            for t, p in sorted(assignment.items(), key=lambda item: item[0].bytes)]


def from_tps(items) -> dict:
    return {i.topic_id: frozenset(i.partitions) for i in items}


# -- strategies ------------------------------------------------------------------------------
texts = st.text(max_size=12)
opt = st.none() | texts
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
assignments = st.dictionaries(st.uuids(), st.frozensets(st.integers(0, 2**31 - 1), min_size=1, max_size=6),
                              max_size=3)
FAST = settings(max_examples=80, deadline=None)


@FAST
@given(texts, texts)
def test_keys_match_the_layouts(group, second):
    cases = [
        (ConsumerGroupMetadataKey(group), {"group": group}),
        (ConsumerGroupPartitionMetadataKey(group), {"group": group}),
        (ConsumerGroupMemberMetadataKey(group, second), {"group": group, "member": second}),
        (ConsumerGroupTargetAssignmentMetadataKey(group), {"group": group}),
        (ConsumerGroupTargetAssignmentMemberKey(group, second), {"group": group, "member": second}),
        (ConsumerGroupCurrentMemberAssignmentKey(group, second), {"group": group, "member": second}),
        (ConsumerGroupRegularExpressionKey(group, second), {"group": group, "regex": second}),
    ]
    for key, fields in cases:
        layout = KEYS[key.KEY_TYPE]
        assert encode_key(key) == layout.build(fields)
        assert decode_consumer_key(layout.build(fields)) == key


@FAST
@given(int32s, int32s)
def test_epoch_values_match_the_layouts(epoch, assignment_epoch):
    assert encode_value(ConsumerGroupMetadataValue(epoch)) == METADATA_VALUE.build({"epoch": epoch})
    assert encode_value(ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch)) == \
        TARGET_METADATA_VALUE.build({"assignment_epoch": assignment_epoch})
    assert decode_consumer_value(ConsumerGroupMetadataKey("g"), METADATA_VALUE.build({"epoch": epoch})).epoch == epoch


@FAST
@given(st.lists(st.tuples(st.uuids(), texts, int32s,
                          st.dictionaries(st.integers(0, 50), st.lists(texts, max_size=3), max_size=3)), max_size=4))
def test_partition_metadata_value_matches_the_layout(topics):
    value = ConsumerGroupPartitionMetadataValue(
        [TopicMetadata(t, name, n, {p: tuple(r) for p, r in racks.items()}) for t, name, n, racks in topics])
    built = PARTITION_METADATA_VALUE.build({"topics": [
        {"topic_id": t, "name": name, "num_partitions": n,
         "partition_metadata": [{"partition": p, "racks": r, "tags": {}} for p, r in sorted(racks.items())],
         "tags": {}} for t, name, n, racks in topics]})
    assert encode_value(value) == built
    assert decode_consumer_value(ConsumerGroupPartitionMetadataKey("g"), built) == value


@FAST
@given(opt, opt, texts, texts, st.lists(texts, max_size=4), opt, int32s, opt,
       st.none() | st.tuples(int32s, st.lists(st.tuples(texts, st.binary(max_size=30)), max_size=3)))
def test_member_metadata_value_matches_the_layout(instance, rack, client, host, topics, regex, timeout, assignor,
                                                  classic):
    value = ConsumerGroupMemberMetadataValue(
        instance, rack, client, host, topics, regex, timeout, assignor,
        None if classic is None else ClassicMemberMetadata(classic[0], list(classic[1])))
    tags = [] if classic is None else [{"tag": 0, "data": {
        "session_timeout_ms": classic[0],
        "supported_protocols": [{"name": n, "metadata": m, "tags": {}} for n, m in classic[1]], "tags": {}}}]
    built = MEMBER_METADATA_VALUE.build({
        "instance_id": instance, "rack_id": rack, "client_id": client, "client_host": host,
        "subscribed_topic_names": topics, "subscribed_topic_regex": regex, "rebalance_timeout_ms": timeout,
        "server_assignor": assignor, "tags": tags})
    assert encode_value(value) == built
    assert decode_consumer_value(ConsumerGroupMemberMetadataKey("g", "m"), built) == value
    parsed = MEMBER_METADATA_VALUE.parse(encode_value(value))
    assert (parsed.instance_id, parsed.client_host, list(parsed.subscribed_topic_names)) == (instance, host, topics)


@FAST
@given(assignments)
def test_target_assignment_member_value_matches_the_layout(assignment):
    built = TARGET_MEMBER_VALUE.build({"topic_partitions": tps(assignment)})
    assert encode_value(ConsumerGroupTargetAssignmentMemberValue(assignment)) == built
    assert from_tps(TARGET_MEMBER_VALUE.parse(built).topic_partitions) == assignment
    assert decode_consumer_value(ConsumerGroupTargetAssignmentMemberKey("g", "m"), built).partitions == assignment


@FAST
@given(int32s, int32s, st.sampled_from([0, 1, 2, 127]), assignments, assignments)
def test_current_member_assignment_value_matches_the_layout(epoch, previous, state, assigned, pending):
    value = ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned, pending)
    built = CURRENT_ASSIGNMENT_VALUE.build({
        "member_epoch": epoch, "previous_member_epoch": previous, "state": state,
        "assigned_partitions": tps(assigned), "partitions_pending_revocation": tps(pending)})
    assert encode_value(value) == built
    assert decode_consumer_value(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), built) == value


@FAST
@given(st.lists(texts, max_size=5), int64s, int64s)
def test_regular_expression_value_matches_the_layout(topics, version, timestamp):
    value = ConsumerGroupRegularExpressionValue(topics, version, timestamp)
    built = REGEX_VALUE.build({"topics": topics, "version_": version, "timestamp": timestamp})
    assert encode_value(value) == built
    assert decode_consumer_value(ConsumerGroupRegularExpressionKey("g", "r"), built) == value

