"""Value translation for topics as Iceberg tables (kafkapy/tables/values.py): values serialized by
confluent-kafka's own Avro, JSON Schema and Protobuf serializers (against confluent-kafka's mock
registry client) come out as typed columns with the exact values; what cannot be translated comes
out as a dead letter with its reason; no record is ever lost."""
from __future__ import annotations

import datetime
import json
import struct
from decimal import Decimal

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("fastavro")
pytest.importorskip("confluent_kafka.schema_registry")

from confluent_kafka.schema_registry import Schema  # noqa: E402
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (  # noqa: E402
    MockSchemaRegistryClient,
)
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from kafkapy.tables.values import (  # noqa: E402
    Records,
    SchemaText,
    ValueTranslator,
    dead_letter_schema,
    kafka_struct_type,
    key_value_rows,
)

TOPIC = "orders"
CTX = SerializationContext(TOPIC, MessageField.VALUE)


class Registry:
    """confluent-kafka's mock registry client, and the lookup the translator is given."""

    def __init__(self):
        self.client = MockSchemaRegistryClient({"url": "mock://tables"})
        self.lookups = 0

    def text(self, schema_id: int) -> SchemaText | None:
        self.lookups += 1
        try:
            schema = self.client.get_schema(schema_id)
        except Exception:  # noqa: BLE001 (the mock raises for an unknown id)
            return None
        references: dict[str, str] = {}

        def resolve(refs):
            for ref in refs or ():
                if ref.name in references:
                    continue
                found = self.client.get_version(ref.subject, ref.version).schema
                resolve(found.references)
                references[ref.name] = found.schema_str
        resolve(schema.references)
        return SchemaText(schema.schema_type or "AVRO", schema.schema_str, references)

    def register(self, subject: str, text: str, schema_type: str) -> int:
        return self.client.register_schema(subject, Schema(text, schema_type))


def records(values, partition=3, first=100, keys=None, headers=None) -> Records:
    n = len(values)
    return Records(partition, list(range(first, first + n)), [1_700_000_000_000 + i for i in range(n)],
                   keys if keys is not None else [f"k{i}".encode() for i in range(n)], list(values),
                   headers if headers is not None else [None] * n)


def check_counts(out, n):
    assert out.rows.num_rows + out.dead_letters.num_rows == n
    assert out.dead_letters.schema.equals(dead_letter_schema())
    assert out.rows.schema.field("kafka").type.equals(kafka_struct_type())
    offsets = sorted(out.rows.column("kafka").combine_chunks().field("offset").to_pylist() +
                     out.dead_letters.column("kafka").combine_chunks().field("offset").to_pylist())
    assert len(set(offsets)) == n


def values_of(table):
    return [{k: v for k, v in row.items() if k != "kafka"} for row in table.to_pylist()]


def reasons(out):
    return out.dead_letters.column("reason").to_pylist()


# -- the shared layout ---------------------------------------------------------------------------------

def test_key_value_rows_hold_the_records_metadata_and_raw_value():
    rs = records([b"v0", None], keys=[b"k", None], headers=[[("h", b"x"), ("n", None)], None])
    table = key_value_rows(rs)
    assert table.schema.field("kafka").nullable is False
    assert table.to_pylist() == [
        {"kafka": {"partition": 3, "offset": 100,
                   "timestamp": datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc),
                   "key": b"k", "headers": [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]},
         "value": b"v0"},
        {"kafka": {"partition": 3, "offset": 101,
                   "timestamp": datetime.datetime(2023, 11, 14, 22, 13, 20, 1000, tzinfo=datetime.timezone.utc),
                   "key": None, "headers": None},
         "value": None},
    ]
    assert [f.name for f in dead_letter_schema()] == ["kafka", "value", "reason"]


# -- Avro ----------------------------------------------------------------------------------------------

ORDER_V1 = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "weight", "type": "float"},
        {"name": "paid", "type": "boolean"},
        {"name": "customer", "type": "string"},
        {"name": "blob", "type": "bytes"},
        {"name": "digest", "type": {"type": "fixed", "name": "MD5", "size": 4}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "address", "type": {"type": "record", "name": "Address",
                                     "fields": [{"name": "city", "type": "string"},
                                                {"name": "zip", "type": ["null", "int"]}]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "prev", "type": ["null", "Address"], "default": None},
        {"name": "either", "type": ["int", "string", "Address"]},
    ],
}
UTC = datetime.timezone.utc


def an_order(i: int) -> dict:
    return {"id": 10_000_000_000 + i, "qty": i, "price": 2.5, "weight": 1.5, "paid": i % 2 == 0,
            "customer": f"c{i}", "blob": b"\x00\x01", "digest": b"abcd", "status": "PAID",
            "note": None if i % 2 else "ring twice", "address": {"city": "Lyon", "zip": 69000 + i},
            "tags": ["a", "b"], "attrs": {"x": 1}, "day": datetime.date(2024, 2, 29),
            "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
            "at_us": datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
            "amount": Decimal("12.34"), "ref": "12345678-1234-5678-1234-567812345678",
            "prev": {"city": "Paris", "zip": None} if i % 2 else None,
            "either": [7, "seven", {"city": "Nice", "zip": 6000}][i % 3]}


def avro_serializer(registry: Registry, schema: dict):
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(registry.client, json.dumps(schema), conf={"auto.register.schemas": True})


def test_avro_values_become_typed_columns_with_exact_values():
    registry = Registry()
    serialize = avro_serializer(registry, ORDER_V1)
    orders = [an_order(i) for i in range(3)]
    out = ValueTranslator(registry.text).translate(records([serialize(o, CTX) for o in orders]))
    check_counts(out, 3)
    assert out.dead_letters.num_rows == 0, reasons(out)
    schema = out.rows.schema
    expected_types = {
        "id": pa.int64(), "qty": pa.int32(), "price": pa.float64(), "weight": pa.float32(), "paid": pa.bool_(),
        "customer": pa.string(), "blob": pa.binary(), "digest": pa.binary(), "status": pa.string(),
        "note": pa.string(), "address": pa.struct([("city", pa.string()), ("zip", pa.int32())]),
        "tags": pa.list_(pa.field("element", pa.string())), "attrs": pa.map_(pa.string(), pa.int64()),
        "day": pa.date32(), "at": pa.timestamp("us", tz="UTC"), "at_us": pa.timestamp("us", tz="UTC"),
        "amount": pa.decimal128(10, 2), "ref": pa.string(),
        "prev": pa.struct([("city", pa.string()), ("zip", pa.int32())]),
        "either": pa.struct([("int", pa.int32()), ("string", pa.string()),
                             ("Address", pa.struct([("city", pa.string()), ("zip", pa.int32())]))]),
    }
    assert [f.name for f in schema] == ["kafka"] + [f["name"] for f in ORDER_V1["fields"]]
    for name, kind in expected_types.items():
        assert schema.field(name).type.equals(kind), (name, schema.field(name).type)
        assert schema.field(name).nullable
    got = values_of(out.rows)
    for i, (row, order) in enumerate(zip(got, orders)):
        want = dict(order, attrs=[("x", 1)],
                    either=[{"int": 7, "string": None, "Address": None},
                            {"int": None, "string": "seven", "Address": None},
                            {"int": None, "string": None, "Address": {"city": "Nice", "zip": 6000}}][i % 3])
        assert row == want
    kafka = out.rows.column("kafka").to_pylist()
    assert [k["offset"] for k in kafka] == [100, 101, 102]
    assert {k["partition"] for k in kafka} == {3}
    assert kafka[0]["key"] == b"k0"


def test_avro_schema_evolution_adds_a_nullable_column():
    registry = Registry()
    v1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"},
                                                      {"name": "age", "type": "int"}]}
    v2 = dict(v1, fields=v1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}])
    first = avro_serializer(registry, v1)({"name": "ann", "age": 30}, CTX)
    second = avro_serializer(registry, v2)({"name": "bob", "age": 40, "email": "b@x"}, CTX)
    assert first[1:5] != second[1:5]  # two schema ids
    translator = ValueTranslator(registry.text)
    out = translator.translate(records([first, second, first]))
    check_counts(out, 3)
    assert out.dead_letters.num_rows == 0
    assert [f.name for f in out.rows.schema] == ["kafka", "name", "age", "email"]
    assert values_of(out.rows) == [{"name": "ann", "age": 30, "email": None},
                                   {"name": "bob", "age": 40, "email": "b@x"},
                                   {"name": "ann", "age": 30, "email": None}]
    # a later call with only v1 records gives v1's columns: the table keeps `email` (union_by_name)
    assert [f.name for f in translator.translate(records([first])).rows.schema] == ["kafka", "name", "age"]
    # int → long widens, as Iceberg's evolution allows
    v3 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"},
                                                      {"name": "age", "type": "long"}]}
    registry.client.get_compatibility = None
    third = avro_serializer(registry, v3)({"name": "cy", "age": 2**40}, CTX)
    out = translator.translate(records([first, third]))
    assert out.dead_letters.num_rows == 0
    assert out.rows.schema.field("age").type == pa.int64()
    assert [r["age"] for r in values_of(out.rows)] == [30, 2**40]


def test_incompatible_field_types_in_one_call_dead_letter_the_later_schema():
    registry = Registry()
    v1 = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]}
    v2 = {"type": "record", "name": "T2", "fields": [{"name": "a", "type": "string"}]}
    one = avro_serializer(registry, v1)({"a": 1}, CTX)
    two = avro_serializer(registry, v2)({"a": "x"}, SerializationContext("other", MessageField.VALUE))
    out = ValueTranslator(registry.text).translate(records([one, two, one]))
    check_counts(out, 3)
    assert values_of(out.rows) == [{"a": 1}, {"a": 1}]
    [reason] = reasons(out)
    assert "field 'a'" in reason and "int32" in reason and "string" in reason
    assert out.dead_letters.column("value").to_pylist() == [two]


def test_bad_values_are_dead_letters_with_a_reason():
    registry = Registry()
    serialize = avro_serializer(registry, {"type": "record", "name": "P",
                                           "fields": [{"name": "s", "type": "string"}]})
    good = serialize({"s": "hello"}, CTX)
    schema_id = struct.unpack(">I", good[1:5])[0]
    kafka_field = registry.register("k-value", json.dumps({"type": "record", "name": "K", "fields": [
        {"name": "kafka", "type": "int"}]}), "AVRO")
    cases = {
        b"plain text": "magic byte 112",
        b"\x00\x00": "shorter than",
        b"\x00" + struct.pack(">I", 999) + b"\x02x": "unknown schema id 999",
        good[:-2]: "truncated",
        good + b"\x00\x00": "2 bytes left",
        b"\x00" + struct.pack(">I", kafka_field) + b"\x02": "top-level field named 'kafka'",
        b"\x01" + good[1:]: "magic byte 1",
    }
    values = [good, None, *cases]
    out = ValueTranslator(registry.text).translate(records(values, keys=[None] * len(values)))
    check_counts(out, len(values))
    assert values_of(out.rows) == [{"s": "hello"}, {"s": None}]  # the tombstone is a row of nulls
    got = dict(zip(out.dead_letters.column("value").to_pylist(), reasons(out)))
    for value, expected in cases.items():
        assert expected in got[value], (value, got[value])
    assert all("\n" not in r for r in got.values())
    assert schema_id != 999


def test_a_schema_lookup_that_raises_is_a_dead_letter_not_an_exception():
    def lookup(schema_id):
        raise ConnectionError("registry is down")
    out = ValueTranslator(lookup).translate(records([b"\x00\x00\x00\x00\x01\x02"]))
    check_counts(out, 1)
    assert "registry is down" in reasons(out)[0]


def test_unknown_ids_are_asked_again_known_ones_once():
    registry = Registry()
    good = avro_serializer(registry, {"type": "record", "name": "P", "fields": [{"name": "s", "type": "string"}]})(
        {"s": "x"}, CTX)
    translator = ValueTranslator(registry.text)
    unknown = b"\x00" + struct.pack(">I", 4242) + b"\x00"
    translator.translate(records([good, good, unknown]))
    translator.translate(records([good, unknown]))
    assert registry.lookups == 3  # the good id once, the unknown one per call


def test_a_value_schema_that_is_not_a_record_is_one_column_named_value():
    registry = Registry()
    serialize = avro_serializer(registry, {"type": "array", "items": "int"})
    out = ValueTranslator(registry.text).translate(records([serialize([1, 2], CTX)]))
    assert values_of(out.rows) == [{"value": [1, 2]}]


def test_a_recursive_avro_type_is_a_dead_letter():
    registry = Registry()
    node = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                        {"name": "next", "type": ["null", "Node"]}]}
    value = avro_serializer(registry, node)({"v": 1, "next": {"v": 2, "next": None}}, CTX)
    out = ValueTranslator(registry.text).translate(records([value]))
    check_counts(out, 1)
    assert "recursive type Node" in reasons(out)[0]


def test_avro_schema_with_a_reference():
    registry = Registry()
    address = {"type": "record", "name": "Address", "namespace": "shop",
               "fields": [{"name": "city", "type": "string"}]}
    registry.register("address", json.dumps(address), "AVRO")
    from confluent_kafka.schema_registry import SchemaReference
    person = {"type": "record", "name": "Person", "namespace": "shop",
              "fields": [{"name": "home", "type": "shop.Address"}]}
    schema_id = registry.client.register_schema(
        "person", Schema(json.dumps(person), "AVRO", [SchemaReference("shop.Address", "address", 1)]))
    import io

    import fastavro
    named = {}
    fastavro.parse_schema(address, named_schemas=named)
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(person, named_schemas=named), {"home": {"city": "Oslo"}})
    out = ValueTranslator(registry.text).translate(records([b"\x00" + struct.pack(">I", schema_id) +
                                                            buffer.getvalue()]))
    assert out.dead_letters.num_rows == 0, reasons(out)
    assert values_of(out.rows) == [{"home": {"city": "Oslo"}}]


# -- JSON Schema -----------------------------------------------------------------------------------------

ITEM_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Item", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "price": {"type": "number"},
        "name": {"type": "string"},
        "ok": {"type": "boolean"},
        "maybe": {"type": ["string", "null"]},
        "dims": {"type": "object", "properties": {"w": {"type": "integer"}, "h": {"type": "integer"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}},
        "anything": {},
        "part": {"$ref": "#/definitions/part"},
    },
    "required": ["id"],
    "definitions": {"part": {"type": "object", "properties": {"sku": {"type": "string"}}}},
}


def json_serializer(registry: Registry, schema: dict):
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    return JSONSerializer(json.dumps(schema), registry.client, conf={"auto.register.schemas": True})


def test_json_schema_values_become_typed_columns():
    registry = Registry()
    serialize = json_serializer(registry, ITEM_SCHEMA)
    items = [{"id": 1, "price": 3, "name": "pen", "ok": True, "maybe": None, "dims": {"w": 2, "h": 3},
              "tags": ["x"], "extra": {"a": 1.5}, "anything": {"k": [1, 2]}, "part": {"sku": "P-1"},
              "undeclared": 5},
             {"id": 2}]
    out = ValueTranslator(registry.text).translate(records([serialize(i, CTX) for i in items]))
    check_counts(out, 2)
    assert out.dead_letters.num_rows == 0, reasons(out)
    types = {f.name: f.type for f in out.rows.schema}
    assert types["id"] == pa.int64() and types["price"] == pa.float64() and types["ok"] == pa.bool_()
    assert types["maybe"] == pa.string() and types["anything"] == pa.string()
    assert types["extra"] == pa.map_(pa.string(), pa.float64())
    assert types["part"] == pa.struct([("sku", pa.string())])
    assert "undeclared" not in types
    assert values_of(out.rows) == [
        {"id": 1, "price": 3.0, "name": "pen", "ok": True, "maybe": None, "dims": {"w": 2, "h": 3},
         "tags": ["x"], "extra": [("a", 1.5)], "anything": '{"k":[1,2]}', "part": {"sku": "P-1"}},
        {"id": 2, "price": None, "name": None, "ok": None, "maybe": None, "dims": None, "tags": None,
         "extra": None, "anything": None, "part": None},
    ]


def test_json_values_that_fail_the_schema_are_dead_letters_with_jsonschemas_message():
    registry = Registry()
    schema_id = registry.register(f"{TOPIC}-value", json.dumps(ITEM_SCHEMA), "JSON")
    header = b"\x00" + struct.pack(">I", schema_id)
    values = [header + b'{"id": "one"}', header + b'{"name": "no id"}', header + b"{not json",
              header + b'{"id": 99999999999999999999999}', header + b'{"id": 7}']
    out = ValueTranslator(registry.text).translate(records(values))
    check_counts(out, 5)
    assert values_of(out.rows)[0]["id"] == 7
    got = reasons(out)
    assert "id: 'one' is not of type 'integer'" in got[0]
    assert "'id' is a required property" in got[1]
    assert "not a JSON document" in got[2]
    assert "does not fit its column types" in got[3]


# -- Protobuf --------------------------------------------------------------------------------------------

PROTO = """
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

message Line {
  string sku = 1;
  uint32 count = 2;
}

message Cart {
  enum Kind { KIND_UNSPECIFIED = 0; ONLINE = 1; }
  message Meta { string source = 1; }
  int64 id = 1;
  sint32 delta = 2;
  uint64 big = 3;
  double total = 4;
  float ratio = 5;
  bool gift = 6;
  bytes token = 7;
  Kind kind = 8;
  repeated Line lines = 9;
  map<string, int32> counts = 10;
  Meta meta = 11;
  optional string coupon = 12;
  oneof pay { string card = 13; int64 account = 14; }
  google.protobuf.Timestamp at = 15;
  repeated int32 nums = 16;
}
"""


def proto_classes():
    """The Cart message class, built from PROTO in protobuf's default pool (as generated code is)."""
    from google.protobuf import descriptor_pool, message_factory

    from kafkapy.tables.proto_arrow import file_descriptor

    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName("shop/v1/cart.proto")
    except KeyError:
        pool.Add(file_descriptor("shop/v1/cart.proto", PROTO))
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.v1.Cart")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.v1.Line")))


def a_cart(Cart, i):
    cart = Cart(id=i, delta=-i, big=2**64 - 1, total=9.5, ratio=0.5, gift=True, token=b"\x01", kind=1,
                nums=[1, 2])
    cart.lines.add(sku="a", count=2)
    cart.counts["x"] = 3
    cart.meta.source = "web"
    if i % 2:
        cart.coupon = ""
        cart.card = "visa"
    cart.at.FromDatetime(datetime.datetime(2024, 5, 6, 7, 8, 9, 123456))
    return cart


EXPECTED_CART = {"id": 1, "delta": -1, "big": Decimal(2**64 - 1), "total": 9.5, "ratio": 0.5, "gift": True,
                 "token": b"\x01", "kind": "ONLINE", "lines": [{"sku": "a", "count": 2}], "counts": [("x", 3)],
                 "meta": {"source": "web"}, "coupon": "", "card": "visa", "account": None,
                 "at": datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC), "nums": [1, 2]}


def test_protobuf_values_from_confluents_serializer_become_typed_columns():
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    Cart, Line = proto_classes()
    registry = Registry()
    serialize = ProtobufSerializer(Cart, registry.client, conf={"auto.register.schemas": True,
                                                               "use.deprecated.format": False})
    values = [serialize(a_cart(Cart, i), CTX) for i in (1, 2)]
    out = ValueTranslator(registry.text).translate(records(values))
    check_counts(out, 2)
    assert out.dead_letters.num_rows == 0, reasons(out)
    types = {f.name: f.type for f in out.rows.schema}
    assert types["id"] == pa.int64() and types["delta"] == pa.int32() and types["big"] == pa.decimal128(20, 0)
    assert types["kind"] == pa.string() and types["counts"] == pa.map_(pa.string(), pa.int32())
    assert types["lines"] == pa.list_(pa.field("element", pa.struct([("sku", pa.string()), ("count", pa.int64())])))
    assert types["at"] == pa.timestamp("us", tz="UTC")
    first, second = values_of(out.rows)
    assert first == EXPECTED_CART
    assert second == dict(EXPECTED_CART, id=2, delta=-2, coupon=None, card=None)
    # Line is message index [0], Cart is [1]: a Line value is the Line message's columns
    line = ProtobufSerializer(Line, registry.client, conf={"auto.register.schemas": True,
                                                          "use.deprecated.format": False})(
        Line(sku="z", count=9), SerializationContext("lines", MessageField.VALUE))
    out = ValueTranslator(registry.text).translate(records([line]))
    assert values_of(out.rows) == [{"sku": "z", "count": 9}]


def test_protobuf_schema_as_proto_text_and_message_indexes():
    Cart, _ = proto_classes()
    registry = Registry()
    # the registry keeps .proto text as it was registered; the well-known import is protobuf's own
    schema_id = registry.register("cart-value", PROTO, "PROTOBUF")
    header = b"\x00" + struct.pack(">I", schema_id)
    cart = a_cart(Cart, 1).SerializeToString()
    index_cart = b"\x02\x02"          # count 1, index 1 (zig-zag)
    values = [header + index_cart + cart,
              header + b"\x00" + b"\x0a\x01q\x10\x05",   # [0] shortcut: a Line
              header + b"\x02\x08" + cart,               # index 4: no such message
              header + index_cart + b"\xff\xff",          # not a message
              header]                                     # no indexes
    out = ValueTranslator(registry.text).translate(records(values))
    check_counts(out, 5)
    rows = values_of(out.rows)
    # two messages in one call: the columns are the union of both, each row null in the other's
    assert rows[0] == dict(EXPECTED_CART, sku=None, count=None)
    assert {k: v for k, v in rows[1].items() if v is not None} == {"sku": "q", "count": 5}
    got = reasons(out)
    assert "message indexes [4] name no message" in got[0]
    assert "not a Protobuf shop.v1.Cart" in got[1]
    assert "truncated in its message indexes" in got[2]


# -- the invariant: never an exception, never a lost record ------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_REGISTRY = None


def shared_registry():
    global _REGISTRY
    if _REGISTRY is None:
        registry = Registry()
        avro_serializer(registry, ORDER_V1)(an_order(1), CTX)                                  # id 1
        registry.register("json-value", json.dumps(ITEM_SCHEMA), "JSON")                      # id 2
        registry.register("proto-value", PROTO, "PROTOBUF")                                   # id 3
        _REGISTRY = registry
    return _REGISTRY


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(
    st.none(), st.binary(max_size=64),
    st.tuples(st.sampled_from([1, 2, 3, 77]), st.binary(max_size=64)).map(
        lambda t: b"\x00" + struct.pack(">I", t[0]) + t[1])), max_size=20))
def test_arbitrary_values_never_raise_and_every_record_is_accounted_for(values):
    registry = shared_registry()
    out = ValueTranslator(registry.text).translate(records(values))
    check_counts(out, len(values))
    assert all(r and "\n" not in r for r in reasons(out))


_AVRO_SCALARS = [
    ("int", st.integers(-2**31, 2**31 - 1)), ("long", st.integers(-2**63, 2**63 - 1)),
    ("double", st.floats(allow_nan=False)), ("boolean", st.booleans()),
    ("string", st.text(max_size=10)), ("bytes", st.binary(max_size=10)),
]


@st.composite
def avro_records(draw):
    """An Avro record schema (scalars, nullable scalars, arrays, maps, a nested record) and values."""
    fields, makers = [], []
    for i in range(draw(st.integers(1, 6))):
        kind, values = draw(st.sampled_from(_AVRO_SCALARS))
        shape = draw(st.sampled_from(["plain", "nullable", "array", "map", "record"]))
        name = f"f{i}"
        if shape == "plain":
            fields.append({"name": name, "type": kind})
            makers.append(values)
        elif shape == "nullable":
            fields.append({"name": name, "type": ["null", kind]})
            makers.append(st.none() | values)
        elif shape == "array":
            fields.append({"name": name, "type": {"type": "array", "items": kind}})
            makers.append(st.lists(values, max_size=3))
        elif shape == "map":
            fields.append({"name": name, "type": {"type": "map", "values": kind}})
            makers.append(st.dictionaries(st.text(max_size=5), values, max_size=3))
        else:
            fields.append({"name": name, "type": {"type": "record", "name": f"R{i}",
                                                  "fields": [{"name": "x", "type": kind}]}})
            makers.append(st.fixed_dictionaries({"x": values}))
    schema = {"type": "record", "name": "Top", "fields": fields}
    rows = draw(st.lists(st.tuples(*makers).map(lambda t: {f["name"]: v for f, v in zip(fields, t)}),
                         min_size=1, max_size=5))
    return schema, rows


def _normal(field_type, value):
    """What a column gives back for an Avro value (maps as key/value pairs)."""
    if value is None:
        return None
    kind = field_type if isinstance(field_type, str) else (
        [t for t in field_type if t != "null"][0] if isinstance(field_type, list) else field_type["type"])
    if kind == "map":
        return [(k, v) for k, v in value.items()]
    if isinstance(kind, str) and kind.startswith("R"):
        return value
    if isinstance(field_type, list):
        return _normal(kind, value)
    return value


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(avro_records())
def test_avro_records_generated_by_hypothesis_round_trip(case):
    import io

    import fastavro

    schema, rows = case
    parsed = fastavro.parse_schema(schema)
    values = []
    for row in rows:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, row)
        values.append(b"\x00\x00\x00\x00\x07" + buffer.getvalue())
    text = SchemaText("AVRO", json.dumps(schema), {})
    out = ValueTranslator(lambda i: text if i == 7 else None).translate(records(values))
    check_counts(out, len(rows))
    assert out.dead_letters.num_rows == 0, reasons(out)
    assert values_of(out.rows) == [{f["name"]: _normal(f["type"], row[f["name"]]) for f in schema["fields"]}
                                   for row in rows]


def test_protobuf_text_schema_importing_a_reference():
    from confluent_kafka.schema_registry import SchemaReference

    registry = Registry()
    registry.register("money", 'syntax = "proto3";\npackage common;\nmessage Money { string currency = 1; '
                               'int64 units = 2; }\n', "PROTOBUF")
    schema_id = registry.client.register_schema("invoice-value", Schema(
        'syntax = "proto3";\npackage billing;\nimport "common/money.proto";\n'
        'message Invoice { string number = 1; common.Money total = 2; repeated common.Money lines = 3; }\n',
        "PROTOBUF", [SchemaReference("common/money.proto", "money", 1)]))
    message = b"\x0a\x02A1" + b"\x12\x07\x0a\x03EUR\x10\x05"   # number "A1", total {EUR, 5}
    out = ValueTranslator(registry.text).translate(records([b"\x00" + struct.pack(">I", schema_id) + b"\x00" +
                                                            message]))
    assert out.dead_letters.num_rows == 0, reasons(out)
    assert values_of(out.rows) == [{"number": "A1", "total": {"currency": "EUR", "units": 5}, "lines": []}]


def test_json_schema_ref_to_a_reference():
    from confluent_kafka.schema_registry import SchemaReference

    registry = Registry()
    registry.register("point", json.dumps({"type": "object", "properties": {"x": {"type": "integer"}},
                                           "required": ["x"]}), "JSON")
    schema_id = registry.client.register_schema("shape-value", Schema(json.dumps(
        {"type": "object", "properties": {"name": {"type": "string"}, "at": {"$ref": "point.json"}}}),
        "JSON", [SchemaReference("point.json", "point", 1)]))
    header = b"\x00" + struct.pack(">I", schema_id)
    out = ValueTranslator(registry.text).translate(records([header + b'{"name": "p", "at": {"x": 3}}',
                                                            header + b'{"at": {"y": 1}}']))
    assert values_of(out.rows) == [{"name": "p", "at": {"x": 3}}]
    assert "'x' is a required property" in reasons(out)[0]


def test_the_tables_columns_seed_the_merge():
    """Within one call the first schema met used to fix a column's type: a schema conflicting with
    the table, met first, made a later schema the table can take dead letters too. Seeded with the
    table's columns (as pyiceberg gives them: large_string), the conflicting one alone is refused."""
    import io

    import fastavro

    from kafkapy.tables.values import Records, SchemaText, ValueTranslator, table_value_fields

    texts = {1: {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]},
             2: {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"},
                                                           {"name": "s", "type": "string"}]}}

    def wire(schema_id, value):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(texts[schema_id]), value)
        return struct.pack(">bI", 0, schema_id) + out.getvalue()

    records = Records(0, [0, 1], [0, 0], [None, None], [wire(1, {"a": "x"}), wire(2, {"a": 7, "s": "y"})],
                      [None, None])
    translator = ValueTranslator(lambda i: SchemaText("AVRO", json.dumps(texts[i]), {}))
    table = pa.schema([pa.field("kafka", pa.int32()), pa.field("a", pa.int64()), pa.field("s", pa.large_string())])
    seeded = translator.translate(records, table_value_fields(table))
    assert seeded.rows.column("a").to_pylist() == [7] and seeded.rows.column("s").to_pylist() == ["y"]
    assert [r["kafka"]["offset"] for r in seeded.dead_letters.to_pylist()] == [0]
    assert "field 'a' is int64 in one schema and string in another" in seeded.dead_letters.column("reason")[0].as_py()
    unseeded = translator.translate(records)
    assert unseeded.rows.column("a").to_pylist() == ["x"]
    assert [r["kafka"]["offset"] for r in unseeded.dead_letters.to_pylist()] == [1]
