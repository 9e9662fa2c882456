"""The translator's Arrow tables are what pyiceberg takes: a table created from the rows' schema holds
them (every column type of the three formats), reads back the same values, and evolves by
`update_schema().union_by_name(...)` when a later schema adds a field or widens int to long, as the
table writer (kafkapy/tables, T1) does before each append."""
from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyiceberg")

from confluent_kafka.schema_registry.json_schema import JSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer  # noqa: E402

from kafkapy.tables.values import ValueTranslator, dead_letter_schema  # noqa: E402

from .test_values import (  # noqa: E402
    CTX,
    ITEM_SCHEMA,
    ORDER_V1,
    Registry,
    a_cart,
    an_order,
    avro_serializer,
    proto_classes,
    records,
)


@pytest.fixture
def catalog(tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("kafkapy", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("kafka")
    return catalog


def with_headers(values):
    # pyiceberg 0.12 writes a null list<struct> as [] (apache/iceberg-python#3833): headers are set
    # here so that the comparison is about the value columns
    return records(values, headers=[[("h", b"1")]] * len(values))


def test_every_column_type_is_written_and_read_back(catalog):
    Cart, _ = proto_classes()
    registry = Registry()
    cases = {
        "orders": [avro_serializer(registry, ORDER_V1)(an_order(i), CTX) for i in range(3)],
        "items": [JSONSerializer(json.dumps(ITEM_SCHEMA), registry.client)(
            {"id": 1, "price": 2.5, "dims": {"w": 1, "h": 2}, "tags": ["a"], "extra": {"x": 1.0},
             "anything": [1], "part": {"sku": "s"}}, CTX)],
        "carts": [ProtobufSerializer(Cart, registry.client, conf={"use.deprecated.format": False})(
            a_cart(Cart, i), CTX) for i in (1, 2)],
    }
    translator = ValueTranslator(registry.text)
    for topic, values in cases.items():
        out = translator.translate(with_headers(values))
        assert out.dead_letters.num_rows == 0, out.dead_letters.column("reason").to_pylist()
        table = catalog.create_table(f"kafka.{topic}", schema=out.rows.schema)
        table.append(out.rows)
        back = catalog.load_table(f"kafka.{topic}").scan().to_arrow()
        assert back.schema.equals(out.rows.schema), topic
        assert back.to_pylist() == out.rows.to_pylist(), topic


def test_dead_letters_are_written_to_their_table(catalog):
    out = ValueTranslator(lambda i: None).translate(with_headers([b"\x00\x00\x00\x00\x09abc", b"junk!"]))
    table = catalog.create_table("kafka.t~dlq", schema=dead_letter_schema())
    table.append(out.dead_letters)
    back = table.scan().to_arrow()
    assert back.column("reason").to_pylist() == ["unknown schema id 9", "magic byte 106, not 0: not in Confluent's "
                                                 "wire format"]
    assert back.column("value").to_pylist() == [b"\x00\x00\x00\x00\x09abc", b"junk!"]


def test_the_table_evolves_with_an_added_field_and_a_widened_int(catalog):
    registry = Registry()
    v1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"},
                                                      {"name": "age", "type": "int"}]}
    v2 = {"type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "long"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "home", "type": ["null", {"type": "record", "name": "Home",
                                          "fields": [{"name": "city", "type": "string"}]}], "default": None}]}
    translator = ValueTranslator(registry.text)
    first = translator.translate(with_headers([avro_serializer(registry, v1)({"name": "ann", "age": 1}, CTX)]))
    table = catalog.create_table("kafka.users", schema=first.rows.schema)
    table.append(first.rows)
    second = translator.translate(with_headers([avro_serializer(registry, v2)(
        {"name": "bob", "age": 2**40, "email": "b@x", "home": {"city": "Oslo"}}, CTX)]))
    with table.update_schema() as update:
        update.union_by_name(second.rows.schema)
    table.append(second.rows)
    # and v1 rows again after the evolution: the missing columns are null
    table.append(translator.translate(with_headers([avro_serializer(registry, v1)({"name": "cy", "age": 3},
                                                                                   CTX)])).rows)
    back = catalog.load_table("kafka.users").scan().to_arrow().sort_by([("name", "ascending")])
    assert back.schema.field("age").type == pa.int64()
    assert [{k: v for k, v in r.items() if k != "kafka"} for r in back.to_pylist()] == [
        {"name": "ann", "age": 1, "email": None, "home": None},
        {"name": "bob", "age": 2**40, "email": "b@x", "home": {"city": "Oslo"}},
        {"name": "cy", "age": 3, "email": None, "home": None},
    ]
