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
    ("message M { oneof o { int32 a = 1; } }", "message M { int32 a = 1; }", True),            # one into a oneof
    ("message M { oneof o { int32 a = 1; int32 b = 2; } }", "message M { int32 a = 1; int32 b = 2; }", False),
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


# -- JSON Schema: Confluent's difference kinds -------------------------------------------------

OBJ = {"type": "object"}


def diffs(old: dict, new: dict) -> set[str]:
    from kafkapy.schemaregistry.jsoncompat import json_differences

    return {kind for kind, _ in json_differences(js(**old).model, js(**new).model)}


@pytest.mark.parametrize("old,new,ok,kind", [
    # open / closed / partially open content models
    (OBJ | {"properties": {"a": {"type": "string"}}}, OBJ | {"properties": {}}, True,
     "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL"),
    (OBJ | {"properties": {}}, OBJ | {"properties": {"a": {"type": "string"}}}, False,
     "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"),
    (OBJ | {"properties": {}}, OBJ | {"properties": {"a": {}}}, True,
     "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"),
    (OBJ | {"properties": {}, "additionalProperties": False}, OBJ | {"properties": {"a": {"type": "string"}},
     "additionalProperties": False}, True, "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"),
    (OBJ | {"properties": {}, "additionalProperties": False}, OBJ | {"properties": {"a": {"type": "string"}},
     "required": ["a"], "additionalProperties": False}, False, "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"),
    (OBJ | {"properties": {}, "additionalProperties": False}, OBJ | {"properties": {"a": {"type": "string",
     "default": ""}}, "required": ["a"], "additionalProperties": False}, True,
     "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"),
    (OBJ | {"properties": {"a": {"type": "string"}}, "additionalProperties": False},
     OBJ | {"properties": {}, "additionalProperties": False}, False, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
    (OBJ | {"properties": {"a": False}, "additionalProperties": False},
     OBJ | {"properties": {}, "additionalProperties": False}, True,
     "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
    (OBJ | {"properties": {}, "additionalProperties": {"type": "string"}},
     OBJ | {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}, True,
     "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"),
    (OBJ | {"properties": {}, "patternProperties": {"^s_": {"type": "string"}}},
     OBJ | {"properties": {"s_a": {"type": "integer"}}, "patternProperties": {"^s_": {"type": "string"}}}, False,
     "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"),
    (OBJ | {"properties": {"a": {"type": "string"}}}, OBJ | {"properties": {"a": {"type": "string"}},
     "patternProperties": {"^a": {"type": "string"}}}, True, None),
    # required
    (OBJ | {"properties": {"a": {"type": "string"}}}, OBJ | {"properties": {"a": {"type": "string"}},
     "required": ["a"]}, False, "REQUIRED_ATTRIBUTE_ADDED"),
    (OBJ | {"properties": {"a": {"type": "string"}}}, OBJ | {"properties": {"a": {"type": "string", "default": "x"}},
     "required": ["a"]}, True, "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"),
    (OBJ | {"properties": {"a": {}}, "required": ["a"]}, OBJ | {"properties": {"a": {}}}, True,
     "REQUIRED_ATTRIBUTE_REMOVED"),
    # types
    ({"type": "integer"}, {"type": "number"}, True, "TYPE_EXTENDED"),
    ({"type": "number"}, {"type": "integer"}, False, "TYPE_NARROWED"),
    ({"type": "string"}, {"type": "boolean"}, False, "TYPE_CHANGED"),
    ({"type": "string"}, {"type": ["string", "null"]}, True, "SUM_TYPE_EXTENDED"),
    ({"type": ["string", "null"]}, {"type": "string"}, False, "TYPE_CHANGED"),
    ({"type": "string"}, {}, True, None),
    ({}, {"type": "string"}, False, "TYPE_CHANGED"),
    # enum and const
    ({"enum": ["a"]}, {"enum": ["a", "b"]}, True, "ENUM_ARRAY_EXTENDED"),
    ({"enum": ["a", "b"]}, {"enum": ["a"]}, False, "ENUM_ARRAY_NARROWED"),
    ({"enum": ["a", "b"]}, {"enum": ["a", "c"]}, False, "ENUM_ARRAY_CHANGED"),
    ({"const": "a"}, {"enum": ["a", "b"]}, True, "ENUM_ARRAY_EXTENDED"),
    # bounds
    ({"type": "string", "maxLength": 5}, {"type": "string"}, True, "MAX_LENGTH_REMOVED"),
    ({"type": "string"}, {"type": "string", "minLength": 1}, False, "MIN_LENGTH_ADDED"),
    ({"type": "string"}, {"type": "string", "pattern": "^a"}, False, "PATTERN_ADDED"),
    ({"type": "string", "pattern": "^a"}, {"type": "string"}, True, "PATTERN_REMOVED"),
    ({"type": "number", "minimum": 0}, {"type": "number", "minimum": -1}, True, "MINIMUM_DECREASED"),
    ({"type": "number", "exclusiveMaximum": 5}, {"type": "number", "exclusiveMaximum": 4}, False,
     "EXCLUSIVE_MAXIMUM_DECREASED"),
    ({"type": "integer", "multipleOf": 4}, {"type": "integer", "multipleOf": 2}, True, "MULTIPLE_OF_REDUCED"),
    ({"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 4}, False, "MULTIPLE_OF_EXPANDED"),
    ({"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}, False, "MULTIPLE_OF_CHANGED"),
    (OBJ | {"maxProperties": 3}, OBJ | {"maxProperties": 2}, False, "MAX_PROPERTIES_DECREASED"),
    # additionalProperties
    (OBJ | {"additionalProperties": False}, OBJ, True, "ADDITIONAL_PROPERTIES_ADDED"),
    (OBJ, OBJ | {"additionalProperties": False}, False, "ADDITIONAL_PROPERTIES_REMOVED"),
    (OBJ, OBJ | {"additionalProperties": {"type": "string"}}, False, "ADDITIONAL_PROPERTIES_NARROWED"),
    (OBJ | {"additionalProperties": {"type": "string"}}, OBJ, True, "ADDITIONAL_PROPERTIES_EXTENDED"),
    # dependencies / dependentRequired
    (OBJ | {"dependencies": {"a": ["b"]}}, OBJ, True, "DEPENDENCY_ARRAY_REMOVED"),
    (OBJ, OBJ | {"dependencies": {"a": ["b"]}}, False, "DEPENDENCY_ARRAY_ADDED"),
    (OBJ | {"dependencies": {"a": ["b"]}}, OBJ | {"dependencies": {"a": ["b", "c"]}}, False,
     "DEPENDENCY_ARRAY_EXTENDED"),
    (OBJ | {"dependencies": {"a": ["b", "c"]}}, OBJ | {"dependencies": {"a": ["b"]}}, True,
     "DEPENDENCY_ARRAY_NARROWED"),
    (OBJ, OBJ | {"dependencies": {"a": {"required": ["b"]}}}, False, "DEPENDENCY_SCHEMA_ADDED"),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
      "dependentRequired": {"a": ["b"]}}, {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                           "type": "object", "dependentRequired": {"a": ["c"]}}, False,
     "DEPENDENCY_ARRAY_CHANGED"),
    # arrays
    ({"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "number"}}, True,
     "TYPE_EXTENDED"),
    ({"type": "array"}, {"type": "array", "uniqueItems": True}, False, "UNIQUE_ITEMS_ADDED"),
    ({"type": "array", "items": [{"type": "string"}]}, {"type": "array", "items": [{"type": "string"},
                                                                                  {"type": "integer"}]}, False,
     "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"),
    ({"type": "array", "items": [{"type": "string"}], "additionalItems": False},
     {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False}, True,
     "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL"),
    ({"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False},
     {"type": "array", "items": [{"type": "string"}], "additionalItems": False}, False,
     "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
    ({"type": "array", "minItems": 1}, {"type": "array", "minItems": 2}, False, "MIN_ITEMS_INCREASED"),
    # combined schemas
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string"}, {"type": "integer"},
                                                                     {"type": "boolean"}]}, True,
     "SUM_TYPE_EXTENDED"),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string"}]}, False,
     "SUM_TYPE_NARROWED"),
    ({"allOf": [{"type": "string"}, {"maxLength": 5}]}, {"allOf": [{"type": "string"}]}, True,
     "PRODUCT_TYPE_NARROWED"),
    ({"allOf": [{"type": "string"}]}, {"allOf": [{"type": "string"}, {"maxLength": 5}]}, False,
     "PRODUCT_TYPE_EXTENDED"),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"anyOf": [{"type": "string"}, {"type": "integer"}]},
     True, "COMBINED_TYPE_EXTENDED"),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string"}, {"type": "integer"}]},
     False, "COMBINED_TYPE_CHANGED"),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
     False, "COMBINED_TYPE_SUBSCHEMAS_CHANGED"),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"anyOf": [{"type": "string"}, {"type": "number"}]},
     True, "TYPE_EXTENDED"),
    # not
    ({"not": {"type": "string"}}, {"not": {"type": "string", "maxLength": 3}}, True, "NOT_TYPE_NARROWED"),
    ({"not": {"type": "string", "maxLength": 3}}, {"not": {"type": "string"}}, False, "NOT_TYPE_EXTENDED"),
    # if / then / else: the condition stays, each branch is compared
    ({"if": {"type": "string"}, "then": {"maxLength": 3}, "else": {"type": "integer"}},
     {"if": {"type": "string"}, "then": {"maxLength": 5}, "else": {"type": "number"}}, True, "MAX_LENGTH_INCREASED"),
    ({"if": {"type": "string"}, "then": {"maxLength": 5}}, {"if": {"type": "string"}, "then": {"maxLength": 3}},
     False, "MAX_LENGTH_DECREASED"),
    ({"if": {"type": "string"}, "then": {}}, {"if": {"type": "integer"}, "then": {}}, False, "TYPE_CHANGED"),
])
def test_json_confluent_differences(old, new, ok, kind):
    found = diffs(old, new)
    if kind is not None:
        assert kind in found, found
    assert compatible(js(**new), js(**old)) is ok, found


def test_json_refs_local_recursive_and_to_references():
    node = {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#"}}}
    wider = {"type": "object", "properties": {"v": {"type": "number"}, "next": {"$ref": "#"}}}
    assert compatible(js(**wider), js(**node)) and not compatible(js(**node), js(**wider))
    v1 = json.dumps({"$id": "address.json", "type": "object", "properties": {"zip": {"type": "integer"}}})
    v2 = json.dumps({"$id": "address.json", "type": "object", "properties": {"zip": {"type": "string"}}})
    person = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}})
    old = parse_schema("JSON", person, [("address.json", "JSON", v1)])
    same = parse_schema("JSON", person, [("address.json", "JSON", v1)])
    new = parse_schema("JSON", person, [("address.json", "JSON", v2)])
    assert compatible(same, old)
    assert not compatible(new, old)
    pointer = json.dumps({"type": "object", "properties": {"z": {"$ref": "https://x.example/address.json#/properties/zip"}}})
    assert not compatible(parse_schema("JSON", pointer, [("address.json", "JSON", v2)]),
                          parse_schema("JSON", pointer, [("address.json", "JSON", v1)]))


# -- Protobuf: Confluent's difference kinds -----------------------------------------------------

def pdiffs(old: str, new: str) -> set[str]:
    from kafkapy.schemaregistry.protocompat import proto_differences

    return {kind for kind, _ in proto_differences(proto(old).model, proto(new).model)}


@pytest.mark.parametrize("old,new,ok,kind", [
    # enums: constants added, removed, renamed are compatible (unknown values are kept as numbers)
    ("enum E { A = 0; B = 1; }", "enum E { A = 0; B = 1; C = 2; }", True, "ENUM_CONST_ADDED"),
    ("enum E { A = 0; B = 1; }", "enum E { A = 0; }", True, "ENUM_CONST_REMOVED"),
    ("enum E { A = 0; B = 1; }", "enum E { A = 0; BEE = 1; }", True, "ENUM_CONST_CHANGED"),
    ("enum E { A = 0; }", "enum F { A = 0; }", True, "ENUM_REMOVED"),
    # an enum field is a varint: it may become int32/bool..., not a string
    ("message M { E e = 1; } enum E { A = 0; }", "message M { int64 e = 1; } enum E { A = 0; }", True, None),
    ("message M { E e = 1; } enum E { A = 0; }", "message M { string e = 1; } enum E { A = 0; }", False,
     "FIELD_SCALAR_KIND_CHANGED"),
    # scalar groups
    ("message M { sint32 a = 1; }", "message M { sint64 a = 1; }", True, None),
    ("message M { sint32 a = 1; }", "message M { int32 a = 1; }", False, "FIELD_SCALAR_KIND_CHANGED"),
    ("message M { fixed32 a = 1; }", "message M { sfixed32 a = 1; }", True, None),
    ("message M { string a = 1; }", "message M { bytes a = 1; }", True, None),
    ("message M { float a = 1; }", "message M { double a = 1; }", False, "FIELD_SCALAR_KIND_CHANGED"),
    ("message M { int32 a = 1; }", "message M { N a = 1; } message N {}", False, "FIELD_KIND_CHANGED"),
    # labels
    ("message M { string a = 1; }", "message M { repeated string a = 1; }", True,
     "FIELD_STRING_OR_BYTES_LABEL_CHANGED"),
    ("message M { int32 a = 1; }", "message M { repeated int32 a = 1; }", False, "FIELD_NUMERIC_LABEL_CHANGED"),
    # named types, compared by full name
    ("message M { N n = 1; } message N {} message O {}", "message M { O n = 1; } message N {} message O {}", False,
     "FIELD_NAMED_TYPE_CHANGED"),
    ("message M { N n = 1; message N {} } message N {}", "message M { .p.N n = 1; message N {} } message N {}",
     False, "FIELD_NAMED_TYPE_CHANGED"),
    ("message M { N n = 1; } message N {}", "message M { p.N n = 1; } message N {}", True, None),
    # maps
    ("message M { map<string, int32> m = 1; }", "message M { map<string, int64> m = 1; }", True, None),
    ("message M { map<string, int32> m = 1; }", "message M { map<string, string> m = 1; }", False,
     "FIELD_SCALAR_KIND_CHANGED"),
    ("message M { map<string, int32> m = 1; }",
     ("message M { repeated E m = 1; message E { string key = 1; int32 value = 2; } }"), False,
     "FIELD_KIND_CHANGED"),
    # oneofs
    ("message M { int32 a = 1; }", "message M { oneof o { int32 a = 1; } }", True, "ONEOF_ADDED"),
    ("message M { oneof o { int32 a = 1; } }", "message M { oneof o { int32 a = 1; int32 b = 2; } }", True,
     "ONEOF_FIELD_ADDED"),
    ("message M { oneof o { int32 a = 1; int32 b = 2; } }", "message M { oneof o { int32 a = 1; } }", False,
     "ONEOF_FIELD_REMOVED"),
    ("message M { int32 a = 1; int32 b = 2; }", "message M { oneof o { int32 a = 1; int32 b = 2; } }", False,
     "MULTIPLE_FIELDS_MOVED_TO_ONEOF"),
    ("message M { int32 a = 1; oneof o { int32 b = 2; } }", "message M { oneof o { int32 a = 1; int32 b = 2; } }",
     False, "FIELD_MOVED_TO_EXISTING_ONEOF"),
    ("message M { oneof o { int32 a = 1; } }", "message M { int32 a = 1; }", True, "ONEOF_REMOVED"),
    # reserved numbers and names (kafkapy's rule, as protoc's)
    ("message M { reserved 2, 5 to 7; int32 a = 1; }", "message M { reserved 2, 5 to 7; int32 a = 1; }", True, None),
    ("message M { reserved 2, 5 to 7; int32 a = 1; }", "message M { reserved 2; int32 a = 1; }", False,
     "RESERVED_NUMBER_REMOVED"),
    ("message M { reserved 2, 5 to 7; int32 a = 1; }", "message M { reserved 2 to 7; int32 a = 1; }", True, None),
    ("message M { reserved 5 to max; int32 a = 1; }", "message M { int32 a = 1; int32 b = 6; }", False,
     "FIELD_CONFLICTS_WITH_RESERVED_NUMBER"),
    ('message M { reserved "b"; int32 a = 1; }', "message M { int32 a = 1; int32 b = 2; }", False,
     "FIELD_CONFLICTS_WITH_RESERVED_NAME"),
    ("enum E { reserved 3; A = 0; }", "enum E { A = 0; C = 3; }", False, "FIELD_CONFLICTS_WITH_RESERVED_NUMBER"),
    # nested types and required
    ("message M { message N { int32 a = 1; } }", "message M { message N { string a = 1; } }", False,
     "FIELD_SCALAR_KIND_CHANGED"),
    ("message M { message N {} }", "message M {}", False, "MESSAGE_REMOVED"),
])
def test_protobuf_confluent_differences(old, new, ok, kind):
    found = pdiffs(old, new)
    if kind is not None:
        assert kind in found, found
    assert compatible(proto(new), proto(old)) is ok, found


def test_protobuf_required_fields_proto2():
    def p2(body):
        return parse_schema("PROTOBUF", f'syntax = "proto2";\npackage p;\n{body}\n')

    assert not compatible(p2("message M { optional int32 a = 1; required int32 b = 2; }"),
                          p2("message M { optional int32 a = 1; }"))
    assert not compatible(p2("message M { optional int32 a = 1; }"),
                          p2("message M { optional int32 a = 1; required int32 b = 2; }"))


def _descriptor_text(file) -> str:
    import base64

    return base64.b64encode(file.SerializeToString()).decode()


def test_protobuf_descriptor_maps_and_oneofs_equal_their_text_form():
    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="m.proto", package="p", syntax="proto3")
    message = file.message_type.add(name="M")
    entry = message.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=fd.TYPE_MESSAGE, type_name=".p.V", label=fd.LABEL_OPTIONAL)
    message.field.add(name="counts", number=1, type=fd.TYPE_MESSAGE, type_name=".p.M.CountsEntry",
                      label=fd.LABEL_REPEATED)
    message.oneof_decl.add(name="choice")
    message.field.add(name="s", number=2, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL, oneof_index=0)
    message.oneof_decl.add(name="_o")  # proto3 `optional`: a synthetic oneof, not a real one
    message.field.add(name="o", number=3, type=fd.TYPE_INT32, label=fd.LABEL_OPTIONAL, oneof_index=1,
                      proto3_optional=True)
    file.message_type.add(name="V").field.add(name="x", number=1, type=fd.TYPE_INT32, label=fd.LABEL_OPTIONAL)
    encoded = parse_schema("PROTOBUF", _descriptor_text(file))
    text = proto("message M { map<string, V> counts = 1; oneof choice { string s = 2; } optional int32 o = 3; }\n"
                 "message V { int32 x = 1; }")
    assert encoded.canonical == text.canonical
    assert not pdiffs_models(encoded, text) and not pdiffs_models(text, encoded)


def pdiffs_models(a, b):
    from kafkapy.schemaregistry.protocompat import proto_differences

    return [d for d in proto_differences(a.model, b.model) if d[0] != "MESSAGE_MOVED"]


def test_protobuf_imported_types_are_compared_through_their_references():
    common_v1 = 'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; }\n'
    common_v2 = 'syntax = "proto3";\npackage common;\nmessage Money { string units = 1; }\n'
    order = ('syntax = "proto3";\npackage shop;\nimport "common.proto";\n'
             "message Order { common.Money total = 1; }\n")
    old = parse_schema("PROTOBUF", order, [("common.proto", "PROTOBUF", common_v1)])
    same = parse_schema("PROTOBUF", order, [("common.proto", "PROTOBUF", common_v1)])
    new = parse_schema("PROTOBUF", order, [("common.proto", "PROTOBUF", common_v2)])
    assert compatible(same, old)
    assert not compatible(new, old)
    assert "shop.Order" in old.model.messages and "common.Money" not in old.model.messages
    # another type of the same simple name in another package is another type
    other = ('syntax = "proto3";\npackage shop;\nimport "common.proto";\nimport "other.proto";\n'
             "message Order { other.Money total = 1; }\n")
    moved = parse_schema("PROTOBUF", other, [("common.proto", "PROTOBUF", common_v1), (
        "other.proto", "PROTOBUF", 'syntax = "proto3";\npackage other;\nmessage Money { int64 units = 1; }\n')])
    assert not compatible(moved, old)


def test_json_nested_combined_schemas_are_compared_in_bounded_time():
    import time

    def nest(depth, leaf):
        schema = leaf
        for _ in range(depth):
            schema = {"anyOf": [schema, dict(schema), {"not": schema}]}
        return schema

    old, new = js(**nest(6, {"type": "string"})), js(**nest(6, {"type": "integer"}))
    started = time.monotonic()
    problems = check_compatibility(new, old)
    assert problems and time.monotonic() - started < 10
