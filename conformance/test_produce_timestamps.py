"""Produce to a topic with message.timestamp.{before,after}.max.ms: each record is checked, as in Kafka.

Kafka's LogValidator.validateTimestamp checks every record's CreateTime (records without one
are skipped) and fails the whole batch with INVALID_TIMESTAMP (32), one record error per
offending record ("Timestamp T of message with offset O is out of range. The timestamp should
be within [L, H]") and the error_message "One or more records have been rejected due to invalid
timestamp" (Produce v8+). A batch's header only gives its first and largest timestamps, so an
old record after the first could pass a header-only check; magic 0 messages have no timestamp.
"""
from __future__ import annotations

import re
import time

import pytest

from conformance.test_compacted_produce import call, end_offset, fetch_keys, produce
from kafkapy.protocol.compression import LZ4, NONE
from kafkapy.protocol.legacy_records import build_message_set
from kafkapy.protocol.messages import CreateTopicsRequest
from kafkapy.protocol.records import build_batch

pytestmark = pytest.mark.timeout(120)

INVALID_TIMESTAMP, INVALID_RECORD = 32, 87
HOUR = 3_600_000


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"num.partitions": "1", "offsets.topic.num.partitions": "1"}


def create_topic(bootstrap: str, name: str, configs: dict[str, str]) -> str:
    Topic, Config = CreateTopicsRequest.CreatableTopic, CreateTopicsRequest.CreatableTopicConfig
    topic = Topic(name=name, num_partitions=1, replication_factor=1,
                  configs=[Config(name=k, value=v) for k, v in configs.items()])
    response = call(bootstrap, CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 5)
    assert [(t.name, t.error_code) for t in response.topics] == [(name, 0)]
    return name


LIMITS = {"message.timestamp.before.max.ms": str(HOUR), "message.timestamp.after.max.ms": str(HOUR)}
OUT_OF_RANGE = re.compile(r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. "
                          r"The timestamp should be within \[(-?\d+), (-?\d+)\]")


@pytest.mark.parametrize("codec", [NONE, LZ4], ids=["none", "lz4"])
def test_each_record_out_of_range_is_listed(broker, topic_name: str, codec: int) -> None:
    bs = broker.bootstrap
    topic = create_topic(bs, topic_name, LIMITS)
    now = int(time.time() * 1000)
    stamps = [now, now - 2 * HOUR, now, now + 2 * HOUR]
    batch = build_batch([(b"k%d" % i, b"v", None, ts) for i, ts in enumerate(stamps)], compression=codec)
    result = produce(bs, 9, {(topic, 0): batch})[(topic, 0)]
    assert (result.error_code, result.base_offset) == (INVALID_TIMESTAMP, -1)
    assert result.error_message == "One or more records have been rejected due to invalid timestamp"
    listed = []
    for error in result.record_errors:
        ts, offset, low, high = map(int, OUT_OF_RANGE.fullmatch(error.batch_index_error_message).groups())
        assert high - low == 2 * HOUR and low <= now - HOUR + 5_000
        listed.append((error.batch_index, ts, offset))
    assert listed == [(1, now - 2 * HOUR, 1), (3, now + 2 * HOUR, 3)]
    assert end_offset(bs, topic) == 0


def test_an_old_record_after_the_first_is_caught(broker, topic_name: str) -> None:
    """The header's first and max timestamps are in range; the second record is not."""
    bs = broker.bootstrap
    topic = create_topic(bs, topic_name, LIMITS)
    now = int(time.time() * 1000)
    batch = build_batch([(b"a", b"v", None, now), (b"b", b"v", None, now - 3 * HOUR)])
    result = produce(bs, 8, {(topic, 0): batch})[(topic, 0)]
    assert result.error_code == INVALID_TIMESTAMP and [e.batch_index for e in result.record_errors] == [1]
    assert end_offset(bs, topic) == 0
    # before v8 the code alone
    assert produce(bs, 7, {(topic, 0): batch})[(topic, 0)].error_code == INVALID_TIMESTAMP


def test_records_without_timestamps_are_not_checked(broker, topic_name: str) -> None:
    """Magic 0 messages (Produce v0-v2) carry no timestamp: Kafka skips them, so does kafkapy."""
    bs = broker.bootstrap
    topic = create_topic(bs, topic_name, LIMITS)
    messages = build_message_set([(b"k1", b"v"), (b"k2", b"v")], 0)
    assert produce(bs, 2, {(topic, 0): messages})[(topic, 0)].error_code == 0
    assert fetch_keys(bs, topic) == [b"k1", b"k2"]


def test_key_and_timestamp_errors_together(broker, topic_name: str) -> None:
    """A compacted topic with limits: a record's key error comes first, and any timestamp error
    makes the batch's code INVALID_TIMESTAMP (LogValidator.processRecordErrors)."""
    bs = broker.bootstrap
    topic = create_topic(bs, topic_name, {**LIMITS, "cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    reason = f"Compacted topic cannot accept message without key in topic partition {topic}-0."
    batch = build_batch([(None, b"v", None, now - 2 * HOUR), (b"k", b"v", None, now - 2 * HOUR), (None, b"v", None, now)])
    result = produce(bs, 9, {(topic, 0): batch})[(topic, 0)]
    assert result.error_code == INVALID_TIMESTAMP
    errors = [(e.batch_index, e.batch_index_error_message) for e in result.record_errors]
    assert [i for i, _ in errors] == [0, 1, 2]
    assert errors[0][1] == reason and errors[2][1] == reason and OUT_OF_RANGE.fullmatch(errors[1][1])
    only_keys = build_batch([(None, b"v", None, now), (b"k", b"v", None, now)])
    result = produce(bs, 9, {(topic, 0): only_keys})[(topic, 0)]
    assert result.error_code == INVALID_RECORD and [e.batch_index for e in result.record_errors] == [0]
    assert end_offset(bs, topic) == 0
