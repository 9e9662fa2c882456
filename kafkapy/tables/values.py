"""Kafka records as Arrow rows for a topic's Iceberg table: the `kafka` metadata column, raw key/value
rows, and values in Confluent's wire format decoded through the registry's schemas into typed columns.

The layout (docs/tables.md): every row has a required `kafka` struct (partition, offset, timestamp,
key, headers); `key_value` mode adds `value binary`; `value_schema_id_prefix` mode adds the value's
top-level fields as nullable columns (every nested field nullable too, so a schema that adds an
optional field only adds a column). What cannot become a row becomes a dead-letter row (`kafka`,
`value`, `reason`): `translate` never raises and never drops a record.

Confluent's wire format is magic byte 0, a 4-byte big-endian schema id, then the Avro binary value,
the JSON document, or (Protobuf) a list of message indexes (zig-zag varints, count first; a single
0 byte for [0]) and the serialized message. The formats live in avro_arrow, json_arrow and
proto_arrow; each compiles a registry schema into a `ValueDecoder` once, and the translator merges
the column types of all the schemas one call meets (fields by name; int→long and float→double
widen; any other difference makes the later schema's records dead letters naming the field).

Choices where Kafka/Iceberg give no answer (docs/tables.md lists them): a value whose schema is not
a record/message/object is one column `value`; a null value (a tombstone) is a row whose value
columns are all null; a field of Avro type `null` (or an empty record) has no column.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .untranslatable import Untranslatable

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Records", "SchemaText", "Translated", "ValueTranslator", "dead_letter_schema", "kafka_struct_type",
           "key_value_rows"]

RESERVED_COLUMN = "kafka"


@dataclass(frozen=True)
class SchemaText:
    """One registry schema, as the registry stores it."""
    schema_type: str             # "AVRO" | "PROTOBUF" | "JSON"
    schema: str
    references: dict[str, str]   # import name / reference name → referenced schema text (resolved, transitive)


@dataclass
class Records:
    """Decoded records of one partition, in offset order (columns)."""
    partition: int
    offsets: list[int]
    timestamps_ms: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[tuple[str, bytes | None]] | None]


@dataclass
class Translated:
    rows: pa.Table          # `kafka` + value columns (nullable, no field ids)
    dead_letters: pa.Table  # `kafka` + value binary + reason string


class ValueDecoder(Protocol):
    """A registry schema compiled for decoding (one per schema id)."""

    def decode(self, value: bytes, start: int) -> tuple[Any, dict]:
        """The value's variant (Protobuf: the message; else None) and its columns as Python values,
        from `value[start:]` (after magic byte and schema id). Raises Untranslatable."""

    def fields(self, variant: Any) -> list[pa.Field]:
        """The Arrow columns of `variant` (all nullable)."""


# -- the shared layout -----------------------------------------------------------------------------

def kafka_struct_type() -> pa.DataType:
    """The `kafka` column's type, shared by both modes and the dead-letter table."""
    import pyarrow as pa

    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.struct([
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("headers", pa.list_(pa.field("element", header))),
    ])


def dead_letter_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(RESERVED_COLUMN, kafka_struct_type(), nullable=False),
                      pa.field("value", pa.binary()), pa.field("reason", pa.string(), nullable=False)])


def _kafka_column(records: Records, picked: list[int] | None = None) -> pa.StructArray:
    import pyarrow as pa

    def take(column):
        return column if picked is None else [column[i] for i in picked]

    kind = kafka_struct_type()
    count = len(records.offsets) if picked is None else len(picked)
    headers = take(records.headers)
    # headers arrive as (key, value) tuples; Arrow's struct conversion wants mappings
    headers = [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers]
    children = [
        pa.array([records.partition] * count, pa.int32()),
        pa.array(take(records.offsets), pa.int64()),
        pa.array([t * 1000 for t in take(records.timestamps_ms)], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array(take(records.keys), pa.binary()),
        pa.array(headers, kind.field("headers").type),
    ]
    return pa.StructArray.from_arrays(children, fields=list(kind))


def key_value_rows(records: Records) -> pa.Table:
    """`key_value` mode: the `kafka` column and the raw value (null for a tombstone)."""
    import pyarrow as pa

    schema = pa.schema([pa.field(RESERVED_COLUMN, kafka_struct_type(), nullable=False),
                        pa.field("value", pa.binary())])
    return pa.Table.from_arrays([_kafka_column(records), pa.array(records.values, pa.binary())], schema=schema)


def _dead_letters(records: Records, reasons: dict[int, str]) -> pa.Table:
    import pyarrow as pa

    picked = sorted(reasons)
    return pa.Table.from_arrays(
        [_kafka_column(records, picked), pa.array([records.values[i] for i in picked], pa.binary()),
         pa.array([reasons[i] for i in picked], pa.string())], schema=dead_letter_schema())


# -- merging column types across schemas ------------------------------------------------------------

class TypeConflict(Exception):
    pass


def merge_types(a: pa.DataType, b: pa.DataType, path: str) -> pa.DataType:
    """The type holding values of `a` and `b`: what Iceberg's schema evolution allows (a struct gains
    fields, int→long, float→double, a decimal's precision grows), else TypeConflict naming the path."""
    import pyarrow as pa

    if a.equals(b):
        return a
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return pa.struct(merge_fields(list(a), list(b), path + "."))
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(a.value_field.with_type(merge_types(a.value_type, b.value_type, path + "[]")))
    if pa.types.is_map(a) and pa.types.is_map(b) and a.key_type.equals(b.key_type):
        return pa.map_(a.key_type, merge_types(a.item_type, b.item_type, path + "{}"))
    widen = {(pa.int32(), pa.int64()), (pa.float32(), pa.float64())}
    for narrow, wide in widen:
        if {str(a), str(b)} == {str(narrow), str(wide)}:
            return wide
    if pa.types.is_decimal(a) and pa.types.is_decimal(b) and a.scale == b.scale:
        return pa.decimal128(max(a.precision, b.precision), a.scale)
    raise TypeConflict(f"field '{path}' is {a} in one schema and {b} in another")


def merge_fields(a: list[pa.Field], b: list[pa.Field], prefix: str = "") -> list[pa.Field]:
    out = {f.name: f for f in a}
    for f in b:
        known = out.get(f.name)
        out[f.name] = f if known is None else known.with_type(merge_types(known.type, f.type, prefix + f.name))
    return list(out.values())


def table_value_fields(schema: pa.Schema) -> list[pa.Field]:
    """A table's value columns (pyiceberg's Arrow schema of it) in the types the decoders give, for
    `ValueTranslator.translate`: pyiceberg reads strings, binaries and lists as their large_ kinds."""
    return [f.with_type(_decoder_type(f.type)) for f in schema if f.name != RESERVED_COLUMN]


def _decoder_type(kind: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    if pa.types.is_large_string(kind):
        return pa.string()
    if pa.types.is_large_binary(kind):
        return pa.binary()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(pa.field(kind.value_field.name, _decoder_type(kind.value_type)))
    if pa.types.is_map(kind):
        return pa.map_(_decoder_type(kind.key_type), _decoder_type(kind.item_type))
    if pa.types.is_struct(kind):
        return pa.struct([kind.field(i).with_type(_decoder_type(kind.field(i).type)) for i in range(kind.num_fields)])
    return kind


# -- the translator ---------------------------------------------------------------------------------

_HEADER = struct.Struct(">bI")


def compile_schema(text: SchemaText) -> ValueDecoder:
    """A registry schema as a ValueDecoder; Untranslatable when it cannot give columns."""
    if text.schema_type == "AVRO":
        from .avro_arrow import AvroDecoder
        return AvroDecoder(text.schema, text.references)
    if text.schema_type == "JSON":
        from .json_arrow import JsonDecoder
        return JsonDecoder(text.schema, text.references)
    if text.schema_type == "PROTOBUF":
        from .proto_arrow import ProtobufDecoder
        return ProtobufDecoder(text.schema, text.references)
    raise Untranslatable(f"schema type {text.schema_type!r} is not AVRO, PROTOBUF or JSON")


def check_columns(fields: list[pa.Field], schema_id: int) -> None:
    for f in fields:
        if f.name == RESERVED_COLUMN:
            raise Untranslatable(f"schema {schema_id} has a top-level field named '{RESERVED_COLUMN}', the "
                                 f"table's record metadata column")


class ValueTranslator:
    """Values in Confluent's wire format → typed rows and dead letters (`value_schema_id_prefix`)."""

    def __init__(self, schemas: Callable[[int], SchemaText | None]):
        self._schemas = schemas
        self._decoders: dict[int, ValueDecoder | str] = {}  # schema id → decoder, or why there is none
        self._fields: dict[tuple[int, Any], list[pa.Field] | str] = {}

    def _decoder(self, schema_id: int) -> ValueDecoder | str:
        found = self._decoders.get(schema_id)
        if found is not None:
            return found
        try:
            text = self._schemas(schema_id)
        except Exception as exc:  # noqa: BLE001 (the caller's lookup failing is this record's reason)
            return f"schema {schema_id} could not be read: {type(exc).__name__}: {exc}"
        if text is None:
            return f"unknown schema id {schema_id}"  # not cached: the registry may learn it later
        try:
            decoder: ValueDecoder | str = compile_schema(text)
        except Untranslatable as exc:
            decoder = f"schema {schema_id}: {exc}"
        except Exception as exc:  # noqa: BLE001 (a schema a library cannot read is a reason, not a crash)
            decoder = f"schema {schema_id} ({text.schema_type}) cannot be used: {type(exc).__name__}: {exc}"
        self._decoders[schema_id] = decoder
        return decoder

    def _variant_fields(self, schema_id: int, decoder: ValueDecoder, variant: Any) -> list[pa.Field] | str:
        key = (schema_id, variant)
        found = self._fields.get(key)
        if found is None:
            try:
                found = decoder.fields(variant)
                check_columns(found, schema_id)
            except Untranslatable as exc:
                found = str(exc)
            except Exception as exc:  # noqa: BLE001
                found = f"schema {schema_id}: {type(exc).__name__}: {exc}"
            self._fields[key] = found
        return found

    def translate(self, records: Records, table_fields: list[pa.Field] | None = None) -> Translated:
        """`table_fields`: the table's value columns now (see `table_value_fields`). A schema whose
        columns conflict with them is refused, and one they can take is kept, whatever the order
        in which the schemas come in this call."""
        try:
            return self._translate(records, table_fields or [])
        except Exception as exc:  # noqa: BLE001 (last resort: every record a dead letter, none lost)
            reason = f"translation failed: {type(exc).__name__}: {_one_line(str(exc))}"
            return Translated(self._rows(records, [], [], []), _dead_letters(
                records, {i: reason for i in range(len(records.offsets))}))

    def _translate(self, records: Records, table_fields: list[pa.Field]) -> Translated:
        reasons: dict[int, str] = {}
        decoded: list[tuple[int, tuple[int, Any] | None, dict]] = []   # index, (schema id, variant), columns
        for i, value in enumerate(records.values):
            if value is None:
                decoded.append((i, None, {}))
                continue
            try:
                if len(value) < 5:
                    raise Untranslatable(f"value of {len(value)} bytes is shorter than the wire format's "
                                         "5-byte header")
                magic, schema_id = _HEADER.unpack_from(value)
                if magic != 0:
                    raise Untranslatable(f"magic byte {magic}, not 0: not in Confluent's wire format")
                decoder = self._decoder(schema_id)
                if isinstance(decoder, str):
                    raise Untranslatable(decoder)
                variant, columns = decoder.decode(value, 5)
                fields = self._variant_fields(schema_id, decoder, variant)
                if isinstance(fields, str):
                    raise Untranslatable(fields)
                decoded.append((i, (schema_id, variant), columns))
            except Untranslatable as exc:
                reasons[i] = _one_line(str(exc))
            except Exception as exc:  # noqa: BLE001 (a decoder library's error on bad bytes)
                reasons[i] = _one_line(f"cannot decode value: {type(exc).__name__}: {exc}")
        # one column type per name over the table's columns and every schema met, in order of first
        # use: a schema conflicting with the table is refused even when it comes first in the call
        merged: list[pa.Field] = []
        known: list[pa.Field] = list(table_fields)
        refused: dict[tuple[int, Any], str] = {}
        for key in dict.fromkeys(key for _, key, _ in decoded if key is not None):
            fields = self._fields[key]
            try:
                known, merged = merge_fields(known, fields), merge_fields(merged, fields)
            except TypeConflict as exc:
                refused[key] = f"schema {key[0]}: {exc}, which this table cannot hold in one column"
        kept = []
        for i, key, columns in decoded:
            if key in refused:
                reasons[i] = refused[key]
            else:
                kept.append((i, columns))
        kept_index, kept_columns = self._fit(kept, merged, reasons)
        return Translated(self._rows(records, kept_index, kept_columns, merged),
                          _dead_letters(records, reasons))

    @staticmethod
    def _fit(kept, merged, reasons):
        """The kept values as Arrow struct values; a value Arrow refuses (an integer that overflows its
        column, say) becomes a dead letter rather than failing the batch."""
        import pyarrow as pa

        kind = pa.struct(merged)
        try:
            return [i for i, _ in kept], pa.array([c for _, c in kept], kind)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass
        index, good = [], []
        for i, columns in kept:
            try:
                pa.array([columns], kind)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                reasons[i] = _one_line(f"value does not fit its column types: {type(exc).__name__}: {exc}")
                continue
            index.append(i)
            good.append(columns)
        return index, pa.array(good, kind)

    @staticmethod
    def _rows(records: Records, index: list[int], values, merged: list[pa.Field]) -> pa.Table:
        import pyarrow as pa

        kafka = _kafka_column(records, index)
        arrays = [kafka] + ([values.field(f.name) for f in merged] if len(merged) else [])
        schema = pa.schema([pa.field(RESERVED_COLUMN, kafka_struct_type(), nullable=False)] +
                           [f.with_nullable(True) for f in merged])
        return pa.Table.from_arrays(arrays, schema=schema)


def _one_line(text: str, limit: int = 500) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."
