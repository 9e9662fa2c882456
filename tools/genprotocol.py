#!/usr/bin/env python3
"""Generate kafkapy's message codecs and error codes from Kafka's protocol specs.

Reads the JSON message specs, apis.tsv and errors.tsv under the spec directory (default
`../shared/kafka-protocol-3.9`, relative to the repository root) and writes:

- `kafkapy/protocol/messages/<api>.py`: one module per API a broker serves (request listeners
  include "broker" or "zkBroker", less Envelope), with a class per request, response and nested struct (`__slots__` and a
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
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC_DIR = REPO_ROOT / ".." / "shared" / "kafka-protocol-3.9"
DEFAULT_OUT_DIR = REPO_ROOT / "kafkapy" / "protocol"
# Kafka 4.0's changes to what kafkapy serves (ConsumerGroupHeartbeat/Describe v1, error 128):
# a message file here replaces the spec directory's one; errors.tsv adds codes.
OVERLAY_DIR = Path(__file__).resolve().parent / "protocol-4.0"


def _message_path(spec_dir: Path, file_name: str) -> Path:
    overlay = OVERLAY_DIR / "messages" / file_name
    return overlay if overlay.is_file() else spec_dir / "messages" / file_name

# the code generation helpers live next to this script
sys.path.insert(0, str(Path(__file__).resolve().parent))
from genprotocol_codegen import FIXED_FORMATS, MAX_VERSION, NO_VERSIONS, snake_case  # noqa: E402
from genprotocol_emit import CODECS_INIT, ModuleBuilder, render_init  # noqa: E402,F401

# ---------------------------------------------------------------------------------------------
# Schema model
# ---------------------------------------------------------------------------------------------


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


def in_range(versions: tuple[int, int], version: int) -> bool:
    return versions[0] <= version <= versions[1]


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


def null_by_default(f: FieldSpec) -> bool:
    """Whether a response field without a JSON default starts as null rather than "".

    Kafka's generated classes start such a string as "", but its handlers fill responses from
    ApiError (ApiError.NONE's message is null) and from optional values, so on the wire a nullable
    string is null unless the broker has something to say; clients compare with null. Starting
    every always-nullable response string as None makes that the default for every handler
    instead of a field each one must remember. Strings that are not nullable in every version
    they exist in (a topic name, nullable only from some version on) keep "".
    """
    return (f.type == "string" and not f.is_array and f.default is None
            and f.nullable_versions[0] <= f.versions[0] and f.nullable_versions[1] >= f.versions[1])


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
        if doc["type"] == "response" and null_by_default(spec):
            spec.default = "null"
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
    """Every API whose request is served on the broker listener (KRaft or ZooKeeper mode), by api key."""
    served: dict[int, str] = {}
    rows = []
    # the overlay's apis.tsv adds the APIs Kafka 4.x added (DescribeShareGroupOffsets, ...)
    for path in (spec_dir / "apis.tsv", OVERLAY_DIR / "apis.tsv"):
        if path.is_file():
            with open(path, newline="") as f:
                rows += list(csv.DictReader(f, delimiter="\t"))
    for row in rows:
        listeners = row["listeners"].split(",")
        # ZooKeeper-mode inter-broker APIs (LeaderAndIsr, UpdateMetadata, AlterPartition, ...)
        # are served too: kafkapy brokers and controllers speak them in cluster mode.
        # Envelope is only for KRaft forwarding.
        if row["type"] == "request" and ("broker" in listeners or "zkBroker" in listeners) \
                and row["name"] != "EnvelopeRequest":
            served[int(row["api_key"])] = row["name"][: -len("Request")]
    apis = []
    for api_key, name in sorted(served.items()):
        request = load_message(_message_path(spec_dir, f"{name}Request.json"))
        response = load_message(_message_path(spec_dir, f"{name}Response.json"))
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
    errors = []
    for path in (spec_dir / "errors.tsv", OVERLAY_DIR / "errors.tsv"):
        with open(path, newline="") as f:
            errors += [(int(row["code"]), row["name"]) for row in csv.DictReader(f, delimiter="\t")]
    names = {name for _, name in errors}
    missing = [name for name in RETRIABLE_ERRORS if name not in names]
    if missing:
        raise ValueError(f"retriable errors not in errors.tsv: {missing}")
    lines = [
        '"""Kafka error codes (from the protocol facts\' errors.tsv) and the typed exception that'
        ' carries one.',
        "",
        "Generated by tools/genprotocol.py from ../shared/kafka-protocol-3.9/errors.tsv"
        " and tools/protocol-4.0/errors.tsv;"
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
# Package writer
# ---------------------------------------------------------------------------------------------

def generate(spec_dir: Path, out_dir: Path) -> list[Path]:
    """Write the messages package and error_codes.py under `out_dir`; returns the files written."""
    apis = load_apis(spec_dir)
    messages_dir = out_dir / "messages"
    codecs_dir = messages_dir / "codecs"
    codecs_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for api in apis:
        classes, codecs = ModuleBuilder(api.name, api.api_key, [api.request, api.response]).render()
        for path, source in ((messages_dir / f"{api.module}.py", classes),
                             (codecs_dir / f"{api.module}.py", codecs)):
            path.write_text(source)
            written.append(path)
    for directory in (messages_dir, codecs_dir):
        for path in sorted(directory.glob("*.py")):
            if path not in written and path.name != "__init__.py":
                path.unlink()    # an API no longer generated
    init = messages_dir / "__init__.py"
    init.write_text(render_init(apis))
    codecs_init = codecs_dir / "__init__.py"
    codecs_init.write_text(CODECS_INIT)
    errors = out_dir / "error_codes.py"
    errors.write_text(render_error_codes(spec_dir))
    return written + [init, codecs_init, errors]


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
