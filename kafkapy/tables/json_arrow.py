"""JSON Schema values as Arrow columns.

A value is validated against its schema (jsonschema, the draft the schema names; Draft 7 when it
names none); one that fails is a dead letter with jsonschema's message. Types: integer→int64,
number→float64, string→string, boolean→bool, object with properties→struct (properties not declared
are not kept), object with only additionalProperties→map<string, …>, array with one items schema→
list; `["T", "null"]` is a nullable T. What has no single type (no `type`, several types,
oneOf/anyOf, tuple arrays, recursive $refs, `true`) is a string column holding the JSON text of the
value. $ref resolves within the document and to the schema's references (by reference name).
"""
from __future__ import annotations

import json
from typing import Any

from .untranslatable import Untranslatable

_SIMPLE = {"integer", "number", "string", "boolean"}


class JsonDecoder:
    def __init__(self, text: str, references: dict[str, str]):
        import jsonschema
        import referencing
        import referencing.jsonschema

        self.document = json.loads(text)
        self.references = {name: json.loads(ref) for name, ref in references.items()}
        cls = jsonschema.validators.validator_for(self.document, default=jsonschema.Draft7Validator)
        resources = []
        for name, doc in self.references.items():
            resources.append((name, referencing.Resource.from_contents(
                doc, default_specification=referencing.jsonschema.DRAFT7)))
        registry = referencing.Registry().with_resources(resources)
        self.validator = cls(self.document, registry=registry)
        mapper = _Mapper(self.document, self.references)
        root, document = mapper.resolve(self.document, self.document)
        if isinstance(root, dict) and _types(root) == ["object"] and isinstance(root.get("properties"), dict):
            self._fields, self._convert = mapper.object_columns(root, document)
        else:
            kind, convert = mapper.map(self.document, self.document, "value")
            self._fields = [] if kind is None else [_field("value", kind)]
            self._convert = lambda v: {"value": _nullsafe(convert, v)}

    def fields(self, variant):
        return self._fields

    def decode(self, value: bytes, start: int):
        import jsonschema

        try:
            instance = json.loads(value[start:])
        except (ValueError, UnicodeDecodeError) as exc:
            raise Untranslatable(f"not a JSON document: {exc}") from None
        except RecursionError:
            raise Untranslatable("JSON document nested too deeply") from None
        try:
            error = jsonschema.exceptions.best_match(self.validator.iter_errors(instance))
        except RecursionError:
            raise Untranslatable("JSON document nested too deeply") from None
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise Untranslatable(f"value does not match its JSON Schema: {where + ': ' if where else ''}"
                                 f"{error.message}")
        return None, self._convert(instance)


def _field(name: str, kind):
    import pyarrow as pa

    return pa.field(name, kind, nullable=True)


def _nullsafe(convert, v):
    return v if v is None or convert is None else convert(v)


def _types(schema: dict) -> list[str]:
    kind = schema.get("type")
    if kind is None:
        if "properties" in schema or "additionalProperties" in schema:
            return ["object"]
        if "items" in schema:
            return ["array"]
        return []
    kinds = kind if isinstance(kind, list) else [kind]
    return [k for k in kinds if k != "null"]


def _json_text(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


class _Mapper:
    def __init__(self, document, references: dict[str, Any]):
        self.root = document
        self.references = references
        self.active: list[int] = []

    def resolve(self, schema, document):
        """Follow $ref (within `document` or to a reference) to the schema it names."""
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
            seen += 1
            ref = schema["$ref"]
            target, _, pointer = ref.partition("#")
            if target:
                if target not in self.references:
                    raise Untranslatable(f"$ref {ref} names no reference of the schema")
                document = self.references[target]
            schema = document
            for part in [p for p in pointer.split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(schema, list):
                    schema = schema[int(part)]
                elif isinstance(schema, dict) and part in schema:
                    schema = schema[part]
                else:
                    raise Untranslatable(f"$ref {ref} points at nothing")
        return schema, document

    def object_columns(self, schema: dict, document):
        fields, converters = [], []
        for name, sub in schema["properties"].items():
            kind, convert = self.map(sub, document, name)
            if kind is None:
                continue
            fields.append(_field(name, kind))
            converters.append((name, convert))

        def convert(v, converters=converters):
            if not isinstance(v, dict):
                return None
            return {n: (v.get(n) if c is None else _nullsafe(c, v.get(n))) for n, c in converters}
        return fields, convert

    def map(self, schema, document, where: str):
        import pyarrow as pa

        if isinstance(schema, dict) and "$ref" in schema:
            if id(schema) in self.active:
                return pa.string(), _json_text  # recursive: the value's JSON text
            self.active.append(id(schema))
            try:
                target, target_document = self.resolve(schema, document)
                return self.map(target, target_document, where)
            finally:
                self.active.pop()
        if not isinstance(schema, dict):
            return pa.string(), _json_text
        kinds = _types(schema)
        if len(kinds) != 1 or any(k in schema for k in ("oneOf", "anyOf", "not")):
            if not kinds and "enum" in schema and all(isinstance(e, str) for e in schema["enum"] if e is not None):
                return pa.string(), None
            if isinstance(schema.get("type"), (str, list)) and not kinds:
                return None, None   # type null only: no column
            return pa.string(), _json_text
        kind = kinds[0]
        if kind == "integer":
            return pa.int64(), int
        if kind == "number":
            return pa.float64(), float
        if kind == "string":
            return pa.string(), None
        if kind == "boolean":
            return pa.bool_(), None
        if kind == "object":
            properties = schema.get("properties")
            if isinstance(properties, dict) and properties:
                fields, convert = self.object_columns(schema, document)
                if fields:
                    return pa.struct(fields), convert
                return None, None
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                item, convert = self.map(extra, document, where + "{}")
                if item is not None:
                    return pa.map_(pa.string(), item), (
                        lambda v: {k: _nullsafe(convert, x) for k, x in v.items()} if isinstance(v, dict) else None)
            return pa.string(), _json_text
        if kind == "array":
            items = schema.get("items")
            if isinstance(items, dict):
                item, convert = self.map(items, document, where + "[]")
                if item is not None:
                    return pa.list_(pa.field("element", item)), (
                        lambda v: [_nullsafe(convert, x) for x in v] if isinstance(v, list) else None)
            return pa.string(), _json_text
        return pa.string(), _json_text
