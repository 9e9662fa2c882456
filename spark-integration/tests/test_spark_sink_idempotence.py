"""Spark's Kafka sink writes through kafka-clients' default producer, which is idempotent.

The proof is in the stored record batches: an idempotent producer stamps every batch with
the producer id the broker gave it (InitProducerId) and a per-partition sequence number
that continues from batch to batch; a plain producer leaves producer id -1. The batches are
fetched with a hand-built Fetch v4 request so the check does not rely on any client library.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest

from conformance.kafka_wire import RawConnection, Reader, frame, kstring, request_header_v1
from kafkapy_spark.kafka_client import create_topic, partition_offsets, read_all

pytestmark = pytest.mark.timeout(180)

API_FETCH = 1
BATCH_HEADER = struct.Struct(">qiiBIhiqqqhii")  # v2 record batch header, 61 bytes


@dataclass(slots=True)
class StoredBatch:
    base_offset: int
    records: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


def fetch_batches(bootstrap: str, topic: str, partition: int) -> list[StoredBatch]:
    """Every record batch of one partition, as stored by the broker (Fetch v4, read_uncommitted)."""
    batches: list[StoredBatch] = []
    offset = 0
    with RawConnection(bootstrap) as conn:
        for correlation_id in range(1, 1000):
            body = (struct.pack(">iiiib", -1, 500, 1, 8 << 20, 0) + struct.pack(">i", 1) + kstring(topic)
                    + struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, 4 << 20))
            reader = Reader(conn.roundtrip(frame(request_header_v1(API_FETCH, 4, correlation_id) + body)))
            assert reader.int32() == correlation_id
            reader.int32()  # throttle
            assert reader.int32() == 1 and reader.string() == topic and reader.int32() == 1
            assert reader.int32() == partition
            error_code, high_watermark = reader.int16(), reader.int64()
            reader.int64()  # last stable offset
            assert error_code == 0, f"Fetch error {error_code}"
            aborted = reader.int32()
            for _ in range(max(aborted, 0)):
                reader.int64(), reader.int64()
            size = reader.int32()
            data = reader.data[reader.pos:reader.pos + max(size, 0)]
            pos = 0
            while pos + BATCH_HEADER.size <= len(data):
                (base_offset, length, _epoch, magic, _crc, _attrs, _last_delta, _base_ts, _max_ts,
                 producer_id, producer_epoch, base_sequence, count) = BATCH_HEADER.unpack_from(data, pos)
                if pos + 12 + length > len(data):
                    break  # a partial batch at the end of the response
                assert magic == 2
                if base_offset >= offset:
                    batches.append(StoredBatch(base_offset, count, producer_id, producer_epoch, base_sequence))
                    offset = base_offset + _last_delta + 1
                pos += 12 + length
            if offset >= high_watermark:
                return batches
    raise AssertionError(f"could not fetch {topic}-{partition} to its end")


def write_with_spark(spark, bootstrap: str, topic: str, rows: int, **options: str) -> None:
    frame_ = spark.range(rows).selectExpr(
        "CAST(id % 97 AS STRING) AS key", "CONCAT('value-', CAST(id AS STRING)) AS value"
    ).repartition(4)
    writer = frame_.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_spark_sink_uses_the_idempotent_producer_by_default(spark, broker, topic_name) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    write_with_spark(spark, broker.bootstrap, topic_name, 3000)

    assert sum(high for _low, high in partition_offsets(broker.bootstrap, topic_name).values()) == 3000
    producers = set()
    for partition in range(3):
        batches = fetch_batches(broker.bootstrap, topic_name, partition)
        assert batches, f"partition {partition} has no batches"
        for batch in batches:
            assert batch.producer_id >= 0 and batch.producer_epoch >= 0, batch
            producers.add((batch.producer_id, batch.producer_epoch))
        # Sequence numbers continue across batches for each producer writing to the partition.
        next_sequence: dict[int, int] = {}
        for batch in batches:
            expected = next_sequence.get(batch.producer_id, 0)
            assert batch.base_sequence == expected, (partition, batch, expected)
            next_sequence[batch.producer_id] = expected + batch.records
    assert producers, "no idempotent producer wrote the data"
    values = sorted(int(m.value().split(b"-")[1]) for m in read_all(broker.bootstrap, topic_name))
    assert values == list(range(3000))  # every row exactly once


def test_idempotence_switched_off_leaves_no_producer_id(spark, broker, topic_name) -> None:
    """The contrast: the same write with kafka.enable.idempotence=false stores producer id -1."""
    create_topic(broker.bootstrap, topic_name, 1)
    write_with_spark(spark, broker.bootstrap, topic_name, 500, **{
        "kafka.enable.idempotence": "false",
        "kafka.acks": "1",
    })
    batches = fetch_batches(broker.bootstrap, topic_name, 0)
    assert sum(b.records for b in batches) == 500
    assert {(b.producer_id, b.base_sequence) for b in batches} == {(-1, -1)}
