"""The hand-written __transaction_state codecs agree with the declarative layouts
(kafkapy/txncoord/layouts.py): kafkapy's v0 records byte for byte, v1 (flexible) decoded alike."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.txncoord.layouts import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE
from kafkapy.txncoord.records import TransactionLogValue, decode_key, decode_value, encode_key, encode_value

names = st.text(min_size=1, max_size=20)
partitions = st.dictionaries(names, st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5, unique=True),
                             max_size=4)
values = st.builds(TransactionLogValue, st.integers(0, 2**63 - 1), st.integers(-1, 2**15 - 1),
                   st.integers(0, 2**31 - 1), st.integers(0, 7), partitions,
                   st.integers(-1, 2**62), st.integers(-1, 2**62))
FAST = settings(max_examples=60, deadline=None)


def _layout_fields(value: TransactionLogValue, null_partitions: bool = False) -> dict:
    return {
        "producer_id": value.producer_id, "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.transaction_timeout_ms, "transaction_status": value.state_id,
        "transaction_partitions": None if null_partitions else [
            {"topic": topic, "partition_ids": sorted(ids)} for topic, ids in sorted(value.partitions.items())],
        "transaction_last_update_timestamp_ms": value.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.start_timestamp_ms,
    }


@FAST
@given(names)
def test_key_matches_the_layout(transactional_id):
    assert encode_key(transactional_id) == TRANSACTION_LOG_KEY.build({"transactional_id": transactional_id})
    assert decode_key(encode_key(transactional_id)) == transactional_id


@FAST
@given(values, st.booleans())
def test_v0_values_kafkapy_writes_match_the_layout(value, null_partitions):
    raw = encode_value(value, partitions_null=null_partitions)
    assert raw == TRANSACTION_LOG_VALUE[0].build(_layout_fields(value, null_partitions))
    decoded = decode_value(raw)
    expected_partitions = {} if null_partitions else {t: sorted(ids) for t, ids in value.partitions.items()}
    assert decoded == TransactionLogValue(value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                                          value.state_id, expected_partitions, value.last_update_timestamp_ms,
                                          value.start_timestamp_ms)


@FAST
@given(values, st.booleans())
def test_flexible_v1_values_decode_as_the_layout_says(value, null_partitions):
    raw = TRANSACTION_LOG_VALUE[1].build(_layout_fields(value, null_partitions))
    decoded = decode_value(raw)
    parsed = TRANSACTION_LOG_VALUE[1].parse(raw)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.transaction_timeout_ms, decoded.state_id) == \
        (parsed.producer_id, parsed.producer_epoch, parsed.transaction_timeout_ms, parsed.transaction_status)
    assert decoded.partitions == {t["topic"]: list(t["partition_ids"]) for t in parsed.transaction_partitions or []}
    assert (decoded.last_update_timestamp_ms, decoded.start_timestamp_ms) == \
        (parsed.transaction_last_update_timestamp_ms, parsed.transaction_start_timestamp_ms)
