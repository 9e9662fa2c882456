"""Avro end to end (issue 34): confluent-kafka's AvroSerializer through kafkapy's built-in schema
registry to a `kafkapy.iceberg.mode=value_schema_id_prefix` topic; pyiceberg and DuckDB read the
same values and offsets back from the table; registering v2 of the schema with an added optional
field evolves the table (a new nullable column, null in the rows written before); Spark (Iceberg's
Spark runtime) reads the evolved table with the same typed values (nested struct, array, the added
column) as pyiceberg.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("confluent_kafka.schema_registry")

from confluent_kafka import SerializingProducer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.serialization import StringSerializer  # noqa: E402

from conformance.broker_process import free_port, start_broker  # noqa: E402
from conformance.tables.readers import (  # noqa: E402
    ReaderUnavailable, TableLocation, duckdb_connect, duckdb_rows, load_catalog, log_end_offsets,
    pyiceberg_rows, spark_rows, wait_for_table,
)
from conformance.tables.test_table_readers import unavailable  # noqa: E402

pytestmark = pytest.mark.timeout(180)

TOPIC = "payments"
V1 = {"type": "record", "name": "Payment", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": "double"},
    {"name": "currency", "type": "string"},
    {"name": "card", "type": {"type": "record", "name": "Card", "fields": [
        {"name": "last4", "type": "string"}, {"name": "expiry_year", "type": "int"}]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
]}
V2 = dict(V1, fields=V1["fields"] + [{"name": "note", "type": ["null", "string"], "default": None}])


@pytest.fixture(scope="module")
def registry_broker():
    port = free_port()
    with start_broker(overrides={"kafkapy.schema.registry.listener": f"http://127.0.0.1:{port}",
                                 "kafkapy.iceberg.commit.interval.ms": "500"}) as broker:
        yield broker, f"http://127.0.0.1:{port}"


def produce(bootstrap: str, registry_url: str, schema: dict, values: list[dict]) -> None:
    import json

    client = SchemaRegistryClient({"url": registry_url})
    producer = SerializingProducer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True,
        "key.serializer": StringSerializer(), "value.serializer": AvroSerializer(client, json.dumps(schema)),
    })
    for value in values:
        producer.produce(TOPIC, key=f"customer-{value['id'] % 3}", value=value, partition=value["id"] % 2)
    assert producer.flush(30) == 0


def payment(i: int, note: str | None = None, v2: bool = False) -> dict:
    value = {"id": i, "amount": i * 1.25, "currency": "EUR" if i % 2 else "USD",
             "card": {"last4": f"{i:04d}", "expiry_year": 2030 + i % 5}, "tags": [f"t{j}" for j in range(i % 3)]}
    if v2:
        value["note"] = note
    return value


def value_columns(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "kafka"}


def test_avro_values_and_offsets_in_the_table_and_evolution(registry_broker) -> None:
    broker, registry_url = registry_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(TOPIC, 2, 1, config={"kafkapy.iceberg.mode": "value_schema_id_prefix"})])[TOPIC].result(30)
    location = TableLocation(broker.data_dir)

    first = [payment(i) for i in range(40)]
    produce(broker.bootstrap, registry_url, V1, first)
    wait_for_table(location, TOPIC, log_end_offsets(broker.bootstrap, TOPIC))
    rows = pyiceberg_rows(location, TOPIC)
    by_partition = {p: [v for v in first if v["id"] % 2 == p] for p in (0, 1)}
    assert [(r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows] == [
        (p, o) for p in (0, 1) for o in range(len(by_partition[p]))]
    assert [value_columns(r) for r in rows] == by_partition[0] + by_partition[1]
    assert rows[0]["kafka"]["key"] == b"customer-0"
    columns_v1 = [f.name for f in load_catalog(location).load_table(("kafka", TOPIC)).schema().fields]
    assert "note" not in columns_v1 and {"id", "amount", "currency", "card", "tags"} <= set(columns_v1)

    second = [payment(i, note=None if i % 4 else f"note {i}", v2=True) for i in range(40, 60)]
    produce(broker.bootstrap, registry_url, V2, second)
    wait_for_table(location, TOPIC, log_end_offsets(broker.bootstrap, TOPIC))
    table = load_catalog(location).load_table(("kafka", TOPIC))
    note = table.schema().find_field("note")
    assert not note.required  # an added optional field: a nullable column
    rows = pyiceberg_rows(location, TOPIC)
    assert len(rows) == 60
    expected = {v["id"]: dict(v, note=None) for v in first} | {v["id"]: v for v in second}
    assert {r["id"]: value_columns(r) for r in rows} == expected

    try:
        connection = duckdb_connect()
    except ReaderUnavailable as error:
        unavailable("DuckDB", error)
    assert duckdb_rows(location, TOPIC, connection) == rows
    dead_letters = [t for t in load_catalog(location).list_tables("kafka") if t[-1].endswith("~dlq")]
    assert (("kafka", f"{TOPIC}~dlq") not in dead_letters) or not pyiceberg_rows(location, f"{TOPIC}~dlq")


def test_spark_reads_the_evolved_avro_table(registry_broker, tmp_path) -> None:
    broker, registry_url = registry_broker
    location = TableLocation(broker.data_dir)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    if TOPIC not in admin.list_topics(timeout=10).topics:  # run alone (-k): write what the test above writes
        admin.create_topics([NewTopic(TOPIC, 2, 1, config={"kafkapy.iceberg.mode": "value_schema_id_prefix"})])[
            TOPIC].result(30)
        produce(broker.bootstrap, registry_url, V1, [payment(i) for i in range(40)])
        produce(broker.bootstrap, registry_url, V2, [payment(i, note=None if i % 4 else f"note {i}", v2=True)
                                                     for i in range(40, 60)])
    wait_for_table(location, TOPIC, log_end_offsets(broker.bootstrap, TOPIC))
    expected = pyiceberg_rows(location, TOPIC)
    assert len(expected) == 60 and any(r["note"] for r in expected)
    try:
        rows, snapshots = spark_rows(location, TOPIC, tmp_path)
    except ReaderUnavailable as error:
        unavailable("Spark", error)
    assert rows == expected
    assert rows[0]["card"] == {"last4": "0000", "expiry_year": 2030} and rows[1]["tags"] == ["t0", "t1"]  # id 2
    assert snapshots and "kafkapy.next-offsets" in snapshots[-1]["summary"]
