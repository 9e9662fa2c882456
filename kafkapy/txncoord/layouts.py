"""Kafka's __transaction_state schemas as declarative binary layouts (construct).

TransactionLogKey v0 and TransactionLogValue v0-v1 (flexible from v1), field by field as in
Kafka's transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json.
The broker encodes and decodes these records with the hand-written code in records.py: every
transition of every transaction writes one, and the load reads them all back, where construct
is several times slower (bench/groups/offsets_decode.py). These layouts are the readable
reference that tests/txncoord/test_record_layouts.py holds the hand-written code to, byte for byte.
construct comes with the `test` extra; the broker never imports this module.
"""
from __future__ import annotations

from construct import Array, Const, Construct, Int8sb, Int16sb, Int32sb, Int64sb, Rebuild, Struct, VarInt, len_

from ..groupcoord.layouts import CompactLength, NullableText, compact_nullable_string, nullable_string, tagged_fields

__all__ = ["TRANSACTION_LOG_KEY", "TRANSACTION_LOG_VALUE", "transaction_log_value"]

TRANSACTION_LOG_KEY = Struct("version" / Const(0, Int16sb), "transactional_id" / nullable_string)


class _NullableArray(NullableText):
    """An array whose length is -1 for null (Kafka's nullable `[]TopicData`)."""

    def _decode(self, obj, context, path):
        return None if obj.length < 0 else list(obj.data)

    def _encode(self, obj, context, path):
        return {"length": -1, "data": []} if obj is None else {"length": len(obj), "data": obj}


def _nullable_array(length: Construct, element: Construct) -> Construct:
    return _NullableArray(Struct("length" / length, "data" / Array(lambda ctx: max(ctx.length, 0), element)),
                          text=False)


def transaction_log_value(version: int) -> Construct:
    """TransactionLogValue v0 or v1."""
    flexible = version >= 1
    text = compact_nullable_string if flexible else nullable_string
    length = CompactLength(VarInt) if flexible else Int32sb
    topic_fields = ["topic" / text,
                    "partition_count" / Rebuild(length, len_(lambda ctx: ctx.partition_ids)),
                    "partition_ids" / Array(lambda ctx: max(ctx.partition_count, 0), Int32sb)]
    if flexible:
        topic_fields.append("tags" / tagged_fields)
    fields = ["version" / Const(version, Int16sb), "producer_id" / Int64sb, "producer_epoch" / Int16sb,
              "transaction_timeout_ms" / Int32sb, "transaction_status" / Int8sb,
              "transaction_partitions" / _nullable_array(length, Struct(*topic_fields)),
              "transaction_last_update_timestamp_ms" / Int64sb, "transaction_start_timestamp_ms" / Int64sb]
    if flexible:
        fields.append("tags" / tagged_fields)
    return Struct(*fields)


TRANSACTION_LOG_VALUE = {version: transaction_log_value(version) for version in (0, 1)}
