#!/usr/bin/env python3
"""Generate kafkapy's message codecs and error codes from Kafka's protocol specs.

Reads the JSON message specs, apis.tsv and errors.tsv under the spec directory (default
`../shared/kafka-protocol-3.9`, relative to the repository root) and writes:

- `kafkapy/protocol/messages/<api>.py`: one module per API served to clients (request listeners
  include "broker"), with a class per request, response and nested struct (`__slots__` and a
  generated `__init__`; equality and repr come from `primitives.GeneratedStruct`) and
  straight-line decode/encode functions per version;
- `kafkapy/protocol/messages/__init__.py`: re-exports, REQUEST_TYPES and RESPONSE_TYPES;
- `kafkapy/protocol/error_codes.py`: the ErrorCode IntEnum and the RETRIABLE set.

Usage: python tools/genprotocol.py [--spec-dir DIR] [--out-dir DIR]
(--out-dir is the `kafkapy/protocol` directory to write into; the test that checks the committed
package is current points it at a temporary directory.)
"""
from __future__ import annotations

import argparse
import csv
import json
import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC_DIR = REPO_ROOT / ".." / "shared" / "kafka-protocol-3.9"
DEFAULT_OUT_DIR = REPO_ROOT / "kafkapy" / "protocol"

# the code generation helpers live next to this script
sys.path.insert(0, str(Path(__file__).resolve().parent))
from genprotocol_codecs import DecodeGen, EncodeGen  # noqa: E402
from genprotocol_codegen import FIXED_FORMATS, FN, Code, default_literal  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Schema model
# ---------------------------------------------------------------------------------------------

NO_VERSIONS = (1, 0)   # an empty range
MAX_VERSION = 0x7FFF

PRIMITIVES = set(FIXED_FORMATS) | {"string", "bytes", "records"}


def parse_versions(text: str | None) -> tuple[int, int]:
    """Kafka's version-range grammar: "N+", "N-M", "N" or "none"."""
    if text is None or text.strip() in ("", "none"):
        return NO_VERSIONS
    text = text.strip()
    if text.endswith("+"):
        return int(text[:-1]), MAX_VERSION
    if "-" in text:
        lo, hi = text.split("-")
        return int(lo), int(hi)
    return int(text), int(text)


def version_text(versions: tuple[int, int]) -> str:
    """A version range in Kafka's grammar (the inverse of parse_versions)."""
    lo, hi = versions
    if lo > hi:
        return "none"
    if hi == MAX_VERSION:
        return f"{lo}+"
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def in_range(versions: tuple[int, int], version: int) -> bool:
    return versions[0] <= version <= versions[1]


def snake_case(name: str) -> str:
    """Kafka JSON name -> Python attribute name (the contract's rule)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@dataclass
class FieldSpec:
    """One field of a message or struct, as the JSON spec describes it."""

    name: str
    attr: str
    type: str                       # element type: a primitive name or a struct name
    is_array: bool
    versions: tuple[int, int]
    nullable_versions: tuple[int, int]
    tagged_versions: tuple[int, int]
    tag: int | None
    default: object                 # raw JSON default (None when absent)
    flexible_versions: tuple[int, int] | None   # per-field override (only RequestHeader.ClientId)
    struct: StructSpec | None = None

    def present(self, version: int) -> bool:
        return in_range(self.versions, version)

    def nullable(self, version: int) -> bool:
        return in_range(self.nullable_versions, version)

    def tagged(self, version: int) -> bool:
        return self.tag is not None and in_range(self.tagged_versions, version)

    def compact(self, version: int, flexible: bool) -> bool:
        if self.flexible_versions is not None:
            return flexible and in_range(self.flexible_versions, version)
        return flexible

    @property
    def is_fixed(self) -> bool:
        return not self.is_array and self.type in FIXED_FORMATS

    @property
    def is_struct(self) -> bool:
        return self.struct is not None


@dataclass
class StructSpec:
    """A struct: the message body itself, an inline `fields` block, or a commonStruct."""

    name: str                       # Python class name
    kafka_name: str
    fields: list[FieldSpec]
    source: str = ""                # canonical JSON of the fields, to detect same-name clashes


@dataclass
class MessageSpec:
    """A request or response message."""

    name: str
    api_key: int
    kind: str                       # "request" | "response"
    valid_versions: tuple[int, int]
    flexible_versions: tuple[int, int]
    root: StructSpec
    structs: list[StructSpec]       # nested structs, dependencies first
    renamed: dict[str, str] = field(default_factory=dict)   # disambiguated struct names

    def flexible(self, version: int) -> bool:
        return in_range(self.flexible_versions, version)

    @property
    def first_flexible(self) -> int | None:
        lo, hi = self.flexible_versions
        return lo if lo <= hi else None


def load_message(path: Path) -> MessageSpec:
    """Parse one message JSON file into a MessageSpec."""
    doc = json.loads(path.read_text())
    common = {s["name"]: s["fields"] for s in doc.get("commonStructs", [])}
    structs: list[StructSpec] = []
    by_name: dict[str, StructSpec] = {}
    renamed: dict[str, str] = {}

    def build_struct(kafka_name: str, raw_fields: list[dict], context: str) -> StructSpec:
        source = json.dumps(raw_fields, sort_keys=True)
        existing = by_name.get(kafka_name)
        if existing is not None and existing.source == source:
            return existing
        name = kafka_name
        if existing is not None:
            # Same struct name, different fields: suffix with the enclosing field's name.
            name = kafka_name + context
            renamed[f"{context}.{kafka_name}"] = name
        spec = StructSpec(name, kafka_name, [], source)
        by_name.setdefault(kafka_name, spec)
        spec.fields = [build_field(f, name) for f in raw_fields]
        structs.append(spec)    # appended after its children: dependencies come first
        return spec

    def build_field(raw: dict, parent: str) -> FieldSpec:
        type_name = raw["type"]
        is_array = type_name.startswith("[]")
        elem = type_name[2:] if is_array else type_name
        spec = FieldSpec(
            name=raw["name"], attr=snake_case(raw["name"]), type=elem, is_array=is_array,
            versions=parse_versions(raw["versions"]),
            nullable_versions=parse_versions(raw.get("nullableVersions")),
            tagged_versions=parse_versions(raw.get("taggedVersions")),
            tag=raw.get("tag"), default=raw.get("default"),
            flexible_versions=(parse_versions(raw["flexibleVersions"])
                               if "flexibleVersions" in raw else None))
        if keyword.iskeyword(spec.attr) or spec.attr in ("encode", "decode", "encode_parts", "self"):
            raise ValueError(f"{path.name}: field name {spec.attr!r} clashes with Python")
        if elem not in PRIMITIVES:
            raw_fields = raw.get("fields") or common.get(elem)
            if raw_fields is None:
                raise ValueError(f"{path.name}: struct {elem} has no definition")
            spec.struct = build_struct(elem, raw_fields, raw["name"])
        return spec

    root = StructSpec(doc["name"], doc["name"], [])
    root.fields = [build_field(f, doc["name"]) for f in doc["fields"]]
    return MessageSpec(
        name=doc["name"], api_key=doc["apiKey"], kind=doc["type"],
        valid_versions=parse_versions(doc["validVersions"]),
        flexible_versions=parse_versions(doc["flexibleVersions"]),
        root=root, structs=structs, renamed=renamed)


@dataclass
class ApiSpec:
    """One API: its request and response and the module they are generated into."""

    api_key: int
    name: str                       # e.g. "Produce"
    module: str                     # e.g. "produce"
    request: MessageSpec
    response: MessageSpec


def load_apis(spec_dir: Path) -> list[ApiSpec]:
    """Every API whose request is served on the broker listener, by api key."""
    served: dict[int, str] = {}
    with open(spec_dir / "apis.tsv", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["type"] == "request" and "broker" in row["listeners"].split(","):
                served[int(row["api_key"])] = row["name"][: -len("Request")]
    apis = []
    for api_key, name in sorted(served.items()):
        request = load_message(spec_dir / "messages" / f"{name}Request.json")
        response = load_message(spec_dir / "messages" / f"{name}Response.json")
        if request.api_key != api_key or response.api_key != api_key:
            raise ValueError(f"{name}: api key mismatch between apis.tsv and the JSON")
        apis.append(ApiSpec(api_key, name, snake_case(name), request, response))
    return apis


# ---------------------------------------------------------------------------------------------
# Error codes
# ---------------------------------------------------------------------------------------------

# Kafka's RetriableException subclasses (Errors.java), in the order the enum has always listed them.
RETRIABLE_ERRORS = [
    "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION",
    "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
    "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_CONTROLLER",
    "KAFKA_STORAGE_ERROR", "FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH",
    "LISTENER_NOT_FOUND", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE",
    "PREFERRED_LEADER_NOT_AVAILABLE", "ELIGIBLE_LEADERS_NOT_AVAILABLE", "ELECTION_NOT_NEEDED",
    "UNSTABLE_OFFSET_COMMIT", "THROTTLING_QUOTA_EXCEEDED", "CONCURRENT_TRANSACTIONS",
    "UNKNOWN_TOPIC_ID", "INCONSISTENT_TOPIC_ID", "FETCH_SESSION_TOPIC_ID_ERROR",
    "OFFSET_MOVED_TO_TIERED_STORAGE", "UNKNOWN_SUBSCRIPTION_ID", "TELEMETRY_TOO_LARGE",
    "REBALANCE_IN_PROGRESS",
]


def render_error_codes(spec_dir: Path) -> str:
    """The source of kafkapy/protocol/error_codes.py."""
    with open(spec_dir / "errors.tsv", newline="") as f:
        errors = [(int(row["code"]), row["name"]) for row in csv.DictReader(f, delimiter="\t")]
    names = {name for _, name in errors}
    missing = [name for name in RETRIABLE_ERRORS if name not in names]
    if missing:
        raise ValueError(f"retriable errors not in errors.tsv: {missing}")
    lines = [
        '"""Kafka error codes (from the protocol facts\' errors.tsv) and the typed exception that'
        ' carries one.',
        "",
        "Generated by tools/genprotocol.py from ../shared/kafka-protocol-3.9/errors.tsv;"
        " do not edit by hand.",
        '"""',
        "from __future__ import annotations",
        "",
        "from enum import IntEnum",
        "",
        "",
        "class ErrorCode(IntEnum):",
        '    """Every Kafka error code, by its Kafka name."""',
        "",
    ]
    lines += [f"    {name} = {code}" for code, name in errors]
    lines += ["", "", "RETRIABLE: frozenset[int] = frozenset({"]
    lines += [f"    ErrorCode.{name}," for name in RETRIABLE_ERRORS]
    lines += ["})", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Module builder
# ---------------------------------------------------------------------------------------------

class ModuleBuilder:
    """Collects the classes, struct constants and codec functions of one API's module."""

    def __init__(self, api_name: str, api_key: int, messages: list[MessageSpec]):
        self.api_name = api_name
        self.api_key = api_key
        self.messages = messages
        self.formats: dict[str, str] = {}        # constant name -> struct format
        self._consts: dict[str, str] = {}        # struct format -> constant name
        self.functions: list[str] = []           # function sources, in definition order
        self._bodies: dict[str, str] = {}        # body with FN placeholder -> function name

    # -- shared pieces -------------------------------------------------------------------------
    def struct_const(self, fmt: str) -> str:
        name = self._consts.get(fmt)
        if name is None:
            name = "_S_" + fmt.replace("?", "T")
            self._consts[fmt] = name
            self.formats[name] = fmt
        return name

    def struct_table(self, template: str) -> str:
        """A StructTable: Structs by array length(s) for a template like '>hiB{0}i'."""
        name = "_T_" + re.sub(r"\{\d+\}", "N", template[1:]).replace("?", "T")
        if name not in self.formats:
            self.formats[name] = template
        return name

    def define(self, hint: str, code: Code) -> str:
        """Add a function (its def line uses FN as its name); identical bodies share one name."""
        body = "\n".join(code.lines)
        name = self._bodies.get(body)
        if name is None:
            name = hint
            self._bodies[body] = name
            self.functions.append(body.replace(FN, name))
        return name

    @staticmethod
    def class_alias(msg: MessageSpec, spec: StructSpec) -> str:
        return msg.name if spec is msg.root else f"_{msg.name}_{spec.name}"

    # -- rendering -----------------------------------------------------------------------------
    def render(self) -> str:
        tables = []
        for msg in self.messages:
            lo, hi = msg.valid_versions
            decoders = {v: DecodeGen(self, msg, v).function() for v in range(lo, hi + 1)}
            encoders = {v: EncodeGen(self, msg, v).function() for v in range(lo, hi + 1)}
            tables.append((msg, decoders, encoders))
        out = []
        for msg in self.messages:
            out.append(self._message_class(msg))
        out.append("\n\n# Each class's fields as the spec declares them, read into SCHEMA on first use (for"
                   " tests and\n# tools): Kafka name, type ([] for arrays), versions, nullable"
                   " versions, tagged versions, tag.")
        for msg in self.messages:
            for spec in msg.structs + [msg.root]:
                out += self._field_spec(msg, spec)
        out.append("\n_new = object.__new__  # decoders fill slots directly, skipping __init__")
        out.append("\n# _S_<format>: precompiled big-endian struct formats ('T' stands for '?', bool);"
                   "\n# _T_<format>: Structs by array length, N marking where each array's elements go.")
        for name, fmt in self.formats.items():
            if "{0}" in fmt:
                out.append(f"{name} = _StructTable({fmt!r})")
            else:
                out.append(f"{name} = _Struct({'>' + fmt!r})")
        if any("_UUID_GET" in src for src in self.functions):
            out.append("_UUID_GET = _UUID_CACHE.get")
        out.append("")
        for src in self.functions:
            out.append("\n\n" + src)
        for msg, decoders, encoders in tables:
            out.append("\n")
            out.append(f"{msg.name}._DECODERS = {{")
            out += [f"    {v}: {fn}," for v, fn in decoders.items()]
            out.append("}")
            out.append(f"{msg.name}._ENCODERS = {{")
            out += [f"    {v}: {fn}," for v, fn in encoders.items()]
            out.append("}")
        body = "\n".join(out) + "\n"
        return self._header(body) + "\n" + body

    # (module, name, local alias) of everything generated code may import; only used ones are
    _IMPORTS = [
        ("uuid", None, "_uuid"), ("struct", "Struct", "_Struct"),
        ("..primitives", "FACTORY", "_FACTORY"),
        ("..primitives", "PLAIN_BUFFERS", "_PLAIN_BUFFERS"),
        ("..primitives", "UUID_CACHE", "_UUID_CACHE"), ("..primitives", "UVARINT_1", "_UV1"),
        ("..primitives", "ZERO_UUID", "_ZERO_UUID"),
        ("..primitives", "ExternalRecords", "ExternalRecords"),
        ("..primitives", "FieldSchema", "_FieldSchema"),
        ("..primitives", "GeneratedStruct", "_GeneratedStruct"),
        ("..primitives", "Malformed", "_Malformed"), ("..primitives", "Message", "_Message"),
        ("..primitives", "StructTable", "_StructTable"),
        ("..primitives", "encode_uvarint", "_uvarint"), ("..primitives", "read_uuid", "_read_uuid"),
        ("..primitives", "read_uvarint", "_read_uvarint"),
        ("..primitives", "skip_tagged_fields", "_skip_tagged_fields"),
    ]

    def _header(self, body: str) -> str:
        names = " / ".join(m.name for m in self.messages)
        all_names = ", ".join(f'"{m.name}"' for m in self.messages)
        lines = [f'"""{names} (api key {self.api_key}).', "",
                 "Generated by tools/genprotocol.py from ../shared/kafka-protocol-3.9;"
                 " do not edit by hand.", '"""', "from __future__ import annotations", ""]
        section = None
        for module, name, alias in self._IMPORTS:
            if not re.search(rf"\b{alias}\b", body):
                continue
            if module.startswith(".") and section != "local":
                lines.append("")
                section = "local"
            if name is None:
                lines.append(f"import {module} as {alias}")
            elif alias == name:
                lines.append(f"from {module} import {name}")
            else:
                lines.append(f"from {module} import {name} as {alias}")
        lines += ["", f"__all__ = [{all_names}]"]
        return "\n".join(lines)

    def _message_class(self, msg: MessageSpec) -> str:
        lines = []
        # Structs are defined at module level under private names (a class body cannot see its
        # enclosing class's namespace) and attached to the message class by their Kafka names;
        # __qualname__ makes them print as Message.Struct.
        for spec in msg.structs:
            lines += ["", "", f"class {self.class_alias(msg, spec)}(_GeneratedStruct):",
                      f'    """{msg.name} struct {spec.kafka_name}."""', "",
                      f'    __qualname__ = "{msg.name}.{spec.name}"']
            lines += self._fields(msg, spec)
        lo, hi = msg.valid_versions
        flex = msg.first_flexible
        flex_text = f"flexible from v{flex}" if flex is not None else "never flexible"
        lines += ["", "", f"class {msg.name}(_Message):",
                  f'    """Kafka {msg.name} (api key {msg.api_key}), versions {lo}-{hi}, '
                  f'{flex_text}."""', "",
                  f"    API_KEY = {msg.api_key}",
                  f"    VALID_VERSIONS = ({lo}, {hi})",
                  f"    FLEXIBLE_VERSION = {flex}"]
        if msg.structs:
            lines.append("")
        for old, new in msg.renamed.items():
            lines.append(f"    # struct {old} is named {new}: another struct has its name")
        for spec in msg.structs:
            lines.append(f"    {spec.name} = {self.class_alias(msg, spec)}")
        lines.append("")
        lines += self._fields(msg, msg.root)
        return "\n".join(lines)

    def _fields(self, msg: MessageSpec, spec: StructSpec) -> list[str]:
        """A class's `__slots__`/`__match_args__` and its `__init__` (none without fields)."""
        names = [f.attr for f in spec.fields]
        slots = "(" + ", ".join(repr(n) for n in names) + ("," if len(names) == 1 else "") + ")"
        lines = [f"    __slots__ = __match_args__ = {slots}"]
        if len(lines[0]) > 100:
            lines = ["    __slots__ = __match_args__ = ("]
            lines += ["        " + ", ".join(chunk) + "," for chunk in _wrap(
                [repr(n) for n in names], 100 - 8)]
            lines.append("    )")
        if not names:
            return lines
        params, body = [], []
        for f in spec.fields:
            hint = self._hint(msg, f)
            lit = default_literal(f)
            if lit == "[]":
                params.append(f"{f.attr}: {hint} = _FACTORY")
                body.append(f"self.{f.attr} = [] if {f.attr} is _FACTORY else {f.attr}")
            elif lit == "STRUCT":
                params.append(f"{f.attr}: {hint} = _FACTORY")
                body.append(f"self.{f.attr} = {self.class_alias(msg, f.struct)}() "
                            f"if {f.attr} is _FACTORY else {f.attr}")
            else:
                params.append(f"{f.attr}: {hint} = {lit}")
                body.append(f"self.{f.attr} = {f.attr}")
        lines.append("")
        one_line = f"    def __init__(self, {', '.join(params)}):"
        if len(one_line) <= 100:
            lines.append(one_line)
        else:
            lines += ["    def __init__(", "        self,"]
            lines += [f"        {p}," for p in params]
            lines.append("    ):")
        lines += ["        " + b for b in body]
        return lines

    def _field_spec(self, msg: MessageSpec, spec: StructSpec) -> list[str]:
        """The `_FIELD_SPEC` text `primitives` reads the class's SCHEMA from, on first use."""
        if not spec.fields:
            return []
        lines = [f'{self.class_alias(msg, spec)}._FIELD_SPEC = """']
        for f in spec.fields:
            type_ = f.struct.name if f.is_struct else f.type
            line = f"{f.name} {'[]' if f.is_array else ''}{type_} {version_text(f.versions)}"
            if f.nullable_versions != NO_VERSIONS:
                line += f" nullable={version_text(f.nullable_versions)}"
            if f.tagged_versions != NO_VERSIONS:
                line += f" tagged={version_text(f.tagged_versions)}"
            if f.tag is not None:
                line += f" tag={f.tag}"
            lines.append(line)
        lines.append('"""')
        return lines

    @staticmethod
    def _hint(msg: MessageSpec, f: FieldSpec) -> str:
        """The type hint of a field's `__init__` parameter."""
        if f.is_struct:
            elem = f"{msg.name}.{f.struct.name}"
        else:
            elem = {"string": "str", "bytes": "bytes", "bool": "bool", "float64": "float",
                    "uuid": "_uuid.UUID",
                    "records": "memoryview | bytes | ExternalRecords"}.get(f.type, "int")
        hint = f"list[{elem}]" if f.is_array else elem
        if default_literal(f) == "None" or (f.type == "records" and not f.is_array):
            hint += " | None"
        return hint


def _wrap(items: list[str], width: int) -> list[list[str]]:
    """`items` in chunks whose ", "-joined text (plus a trailing comma) fits `width`."""
    chunks: list[list[str]] = [[]]
    size = 0
    for item in items:
        if chunks[-1] and size + len(item) + 2 > width:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += len(item) + 2
    return chunks


# ---------------------------------------------------------------------------------------------
# Package writer
# ---------------------------------------------------------------------------------------------

def render_init(apis: list[ApiSpec]) -> str:
    """The source of kafkapy/protocol/messages/__init__.py."""
    lines = [
        '"""Kafka request and response messages, one module per API.',
        "",
        "Generated by tools/genprotocol.py from ../shared/kafka-protocol-3.9; do not edit by hand.",
        '"""',
        "from __future__ import annotations",
        "",
    ]
    for api in apis:
        lines.append(f"from .{api.module} import {api.request.name}, {api.response.name}")
    lines += ["", "__all__ = ["]
    for api in apis:
        lines.append(f'    "{api.request.name}", "{api.response.name}",')
    lines += ['    "REQUEST_TYPES", "RESPONSE_TYPES",', "]", ""]
    lines.append("REQUEST_TYPES: dict[int, type] = {")
    lines += [f"    {api.api_key}: {api.request.name}," for api in apis]
    lines += ["}", "", "RESPONSE_TYPES: dict[int, type] = {"]
    lines += [f"    {api.api_key}: {api.response.name}," for api in apis]
    lines += ["}", ""]
    return "\n".join(lines)


def generate(spec_dir: Path, out_dir: Path) -> list[Path]:
    """Write the messages package and error_codes.py under `out_dir`; returns the files written."""
    apis = load_apis(spec_dir)
    messages_dir = out_dir / "messages"
    messages_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for api in apis:
        builder = ModuleBuilder(api.name, api.api_key, [api.request, api.response])
        path = messages_dir / f"{api.module}.py"
        path.write_text(builder.render())
        written.append(path)
    stale = {p.name for p in messages_dir.glob("*.py")} - {p.name for p in written} - {"__init__.py"}
    for name in sorted(stale):
        (messages_dir / name).unlink()
    init = messages_dir / "__init__.py"
    init.write_text(render_init(apis))
    errors = out_dir / "error_codes.py"
    errors.write_text(render_error_codes(spec_dir))
    return written + [init, errors]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec-dir", type=Path, default=DEFAULT_SPEC_DIR,
                        help="directory with apis.tsv, errors.tsv and messages/*.json")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR,
                        help="the kafkapy/protocol directory to write into")
    args = parser.parse_args(argv)
    written = generate(args.spec_dir.resolve(), args.out_dir)
    print(f"wrote {len(written)} files under {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
