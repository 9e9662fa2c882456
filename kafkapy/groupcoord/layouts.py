"""Kafka's coordinator record schemas as declarative binary layouts (construct).

One layout per schema version, read like Kafka's JSON message definitions
(group-coordinator/src/main/resources/common/message/*.json): a field list per version, with
Kafka's primitive types. Versions at or above a schema's first flexible version use compact
lengths (unsigned varint of length + 1, 0 for null) and end with tagged fields.

The broker runs the hand-written codecs of records.py, not these: construct is 16-37x slower
per record (bench/groups/offsets_decode.py), which would double the load of a compacted
__consumer_offsets even if used only for GroupMetadataValue, and stall the event loop at each
rebalance if used to write it. These layouts are the executable reference the hand-written code
is tested against, byte for byte, for every version (tests/groupcoord/test_record_layouts.py).
construct comes with the `test` extra; the broker never imports this module.
"""
from __future__ import annotations

from construct import (
    Adapter,
    Array,
    Bytes,
    Construct,
    Const,
    Default,
    Int16sb,
    Int32sb,
    Int64sb,
    Rebuild,
    Struct,
    VarInt,
    len_,
    this,
)

__all__ = [
    "CompactLength", "NullableText", "GROUP_METADATA_KEY", "GROUP_METADATA_VALUE", "OFFSET_COMMIT_KEY", "OFFSET_COMMIT_VALUE", "compact_bytes", "compact_nullable_string", "group_metadata_value",
    "kafka_bytes", "nullable_string", "offset_commit_value", "string", "tagged_fields",
]


class NullableText(Adapter):
    """A byte string whose length is -1 for null, decoded to str (or kept as bytes)."""

    def __init__(self, subcon: Construct, text: bool):
        super().__init__(subcon)
        self.text = text

    def _decode(self, obj, context, path):
        if obj.length < 0:
            return None
        return obj.data.decode("utf-8") if self.text else bytes(obj.data)

    def _encode(self, obj, context, path):
        if obj is None:
            return {"length": -1, "data": b""}
        raw = obj.encode("utf-8") if self.text else bytes(obj)
        return {"length": len(raw), "data": raw}


class CompactLength(Adapter):
    """Kafka's compact length: unsigned varint of length + 1 (0 means null)."""

    def _decode(self, obj, context, path):
        return obj - 1

    def _encode(self, obj, context, path):
        return obj + 1


def _sized(length: Construct, text: bool) -> Construct:
    return NullableText(Struct("length" / length, "data" / Bytes(lambda ctx: max(ctx.length, 0))), text)


nullable_string = _sized(Int16sb, text=True)
string = nullable_string  # a non-null string has the same layout; the decoders check for null
kafka_bytes = _sized(Int32sb, text=False)
compact_nullable_string = _sized(CompactLength(VarInt), text=True)
compact_bytes = _sized(CompactLength(VarInt), text=False)

# tagged fields: count, then (tag, size, data) each; Kafka's coordinator records define none yet
tagged_fields = Default(Struct(
    "count" / Rebuild(VarInt, lambda ctx: len(ctx.get("fields") or ())),
    "fields" / Default(Array(this.count, Struct(
        "tag" / VarInt, "size" / Rebuild(VarInt, len_(this.data)), "data" / Bytes(this.size))), []),
), {})


def _string(flexible: bool) -> Construct:
    return compact_nullable_string if flexible else nullable_string


def _bytes(flexible: bool) -> Construct:
    return compact_bytes if flexible else kafka_bytes


def _array_length(flexible: bool) -> Construct:
    return CompactLength(VarInt) if flexible else Int32sb


# -- keys ---------------------------------------------------------------------------------
OFFSET_COMMIT_KEY = {
    version: Struct("version" / Const(version, Int16sb), "group" / string, "topic" / string,
                    "partition" / Int32sb)
    for version in (0, 1)
}
GROUP_METADATA_KEY = Struct("version" / Const(2, Int16sb), "group" / string)


# -- values -------------------------------------------------------------------------------
def offset_commit_value(version: int) -> Construct:
    """OffsetCommitValue v0-v4 (flexible from v4)."""
    flexible = version >= 4
    fields = ["version" / Const(version, Int16sb), "offset" / Int64sb]
    if version >= 3:
        fields.append("leader_epoch" / Int32sb)
    fields += ["metadata" / _string(flexible), "commit_timestamp" / Int64sb]
    if version == 1:
        fields.append("expire_timestamp" / Int64sb)
    if flexible:
        fields.append("tags" / tagged_fields)
    return Struct(*fields)


def _member(version: int) -> Construct:
    flexible = version >= 4
    fields = ["member_id" / _string(flexible)]
    if version >= 3:
        fields.append("group_instance_id" / _string(flexible))
    fields += ["client_id" / _string(flexible), "client_host" / _string(flexible)]
    if version >= 1:
        fields.append("rebalance_timeout" / Int32sb)
    fields += ["session_timeout" / Int32sb, "subscription" / _bytes(flexible),
               "assignment" / _bytes(flexible)]
    if flexible:
        fields.append("tags" / tagged_fields)
    return Struct(*fields)


def group_metadata_value(version: int) -> Construct:
    """GroupMetadataValue v0-v4 (flexible from v4), members included."""
    flexible = version >= 4
    fields = ["version" / Const(version, Int16sb), "protocol_type" / _string(flexible),
              "generation" / Int32sb, "protocol" / _string(flexible), "leader" / _string(flexible)]
    if version >= 2:
        fields.append("current_state_timestamp" / Int64sb)
    fields += ["member_count" / Rebuild(_array_length(flexible), len_(this.members)),
               "members" / Array(lambda ctx: max(ctx.member_count, 0), _member(version))]
    if flexible:
        fields.append("tags" / tagged_fields)
    return Struct(*fields)


OFFSET_COMMIT_VALUE = {version: offset_commit_value(version) for version in range(5)}
GROUP_METADATA_VALUE = {version: group_metadata_value(version) for version in range(5)}
