"""__transaction_state record schemas, byte for byte as Kafka writes them."""
from __future__ import annotations

import struct

import pytest

from kafkapy.protocol.errors import CorruptRecordError
from kafkapy.txncoord.records import TransactionLogValue, decode_key, decode_value, encode_key, encode_value


def test_key_layout():
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(encode_key("tx-é")) == "tx-é"
    assert decode_key(b"\x00\x05\x00\x01x") is None


def test_value_v0_layout_and_round_trip():
    value = TransactionLogValue(42, 3, 60000, 1, {"b": [2, 1], "a": [0]}, 1000, 900)
    raw = encode_value(value)
    assert raw[:2] == b"\x00\x00"
    assert struct.unpack_from(">qhib", raw, 2) == (42, 3, 60000, 1)
    assert struct.unpack_from(">i", raw, 17)[0] == 2  # two topics
    decoded = decode_value(raw)
    assert decoded.partitions == {"a": [0], "b": [1, 2]}
    assert (decoded.producer_id, decoded.producer_epoch, decoded.transaction_timeout_ms, decoded.state_id,
            decoded.last_update_timestamp_ms, decoded.start_timestamp_ms) == (42, 3, 60000, 1, 1000, 900)


def test_empty_state_writes_null_partitions():
    raw = encode_value(TransactionLogValue(1, 0, 100, 0), partitions_null=True)
    assert struct.unpack_from(">i", raw, 17)[0] == -1
    assert decode_value(raw).partitions == {}


def test_flexible_v1_is_read():
    raw = (struct.pack(">hqhib", 1, 7, 2, 5000, 2)
           + bytes([2]) + bytes([2]) + b"t" + bytes([3]) + struct.pack(">ii", 4, 5) + bytes([0])
           + struct.pack(">qq", 11, 10)
           + bytes([1, 2, 2]) + struct.pack(">h", 1))  # one tagged field (tag 2: ClientTransactionVersion)
    value = decode_value(raw)
    assert (value.producer_id, value.producer_epoch, value.state_id) == (7, 2, 2)
    assert value.partitions == {"t": [4, 5]}
    assert (value.last_update_timestamp_ms, value.start_timestamp_ms) == (11, 10)


def test_corrupt_values_raise():
    with pytest.raises(CorruptRecordError):
        decode_value(b"\x00\x09")
    with pytest.raises(CorruptRecordError):
        decode_value(encode_value(TransactionLogValue(1, 0, 100, 1, {"t": [1]}))[:-3])
