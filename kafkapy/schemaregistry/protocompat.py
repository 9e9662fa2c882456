"""Protobuf schemas as a table of messages and enums, and their compatibility as Confluent's registry
decides it.

Both forms a registry receives become the same `ProtoModel`: `.proto` text (parsed by
`proto-schema-parser`) and a base64 FileDescriptorProto (what confluent-kafka's ProtobufSerializer
sends). Field types are resolved to full names with protobuf's scoping rules, against the file's
own types and those of the files it imports (the schema's `references`), so a type is the same
type in both forms and an imported type is compared by its full name. A map field is a map in both
forms (a descriptor spells it as a repeated field of a nested `...Entry` message with the
map_entry option; those entry messages are not messages of the schema).

Compatibility follows Confluent's protobuf-provider `diff` package: the old schema (original) and
the new one (update) are compared message by message and field number by field number; each
difference gets Confluent's name and the change is compatible when all of them are among
Confluent's compatible ones (field added/removed/renamed, enum constants added/removed/renamed,
messages/enums/oneofs added, a single field moved into a new oneof, string<->bytes label changes).
Reserved numbers and names are kafkapy's addition, as protoc enforces them: a number or name the
old schema reserved may not be used, or un-reserved, by the new one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .errors import InvalidSchema

__all__ = ["COMPATIBLE_CHANGES", "ProtoModel", "proto_differences", "proto_incompatibilities"]

SCALARS = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
           "sfixed32", "sfixed64", "bool", "string", "bytes"}
# the scalar groups Confluent's checker lets a field move within (protobuf's "updating a message" rules)
_SCALAR_KIND = {"int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER",
                "uint64": "GENERAL_NUMBER", "bool": "GENERAL_NUMBER", "sint32": "SIGNED_NUMBER",
                "sint64": "SIGNED_NUMBER", "string": "STRING_OR_BYTES", "bytes": "STRING_OR_BYTES",
                "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64", "sfixed64": "FIXED64",
                "float": "FLOAT", "double": "DOUBLE"}

COMPATIBLE_CHANGES = frozenset([
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
    "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
])

_DESCRIPTOR_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
                     8: "bool", 9: "string", 10: "group", 11: "message", 12: "bytes", 13: "uint32", 14: "enum",
                     15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}
_DESCRIPTOR_LABELS = {1: "optional", 2: "required", 3: "repeated"}
_MAX_NUMBER = 536870911


@dataclass
class Field:
    name: str
    type: str            # a scalar, a full type name, or "map<K,V>" with K and V resolved
    label: str           # "optional" (or implicit), "required", "repeated"
    oneof: str | None = None


@dataclass
class Message:
    fields: dict[int, Field] = field(default_factory=dict)
    reserved_numbers: list[tuple[int, int]] = field(default_factory=list)  # inclusive ranges
    reserved_names: set[str] = field(default_factory=set)


@dataclass
class Enum:
    values: dict[int, str] = field(default_factory=dict)
    reserved_numbers: list[tuple[int, int]] = field(default_factory=list)
    reserved_names: set[str] = field(default_factory=set)


@dataclass
class ProtoModel:
    package: str
    syntax: str
    messages: dict[str, Message]               # this file's messages by full name (map entries excluded)
    enums: dict[str, Enum]                     # this file's enums by full name
    imported: dict[str, Message | Enum] = field(default_factory=dict)  # types of the referenced files

    def lookup(self, name: str):
        return self.messages.get(name) or self.enums.get(name) or self.imported.get(name)

    def canonical(self) -> str:
        def message(m: Message):
            return {"fields": sorted((n, f.name, f.type, f.label, f.oneof or "") for n, f in m.fields.items()),
                    "reserved": [sorted(m.reserved_numbers), sorted(m.reserved_names)]}

        def enum(e: Enum):
            return {"values": sorted(e.values.items()), "reserved": [sorted(e.reserved_numbers),
                                                                      sorted(e.reserved_names)]}

        return json.dumps({"package": self.package, "syntax": self.syntax,
                           "messages": {k: message(v) for k, v in sorted(self.messages.items())},
                           "enums": {k: enum(v) for k, v in sorted(self.enums.items())}},
                          sort_keys=True, separators=(",", ":"))


# -- building the model ------------------------------------------------------------------------

class _Builder:
    """Collects the types of a file (and of its imports), then resolves field type names."""

    def __init__(self):
        self.messages: dict[str, Message] = {}
        self.enums: dict[str, Enum] = {}
        self.map_entries: dict[str, tuple[str, str]] = {}  # entry message -> (key, value type as written)
        self.pending: list[tuple[Field, str]] = []          # fields whose type to resolve, with their scope

    def known(self, name: str) -> bool:
        return name in self.messages or name in self.enums or name in self.map_entries

    def resolve(self, name: str, scope: str) -> str:
        """protobuf's lookup: a relative name is searched from the innermost scope outwards."""
        if name in SCALARS or name.startswith("map<"):
            return name
        if name.startswith("."):
            return name[1:]
        parts = scope.split(".") if scope else []
        for i in range(len(parts), -1, -1):
            candidate = ".".join(parts[:i] + [name])
            if self.known(candidate):
                return candidate
        return name

    def finish(self, extra: dict[str, Message | Enum] | None = None) -> None:
        for f, scope in self.pending:
            if f.type.startswith("map<"):
                key, value = f.type[4:-1].split(",", 1)
                f.type = f"map<{key},{self.resolve(value, scope)}>"
                continue
            resolved = self.resolve(f.type, scope)
            if resolved in self.map_entries and f.label == "repeated":
                key, value = self.map_entries[resolved]
                f.type, f.label = f"map<{key},{self.resolve(value, resolved)}>", "repeated"
            else:
                f.type = resolved
        self.pending.clear()


def _ranges(texts, *, end_exclusive: bool = False) -> list[tuple[int, int]]:
    out = []
    for text in texts:
        if isinstance(text, tuple):
            lo, hi = text
            out.append((lo, hi - 1 if end_exclusive else hi))
            continue
        lo, _, hi = str(text).partition(" to ")
        try:
            start = int(lo.strip(), 0)
            end = start if not hi else (_MAX_NUMBER if hi.strip() == "max" else int(hi.strip(), 0))
        except ValueError:
            continue
        out.append((start, end))
    return out


def _text_file(text: str, builder: _Builder, own: bool):
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    class Raise(ErrorListener):
        def syntaxError(self, recognizer, offending, line, column, msg, e):
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
    except Exception as exc:  # noqa: BLE001 (the grammar's own errors: the text is not a .proto)
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    package = next((e.name for e in file.file_elements if isinstance(e, ast.Package)), "")
    prefix = f"{package}." if package else ""
    enum_reserved = getattr(ast, "EnumReserved", ast.Reserved)

    def enum_of(element) -> Enum:
        e = Enum()
        for item in element.elements:
            if isinstance(item, ast.EnumValue):
                e.values[item.number] = item.name
            elif isinstance(item, (ast.Reserved, enum_reserved)):
                e.reserved_numbers += _ranges(item.ranges)
                e.reserved_names.update(item.names)
        return e

    def fields_of(elements, message: Message, scope: str, oneof: str | None = None) -> None:
        for element in elements:
            if isinstance(element, ast.Field):
                label = element.cardinality.value.lower() if element.cardinality else "optional"
                f = Field(element.name, element.type, label, oneof)
                message.fields[element.number] = f
                builder.pending.append((f, scope))
            elif isinstance(element, ast.MapField):
                f = Field(element.name, f"map<{element.key_type},{element.value_type}>", "repeated", oneof)
                message.fields[element.number] = f
                builder.pending.append((f, scope))
            elif isinstance(element, ast.OneOf):
                fields_of(element.elements, message, scope, element.name)
            elif isinstance(element, ast.Reserved):
                message.reserved_numbers += _ranges(element.ranges)
                message.reserved_names.update(element.names)
            elif isinstance(element, ast.Message):
                walk(element, scope + ".")
            elif isinstance(element, ast.Enum):
                builder.enums[f"{scope}.{element.name}"] = enum_of(element)

    def walk(element, scope: str) -> None:
        name = f"{scope}{element.name}"
        message = Message()
        builder.messages[name] = message
        fields_of(element.elements, message, name)

    for element in file.file_elements:
        if isinstance(element, ast.Message):
            walk(element, prefix)
        elif isinstance(element, ast.Enum):
            builder.enums[f"{prefix}{element.name}"] = enum_of(element)
    return package, file.syntax or "proto2"


def _descriptor_file(proto, builder: _Builder):
    prefix = f"{proto.package}." if proto.package else ""

    def enum_of(enum) -> Enum:
        return Enum({v.number: v.name for v in enum.value},
                    _ranges([(r.start, r.end) for r in enum.reserved_range]), set(enum.reserved_name))

    def walk(message, scope: str) -> None:
        name = f"{scope}{message.name}"
        if message.options.map_entry:
            fields = {f.number: f for f in message.field}
            key, value = fields.get(1), fields.get(2)
            builder.map_entries[name] = (_descriptor_type(key) if key else "?", _descriptor_type(value) if value else "?")
        else:
            m = Message(reserved_numbers=_ranges([(r.start, r.end) for r in message.reserved_range],
                                                 end_exclusive=True),
                        reserved_names=set(message.reserved_name))
            builder.messages[name] = m
            for f in message.field:
                oneof = None
                if f.HasField("oneof_index") and not f.proto3_optional and f.oneof_index < len(message.oneof_decl):
                    oneof = message.oneof_decl[f.oneof_index].name
                entry = Field(f.name, _descriptor_type(f), _DESCRIPTOR_LABELS.get(f.label, "optional"), oneof)
                m.fields[f.number] = entry
                builder.pending.append((entry, name))
        for nested in message.nested_type:
            walk(nested, name + ".")
        for enum in message.enum_type:
            builder.enums[f"{name}.{enum.name}"] = enum_of(enum)

    for message in proto.message_type:
        walk(message, prefix)
    for enum in proto.enum_type:
        builder.enums[f"{prefix}{enum.name}"] = enum_of(enum)
    return proto.package, proto.syntax or "proto2"


def _descriptor_type(f) -> str:
    if f.type in (11, 14) or f.type_name:
        return "." + f.type_name.lstrip(".")
    return _DESCRIPTOR_TYPES.get(f.type, "?")


def build_model(text: str, descriptor, references) -> ProtoModel:
    """`descriptor` is a parsed FileDescriptorProto, or None for .proto `text`; `references` are
    (name, type, text) of the referenced schemas (imports), dependencies first."""
    imports = _Builder()
    for _, ref_type, ref_text in references:
        if ref_type != "PROTOBUF":
            continue
        try:
            ref_descriptor = _decode_descriptor(ref_text)
            if ref_descriptor is not None:
                _descriptor_file(ref_descriptor, imports)
            else:
                _text_file(ref_text, imports, own=False)
        except Exception:  # noqa: BLE001, S112 (a reference valid when registered: its types are left out)
            continue
    imports.finish()
    builder = _Builder()
    builder.messages.update(imports.messages)
    builder.enums.update(imports.enums)
    builder.map_entries.update(imports.map_entries)
    imported_names = set(imports.messages) | set(imports.enums)
    if descriptor is not None:
        package, syntax = _descriptor_file(descriptor, builder)
    else:
        package, syntax = _text_file(text, builder, own=True)
    builder.finish()
    own_messages = {k: v for k, v in builder.messages.items() if k not in imported_names}
    own_enums = {k: v for k, v in builder.enums.items() if k not in imported_names}
    imported = {k: v for k, v in builder.messages.items() if k in imported_names}
    imported.update({k: v for k, v in builder.enums.items() if k in imported_names})
    return ProtoModel(package, syntax, own_messages, own_enums, imported)


def _decode_descriptor(text: str):
    import base64
    import binascii

    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    stripped = text.strip()
    if "{" in stripped or ";" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(raw)
    except DecodeError as exc:
        raise InvalidSchema(f"Invalid schema: not a serialized FileDescriptorProto: {exc}") from None
    return proto


# -- comparing ---------------------------------------------------------------------------------

class _Ctx:
    def __init__(self, original: ProtoModel, update: ProtoModel):
        self.original, self.update = original, update
        self.differences: list[tuple[str, str]] = []
        self.active: set[str] = set()
        self.imported_done: dict[str, bool] = {}  # imported message -> compared compatible?

    def add(self, kind: str, path: str) -> None:
        self.differences.append((kind, path))


def proto_differences(original: ProtoModel, update: ProtoModel) -> list[tuple[str, str]]:
    ctx = _Ctx(original, update)
    if original.package != update.package:
        ctx.add("PACKAGE_CHANGED", original.package or "(none)")
    # types are compared by their name inside the package, as Confluent does (the package change is
    # reported on its own)
    o_local = {_local(n, original.package): n for n in original.messages}
    u_local = {_local(n, update.package): n for n in update.messages}
    for name in sorted(set(o_local) | set(u_local)):
        if name not in u_local:
            ctx.add("MESSAGE_REMOVED", name)
        elif name not in o_local:
            ctx.add("MESSAGE_ADDED", name)
        else:
            _compare_message(ctx, original.messages[o_local[name]], update.messages[u_local[name]], name)
    o_enums = {_local(n, original.package): n for n in original.enums}
    u_enums = {_local(n, update.package): n for n in update.enums}
    for name in sorted(set(o_enums) | set(u_enums)):
        if name not in u_enums:
            ctx.add("ENUM_REMOVED", name)
        elif name not in o_enums:
            ctx.add("ENUM_ADDED", name)
        else:
            _compare_enum(ctx, original.enums[o_enums[name]], update.enums[u_enums[name]], name)
    return ctx.differences


def proto_incompatibilities(original: ProtoModel, update: ProtoModel) -> list[str]:
    seen, out = set(), []
    for kind, path in proto_differences(original, update):
        if kind not in COMPATIBLE_CHANGES and (kind, path) not in seen:
            seen.add((kind, path))
            out.append(f"{{errorType:\"{kind}\", description:\"at '{path}' data written with the old schema may "
                       f"not be read with the new one\"}}")
    return out


def _local(name: str, package: str) -> str:
    return name[len(package) + 1:] if package and name.startswith(package + ".") else name


def _reserved(ranges: list[tuple[int, int]], number: int) -> bool:
    return any(lo <= number <= hi for lo, hi in ranges)


def _covered(lo: int, hi: int, ranges: list[tuple[int, int]]) -> bool:
    """Is every number of lo..hi inside the union of `ranges`?"""
    at = lo
    for start, end in sorted(ranges):
        if start > at:
            break
        at = max(at, end + 1)
        if at > hi:
            return True
    return at > hi


def _compare_reserved(ctx: _Ctx, original, update, numbers_in_use: dict[int, str], path: str) -> None:
    for lo, hi in original.reserved_numbers:
        if not _covered(lo, hi, update.reserved_numbers):
            ctx.add("RESERVED_NUMBER_REMOVED", f"{path}.reserved {lo} to {hi}")
    for number, name in sorted(numbers_in_use.items()):
        if _reserved(original.reserved_numbers, number):
            ctx.add("FIELD_CONFLICTS_WITH_RESERVED_NUMBER", f"{path}.{number}")
        if name in original.reserved_names:
            ctx.add("FIELD_CONFLICTS_WITH_RESERVED_NAME", f"{path}.{name}")


def _compare_enum(ctx: _Ctx, original: Enum, update: Enum, path: str) -> None:
    for number in sorted(set(original.values) | set(update.values)):
        where = f"{path}.{number}"
        if number not in update.values:
            ctx.add("ENUM_CONST_REMOVED", where)
        elif number not in original.values:
            ctx.add("ENUM_CONST_ADDED", where)
        elif original.values[number] != update.values[number]:
            ctx.add("ENUM_CONST_CHANGED", where)
    _compare_reserved(ctx, original, update, update.values, path)


def _compare_message(ctx: _Ctx, original: Message, update: Message, path: str) -> None:
    if path in ctx.active:
        return
    ctx.active.add(path)
    try:
        _compare_message_fields(ctx, original, update, path)
    finally:
        ctx.active.discard(path)


def _compare_message_fields(ctx: _Ctx, original: Message, update: Message, path: str) -> None:
    o_oneofs: dict[str, set[int]] = {}
    u_oneofs: dict[str, set[int]] = {}
    for number, f in original.fields.items():
        if f.oneof:
            o_oneofs.setdefault(f.oneof, set()).add(number)
    for number, f in update.fields.items():
        if f.oneof:
            u_oneofs.setdefault(f.oneof, set()).add(number)
    # a oneof of the new schema may take in at most one field that was outside any oneof, and
    # only when none of its fields were in a oneof before (else old data could set two of them)
    for name, numbers in sorted(u_oneofs.items()):
        moved = [n for n in numbers if n in original.fields and not original.fields[n].oneof]
        existing = [n for n in numbers if n in original.fields and original.fields[n].oneof]
        if len(moved) > 1:
            ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}.{name}")
        elif len(moved) == 1 and existing:
            ctx.add("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}.{name}")
    for name in sorted(set(o_oneofs) | set(u_oneofs)):
        where = f"{path}.{name}"
        if name not in u_oneofs:
            ctx.add("ONEOF_REMOVED", where)
        elif name not in o_oneofs:
            ctx.add("ONEOF_ADDED", where)
        else:
            for number in sorted(o_oneofs[name] | u_oneofs[name]):
                if number not in u_oneofs[name]:
                    if number not in update.fields:
                        ctx.add("ONEOF_FIELD_REMOVED", f"{where}.{number}")
                elif number not in o_oneofs[name] and number not in original.fields:
                    ctx.add("ONEOF_FIELD_ADDED", f"{where}.{number}")
    for number in sorted(set(original.fields) | set(update.fields)):
        where = f"{path}.{number}"
        old, new = original.fields.get(number), update.fields.get(number)
        if new is None:
            if old.oneof and old.oneof in u_oneofs:
                continue  # reported as ONEOF_FIELD_REMOVED above
            ctx.add("REQUIRED_FIELD_REMOVED" if old.label == "required" else "FIELD_REMOVED", where)
        elif old is None:
            if new.oneof and new.oneof in o_oneofs:
                continue  # ONEOF_FIELD_ADDED above
            ctx.add("REQUIRED_FIELD_ADDED" if new.label == "required" else "FIELD_ADDED", where)
        else:
            if old.name != new.name:
                ctx.add("FIELD_NAME_CHANGED", where)
            _compare_types(ctx, old.type, new.type, where)
            _compare_labels(ctx, old, new, where)
    _compare_reserved(ctx, original, update, {n: f.name for n, f in update.fields.items()}, path)


def _kind(ctx: _Ctx, type_name: str, original: bool) -> str:
    if type_name in SCALARS:
        return "SCALAR"
    if type_name.startswith("map<"):
        return "MAP"
    found = (ctx.original if original else ctx.update).lookup(type_name)
    return "SCALAR" if isinstance(found, Enum) else "MESSAGE"


def _scalar_kind(ctx: _Ctx, type_name: str, original: bool) -> str:
    if type_name in _SCALAR_KIND:
        return _SCALAR_KIND[type_name]
    return "GENERAL_NUMBER"  # an enum is a varint


def _compare_types(ctx: _Ctx, old: str, new: str, path: str) -> None:
    o_kind, u_kind = _kind(ctx, old, True), _kind(ctx, new, False)
    if o_kind != u_kind:
        ctx.add("FIELD_KIND_CHANGED", path)
    elif o_kind == "SCALAR":
        if _scalar_kind(ctx, old, True) != _scalar_kind(ctx, new, False):
            ctx.add("FIELD_SCALAR_KIND_CHANGED", path)
    elif o_kind == "MAP":
        o_key, o_value = old[4:-1].split(",", 1)
        u_key, u_value = new[4:-1].split(",", 1)
        _compare_types(ctx, o_key, u_key, path + ".key")
        _compare_types(ctx, o_value, u_value, path + ".value")
    elif old != new:
        ctx.add("FIELD_NAMED_TYPE_CHANGED", path)
    else:
        # the same full name: compare the message itself where it comes from another file (a
        # reference), since that file may differ between the two schemas' references
        o_type, u_type = ctx.original.imported.get(old), ctx.update.imported.get(new)
        if isinstance(o_type, Message) and isinstance(u_type, Message):
            # compared once per check: a type used by many fields (or many paths) is not walked again
            if old not in ctx.imported_done:
                before = len(ctx.differences)
                ctx.imported_done[old] = True
                _compare_message(ctx, o_type, u_type, old)
                ctx.imported_done[old] = all(kind in COMPATIBLE_CHANGES for kind, _ in ctx.differences[before:])
            if not ctx.imported_done[old]:
                ctx.add("FIELD_NAMED_TYPE_CHANGED", path)


def _compare_labels(ctx: _Ctx, old: Field, new: Field, path: str) -> None:
    if (old.label == "repeated") == (new.label == "repeated") or old.type.startswith("map<"):
        return
    if old.type in ("string", "bytes") and new.type in ("string", "bytes"):
        ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED", path)  # length-delimited either way
    elif old.type in SCALARS or _kind(ctx, old.type, True) == "SCALAR":
        ctx.add("FIELD_NUMERIC_LABEL_CHANGED", path)  # packed repeated numbers differ on the wire
