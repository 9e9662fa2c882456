"""Topics as Iceberg tables with input that is not what the mode expects (issue 34), through a real
`kafkapy serve` process:

- an old client (kafka-python with api_version (0, 10): Produce v2, message format v1 message sets)
  writing to a key_value topic: every record becomes a row (kafkapy stores v2 batches; the message
  sets are converted on append, as Kafka's LogValidator does);
- a value_schema_id_prefix topic given values without the magic byte, with a schema id the registry
  does not know, bytes that do not match their schema, and, in the same reads, schemas the table
  can and cannot take: bad records are rows of kafka.<topic>~dlq with the reason, good ones rows of
  the table, and every produced offset is in exactly one of them.
"""
from __future__ import annotations

import collections
import io
import json
import struct

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("fastavro")
pytestmark = pytest.mark.timeout(240)

from confluent_kafka import Producer  # noqa: E402

from conformance.broker_process import free_port  # noqa: E402
from conformance.test_tables_core import (  # noqa: E402
    create_topic,
    log_end_offsets,
    open_table_catalog,
    table_rows,
    wait_for_table,
)

COMMIT_INTERVAL_MS = 400


def test_an_old_clients_message_sets_become_rows(broker_factory, topic_name):
    kafka = pytest.importorskip("kafka")
    instance = broker_factory({"kafkapy.iceberg.commit.interval.ms": str(COMMIT_INTERVAL_MS)})
    create_topic(instance.bootstrap, topic_name, 1, {"kafkapy.iceberg.mode": "key_value"})
    producer = kafka.KafkaProducer(bootstrap_servers=instance.bootstrap, api_version=(0, 10, 1),
                                   compression_type="gzip", linger_ms=5, request_timeout_ms=15000)
    try:
        for i in range(50):
            producer.send(topic_name, key=None if i % 5 == 0 else b"k%d" % i, value=b"old-%d" % i,
                          timestamp_ms=1_700_000_000_000 + i)
        producer.send(topic_name, key=b"gone", value=None)  # a tombstone
        producer.flush(30)
    finally:
        producer.close(10)
    catalog = open_table_catalog(instance.data_dir)
    wait_for_table(catalog, topic_name, {0: 51})
    rows = sorted(table_rows(catalog, topic_name), key=lambda r: r["kafka"]["offset"])
    assert [r["kafka"]["offset"] for r in rows] == list(range(51))
    assert [r["value"] for r in rows] == [b"old-%d" % i for i in range(50)] + [None]
    assert [r["kafka"]["key"] for r in rows[:6]] == [None, b"k1", b"k2", b"k3", b"k4", None]
    assert rows[7]["kafka"]["timestamp"].timestamp() == 1_700_000_000.007
    assert [r["kafka"]["headers"] for r in rows] == [[]] * 51  # none: an empty list (docs/tables.md)


def _avro(schema: dict, schema_id: int, value: dict) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return struct.pack(">bI", 0, schema_id) + out.getvalue()


V_LONG = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "item", "type": "string"}]}
V_STRING = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}


def test_bad_values_become_dead_letters_and_none_is_lost(broker_factory, topic_name):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    port = free_port()
    instance = broker_factory({"kafkapy.iceberg.commit.interval.ms": str(COMMIT_INTERVAL_MS),
                               "kafkapy.schema.registry.listener": f"http://127.0.0.1:{port}"})
    create_topic(instance.bootstrap, topic_name, 2, {"kafkapy.iceberg.mode": "value_schema_id_prefix"})
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
    good_id = registry.register_schema(f"{topic_name}-value", Schema(json.dumps(V_LONG), "AVRO"))
    registry.set_compatibility(subject_name="other-value", level="NONE")
    string_id = registry.register_schema("other-value", Schema(json.dumps(V_STRING), "AVRO"))
    unknown_id = 9999
    assert unknown_id not in (good_id, string_id)

    # first the table learns `id long` from good records
    producer = Producer({"bootstrap.servers": instance.bootstrap, "enable.idempotence": True, "linger.ms": 20})
    expected_rows, expected_dead = {}, {}

    def send(partition: int, value: bytes | None, reason: str | None) -> None:
        producer.produce(topic_name, value=value, partition=partition)
        producer.poll(0)
        sent.append((partition, value, reason))

    sent: list = []
    for i in range(20):
        send(i % 2, _avro(V_LONG, good_id, {"id": i, "item": f"item-{i}"}), None)
    assert producer.flush(30) == 0
    catalog = open_table_catalog(instance.data_dir)
    wait_for_table(catalog, topic_name, {0: 10, 1: 10})

    # then, mixed in the same batches (linger.ms): good records and each kind of bad one
    for i in range(20, 80):
        kind = i % 6
        if kind == 0:
            send(i % 2, b'{"id": %d}' % i, "magic byte 123, not 0")                        # plain JSON
        elif kind == 1:
            send(i % 2, _avro(V_LONG, unknown_id, {"id": i, "item": "x"}), f"unknown schema id {unknown_id}")
        elif kind == 2:
            send(i % 2, struct.pack(">bI", 0, good_id) + b"\x02", "Avro value is truncated")
        elif kind == 3:  # a schema whose `id` the table (long) cannot hold, before good ones in the read
            send(i % 2, _avro(V_STRING, string_id, {"id": str(i)}), "field 'id' is int64 in one schema and string")
        elif kind == 4:
            send(i % 2, b"\x00\x00", "shorter than the wire format's 5-byte header")
        else:
            send(i % 2, _avro(V_LONG, good_id, {"id": i, "item": f"item-{i}"}), None)
    for i in range(80, 100):
        send(i % 2, _avro(V_LONG, good_id, {"id": i, "item": f"item-{i}"}), None)
    assert producer.flush(30) == 0

    ends = log_end_offsets(instance.bootstrap, topic_name, 2)
    assert sum(ends.values()) == len(sent) == 100
    wait_for_table(catalog, topic_name, ends)
    # every offset of the log, in produce order per partition
    offsets = collections.Counter()
    for partition, value, reason in sent:
        offset = offsets[partition]
        offsets[partition] += 1
        (expected_dead if reason else expected_rows)[(partition, offset)] = (value, reason)

    rows = table_rows(catalog, topic_name)
    dead = catalog.load_table(("kafka", f"{topic_name}~dlq")).scan().to_arrow().to_pylist()
    row_keys = collections.Counter((r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows)
    dead_keys = collections.Counter((r["kafka"]["partition"], r["kafka"]["offset"]) for r in dead)
    assert set(row_keys.values()) == {1} and set(dead_keys.values()) == {1}  # nothing twice
    assert set(row_keys) == set(expected_rows) and set(dead_keys) == set(expected_dead)
    assert len(rows) + len(dead) == 100  # nothing lost
    for row in rows:
        i = row["id"]
        assert row["item"] == f"item-{i}" and (i < 20 or i >= 80 or i % 6 == 5)
    for letter in dead:
        value, reason = expected_dead[(letter["kafka"]["partition"], letter["kafka"]["offset"])]
        assert letter["value"] == value
        assert reason in letter["reason"], (reason, letter["reason"])
    dead_next = json.loads(catalog.load_table(("kafka", f"{topic_name}~dlq")).current_snapshot()
                           .summary["kafkapy.next-offsets"])
    assert {int(p): o for p, o in dead_next.items()} == ends
