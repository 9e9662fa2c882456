"""Produce to a compacted topic: a record without a key fails its whole batch, as in Kafka.

Kafka's LogValidator.validateKey refuses, on a topic whose cleanup.policy contains "compact",
every batch holding a record with a null key: INVALID_RECORD (87), one record error per keyless
record (batch_index, "Compacted topic cannot accept message without key in topic partition
T-P.") and an error_message summing them up (both from Produce v8), nothing appended. Requests
are built with kafkapy's own codec; librdkafka (confluent-kafka) is the real client.
"""
from __future__ import annotations

import time
import uuid

import pytest

from conformance.kafka_wire import RawConnection
from kafkapy.net.client import encode_request
from kafkapy.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafkapy.protocol.headers import response_header_version
from kafkapy.protocol.legacy_records import build_message_set
from kafkapy.protocol.messages import (
    RESPONSE_TYPES,
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from kafkapy.protocol.primitives import skip_tagged_fields
from kafkapy.protocol.records import build_batch, iter_batch_headers, iter_records

pytestmark = pytest.mark.timeout(120)

INVALID_RECORD = 87


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"num.partitions": "1", "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0"}


def call(bootstrap: str, request, version: int):
    """One request built by kafkapy's codec; the decoded response of that version."""
    with RawConnection(bootstrap, timeout=15) as conn:
        conn.send(b"".join(encode_request(request, version, 11, "compacted-produce-test")))
        frame = conn.receive()
    pos = 4
    if response_header_version(request.API_KEY, version) == 1:
        pos = skip_tagged_fields(frame, pos)
    return RESPONSE_TYPES[request.API_KEY].decode(frame, version, pos)


def create_topic(bootstrap: str, policy: str, partitions: int = 1) -> str:
    name = f"compacted-{uuid.uuid4().hex[:8]}"
    Topic, Config = CreateTopicsRequest.CreatableTopic, CreateTopicsRequest.CreatableTopicConfig
    topic = Topic(name=name, num_partitions=partitions, replication_factor=1,
                  configs=[Config(name="cleanup.policy", value=policy)])
    response = call(bootstrap, CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 5)
    assert [(t.name, t.error_code) for t in response.topics] == [(name, 0)]
    return name


def produce(bootstrap: str, version: int, batches: dict[tuple[str, int], bytes]):
    """One Produce request (acks=all) carrying each (topic, partition)'s batch; {(topic, partition): response}."""
    Data, Part = ProduceRequest.TopicProduceData, ProduceRequest.PartitionProduceData
    topics: dict[str, list] = {}
    for (topic, partition), batch in batches.items():
        topics.setdefault(topic, []).append(Part(index=partition, records=batch))
    request = ProduceRequest(acks=-1, timeout_ms=10_000,
                             topic_data=[Data(name=t, partition_data=p) for t, p in topics.items()])
    response = call(bootstrap, request, version)
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    Topic, Part = ListOffsetsRequest.ListOffsetsTopic, ListOffsetsRequest.ListOffsetsPartition
    response = call(bootstrap, ListOffsetsRequest(replica_id=-1, topics=[
        Topic(name=topic, partitions=[Part(partition_index=partition, timestamp=-1)])]), 4)
    [part] = response.topics[0].partitions
    assert part.error_code == 0
    return part.offset


def fetch_keys(bootstrap: str, topic: str) -> list[bytes | None]:
    Topic, Part = FetchRequest.FetchTopic, FetchRequest.FetchPartition
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1, topics=[
        Topic(topic=topic, partitions=[Part(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    data = call(bootstrap, request, 11).responses[0].partitions[0].records or b""
    return [r.key for h in iter_batch_headers(data) if not h.is_control for r in iter_records(data, h)]


def expected_message(topic: str, partition: int, indexes: list[int]) -> str:
    reason = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{reason}')" for i in indexes[:3])
    return (f"One or more records have been rejected due to {len(indexes)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]")


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_keyless_records_fail_the_batch_with_record_errors(broker, codec: int) -> None:
    bs = broker.bootstrap
    compacted = create_topic(bs, "compact,delete", partitions=2)
    plain = create_topic(bs, "delete")
    mixed = build_batch([(b"k0", b"v"), (None, b"v1"), (b"k2", None), (None, b"v3"), (None, None), (None, b"v5")],
                        compression=codec)
    keyed = build_batch([(b"a", b"1"), (b"b", None)], compression=codec)  # a tombstone has a key
    for version in (8, 9, 11):
        results = produce(bs, version, {(compacted, 0): mixed, (compacted, 1): keyed, (plain, 0): mixed})
        bad = results[(compacted, 0)]
        assert (bad.error_code, bad.base_offset, bad.log_start_offset) == (INVALID_RECORD, -1, 0)
        assert bad.error_message == expected_message(compacted, 0, [1, 3, 4, 5])
        reason = f"Compacted topic cannot accept message without key in topic partition {compacted}-0."
        assert [(e.batch_index, e.batch_index_error_message) for e in bad.record_errors] == \
            [(1, reason), (3, reason), (4, reason), (5, reason)]
        # the other partitions of the same request are unaffected
        assert results[(compacted, 1)].error_code == 0 and results[(compacted, 1)].error_message is None
        assert results[(plain, 0)].error_code == 0
    assert end_offset(bs, compacted, 0) == 0  # nothing appended
    assert end_offset(bs, compacted, 1) == 6
    assert end_offset(bs, plain, 0) == 18


def test_before_v8_only_the_error_code(broker) -> None:
    """Produce v3-v7 have no record_errors or error_message: Kafka sends INVALID_RECORD alone."""
    bs = broker.bootstrap
    topic = create_topic(bs, "compact")
    for version in (3, 7):
        result = produce(bs, version, {(topic, 0): build_batch([(None, b"v")])})[(topic, 0)]
        assert (result.error_code, result.base_offset, result.record_errors, result.error_message) == \
            (INVALID_RECORD, -1, [], None)
    assert produce(bs, 3, {(topic, 0): build_batch([(b"k", b"v")])})[(topic, 0)].error_code == 0
    assert fetch_keys(bs, topic) == [b"k"]


@pytest.mark.parametrize("magic,codec", [(0, NONE), (1, NONE), (1, GZIP)], ids=["v0", "v1", "v1-gzip"])
def test_legacy_message_sets_are_checked_too(broker, magic: int, codec: int) -> None:
    """Produce v2 with magic 0/1 message sets: converted, then checked like v2 batches."""
    bs = broker.bootstrap
    topic = create_topic(bs, "compact")
    ts = int(time.time() * 1000)
    keyless = build_message_set([(b"k", b"v", ts), (None, b"v", ts)], magic, compression=codec)
    assert produce(bs, 2, {(topic, 0): keyless})[(topic, 0)].error_code == INVALID_RECORD
    keyed = build_message_set([(b"k", b"v", ts), (b"k2", None, ts)], magic, compression=codec)
    assert produce(bs, 2, {(topic, 0): keyed})[(topic, 0)].error_code == 0
    assert fetch_keys(bs, topic) == [b"k", b"k2"]


def test_confluent_kafka_producer_gets_invalid_record(broker) -> None:
    from confluent_kafka import KafkaError, Producer

    bs = broker.bootstrap
    topic = create_topic(bs, "compact")
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 0, "retries": 0, "compression.type": "lz4"})
    outcomes = []
    producer.produce(topic, value=b"no key", on_delivery=lambda err, msg: outcomes.append(err))
    assert producer.flush(15) == 0
    [error] = outcomes
    assert error is not None and error.code() == KafkaError.INVALID_RECORD and error.name() == "INVALID_RECORD"
    outcomes.clear()
    producer.produce(topic, key=b"k", value=b"with key", on_delivery=lambda err, msg: outcomes.append(err))
    producer.produce(topic, key=b"k", value=None, on_delivery=lambda err, msg: outcomes.append(err))  # tombstone
    assert producer.flush(15) == 0
    assert outcomes == [None, None]
    assert fetch_keys(bs, topic) == [b"k", b"k"]


def test_transactional_keyed_records_and_markers_are_accepted(broker) -> None:
    """Transactional batches are checked like any other; the coordinator's markers are written."""
    from confluent_kafka import KafkaException, Producer

    bs = broker.bootstrap
    topic = create_topic(bs, "compact")
    producer = Producer({"bootstrap.servers": bs, "transactional.id": f"compacted-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 0})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, key=b"t1", value=b"v")
    producer.produce(topic, key=b"t2", value=None)
    producer.commit_transaction(15)
    producer.begin_transaction()
    producer.produce(topic, value=b"keyless in a transaction")
    with pytest.raises(KafkaException):
        producer.commit_transaction(15)  # the batch failed, so the transaction cannot commit
    deadline = time.monotonic() + 15
    while fetch_keys(bs, topic) != [b"t1", b"t2"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fetch_keys(bs, topic) == [b"t1", b"t2"]
