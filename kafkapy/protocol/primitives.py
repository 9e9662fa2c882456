"""Wire primitives shared by the generated message codecs, the zero-copy records type, and the
base classes of the generated messages.

The generated codecs in `kafkapy.protocol.messages.codecs` inline the common cases (fixed-width
runs via precompiled `struct.Struct`, one-byte varints); this module holds the rarer slow paths
they call (multi-byte varints, tagged-field sections) and the entry points that turn any
low-level failure into a `DecodeError` naming the api key, version and byte offset.
The generated classes get equality, repr, `SCHEMA` and their codecs (imported on first use) from
`GeneratedStruct` and `Message` here.
"""
from __future__ import annotations

import _thread
import abc
import importlib
import struct
import sys
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Self

from .errors import DecodeError

if TYPE_CHECKING:
    import uuid

__all__ = [
    "ExternalRecords", "FACTORY", "FieldSchema", "GeneratedStruct", "Malformed", "Message",
    "UVARINT_1", "ZERO_UUID",
    "read_uvarint", "encode_uvarint", "read_uuid", "skip_tagged_fields", "StructTable",
    "PLAIN_BUFFERS", "UUID_CACHE",
    "decode_message", "encode_message", "encode_message_parts", "asdict", "replace",
]

# Varints below 128 are one byte; the generated encoders index this table instead of calling.
UVARINT_1: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))

_MAX_UVARINT_BYTES = 5  # Kafka's unsigned varints are 32-bit

_new = object.__new__
_setattr = object.__setattr__


class Malformed(Exception):
    """Raised inside generated decoders; `decode_message` turns it into a located DecodeError."""

    def __init__(self, reason: str, offset: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


class ExternalRecords(abc.ABC):
    """A records payload that lives outside the encoded message (e.g. a log segment slice).

    `encode_parts()` emits it as its own element, uncopied, so the broker can sendfile it.
    """

    @abc.abstractmethod
    def __len__(self) -> int:
        """Byte length of the payload."""

    @abc.abstractmethod
    def tobytes(self) -> bytes:
        """The payload as bytes (used only when a single joined buffer is needed)."""


class FieldSchema:
    """One field of a generated message or struct class, as Kafka's JSON spec declares it.

    Every generated class lists its fields in `SCHEMA`; tests and tools use it to build values
    valid for a version. Version ranges are (min, max) with max 0x7fff for "N+" and (1, 0) for
    "none". Immutable and compared by value, like the frozen dataclass it replaces (written out
    by hand so that importing the messages does not import `dataclasses`).
    """

    __slots__ = __match_args__ = (
        "name",                 # Kafka's name, e.g. "PartitionIndex"
        "attr",                 # attribute name, e.g. "partition_index"
        "type",                 # element type: "int32", "string", ..., or "struct"
        "is_array",
        "struct",               # the struct class for "struct" types, else None
        "versions",
        "nullable_versions",
        "tagged_versions",
        "tag",                  # the tag number, None if never tagged
    )
    name: str
    attr: str
    type: str
    is_array: bool
    struct: type | None
    versions: tuple[int, int]
    nullable_versions: tuple[int, int]
    tagged_versions: tuple[int, int]
    tag: int | None

    def __init__(self, name: str, attr: str, type: str, is_array: bool, struct: type | None,
                 versions: tuple[int, int], nullable_versions: tuple[int, int],
                 tagged_versions: tuple[int, int], tag: int | None):
        _setattr(self, "name", name)
        _setattr(self, "attr", attr)
        _setattr(self, "type", type)
        _setattr(self, "is_array", is_array)
        _setattr(self, "struct", struct)
        _setattr(self, "versions", versions)
        _setattr(self, "nullable_versions", nullable_versions)
        _setattr(self, "tagged_versions", tagged_versions)
        _setattr(self, "tag", tag)

    def _values(self) -> tuple:
        return (self.name, self.attr, self.type, self.is_array, self.struct, self.versions,
                self.nullable_versions, self.tagged_versions, self.tag)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "FieldSchema(" + ", ".join(
            f"{name}={value!r}" for name, value in zip(self.__slots__, self._values())) + ")"

    def __setattr__(self, name: str, value: Any) -> None:
        raise _frozen(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(name)

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable(self, version: int) -> bool:
        return self.nullable_versions[0] <= version <= self.nullable_versions[1]

    def tagged(self, version: int) -> bool:
        return self.tag is not None and self.tagged_versions[0] <= version <= self.tagged_versions[1]


def _frozen(name: str) -> Exception:
    from dataclasses import FrozenInstanceError   # the error a frozen dataclass raises
    return FrozenInstanceError(f"cannot assign to field {name!r}")


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Read an unsigned 32-bit varint at `pos`; returns (value, position after it)."""
    value = 0
    shift = 0
    end = len(buf)
    for i in range(_MAX_UVARINT_BYTES):
        if pos >= end:
            raise Malformed("varint runs past the end of the buffer", pos)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > 0xFFFFFFFF:
                break
            return value, pos
        shift += 7
    raise Malformed("unsigned varint longer than 32 bits", pos)


def encode_uvarint(value: int) -> bytes:
    """Encode an unsigned 32-bit varint."""
    if value < 128:
        return UVARINT_1[value]
    if value > 0xFFFFFFFF or value < 0:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class StructTable(dict):
    """Precompiled Structs keyed by array length(s), for a template like '>hB{0}iB{1}i'.

    Generated encoders write a struct's fixed fields and its arrays of primitives with one pack;
    the Struct depends on the arrays' lengths, so it is looked up here (an int key for one
    array, a tuple for several).
    """

    def __init__(self, template: str):
        super().__init__()
        self.template = template

    def __missing__(self, key: int | tuple[int, ...]) -> struct.Struct:
        counts = key if isinstance(key, tuple) else (key,)
        compiled = struct.Struct(self.template.format(*counts))
        if len(self) < 4096:   # bounded: hostile or unusual lengths are compiled each time
            self[key] = compiled
        return compiled


# Records values that are copied into the output; anything else is an ExternalRecords part.
PLAIN_BUFFERS = frozenset({bytes, bytearray, memoryview})

# Topic ids repeat across requests; caching their UUID objects skips UUID's slow constructor.
# Bounded so hostile input cannot grow it without limit.
UUID_CACHE: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_MAX = 65536
# `uuid` (with the `platform` module it imports) loads with the first uuid field, not at start-up
_UUID_TYPE: Any = None
_SAFE_UNKNOWN: Any = None


def _load_uuid() -> None:
    global _UUID_TYPE, _SAFE_UNKNOWN
    import uuid

    _UUID_TYPE, _SAFE_UNKNOWN = uuid.UUID, uuid.SafeUUID.unknown


def __getattr__(name: str) -> Any:
    if name == "ZERO_UUID":  # the generated codecs' default for uuid fields
        import uuid

        value = globals()["ZERO_UUID"] = uuid.UUID(int=0)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_uuid(raw: bytes) -> uuid.UUID:
    """The UUID for 16 raw bytes (cached; avoids uuid.UUID's argument checking)."""
    u = UUID_CACHE.get(raw)
    if u is None:
        if len(raw) != 16:
            raise Malformed("uuid runs past the end of the buffer")
        if _UUID_TYPE is None:
            _load_uuid()
        u = _new(_UUID_TYPE)
        _setattr(u, "int", int.from_bytes(raw, "big"))
        _setattr(u, "is_safe", _SAFE_UNKNOWN)
        if len(UUID_CACHE) >= _UUID_CACHE_MAX:
            UUID_CACHE.clear()
        UUID_CACHE[bytes(raw)] = u
    return u


def skip_tagged_fields(buf: Any, pos: int) -> int:
    """Skip a tagged-field section whose fields are all unknown; returns the position after it."""
    count, pos = read_uvarint(buf, pos)
    end = len(buf)
    if count > end - pos:
        raise Malformed(f"tagged field count {count} exceeds the remaining bytes", pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > end:
            raise Malformed(f"tagged field of {size} bytes runs past the end", pos - size)
    return pos


# Low-level failures a generated decoder can hit on malformed input; all become DecodeError.
_DECODE_FAILURES = (struct.error, IndexError, ValueError, TypeError, OverflowError, MemoryError,
                    RecursionError, UnicodeDecodeError)


def _failure_offset(exc: BaseException) -> int | None:
    """The read position of the innermost generated decoder when `exc` was raised.

    Generated decoders keep the current read position in a local named `pos`; reading it from the
    traceback costs nothing on the success path (no bookkeeping per field).
    """
    tb = exc.__traceback__
    offset = None
    while tb is not None:
        pos = tb.tb_frame.f_locals.get("pos")
        if isinstance(pos, int):
            offset = pos
        tb = tb.tb_next
    return offset


def decode_message(decoders: dict[int, Callable[[Any, int], Any]], buf: Any, version: int,
                   pos: int, api_key: int | None) -> Any:
    """Run the generated decoder for `version`, turning every failure into a DecodeError."""
    decoder = decoders.get(version)
    if decoder is None:
        raise DecodeError(f"unsupported version {version}", api_key, version, pos)
    if isinstance(buf, memoryview) and (buf.format != "B" or buf.ndim != 1):
        buf = buf.cast("B")
    try:
        return decoder(buf, pos)
    except Malformed as exc:
        offset = exc.offset if exc.offset is not None else _failure_offset(exc)
        raise DecodeError(exc.reason, api_key, version, offset) from None
    except _DECODE_FAILURES as exc:
        offset = _failure_offset(exc)
        raise DecodeError(_describe(exc), api_key, version, offset) from exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, (struct.error, IndexError)):
        return f"message truncated ({exc})"
    if isinstance(exc, UnicodeDecodeError):
        return f"string is not valid UTF-8 ({exc.reason})"
    return f"malformed message ({type(exc).__name__}: {exc})"


def encode_message(encoders: dict[int, Callable[[Any, list], list]], message: Any,
                   version: int) -> bytes:
    """Encode `message` as `version` into one bytes object."""
    encoder = encoders.get(version)
    if encoder is None:
        raise ValueError(f"{type(message).__name__} has no version {version}")
    external: list[int] = []
    parts = encoder(message, external)
    for i in external:   # materialise ExternalRecords (encode_parts() avoids this copy)
        part = parts[i]
        parts[i] = part.tobytes() if isinstance(part, ExternalRecords) else bytes(part)
    return b"".join(parts)


def encode_message_parts(encoders: dict[int, Callable[[Any, list], list]], message: Any,
                         version: int) -> list:
    """Encode `message` as a list of bytes, with ExternalRecords payloads as their own elements."""
    encoder = encoders.get(version)
    if encoder is None:
        raise ValueError(f"{type(message).__name__} has no version {version}")
    external: list[int] = []
    parts = encoder(message, external)
    if not external:
        return [b"".join(parts)]
    out: list = []
    start = 0
    for i in external:
        part = parts[i]
        if not isinstance(part, ExternalRecords):
            parts[i] = bytes(part)   # a bytes-like subclass: copied like any other value
            continue
        if i > start:
            out.append(b"".join(parts[start:i]))
        out.append(part)
        start = i + 1
    if start < len(parts):
        out.append(b"".join(parts[start:]))
    return out


class _Factory:
    """The marker default of a field whose default is made per instance (a list, a struct)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"   # as dataclasses shows a default_factory in signatures


FACTORY: Any = _Factory()

_repr_running: set[tuple[int, int]] = set()


class _SchemaOnFirstUse:
    """`SCHEMA` of a generated class, read from its `_FIELD_SPEC` text when first asked for.

    Only tests and tools use SCHEMA; a line of text per field is much cheaper to compile and
    load than the FieldSchema calls, which made up a tenth of the generated source. A line is
    `KafkaName type versions [nullable=R] [tagged=R] [tag=N]`, with `[]` before an array's
    element type and structs by their names on the message class (`ApiKeys []ApiVersion 0+`);
    attribute names are the class's `__match_args__`, in the same order.
    """

    def __get__(self, obj: Any, cls: type) -> tuple[FieldSchema, ...]:
        for owner in cls.__mro__:
            if "_FIELD_SPEC" in owner.__dict__:
                break
        else:
            return ()
        schema = _read_field_spec(owner)
        setattr(owner, "SCHEMA", schema)   # shadows this descriptor from now on
        return schema


_SPEC_TYPES = frozenset({"bool", "int8", "int16", "uint16", "int32", "uint32", "int64",
                         "float64", "uuid", "string", "bytes", "records"})
_NO_VERSIONS = (1, 0)


def _read_field_spec(cls: type) -> tuple[FieldSchema, ...]:
    message = getattr(sys.modules[cls.__module__], cls.__qualname__.split(".")[0])
    lines = [line.split() for line in cls.__dict__["_FIELD_SPEC"].splitlines() if line.strip()]
    if len(lines) != len(cls.__match_args__):
        raise ValueError(f"{cls.__qualname__}: _FIELD_SPEC does not match its fields")
    schema = []
    for attr, (name, type_, versions, *options) in zip(cls.__match_args__, lines):
        extra = dict(option.split("=") for option in options)
        is_array = type_.startswith("[]")
        elem = type_[2:] if is_array else type_
        struct_class = None
        if elem not in _SPEC_TYPES:
            struct_class = getattr(message, elem)
            elem = "struct"
        schema.append(FieldSchema(
            name, attr, elem, is_array, struct_class, _version_range(versions),
            _version_range(extra.get("nullable")), _version_range(extra.get("tagged")),
            int(extra["tag"]) if "tag" in extra else None))
    return tuple(schema)


def _version_range(text: str | None) -> tuple[int, int]:
    """Kafka's version-range grammar: "N+", "N-M", "N" ("none" or absent: the empty range)."""
    if text is None or text == "none":
        return _NO_VERSIONS
    if text.endswith("+"):
        return int(text[:-1]), 0x7FFF
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


class GeneratedStruct:
    """Base of every generated message and struct class: fields compared and printed by value.

    A generated class lists its fields in order in `__slots__` and `__match_args__` and has a
    generated `__init__` taking them as keyword (or positional) arguments with their defaults;
    a `FACTORY` default means a fresh list or struct per instance. Equality and repr behave as a
    dataclass's: equal when of the same class with equal fields, shown as
    `ProduceResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=2)`. Plain classes rather than
    dataclasses because dataclass processing of ~360 classes dominated the import time.
    """

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()
    SCHEMA: ClassVar[tuple[FieldSchema, ...]] = _SchemaOnFirstUse()   # type: ignore[assignment]

    def __eq__(self, other: object) -> Any:
        if other.__class__ is self.__class__:
            values = _VALUES.get(self.__class__) or _values_getter(self.__class__)
            return values(self) == values(other)
        return NotImplemented

    def __repr__(self) -> str:
        key = (id(self), _thread.get_ident())
        if key in _repr_running:   # a struct that (indirectly) contains itself
            return "..."
        _repr_running.add(key)
        try:
            template = _REPR_TEMPLATES.get(self.__class__) or _repr_template(self.__class__)
            return template % (_VALUES.get(self.__class__) or _values_getter(self.__class__))(self)
        finally:
            _repr_running.discard(key)


# Per class, made on first use: a function returning the field values as a tuple (what a
# dataclass's __eq__ compares), and a %-template of the repr.
_VALUES: dict[type, Callable[[Any], tuple]] = {}
_REPR_TEMPLATES: dict[type, str] = {}


def _values_getter(cls: type) -> Callable[[Any], tuple]:
    names = cls.__match_args__
    if len(names) > 1:
        getter = attrgetter(*names)
    elif names:
        getter = _one_value(attrgetter(names[0]))
    else:
        getter = _no_values
    _VALUES[cls] = getter
    return getter


def _one_value(get: Callable[[Any], Any]) -> Callable[[Any], tuple]:
    return lambda obj: (get(obj),)


def _no_values(obj: Any) -> tuple:
    return ()


def _repr_template(cls: type) -> str:
    fields = ", ".join(f"{name}=%r" for name in cls.__match_args__)
    template = cls.__qualname__.replace("%", "%%") + "(" + fields + ")"
    _REPR_TEMPLATES[cls] = template
    return template


def asdict(obj: GeneratedStruct) -> dict[str, Any]:
    """A generated object's fields as a dict, nested structs and lists too (dataclasses.asdict)."""
    return {n: _plain(getattr(obj, n)) for n in obj.__match_args__}


def _plain(value: Any) -> Any:
    if isinstance(value, GeneratedStruct):
        return asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def replace(obj: GeneratedStruct, **changes: Any) -> Any:
    """A shallow copy of a generated object with `changes` applied (dataclasses.replace)."""
    values = {n: getattr(obj, n) for n in obj.__match_args__}
    unknown = changes.keys() - values.keys()
    if unknown:
        raise TypeError(f"{obj.__class__.__qualname__} has no field {sorted(unknown)[0]!r}")
    values.update(changes)
    return obj.__class__(**values)


class _CodecsOnFirstUse:
    """`_DECODERS` or `_ENCODERS` of a generated message class until its codecs are imported.

    A message's decode and encode functions are generated into `messages/codecs/<api>.py`,
    imported here on the first decode or encode: a process uses a few APIs, and compiling the
    functions of all of them dominated the import time without cached bytecode. The codecs
    module sets both tables on the message classes, which then shadow this descriptor.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, cls: type) -> dict:
        for owner in cls.__mro__:
            if "API_KEY" in owner.__dict__:     # the generated class (cls may subclass it)
                break
        else:
            return {}
        package, _, module = owner.__module__.rpartition(".")
        importlib.import_module(f"{package}.codecs.{module}")
        return owner.__dict__[self.name]


class Message(GeneratedStruct):
    """Base of the generated request and response classes: decode and encode any version.

    Each generated subclass fills in the class attributes and its fields (see
    `GeneratedStruct`); the codecs themselves are generated functions, one per version, in
    `_DECODERS`/`_ENCODERS`.
    """

    __slots__ = ()

    API_KEY: ClassVar[int]
    VALID_VERSIONS: ClassVar[tuple[int, int]]     # (min, max)
    FLEXIBLE_VERSION: ClassVar[int | None]         # first flexible version, None if never
    # by version; the generated codecs module replaces these with dicts when first used
    _DECODERS: ClassVar[dict[int, Callable[[Any, int], Any]]] = _CodecsOnFirstUse()  # type: ignore
    _ENCODERS: ClassVar[dict[int, Callable[[Any, list], list]]] = _CodecsOnFirstUse()  # type: ignore

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, version: int, pos: int = 0) -> Self:
        """Decode a body of `version` starting at `pos`; trailing bytes are ignored.

        Raises DecodeError (api key, version, byte offset) for any malformed input.
        """
        return decode_message(cls._DECODERS, buf, version, pos, cls.API_KEY)

    def encode(self, version: int) -> bytes:
        """Encode as `version`; tagged fields are written only when they differ from defaults."""
        return encode_message(self._ENCODERS, self, version)

    def encode_parts(self, version: int) -> list:
        """Encode as a list of buffers: bytes, and ExternalRecords payloads left uncopied."""
        return encode_message_parts(self._ENCODERS, self, version)
