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

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from .errors import InvalidSchema  # still importable from here

__all__ = ["SCHEMA_TYPES", "InvalidSchema", "ParsedSchema", "check_compatibility", "parse_schema"]

SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")
MAX_SCHEMA_DEPTH = 64


@dataclass
class ParsedSchema:
    schema_type: str
    text: str
    canonical: str  # equal for schemas the registry treats as the same (lookup, re-registration)
    model: object = field(repr=False, default=None)  # what the compatibility rules compare
    # the text stored when the schema is registered with `normalize` (Confluent's normalized form)
    normalized: str | None = field(repr=False, default=None)

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
    from .protocompat import proto_incompatibilities

    return proto_incompatibilities(writer.model, reader.model)


# -- AVRO ------------------------------------------------------------------------------------

def _parse_avro(text: str, references) -> ParsedSchema:
    import avro.errors
    import avro.name
    import avro.schema

    document = _json_document(text)
    names = avro.name.Names()
    referenced = avro.name.Names()  # the referenced types only: written by name in the normal form
    try:
        for _, ref_type, ref_text in references:
            if ref_type == "AVRO":
                avro.schema.make_avsc_object(json.loads(ref_text), names)
                avro.schema.make_avsc_object(json.loads(ref_text), referenced)
        schema = avro.schema.make_avsc_object(document, names)
        form = schema.to_json(referenced)
    except (avro.errors.AvroException, avro.errors.SchemaParseException, TypeError, ValueError, KeyError,
            AttributeError, RecursionError) as exc:
        raise InvalidSchema(f"Invalid schema {text[:200]}: {exc}") from None
    # Confluent compares Avro schemas by their parsed form (Avro's own JSON writing of it), so white
    # space, key order, `{"type": "int"}` for `"int"` and `namespace` + `name` for a full name do not
    # count; that form is also what `normalize` stores
    canonical = json.dumps(form, sort_keys=True, separators=(",", ":"))
    return ParsedSchema("AVRO", text, canonical, schema, json.dumps(form, separators=(",", ":")))


def _avro_compat(reader, writer) -> list[str]:
    from avro.compatibility import (
        ReaderWriterCompatibilityChecker,
        SchemaCompatibilityType,
    )

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
    return ParsedSchema("JSON", text, canonical, JsonModel(document, referenced), canonical)


# -- PROTOBUF --------------------------------------------------------------------------------

def _parse_protobuf(text: str, references) -> ParsedSchema:
    from .protocompat import _decode_descriptor, build_model

    descriptor = _decode_descriptor(text)
    if descriptor is not None and not descriptor.message_type and not descriptor.enum_type and not descriptor.name:
        raise InvalidSchema("Invalid schema: empty FileDescriptorProto")
    model = build_model(text, descriptor, references)
    return ParsedSchema("PROTOBUF", text, model.canonical(), model)
