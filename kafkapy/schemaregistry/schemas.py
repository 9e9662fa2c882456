"""Parsing the three schema types, their canonical forms, and their compatibility rules.

AVRO is parsed and checked by Apache's `avro` package (its ReaderWriterCompatibilityChecker is
Avro's own schema resolution); JSON Schema documents are checked with `jsonschema` (the draft the
document names) and compared with the rules of Confluent's JSON Schema compatibility checker, as
"everything the writer's schema accepts, the reader's schema accepts"; PROTOBUF comes as .proto
text (parsed by `proto-schema-parser`, a pure-Python ANTLR grammar of proto2/proto3, so no protoc
binary is needed) or as a base64 FileDescriptorProto (what confluent-kafka's ProtobufSerializer
sends; parsed by `protobuf`), and both become the same message/field table that the rules compare.

Every function raises InvalidSchema with a message for a schema that cannot be used; callers turn
it into Confluent's 42201.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["SCHEMA_TYPES", "InvalidSchema", "ParsedSchema", "check_compatibility", "parse_schema"]

SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")
MAX_SCHEMA_DEPTH = 64


class InvalidSchema(Exception):
    pass


@dataclass
class ParsedSchema:
    schema_type: str
    text: str
    canonical: str  # equal for schemas the registry treats as the same (lookup, re-registration)
    model: object = field(repr=False, default=None)  # what the compatibility rules compare

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.canonical.encode()).hexdigest()


def _depth(obj, limit: int = MAX_SCHEMA_DEPTH) -> None:
    """Refuse documents nested deeper than `limit` before recursive code walks them."""
    stack = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise InvalidSchema(f"schema is nested more than {limit} levels deep")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _json_document(text: str):
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"Invalid schema: not JSON: {exc}") from None
    _depth(document)
    return document


def parse_schema(schema_type: str, text: str, references: Sequence[tuple[str, str, str]] = ()) -> ParsedSchema:
    """Parse `text` of `schema_type`; `references` are (name, type, text) of the referenced schemas,
    dependencies first (the caller resolves them transitively)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchema("Invalid schema: empty")
    if schema_type == "AVRO":
        return _parse_avro(text, references)
    if schema_type == "JSON":
        return _parse_json(text, references)
    if schema_type == "PROTOBUF":
        return _parse_protobuf(text, references)
    raise InvalidSchema(f"Invalid schema type {schema_type}")


def check_compatibility(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why data written with `writer` cannot be read with `reader` (empty: it can)."""
    if reader.schema_type != writer.schema_type:
        return [f"Incompatible because of different schema type: {reader.schema_type} and {writer.schema_type}"]
    if reader.schema_type == "AVRO":
        return _avro_compat(reader.model, writer.model)
    if reader.schema_type == "JSON":
        from .jsoncompat import json_incompatibilities

        # Confluent's checker compares the schema data was written with (the "original") with the
        # one that reads it (the "update")
        return json_incompatibilities(writer.model, reader.model)
    return _protobuf_compat(reader.model, writer.model)


# -- AVRO ------------------------------------------------------------------------------------

def _parse_avro(text: str, references) -> ParsedSchema:
    import avro.errors
    import avro.name
    import avro.schema

    document = _json_document(text)
    names = avro.name.Names()
    try:
        for _, ref_type, ref_text in references:
            if ref_type == "AVRO":
                avro.schema.make_avsc_object(json.loads(ref_text), names)
        schema = avro.schema.make_avsc_object(document, names)
    except (avro.errors.AvroException, avro.errors.SchemaParseException, TypeError, ValueError, KeyError,
            AttributeError, RecursionError) as exc:
        raise InvalidSchema(f"Invalid schema {text[:200]}: {exc}") from None
    # Confluent compares Avro schemas by their parsed form, so whitespace and key order do not count
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return ParsedSchema("AVRO", text, canonical, schema)


def _avro_compat(reader, writer) -> list[str]:
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    messages = sorted(str(m) for m in result.messages) or ["incompatible"]
    locations = sorted(result.locations)
    kinds = sorted(str(getattr(i, "name", i)) for i in result.incompatibilities)
    return [f"{{errorType:'{', '.join(kinds)}', description:'The type (path '{', '.join(locations)}') of a field "
            f"in the new schema does not match the old schema: {', '.join(messages)}'}}"]


# -- JSON Schema -----------------------------------------------------------------------------

def _parse_json(text: str, references) -> ParsedSchema:
    import jsonschema
    import jsonschema.exceptions
    import jsonschema.validators

    document = _json_document(text)
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema(f"Invalid schema {text[:200]}: a JSON Schema is an object or a boolean")
    try:
        validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
        validator.check_schema(document)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidSchema(f"Invalid schema {text[:200]}: {exc.message}") from None
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None
    from .jsoncompat import JsonModel

    referenced = {}
    for name, ref_type, ref_text in references:
        if ref_type == "JSON":
            try:
                referenced[name] = json.loads(ref_text)
            except ValueError:
                continue
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return ParsedSchema("JSON", text, canonical, JsonModel(document, referenced))


# -- PROTOBUF --------------------------------------------------------------------------------

@dataclass
class ProtoModel:
    package: str
    # message full name -> field number -> (type, label, name)
    messages: dict[str, dict[int, tuple[str, str, str]]]
    enums: dict[str, set[int]]
    syntax: str


_SCALARS = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "bool", "string", "bytes"}
# scalar types sharing a wire encoding whose values Confluent's checker lets a field change between
_WIRE_COMPATIBLE = [{"int32", "uint32", "int64", "uint64", "bool"}, {"sint32", "sint64"},
                    {"fixed32", "sfixed32"}, {"fixed64", "sfixed64"}, {"string", "bytes"}]
_DESCRIPTOR_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
                     8: "bool", 9: "string", 10: "group", 11: "message", 12: "bytes", 13: "uint32", 14: "enum",
                     15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}
_DESCRIPTOR_LABELS = {1: "optional", 2: "required", 3: "repeated"}


def _parse_protobuf(text: str, references) -> ParsedSchema:
    stripped = text.strip()
    model = None
    if "{" not in stripped and ";" not in stripped:
        model = _proto_from_descriptor(stripped)
    if model is None:
        model = _proto_from_text(text)
    canonical = json.dumps({"package": model.package, "syntax": model.syntax,
                            "messages": {k: sorted(v.items()) for k, v in sorted(model.messages.items())},
                            "enums": {k: sorted(v) for k, v in sorted(model.enums.items())}},
                           sort_keys=True, separators=(",", ":"))
    return ParsedSchema("PROTOBUF", text, canonical, model)


def _proto_from_descriptor(text: str) -> ProtoModel | None:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(raw)
    except DecodeError as exc:
        raise InvalidSchema(f"Invalid schema: not a serialized FileDescriptorProto: {exc}") from None
    if not proto.message_type and not proto.enum_type and not proto.name:
        raise InvalidSchema("Invalid schema: empty FileDescriptorProto")
    messages: dict[str, dict] = {}
    enums: dict[str, set[int]] = {}
    prefix = f"{proto.package}." if proto.package else ""

    def walk(message, scope: str) -> None:
        name = f"{scope}{message.name}"
        messages[name] = {f.number: (_DESCRIPTOR_TYPES.get(f.type, "?") if f.type not in (11, 14)
                                     else f.type_name.lstrip("."), _DESCRIPTOR_LABELS.get(f.label, "optional"), f.name)
                          for f in message.field}
        for nested in message.nested_type:
            walk(nested, name + ".")
        for enum in message.enum_type:
            enums[f"{name}.{enum.name}"] = {v.number for v in enum.value}

    for message in proto.message_type:
        walk(message, prefix)
    for enum in proto.enum_type:
        enums[f"{prefix}{enum.name}"] = {v.number for v in enum.value}
    return ProtoModel(proto.package, messages, enums, proto.syntax or "proto2")


def _proto_from_text(text: str) -> ProtoModel:
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    class Raise(ErrorListener):
        def syntaxError(self, recognizer, offending, line, column, msg, e):  # noqa: N802 (ANTLR's name)
            raise InvalidSchema(f"Invalid schema: line {line}:{column} {msg}")

    def quiet(recognizer) -> None:
        recognizer.removeErrorListeners()
        recognizer.addErrorListener(Raise())

    try:
        file = Parser(setup_lexer=quiet, setup_parser=quiet).parse(text)
    except InvalidSchema:
        raise
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None
    except Exception as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    package = next((e.name for e in file.file_elements if isinstance(e, ast.Package)), "")
    prefix = f"{package}." if package else ""
    messages: dict[str, dict] = {}
    enums: dict[str, set[int]] = {}

    def fields_of(elements, into: dict, scope: str, in_oneof: bool = False) -> None:
        for element in elements:
            if isinstance(element, ast.Field):
                label = element.cardinality.value.lower() if element.cardinality else \
                    ("oneof" if in_oneof else "optional")
                kind = element.type if element.type in _SCALARS else "message:" + element.type.split(".")[-1]
                into[element.number] = (kind, label, element.name)
            elif isinstance(element, ast.MapField):
                into[element.number] = (f"map<{element.key_type},{element.value_type}>", "repeated", element.name)
            elif isinstance(element, ast.OneOf):
                fields_of(element.elements, into, scope, True)
            elif isinstance(element, ast.Message):
                walk(element, scope + ".")
            elif isinstance(element, ast.Enum):
                enums[f"{scope}.{element.name}"] = {v.number for v in element.elements if isinstance(v, ast.EnumValue)}

    def walk(message, scope: str) -> None:
        name = f"{scope}{message.name}"
        table: dict = {}
        messages[name] = table
        fields_of(message.elements, table, name)

    for element in file.file_elements:
        if isinstance(element, ast.Message):
            walk(element, prefix)
        elif isinstance(element, ast.Enum):
            enums[f"{prefix}{element.name}"] = {v.number for v in element.elements if isinstance(v, ast.EnumValue)}
    return ProtoModel(package, messages, enums, file.syntax or "proto2")


def _proto_kind(kind: str) -> str:
    """Descriptor type names are full names, text ones as written: compare the simple name."""
    if kind.startswith("message:"):
        return "message:" + kind.split(":", 1)[1].split(".")[-1]
    if "." in kind or kind not in _SCALARS and not kind.startswith("map<"):
        return "message:" + kind.split(".")[-1]
    return kind


def _protobuf_compat(reader: ProtoModel, writer: ProtoModel) -> list[str]:
    """Confluent's Protobuf rules: a message type removed, a field's type changed to one with another
    wire encoding, a field moved into or out of a oneof, a required field added, a package changed:
    incompatible. Fields added, removed or renamed: compatible (unknown fields are skipped)."""
    problems = []
    if reader.package != writer.package:
        problems.append(f"PACKAGE_CHANGED ({writer.package!r} to {reader.package!r})")
    for name, writer_fields in writer.messages.items():
        reader_fields = reader.messages.get(name)
        if reader_fields is None:
            problems.append(f"MESSAGE_REMOVED ({name})")
            continue
        for number, (kind, label, field_name) in writer_fields.items():
            other = reader_fields.get(number)
            if other is None:
                continue
            a, b = _proto_kind(kind), _proto_kind(other[0])
            if a != b and not any(a in group and b in group for group in _WIRE_COMPATIBLE):
                problems.append(f"FIELD_SCALAR_KIND_CHANGED ({name}.{field_name} #{number}: {a} to {b})")
            if (label == "oneof") != (other[1] == "oneof") and label != other[1]:
                problems.append(f"FIELD_MOVED_TO_OR_FROM_ONEOF ({name}.{field_name} #{number})")
        for number, (kind, label, field_name) in reader_fields.items():
            if label == "required" and number not in writer_fields:
                problems.append(f"REQUIRED_FIELD_ADDED ({name}.{field_name} #{number})")
    return problems
