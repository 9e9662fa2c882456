"""Avro values (decoded by fastavro) as Arrow columns.

Types: boolean, int→int32, long→int64, float, double, string, bytes and fixed→binary, enum→string,
record→struct, array→list, map→map<string, …>; logical types date→date32, time-*→time64[us],
timestamp-*→timestamp[us, UTC], local-timestamp-*→timestamp[us], decimal→decimal128 (precision
over 38: its text), uuid→string. A union [null, T] (either order) is a nullable T; any other union
is a struct with one field per branch, named by the branch's type (`int`, `string`, a record's
short name…), of which the value's branch is set and the others are null (as Redpanda does). A
field of type `null` (or an empty record) has no column: there is nothing to hold. A recursive type
cannot be a column type: its schema's values become dead letters.
"""
from __future__ import annotations

import io
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from .untranslatable import Untranslatable

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
Convert = Callable[[Any], Any] | None   # None: fastavro's value is already what Arrow takes


class AvroDecoder:
    def __init__(self, text: str, references: dict[str, str]):
        import fastavro

        named: dict = {}
        pending = list(references.values())
        # references are dependencies-first, but a parse in any order that converges is as good
        for _ in range(len(pending) + 1):
            failed = []
            for ref in pending:
                try:
                    fastavro.parse_schema(json.loads(ref), named_schemas=named)
                except Exception:  # noqa: BLE001 (retried once what it names is known)
                    failed.append(ref)
            if not failed or len(failed) == len(pending):
                break
            pending = failed
        self.schema = fastavro.parse_schema(json.loads(text), named_schemas=named)
        self.named = named
        self._reader = fastavro.schemaless_reader
        root = self._resolve(self.schema)
        if isinstance(root, dict) and root.get("type") in ("record", "error"):
            self._fields, convert = _Mapper(named).record_columns(root)
            self._convert = convert or (lambda v: v)
        else:
            kind, convert = _Mapper(named).map(self.schema, "value")
            self._fields = [] if kind is None else [_field("value", kind)]
            self._convert = (lambda v: {"value": v}) if convert is None else (lambda v: {"value": convert(v)})

    def _resolve(self, schema):
        while isinstance(schema, str) and schema in self.named:
            schema = self.named[schema]
        return schema

    def fields(self, variant):
        return self._fields

    def decode(self, value: bytes, start: int):
        buffer = io.BytesIO(value)
        buffer.seek(start)
        try:
            decoded = self._reader(buffer, self.schema, None, return_named_type=True)
        except (EOFError, StopIteration):
            raise Untranslatable("Avro value is truncated") from None
        except RecursionError:
            raise Untranslatable("Avro value is nested too deeply") from None
        except (ValueError, IndexError, KeyError, TypeError, UnicodeDecodeError, OverflowError,
                MemoryError) as exc:
            raise Untranslatable(f"not an Avro value of schema: {type(exc).__name__}: {exc}") from None
        left = len(value) - buffer.tell()
        if left:
            raise Untranslatable(f"{left} bytes left after the Avro value: written with another schema?")
        return None, self._convert(decoded)


def _field(name: str, kind):
    import pyarrow as pa

    return pa.field(name, kind, nullable=True)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Mapper:
    """Avro schema → (Arrow type or None for no column, converter of fastavro's value)."""

    def __init__(self, named: dict):
        self.named = named
        self.active: list[str] = []

    def record_columns(self, record: dict):
        fields, converters = [], []
        name = record.get("name", "")
        self.active.append(name)
        try:
            for f in record["fields"]:
                kind, convert = self.map(f["type"], f["name"])
                if kind is None:
                    continue
                fields.append(_field(f["name"], kind))
                converters.append((f["name"], convert))
        finally:
            self.active.pop()
        if all(c is None for _, c in converters):
            return fields, None   # Arrow takes fastavro's dict as it is (and ignores keys without a column)

        def convert(v, converters=converters):
            return {n: (v.get(n) if c is None else _nullsafe(c, v.get(n))) for n, c in converters}
        return fields, convert

    def map(self, schema, where: str):
        import pyarrow as pa

        if isinstance(schema, list):
            return self._union(schema, where)
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _primitive(schema)
            if schema in self.active:
                raise Untranslatable(f"field '{where}' has the recursive type {schema}, which a table column "
                                     "cannot hold")
            if schema not in self.named:
                raise Untranslatable(f"field '{where}' names the unknown type {schema}")
            return self.map(self.named[schema], where)
        kind = schema.get("type")
        logical = schema.get("logicalType")
        if logical is not None:
            mapped = _logical(schema, kind, logical)
            if mapped is not None:
                return mapped
        if isinstance(kind, (list, dict)):
            return self.map(kind, where)
        if kind in _PRIMITIVES:
            return _primitive(kind)
        if kind in ("record", "error"):
            fields, convert = self.record_columns(schema)
            if not fields:
                return None, None
            return pa.struct(fields), convert
        if kind == "enum":
            return pa.string(), None
        if kind == "fixed":
            return pa.binary(), None
        if kind == "array":
            item, convert = self.map(schema["items"], where + "[]")
            if item is None:
                return None, None
            kind = pa.list_(pa.field("element", item))
            return kind, None if convert is None else (lambda v: [_nullsafe(convert, x) for x in v])
        if kind == "map":
            item, convert = self.map(schema["values"], where + "{}")
            if item is None:
                return None, None
            kind = pa.map_(pa.string(), item)
            return kind, None if convert is None else (lambda v: {k: _nullsafe(convert, x) for k, x in v.items()})
        if isinstance(kind, str) and kind in self.named:
            return self.map(kind, where)
        raise Untranslatable(f"field '{where}' has the Avro type {kind!r}, which has no column type")

    def _union(self, branches: list, where: str):
        import pyarrow as pa

        others = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        if not others:
            return None, None
        if len(others) == 1:
            kind, convert = self.map(others[0], where)
            if kind is None:
                return None, None
            named = _named(others[0], self.named)
            if named is None:
                return kind, convert
            # return_named_type gives a named branch's value as (name, value)
            return kind, (lambda v: v[1]) if convert is None else (lambda v: convert(v[1]))
        fields, choices = [], []
        taken: set[str] = set()
        for branch in others:
            kind, convert = self.map(branch, where)
            name = _branch_name(branch, self.named)
            base, n = name, 1
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            taken.add(name)
            if kind is None:
                continue
            fields.append(_field(name, kind))
            choices.append((name, _named(branch, self.named), _accepts(branch, self.named), convert))

        def convert_union(v):
            if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
                for name, full, _, convert in choices:
                    if full == v[0]:
                        return {name: _nullsafe(convert, v[1])}
            for name, full, accepts, convert in choices:
                if full is None and accepts(v):
                    return {name: _nullsafe(convert, v)}
            raise Untranslatable(f"field '{where}': a value of no branch of its union")
        return pa.struct(fields), convert_union


def _nullsafe(convert, v):
    return v if v is None or convert is None else convert(v)


def _primitive(name: str):
    import pyarrow as pa

    return {"null": (None, None), "boolean": (pa.bool_(), None), "int": (pa.int32(), None),
            "long": (pa.int64(), None), "float": (pa.float32(), None), "double": (pa.float64(), None),
            "bytes": (pa.binary(), None), "string": (pa.string(), None)}[name]


def _logical(schema: dict, kind, logical: str):
    import pyarrow as pa

    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema.get("precision", 0)), int(schema.get("scale", 0))
        if 0 < precision <= 38:
            return pa.decimal128(precision, scale), None
        return pa.string(), lambda v: str(v)
    if logical == "uuid" and kind == "string":
        return pa.string(), lambda v: str(v)
    if logical == "date" and kind == "int":
        return pa.date32(), None
    if logical in ("time-millis", "time-micros") and kind in ("int", "long"):
        return pa.time64("us"), None
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return pa.timestamp("us", tz="UTC"), None
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return pa.timestamp("us"), None
    return None   # an unknown logical type is its underlying type, as Avro says


def _named(branch, named: dict) -> str | None:
    """The full name of a named branch (record, enum, fixed), else None."""
    if isinstance(branch, str):
        return branch if branch not in _PRIMITIVES else None
    if isinstance(branch, dict) and branch.get("type") in ("record", "error", "enum", "fixed"):
        return branch.get("name")
    return None


def _branch_name(branch, named: dict) -> str:
    full = _named(branch, named)
    if full is not None:
        return _short(full)
    if isinstance(branch, str):
        return branch
    kind = branch.get("type")
    return kind if isinstance(kind, str) else "branch"


def _accepts(branch, named: dict) -> Callable[[Any], bool]:
    """Does fastavro's value (an unnamed branch's) belong to `branch`? First match wins, as fastavro's
    writer picks the first branch a value fits."""
    import datetime

    kind = branch if isinstance(branch, str) else branch.get("type")
    logical = None if isinstance(branch, str) else branch.get("logicalType")
    if logical == "decimal":
        return lambda v: isinstance(v, Decimal)
    if logical == "date":
        return lambda v: isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)
    if logical and logical.startswith(("timestamp", "local-timestamp")):
        return lambda v: isinstance(v, datetime.datetime)
    if logical and logical.startswith("time-"):
        return lambda v: isinstance(v, datetime.time)
    if logical == "uuid":
        import uuid
        return lambda v: isinstance(v, uuid.UUID)
    return {
        "boolean": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool) and -2**31 <= v < 2**31,
        "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, float),
        "double": lambda v: isinstance(v, float),
        "bytes": lambda v: isinstance(v, bytes),
        "string": lambda v: isinstance(v, str),
        "array": lambda v: isinstance(v, list),
        "map": lambda v: isinstance(v, dict),
    }.get(kind, lambda v: False)
