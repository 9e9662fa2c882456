"""Compatibility rules of the three schema types, and what counts as the same schema."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("avro")

from kafkapy.schemaregistry.schemas import InvalidSchema, check_compatibility, parse_schema  # noqa: E402


def avro(fields, name="R"):
    return parse_schema("AVRO", json.dumps({"type": "record", "name": name, "fields": fields}))


def compatible(reader, writer) -> bool:
    return not check_compatibility(reader, writer)


INT_A = [{"name": "a", "type": "int"}]


@pytest.mark.parametrize("reader,writer,ok", [
    (INT_A + [{"name": "b", "type": "string", "default": ""}], INT_A, True),   # field added with default
    (INT_A + [{"name": "b", "type": "string"}], INT_A, False),                  # added without default
    (INT_A, INT_A + [{"name": "b", "type": "string"}], True),                   # field removed
    ([{"name": "a", "type": "long"}], INT_A, True),                             # int promoted to long
    (INT_A, [{"name": "a", "type": "long"}], False),                            # long narrowed to int
    ([{"name": "a", "type": ["null", "int"]}], INT_A, True),                    # widened to a union
    ([{"name": "a", "type": "string"}], INT_A, False),                          # type changed
])
def test_avro_resolution_rules(reader, writer, ok):
    assert compatible(avro(reader), avro(writer)) is ok


def test_avro_enum_symbols_and_names():
    e1 = parse_schema("AVRO", json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]}))
    e2 = parse_schema("AVRO", json.dumps({"type": "enum", "name": "E", "symbols": ["A"]}))
    assert compatible(e1, e2) and not compatible(e2, e1)
    assert not compatible(avro(INT_A, "X"), avro(INT_A, "Y"))


def test_avro_canonical_ignores_whitespace_and_key_order():
    a = parse_schema("AVRO", '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}')
    b = parse_schema("AVRO", '{"fields":[{"type":"int","name":"a"}],\n "name":"R","type":"record"}')
    assert a.canonical == b.canonical and a.fingerprint == b.fingerprint
    assert a.canonical != avro(INT_A + [{"name": "b", "type": "int"}]).canonical


@pytest.mark.parametrize("text", ['{"type": "nope"}', '{"type": "record", "name": "R"}', "not json", "[",
                                  '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}',
                                  "[" * 200 + "]" * 200])
def test_avro_invalid(text):
    with pytest.raises(InvalidSchema):
        parse_schema("AVRO", text)


def test_avro_references_resolve_named_types():
    address = json.dumps({"type": "record", "name": "Address", "namespace": "a", "fields": [
        {"name": "city", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "P", "namespace": "a", "fields": [
        {"name": "home", "type": "a.Address"}]})
    parse_schema("AVRO", person, [("a.Address", "AVRO", address)])
    with pytest.raises(InvalidSchema):
        parse_schema("AVRO", person)


def js(**schema):
    return parse_schema("JSON", json.dumps(schema))


@pytest.mark.parametrize("reader,writer,ok", [
    ({"type": "number"}, {"type": "integer"}, True),
    ({"type": "integer"}, {"type": "number"}, False),
    ({"type": "string"}, {"type": "integer"}, False),
    ({"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object", "properties": {}}, False),
    ({"type": "object", "properties": {"a": {"type": "string"}}},
     {"type": "object", "properties": {}, "additionalProperties": False}, True),
    ({"type": "object", "properties": {}}, {"type": "object", "properties": {"a": {"type": "string"}}}, True),
    ({"type": "object", "properties": {}, "additionalProperties": False},
     {"type": "object", "properties": {"a": {"type": "string"}}}, False),
    ({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
     {"type": "object", "properties": {"a": {"type": "string"}}}, False),
    ({"type": "string", "enum": ["x", "y"]}, {"type": "string", "enum": ["x"]}, True),
    ({"type": "string", "enum": ["x"]}, {"type": "string", "enum": ["x", "y"]}, False),
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, False),
    ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, True),
    ({"type": "array", "items": {"type": "number"}}, {"type": "array", "items": {"type": "integer"}}, True),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "string"}, True),
    ({"type": "string"}, {"oneOf": [{"type": "string"}, {"type": "integer"}]}, False),
])
def test_json_schema_rules(reader, writer, ok):
    assert compatible(js(**reader), js(**writer)) is ok


def test_json_local_refs_are_followed():
    writer = {"definitions": {"n": {"type": "integer"}}, "type": "object", "properties": {"a": {"$ref": "#/definitions/n"}}}
    reader = {"definitions": {"n": {"type": "string"}}, "type": "object", "properties": {"a": {"$ref": "#/definitions/n"}}}
    assert not compatible(js(**reader), js(**writer))
    assert compatible(js(**writer), js(**writer))


def test_json_invalid():
    for text in ('{"type": 5}', "[]", "nope", '{"minLength": -1}'):
        with pytest.raises(InvalidSchema):
            parse_schema("JSON", text)


def proto(body: str, package: str = "p"):
    return parse_schema("PROTOBUF", f'syntax = "proto3";\npackage {package};\n{body}\n')


@pytest.mark.parametrize("reader,writer,ok", [
    ("message M { int32 a = 1; string b = 2; }", "message M { int32 a = 1; }", True),          # field added
    ("message M { int32 a = 1; }", "message M { int32 a = 1; string b = 2; }", True),          # field removed
    ("message M { int32 renamed = 1; }", "message M { int32 a = 1; }", True),                  # renamed
    ("message M { int64 a = 1; }", "message M { int32 a = 1; }", True),                        # same wire type
    ("message M { string a = 1; }", "message M { int32 a = 1; }", False),                      # kind changed
    ("message N { int32 a = 1; }", "message M { int32 a = 1; }", False),                       # message removed
    ("message M { oneof o { int32 a = 1; } }", "message M { int32 a = 1; }", False),           # into a oneof
])
def test_protobuf_rules(reader, writer, ok):
    assert compatible(proto(reader), proto(writer)) is ok


def test_protobuf_package_change_and_invalid_text():
    assert not compatible(proto("message M { int32 a = 1; }", "q"), proto("message M { int32 a = 1; }"))
    for text in ("message {", "syntax = 'proto3'; message M { int32 a = ; }"):
        with pytest.raises(InvalidSchema):
            parse_schema("PROTOBUF", text)


def test_protobuf_descriptor_and_text_forms_compare_equal():
    import base64

    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto(name="m.proto", package="p", syntax="proto3")
    message = file.message_type.add(name="M")
    message.field.add(name="a", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    encoded = parse_schema("PROTOBUF", base64.b64encode(file.SerializeToString()).decode())
    text = proto("message M { int32 a = 1; }")
    assert compatible(encoded, text) and compatible(text, encoded)
    with pytest.raises(InvalidSchema):
        parse_schema("PROTOBUF", base64.b64encode(b"\xff\xff\xff").decode())


def test_different_types_are_incompatible():
    assert not compatible(parse_schema("AVRO", '"string"'), js(type="string"))
