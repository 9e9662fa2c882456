"""Protobuf values as Arrow columns.

The registry holds a schema as .proto text or as a base64 FileDescriptorProto (what confluent-kafka's
ProtobufSerializer registers); text is parsed with proto-schema-parser (as the registry does) and
turned into a FileDescriptorProto, so both become message classes of protobuf's own descriptor pool,
with the schema's references (and google/protobuf/* well-known files) as its imports. A value names
its message by the wire format's message indexes.

Types: int32/sint32/sfixed32→int32, int64/sint64/sfixed64→int64, uint32/fixed32→int64,
uint64/fixed64→decimal128(20, 0) (Iceberg has no unsigned long), float, double, bool, string,
bytes→binary, enum→string (its name; a number the schema does not name: the number as text),
message→struct, repeated→list, map→map, google.protobuf.Timestamp→timestamp[us, UTC], the wrapper
types (google.protobuf.Int64Value…)→their nullable scalar. A field without presence (proto3 scalars)
is its value, default included; a field with presence that is not set (a message field, proto2 or
proto3 `optional`, a oneof member) is null. A recursive message is its JSON text (json_format).
"""
from __future__ import annotations

import base64
import binascii
from decimal import Decimal

from .untranslatable import Untranslatable

_SCALAR_TYPES = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7,
                 "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16,
                 "sint32": 17, "sint64": 18}
_LABELS = {"optional": 1, "required": 2, "repeated": 3}
MAIN_FILE = "kafkapy_value.proto"


def read_message_indexes(value: bytes, at: int) -> tuple[tuple[int, ...], int]:
    """Confluent's message-index list at `value[at:]`: a zig-zag varint count then zig-zag varint
    indexes; a count of 0 (the single byte 0) means [0]. Returns the indexes and the offset after."""
    def varint(at):
        result = shift = 0
        while True:
            if at >= len(value):
                raise Untranslatable("Protobuf value is truncated in its message indexes")
            byte = value[at]
            at += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1), at
            if shift > 63:
                raise Untranslatable("Protobuf message index is not a varint")

    count, at = varint(at)
    if count == 0:
        return (0,), at
    if count < 0 or count > 64:
        raise Untranslatable(f"Protobuf message index list of length {count}")
    indexes = []
    for _ in range(count):
        index, at = varint(at)
        indexes.append(index)
    return tuple(indexes), at


def file_descriptor(name: str, text: str):
    """A schema's text (.proto or base64 FileDescriptorProto) as a FileDescriptorProto."""
    from google.protobuf import descriptor_pb2

    stripped = text.strip()
    if "{" not in stripped and ";" not in stripped:
        try:
            raw = base64.b64decode(stripped, validate=True)
        except (binascii.Error, ValueError):
            raw = None
        if raw is not None:
            proto = descriptor_pb2.FileDescriptorProto()
            proto.ParseFromString(raw)
            if not proto.name:
                proto.name = name
            return proto
    return _from_text(name, text)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _from_text(name: str, text: str):
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    try:
        parsed = Parser().parse(text)
    except Exception as exc:  # noqa: BLE001 (the grammar's errors: not a .proto)
        raise Untranslatable(f"the Protobuf schema does not parse: {exc}") from None
    proto = descriptor_pb2.FileDescriptorProto(name=name, syntax=parsed.syntax or "proto2")
    if parsed.edition:
        raise Untranslatable("Protobuf editions are not supported")
    proto3 = proto.syntax == "proto3"

    def add_field(message, element, oneof_index=None):
        f = message.field.add(name=element.name, number=element.number)
        cardinality = element.cardinality.value.lower() if element.cardinality else None
        f.label = _LABELS.get(cardinality or "optional", 1)
        if element.type in _SCALAR_TYPES:
            f.type = _SCALAR_TYPES[element.type]
        else:
            f.type_name = element.type   # resolved by the pool with protobuf's scoping rules
        if oneof_index is not None:
            f.oneof_index = oneof_index
        elif proto3 and cardinality == "optional":
            f.proto3_optional = True
            message.oneof_decl.add(name=f"_{element.name}")
            f.oneof_index = len(message.oneof_decl) - 1
        return f

    def add_enum(container, element):
        enum = container.add(name=element.name)
        for item in element.elements:
            if isinstance(item, ast.EnumValue):
                enum.value.add(name=item.name, number=item.number)
        return enum

    def add_message(container, element):
        message = container.add(name=element.name)
        synthetic = []
        for item in element.elements:
            if isinstance(item, ast.Field):
                f = add_field(message, item)
                if f.proto3_optional:
                    synthetic.append(f)
            elif isinstance(item, ast.MapField):
                entry = message.nested_type.add(name=_camel(item.name) + "Entry")
                entry.options.map_entry = True
                for number, (field_name, kind) in enumerate([("key", item.key_type), ("value", item.value_type)], 1):
                    add_field(entry, ast.Field(name=field_name, number=number, type=kind))
                f = message.field.add(name=item.name, number=item.number, label=3, type_name=entry.name)
            elif isinstance(item, ast.OneOf):
                message.oneof_decl.add(name=item.name)
                index = len(message.oneof_decl) - 1
                for member in item.elements:
                    if isinstance(member, ast.Field):
                        add_field(message, member, index)
            elif isinstance(item, ast.Message):
                add_message(message.nested_type, item)
            elif isinstance(item, ast.Enum):
                add_enum(message.enum_type, item)
            elif isinstance(item, ast.Group):
                raise Untranslatable(f"message {element.name} has a group, which is not supported")
        # protoc puts the synthetic oneofs of proto3 `optional` after the real ones
        if synthetic:
            real = [o.name for o in message.oneof_decl if not any(o.name == f"_{s.name}" for s in synthetic)]
            names = real + [f"_{s.name}" for s in synthetic]
            index = {n: i for i, n in enumerate(names)}
            old = [o.name for o in message.oneof_decl]
            del message.oneof_decl[:]
            for n in names:
                message.oneof_decl.add(name=n)
            for f in message.field:
                if f.HasField("oneof_index"):
                    f.oneof_index = index[old[f.oneof_index]]
        return message

    for element in parsed.file_elements:
        if isinstance(element, ast.Package):
            proto.package = element.name
        elif isinstance(element, ast.Import):
            proto.dependency.append(element.name)
        elif isinstance(element, ast.Message):
            add_message(proto.message_type, element)
        elif isinstance(element, ast.Enum):
            add_enum(proto.enum_type, element)
    return proto


def build_pool(text: str, references: dict[str, str]):
    """A descriptor pool holding the schema (as MAIN_FILE unless it names itself) and its imports;
    returns (pool, main file's FileDescriptorProto)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    parsed = {name: file_descriptor(name, ref) for name, ref in references.items()}

    def add(proto, stack=()):
        if proto.name in added:
            return
        for dependency in proto.dependency:
            if dependency in added:
                continue
            if dependency in stack:
                raise Untranslatable(f"import cycle through {dependency}")
            if dependency in parsed:
                add(parsed[dependency], stack + (proto.name,))
            elif dependency.startswith("google/protobuf/"):
                try:
                    known = descriptor_pool.Default().FindFileByName(dependency)
                except KeyError:
                    raise Untranslatable(f"the schema imports {dependency}, which protobuf does not have") from None
                copy = descriptor_pb2.FileDescriptorProto()
                known.CopyToProto(copy)
                add(copy, stack + (proto.name,))
            else:
                raise Untranslatable(f"the schema imports {dependency}, which is not among its references")
        pool.Add(proto)
        added.add(proto.name)

    main = file_descriptor(MAIN_FILE, text)
    add(main)
    return pool, main


class ProtobufDecoder:
    def __init__(self, text: str, references: dict[str, str]):
        self.pool, main = build_pool(text, references)
        prefix = f"{main.package}." if main.package else ""
        self._top = [prefix + m.name for m in main.message_type]   # in the order message indexes count
        self._variants: dict[tuple[int, ...], tuple] = {}

    def _message(self, indexes: tuple[int, ...]):
        found = self._variants.get(indexes)
        if found is None:
            from google.protobuf import message_factory

            try:
                descriptor = self.pool.FindMessageTypeByName(self._top[indexes[0]])
                for index in indexes[1:]:
                    descriptor = descriptor.nested_types[index]
            except IndexError:
                raise Untranslatable(f"message indexes {list(indexes)} name no message of the schema") from None
            fields, convert = _Mapper().message_columns(descriptor)
            found = (message_factory.GetMessageClass(descriptor), fields, convert)
            self._variants[indexes] = found
        return found

    def fields(self, variant):
        return self._message(variant)[1]

    def decode(self, value: bytes, start: int):
        from google.protobuf.message import DecodeError

        indexes, at = read_message_indexes(value, start)
        if any(i < 0 for i in indexes):
            raise Untranslatable(f"negative message index in {list(indexes)}")
        cls, _, convert = self._message(indexes)
        message = cls()
        try:
            message.ParseFromString(value[at:])
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise Untranslatable(f"not a Protobuf {cls.DESCRIPTOR.full_name}: {exc}") from None
        return indexes, convert(message)


def _field(name: str, kind):
    import pyarrow as pa

    return pa.field(name, kind, nullable=True)


_WRAPPERS = {"google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
             "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
             "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue"}


class _Mapper:
    def __init__(self):
        self.active: list[str] = []

    def message_columns(self, descriptor):
        fields, getters = [], []
        self.active.append(descriptor.full_name)
        try:
            for f in descriptor.fields:
                kind, get = self.field(f)
                if kind is None:
                    continue
                fields.append(_field(f.name, kind))
                getters.append((f.name, get))
        finally:
            self.active.pop()

        def convert(message, getters=getters):
            return {name: get(message) for name, get in getters}
        return fields, convert

    def field(self, f):
        import pyarrow as pa

        name = f.name
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key_kind, key_value = self.single(f.message_type.fields_by_name["key"])
            item_kind, item_value = self.single(f.message_type.fields_by_name["value"])
            if item_kind is None:
                return None, None
            return pa.map_(key_kind, item_kind), lambda m: [(key_value(k), item_value(v))
                                                            for k, v in getattr(m, name).items()]
        kind, value = self.single(f)
        if kind is None:
            return None, None
        if _repeated(f):
            return pa.list_(pa.field("element", kind)), lambda m: [value(v) for v in getattr(m, name)]
        if f.has_presence:
            return kind, lambda m: value(getattr(m, name)) if m.HasField(name) else None
        return kind, lambda m: value(getattr(m, name))

    def single(self, f):
        """The Arrow type of one value of `f` and the converter of protobuf's Python value."""
        import pyarrow as pa

        t = f.type
        if t == f.TYPE_MESSAGE:
            message = f.message_type
            full = message.full_name
            if full == "google.protobuf.Timestamp":
                return pa.timestamp("us", tz="UTC"), lambda v: v.ToDatetime(tzinfo=_utc())
            if full in _WRAPPERS:
                inner, convert = self.single(message.fields_by_name["value"])
                return inner, lambda v: convert(v.value)
            if full in self.active:
                from google.protobuf import json_format
                return pa.string(), lambda v: json_format.MessageToJson(v, indent=None)
            fields, convert = self.message_columns(message)
            if not fields:
                return None, None
            return pa.struct(fields), convert
        if t == f.TYPE_ENUM:
            names = {v.number: v.name for v in f.enum_type.values}
            return pa.string(), lambda v: names.get(v, str(v))
        if t == f.TYPE_GROUP:
            raise Untranslatable(f"field {f.full_name} is a group, which is not supported")
        ident = lambda v: v  # noqa: E731
        if t in (f.TYPE_INT32, f.TYPE_SINT32, f.TYPE_SFIXED32):
            return pa.int32(), ident
        if t in (f.TYPE_INT64, f.TYPE_SINT64, f.TYPE_SFIXED64, f.TYPE_UINT32, f.TYPE_FIXED32):
            return pa.int64(), ident
        if t in (f.TYPE_UINT64, f.TYPE_FIXED64):
            return pa.decimal128(20, 0), Decimal
        if t == f.TYPE_FLOAT:
            return pa.float32(), ident
        if t == f.TYPE_DOUBLE:
            return pa.float64(), ident
        if t == f.TYPE_BOOL:
            return pa.bool_(), ident
        if t == f.TYPE_STRING:
            return pa.string(), ident
        if t == f.TYPE_BYTES:
            return pa.binary(), ident
        raise Untranslatable(f"field {f.full_name} has protobuf type {t}, which has no column type")


def _repeated(f) -> bool:
    is_repeated = getattr(f, "is_repeated", None)   # protobuf >= 6; `label` is gone in 7
    return is_repeated if is_repeated is not None else f.label == f.LABEL_REPEATED


def _utc():
    import datetime
    return datetime.timezone.utc
