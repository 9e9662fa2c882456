"""Rendering of tools/genprotocol.py's output: one API's classes module and codecs module.

`ModuleBuilder` turns an API's request and response specs into two sources: the classes
(`messages/<api>.py`: `__slots__`, generated `__init__`, the `_FIELD_SPEC` text SCHEMA is read
from) and the codecs (`messages/codecs/<api>.py`: struct constants and one decode and one encode
function per version, from genprotocol_codecs), which `primitives.Message` imports on first use.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from genprotocol_codecs import DecodeGen, EncodeGen
from genprotocol_codegen import FN, MAX_VERSION, NO_VERSIONS, Code, default_literal, snake_case

if TYPE_CHECKING:
    from genprotocol import ApiSpec, FieldSpec, MessageSpec, StructSpec


def version_text(versions: tuple[int, int]) -> str:
    """A version range in Kafka's grammar (the inverse of parse_versions)."""
    lo, hi = versions
    if lo > hi:
        return "none"
    if hi == MAX_VERSION:
        return f"{lo}+"
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


class ModuleBuilder:
    """Collects the classes, struct constants and codec functions of one API's two modules."""

    def __init__(self, api_name: str, api_key: int, messages: list[MessageSpec]):
        self.api_name = api_name
        self.module = snake_case(api_name)
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
    def render(self) -> tuple[str, str]:
        """The sources of the API's classes module and of its codecs module."""
        tables = []
        for msg in self.messages:
            lo, hi = msg.valid_versions
            decoders = {v: DecodeGen(self, msg, v).function() for v in range(lo, hi + 1)}
            encoders = {v: EncodeGen(self, msg, v).function() for v in range(lo, hi + 1)}
            tables.append((msg, decoders, encoders))
        return self._render_classes(), self._render_codecs(tables)

    def _render_classes(self) -> str:
        out = []
        for msg in self.messages:
            out.append(self._message_class(msg))
        out.append("\n\n# Each class's fields as the spec declares them, read into SCHEMA on first use (for"
                   " tests and\n# tools): Kafka name, type ([] for arrays), versions, nullable"
                   " versions, tagged versions, tag.")
        for msg in self.messages:
            for spec in msg.structs + [msg.root]:
                out += self._field_spec(msg, spec)
        body = "\n".join(out) + "\n"
        names = " / ".join(m.name for m in self.messages)
        all_names = ", ".join(f'"{m.name}"' for m in self.messages)
        doc = [f"{names} (api key {self.api_key}).", "",
               f"Their decode and encode functions are in codecs/{self.module}.py, imported on first"
               " use."]
        header = self._header(doc, body, "..", hints=True) + ["", f"__all__ = [{all_names}]"]
        return "\n".join(header) + "\n" + body

    def _render_codecs(self, tables: list) -> str:
        out = ["_new = object.__new__  # decoders fill slots directly, skipping __init__",
               "\n# _S_<format>: precompiled big-endian struct formats ('T' stands for '?', bool);"
               "\n# _T_<format>: Structs by array length, N marking where each array's elements go."]
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
        names = " / ".join(m.name for m in self.messages)
        doc = [f"Decoders and encoders of {names} (api key {self.api_key}), one per version.", "",
               "Imported when one of the messages is first decoded or encoded (primitives.Message)."]
        header = self._header(doc, body, "...")
        classes = [self.class_alias(msg, spec) for msg in self.messages
                   for spec in msg.structs + [msg.root]]
        used = [c for c in classes if re.search(rf"\b{c}\b", body)]
        header += ["", f"from ..{self.module} import ("]
        header += ["    " + ", ".join(chunk) + "," for chunk in _wrap(used, 100 - 4)]
        header.append(")")
        return "\n".join(header) + "\n\n" + body

    # (module, name, local alias) of everything generated code may import; only used ones are
    _IMPORTS = [
        ("uuid", None, "_uuid"), ("struct", "Struct", "_Struct"),
        (".primitives", "FACTORY", "_FACTORY"),
        (".primitives", "PLAIN_BUFFERS", "_PLAIN_BUFFERS"),
        (".primitives", "UUID_CACHE", "_UUID_CACHE"), (".primitives", "UVARINT_1", "_UV1"),
        (".primitives", "ZERO_UUID", "_ZERO_UUID"),
        (".primitives", "ExternalRecords", "ExternalRecords"),
        (".primitives", "GeneratedStruct", "_GeneratedStruct"),
        (".primitives", "Malformed", "_Malformed"), (".primitives", "Message", "_Message"),
        (".primitives", "StructTable", "_StructTable"),
        (".primitives", "encode_uvarint", "_uvarint"), (".primitives", "read_uuid", "_read_uuid"),
        (".primitives", "read_uvarint", "_read_uvarint"),
        (".primitives", "skip_tagged_fields", "_skip_tagged_fields"),
    ]

    @classmethod
    def _header(cls, doc: list[str], body: str, up: str, hints: bool = False) -> list[str]:
        """Docstring and imports of a module; `up` is the relative prefix of kafkapy.protocol.

        With `hints`, annotations are left unevaluated (they name classes defined later).
        """
        lines = ['"""' + doc[0], *doc[1:], "",
                 "Generated by tools/genprotocol.py from ../shared/kafka-protocol-3.9;"
                 " do not edit by hand.", '"""']
        if hints:
            lines.append("from __future__ import annotations")
        lines.append("")
        section = None
        for module, name, alias in cls._IMPORTS:
            if not re.search(rf"\b{alias}\b", body):
                continue
            if module.startswith("."):
                module = up[:-1] + module
                if section != "local":
                    if lines[-1]:
                        lines.append("")
                    section = "local"
            if name is None:
                lines.append(f"import {module} as {alias}")
            elif alias == name:
                lines.append(f"from {module} import {name}")
            else:
                lines.append(f"from {module} import {name} as {alias}")
        return lines

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


def render_init(apis: list[ApiSpec]) -> str:
    """The source of kafkapy/protocol/messages/__init__.py: every class by name and by api key,
    each API's module imported on first use (a broker's start-up needs few of them)."""
    lines = [
        '"""Kafka request and response messages, one module per API.',
        "",
        "Each API's module is imported on first use: when one of its classes is first imported from",
        "this package (module `__getattr__`) or first looked up in REQUEST_TYPES or RESPONSE_TYPES",
        "(protocol.message_types): a broker answers its first request long before it needs most APIs.",
        "",
        "Generated by tools/genprotocol.py from ../shared/kafka-protocol-3.9; do not edit by hand.",
        '"""',
        "from __future__ import annotations",
        "",
        "from importlib import import_module",
        "from typing import TYPE_CHECKING",
        "",
        "from ..message_types import MessageTypes",
        "",
        "if TYPE_CHECKING:",
    ]
    for api in apis:
        lines.append(f"    from .{api.module} import {api.request.name}, {api.response.name}")
    lines += ["", "__all__ = ["]
    for api in apis:
        lines.append(f'    "{api.request.name}", "{api.response.name}",')
    lines += ['    "REQUEST_TYPES", "RESPONSE_TYPES",', "]", ""]
    lines.append("# api key -> (module, request class, response class)")
    lines.append("_APIS: dict[int, tuple[str, str, str]] = {")
    lines += [f'    {api.api_key}: ("{api.module}", "{api.request.name}", "{api.response.name}"),'
              for api in apis]
    lines += [
        "}",
        "",
        "REQUEST_TYPES = MessageTypes(__name__, {key: (module, request) for key, (module, request, _) in _APIS.items()})",
        "RESPONSE_TYPES = MessageTypes(__name__, {key: (module, response) for key, (module, _, response) in _APIS.items()})",
        "",
        "_MODULE_OF = {name: module for module, request, response in _APIS.values() for name in (request, response)}",
        "",
        "",
        "def __getattr__(name: str) -> type:",
        "    module = _MODULE_OF.get(name)",
        "    if module is None:",
        '        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")',
        "    cls = getattr(import_module(f\"{__name__}.{module}\"), name)",
        "    globals()[name] = cls  # later lookups find the attribute without this function",
        "    return cls",
        "",
        "",
        "def __dir__() -> list[str]:",
        "    return sorted(set(globals()) | set(_MODULE_OF))",
        "",
    ]
    return "\n".join(lines)


CODECS_INIT = '''"""Decode and encode functions of each API's messages, one module per API.

A module is imported when one of its messages is first decoded or encoded (see
primitives.Message): most processes use a few APIs, and compiling the functions of all of them
dominated the import time when bytecode is not cached.

Generated by tools/genprotocol.py; do not edit by hand.
"""
'''
