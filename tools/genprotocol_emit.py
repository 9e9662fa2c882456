"""Python source emission for tools/genprotocol.py: classes and straight-line codecs per version.

Decoders build objects with `object.__new__` and assign slots directly; runs of fixed-width fields
(and fixed-width length prefixes) are read with one precompiled `struct.Struct.unpack_from`, and
written with one `pack`. Nested structs are inlined into their parent's function, so a message
version is one function with no per-field dispatch. Tagged-field sections take a helper call only
when they are non-empty. Versions whose code comes out identical share one function.
"""
from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from genprotocol import FieldSpec, MessageSpec, StructSpec

FIXED_FORMATS = {
    "bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
    "int64": "q", "float64": "d", "uuid": "16s",
}
FIXED_SIZES = {"?": 1, "b": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "d": 8, "16s": 16,
               "x": 1, "B": 1}
INT_RANGES = {
    "int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
}
# element types whose arrays are read/written with one struct call
PACKABLE_ELEMENTS = {t: f for t, f in FIXED_FORMATS.items() if t != "uuid"}

FIXED_ARRAY_MIN = 8   # same-size struct arrays this long are read with one iter_unpack
FN = "__FN__"   # placeholder for a function's own name while its body is deduplicated


class Code:
    """Indented lines of Python under construction."""

    def __init__(self, level: int = 1):
        self.lines: list[str] = []
        self.level = level

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self(header)
        self.level += 1
        yield
        self.level -= 1

    @contextmanager
    def block_if(self, enabled: bool, header: str) -> Iterator[None]:
        """A block when `enabled`, else the enclosed lines stay at the current level."""
        if enabled:
            with self.block(header):
                yield
        else:
            yield

    @contextmanager
    def if_all(self, conditions: list[str]) -> Iterator[None]:
        """A block under `if c1 and c2 ...:`, the condition wrapped over lines when long."""
        line = "if " + " and ".join(conditions) + ":"
        if len(line) + 4 * self.level <= 100 or len(conditions) == 1:
            self(line)
        else:
            self("if (" + conditions[0])
            for cond in conditions[1:-1]:
                self("        and " + cond)
            self("        and " + conditions[-1] + "):")
        self.level += 1
        yield
        self.level -= 1


class ArrayPart:
    """A non-null array of fixed-width primitives inside an encode run: its count and elements."""

    def __init__(self, elem: str, var: str, count: str, compact: bool):
        self.elem = elem          # struct format of one element
        self.var = var            # local holding the list
        self.count = count        # local holding its length
        self.compact = compact    # count as a varint (one byte below 127) instead of an int32


class Run:
    """Consecutive fixed-width values, read or written by one struct call when flushed.

    When encoding, a run may also hold arrays of fixed-width primitives; it is then written with
    a Struct chosen by the arrays' lengths (e.g. a Metadata partition: four fields and three
    compact int32 arrays in one pack).
    """

    def __init__(self, builder: ModuleBuilder):
        self.builder = builder
        self.formats: list = []              # format strings, or ArrayParts (encode only)
        self.items: list[str | None] = []   # decode: assignment targets; encode: value expressions
        self.after: list[str] = []           # decode: statements to run after the read

    def add(self, fmt, item: str | None, after: str | None = None) -> None:
        self.formats.append(fmt)
        self.items.append(item)
        if after:
            self.after.append(after)

    def __bool__(self) -> bool:
        return bool(self.formats)

    def _take(self) -> tuple[str, list, list[str], int]:
        fmt = "".join(self.formats)
        size = sum(FIXED_SIZES[f] for f in self.formats)
        items, after = self.items, self.after
        self.formats, self.items, self.after = [], [], []
        return self.builder.struct_const(fmt), items, after, size

    def flush_read(self, c: Code) -> None:
        if not self.formats:
            return
        const, targets, after, size = self._take()
        targets = [t for t in targets if t is not None]
        if len(targets) == 1:
            c(f"{targets[0]} = {const}.unpack_from(buf, pos)[0]")
        else:
            c(f"{', '.join(targets)} = {const}.unpack_from(buf, pos)")
        c(f"pos += {size}")
        for line in after:
            c(line)

    def flush_write(self, c: Code) -> None:
        if not self.formats:
            return
        if any(isinstance(f, ArrayPart) for f in self.formats):
            self._write_with_arrays(c)
            return
        if all(f == "x" for f in self.formats):   # only empty tagged sections: zero bytes
            c(f"ap({bytes(len(self.formats))!r})")
            self.formats, self.items, self.after = [], [], []
            return
        const, values, _, _ = self._take()
        c(f"ap({const}.pack({', '.join(v for v in values if v is not None)}))")

    def _write_with_arrays(self, c: Code) -> None:
        parts = list(zip(self.formats, self.items))
        self.formats, self.items, self.after = [], [], []
        template, args, arrays = ">", [], []
        for fmt, value in parts:
            if isinstance(fmt, ArrayPart):
                template += ("B" if fmt.compact else "i") + "{%d}" % len(arrays) + fmt.elem
                args += [f"{fmt.count} + 1" if fmt.compact else fmt.count, f"*{fmt.var}"]
                arrays.append(fmt)
            else:
                template += fmt
                if value is not None:
                    args.append(value)
        table = self.builder.struct_table(template)
        key = ", ".join(a.count for a in arrays)
        line = f"ap({table}[{key}].pack({', '.join(args)}))"
        compact = [a.count for a in arrays if a.compact]
        if not compact:
            c(line)
            return
        # a compact count fits the one-byte slot below 127; longer arrays are written piecewise
        with c.block("if " + " and ".join(f"{n} < 127" for n in compact) + ":"):
            c(line)
        with c.block("else:"):
            piece = Run(self.builder)
            for fmt, value in parts:
                if not isinstance(fmt, ArrayPart):
                    piece.add(fmt, value)
                    continue
                if fmt.compact:
                    piece.flush_write(c)
                    c(f"ap(_uvarint({fmt.count} + 1))")
                else:
                    piece.add("i", fmt.count)
                    piece.flush_write(c)
                elements = self.builder.struct_table(">{0}" + fmt.elem)
                c(f"ap({elements}[{fmt.count}].pack(*{fmt.var}))")
            piece.flush_write(c)


# ---------------------------------------------------------------------------------------------
# Defaults
# ---------------------------------------------------------------------------------------------

def default_literal(f: FieldSpec) -> str:
    """Python source of an immutable default; "[]"/"STRUCT" markers for mutable ones."""
    d = f.default
    where = f"field {f.name}"
    if f.is_array:
        return "None" if d == "null" else "[]"
    if f.is_struct:
        if d not in (None, "", "null"):
            raise ValueError(f"{where}: a struct's only default is null")
        return "None" if d == "null" else "STRUCT"
    t = f.type
    if t in INT_RANGES:
        if d is None or d == "":
            value = 0
        elif isinstance(d, str):
            value = int(d, 16) if d.lower().lstrip("-").startswith("0x") else int(d)
        else:
            value = int(d)
        lo, hi = INT_RANGES[t]
        if not lo <= value <= hi:
            raise ValueError(f"{where}: default {d!r} out of range for {t}")
        return repr(value)
    if t == "bool":
        if d in (None, "", "false", False):
            return "False"
        if d in ("true", True):
            return "True"
        raise ValueError(f"{where}: bad bool default {d!r}")
    if t == "float64":
        return repr(float(d)) if d not in (None, "") else "0.0"
    if t == "string":
        if d == "null":
            return "None"
        return repr(d if d is not None else "")
    if t == "bytes":
        if d == "null":
            return "None"
        if d not in (None, ""):
            raise ValueError(f"{where}: bytes default must be empty or null")
        return "b''"
    if t == "records":
        return "None"
    if t == "uuid":
        if d in (None, ""):
            return "_ZERO_UUID"
        return f"_uuid.UUID({str(uuid.UUID(d))!r})"
    raise ValueError(f"{where}: unknown type {t}")


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
        out = [self._header()]
        for msg in self.messages:
            out.append(self._message_class(msg))
        out.append("\n# Each class's fields as the spec declares them (for tests and tools): Kafka name,"
                   " attribute,\n# type, array?, struct class, versions, nullable versions,"
                   " tagged versions, tag.")
        for msg in self.messages:
            for spec in msg.structs + [msg.root]:
                out += self._schema(msg, spec)
        out.append("\n_new = object.__new__  # decoders fill slots directly, skipping __init__")
        out.append("\n# _S_<format>: precompiled big-endian struct formats ('T' stands for '?', bool);"
                   "\n# _T_<format>: Structs by array length, N marking where each array's elements go.")
        for name, fmt in self.formats.items():
            if "{0}" in fmt:
                out.append(f"{name} = _StructTable({fmt!r})")
            else:
                out.append(f"{name} = _Struct({'>' + fmt!r})")
        out.append("_UUID_GET = _UUID_CACHE.get")
        out.append("")
        for src in self.functions:
            out.append("\n\n" + src)
        for msg, decoders, encoders in tables:
            base = _upper_snake(msg.name)
            out.append("\n")
            out.append(f"_{base}_DECODERS = {{")
            out += [f"    {v}: {fn}," for v, fn in decoders.items()]
            out.append("}")
            out.append(f"_{base}_ENCODERS = {{")
            out += [f"    {v}: {fn}," for v, fn in encoders.items()]
            out.append("}")
        return "\n".join(out) + "\n"

    def _header(self) -> str:
        names = " / ".join(m.name for m in self.messages)
        all_names = ", ".join(f'"{m.name}"' for m in self.messages)
        return f'''"""{names} (api key {self.api_key}).

Generated by tools/genprotocol.py from ../shared/kafka-protocol-3.9; do not edit by hand.
"""
from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from dataclasses import field as _field
from struct import Struct as _Struct
from typing import ClassVar

from ..primitives import PLAIN_BUFFERS as _PLAIN_BUFFERS
from ..primitives import UUID_CACHE as _UUID_CACHE
from ..primitives import UVARINT_1 as _UV1
from ..primitives import ZERO_UUID as _ZERO_UUID
from ..primitives import ExternalRecords
from ..primitives import FieldSchema as _FieldSchema
from ..primitives import Malformed as _Malformed
from ..primitives import decode_message as _decode_message
from ..primitives import encode_message as _encode_message
from ..primitives import encode_message_parts as _encode_message_parts
from ..primitives import encode_uvarint as _uvarint
from ..primitives import read_uuid as _read_uuid
from ..primitives import read_uvarint as _read_uvarint
from ..primitives import StructTable as _StructTable
from ..primitives import skip_tagged_fields as _skip_tagged_fields

__all__ = [{all_names}]'''

    def _message_class(self, msg: MessageSpec) -> str:
        lines = []
        # Structs are defined at module level under private names (a class body cannot see its
        # enclosing class's namespace, which default_factory needs) and attached to the message
        # class by their Kafka names; __qualname__ makes them print as Message.Struct.
        for spec in msg.structs:
            lines += ["", "", "@dataclass(slots=True)", f"class {self.class_alias(msg, spec)}:",
                      f'    """{msg.name} struct {spec.kafka_name}."""', "",
                      f'    __qualname__ = "{msg.name}.{spec.name}"',
                      "    SCHEMA: ClassVar[tuple[_FieldSchema, ...]] = ()"]
            if spec.fields:
                lines.append("")
            lines += ["    " + d for d in self._field_decls(msg, spec)]
        lo, hi = msg.valid_versions
        flex = msg.first_flexible
        flex_text = f"flexible from v{flex}" if flex is not None else "never flexible"
        lines += ["", "", "@dataclass(slots=True)", f"class {msg.name}:",
                  f'    """Kafka {msg.name} (api key {msg.api_key}), versions {lo}-{hi}, '
                  f'{flex_text}."""', "",
                  f"    API_KEY: ClassVar[int] = {msg.api_key}",
                  f"    VALID_VERSIONS: ClassVar[tuple[int, int]] = ({lo}, {hi})",
                  f"    FLEXIBLE_VERSION: ClassVar[int | None] = {flex}",
                  "    SCHEMA: ClassVar[tuple[_FieldSchema, ...]] = ()"]
        if msg.structs:
            lines.append("")
        for old, new in msg.renamed.items():
            lines.append(f"    # struct {old} is named {new}: another struct has its name")
        for spec in msg.structs:
            lines.append(f"    {spec.name} = {self.class_alias(msg, spec)}")
        lines.append("")
        lines += ["    " + d for d in self._field_decls(msg, msg.root)]
        base = _upper_snake(msg.name)
        lines += [
            "",
            "    @classmethod",
            f"    def decode(cls, buf: bytes | bytearray | memoryview, version: int, pos: int = 0)"
            f" -> {msg.name}:",
            f'        """Decode a {msg.name} body of `version` starting at `pos`."""',
            f"        return _decode_message(_{base}_DECODERS, buf, version, pos, {msg.api_key})",
            "",
            "    def encode(self, version: int) -> bytes:",
            f'        """Encode this {msg.name} as `version`."""',
            f"        return _encode_message(_{base}_ENCODERS, self, version)",
            "",
            "    def encode_parts(self, version: int) -> list:",
            '        """Encode as buffers; ExternalRecords payloads stay separate and uncopied."""',
            f"        return _encode_message_parts(_{base}_ENCODERS, self, version)",
        ]
        return "\n".join(lines)

    def _schema(self, msg: MessageSpec, spec: StructSpec) -> list[str]:
        lines = [f"{self.class_alias(msg, spec)}.SCHEMA = ("]
        for f in spec.fields:
            type_ = "struct" if f.is_struct else f.type
            struct = self.class_alias(msg, f.struct) if f.is_struct else None
            lines.append(f"    _FieldSchema({f.name!r}, {f.attr!r}, {type_!r}, {f.is_array}, {struct}, "
                         f"{f.versions}, {f.nullable_versions}, {f.tagged_versions}, {f.tag}),")
        lines.append(")")
        return lines

    def _field_decls(self, msg: MessageSpec, spec: StructSpec) -> list[str]:
        decls = []
        for f in spec.fields:
            nullable = f.nullable_versions[0] <= f.nullable_versions[1]
            if f.is_struct:
                elem = f"{msg.name}.{f.struct.name}"
            else:
                elem = {"string": "str", "bytes": "bytes", "bool": "bool", "float64": "float",
                        "uuid": "_uuid.UUID",
                        "records": "memoryview | bytes | ExternalRecords"}.get(f.type, "int")
            hint = f"list[{elem}]" if f.is_array else elem
            lit = default_literal(f)
            if lit == "None" or (f.type == "records" and not f.is_array):
                hint += " | None"
            if lit == "[]":
                value = "_field(default_factory=list)"
            elif lit == "STRUCT":
                value = f"_field(default_factory={self.class_alias(msg, f.struct)})"
            else:
                value = lit
            decls.append(f"{f.attr}: {hint} = {value}")
        return decls


def _upper_snake(name: str) -> str:
    import re
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def _fn_name(msg: MessageSpec, what: str, version: int) -> str:
    import re
    return f"_{what}_{re.sub(r'(?<=[a-z0-9])(?=[A-Z])', '_', msg.name).lower()}_v{version}"


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------

class DecodeGen:
    """Emits the decoder of one message version."""

    def __init__(self, builder: ModuleBuilder, msg: MessageSpec, version: int):
        self.b = builder
        self.msg = msg
        self.v = version
        self.flex = msg.flexible(version)
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def function(self) -> str:
        c = Code()
        self.counter = 0
        obj = self.struct(c, self.msg.root, "end")
        c(f"return {obj}")
        return self.b.define(_fn_name(self.msg, "decode", self.v), _with_prologue(
            f"def {FN}(buf, pos):", c, "end = len(buf)"))

    def default_expr(self, f: FieldSpec) -> str:
        lit = default_literal(f)
        if lit == "STRUCT":
            return f"{self.b.class_alias(self.msg, f.struct)}()"
        return lit

    def struct(self, c: Code, spec: StructSpec, end: str, run: Run | None = None,
               obj: str | None = None) -> str:
        """Emit the decoding of one struct; returns the variable holding the object."""
        obj = obj or self.fresh("o")
        own_run = run is None
        run = run or Run(self.b)
        c(f"{obj} = _new({self.b.class_alias(self.msg, spec)})")
        present = [f for f in spec.fields if f.present(self.v)]
        tagged = [f for f in present if self.flex and f.tagged(self.v)]
        for f in spec.fields:
            if f not in present or f in tagged:
                c(f"{obj}.{f.attr} = {self.default_expr(f)}")
        for f in present:
            if f not in tagged:
                self.field(c, f, f"{obj}.{f.attr}", end, run)
        if self.flex:
            helper = self.tags_helper(spec, tagged)
            extra = f", {obj}" if tagged else ""
            if run:
                # read the section's count byte with the fixed run; non-zero is the rare case
                flag = self.fresh("t")
                run.add("B", flag)
                run.flush_read(c)
                with c.block(f"if {flag}:"):
                    c(f"pos = {helper}(buf, pos - 1{extra})")
            else:
                with c.block("if buf[pos]:"):
                    c(f"pos = {helper}(buf, pos{extra})")
                with c.block("else:"):
                    c("pos += 1")
        elif own_run:
            run.flush_read(c)
        return obj

    def length(self, c: Code, run: Run, compact: bool, fmt: str) -> None:
        """Read a length/count into `n` (-1 meaning null)."""
        if compact:
            run.flush_read(c)
            c("n = buf[pos] - 1")
            with c.block("if n < 127:"):
                c("pos += 1")
            with c.block("else:"):
                c("n, pos = _read_uvarint(buf, pos)")
                c("n -= 1")
        else:
            run.add(fmt, "n")
            run.flush_read(c)

    def field(self, c: Code, f: FieldSpec, target: str, end: str, run: Run) -> None:
        compact = f.compact(self.v, self.flex)
        nullable = f.nullable(self.v)
        if f.is_array:
            self.length(c, run, compact, "i")
            self.array_body(c, f, target, end, nullable, compact)
        elif f.is_struct:
            if nullable:
                run.add("b", "n")
                run.flush_read(c)
                with c.block("if n < 0:"):
                    c(f"{target} = None")
                with c.block("else:"):
                    obj = self.struct(c, f.struct, end)
                    c(f"{target} = {obj}")
            else:
                # continues the parent's run: the object exists before the run is read
                obj = self.struct(c, f.struct, end, run)
                c(f"{target} = {obj}")
        else:
            self.value(c, f, f.type, target, end, run, nullable, compact)

    def value(self, c: Code, f: FieldSpec, type_: str, target: str, end: str, run: Run,
              nullable: bool, compact: bool) -> None:
        """Emit the decoding of one non-array, non-struct value into `target`."""
        fmt = FIXED_FORMATS.get(type_)
        if fmt == "16s":
            raw = self.fresh("u")
            run.add(fmt, raw, f"{target} = _UUID_GET({raw}) or _read_uuid({raw})")
            return
        if fmt is not None:
            run.add(fmt, target)
            return
        self.length(c, run, compact, "h" if type_ == "string" else "i")
        if type_ == "string":
            read = "str(buf[pos:e], 'utf-8')"
        elif type_ == "bytes":
            read = "bytes(buf[pos:e])"
        else:
            read = "mv[pos:e]"
        if nullable:
            with c.block("if n < 0:"):
                c(f"{target} = None")
            with c.block("else:"):
                self._slice(c, f, target, read, end, "n > " + end + " - pos")
        else:
            self._slice(c, f, target, read, end, f"n < 0 or n > {end} - pos")

    @staticmethod
    def _slice(c: Code, f: FieldSpec, target: str, read: str, end: str, bad: str) -> None:
        with c.block(f"if {bad}:"):
            c(f"raise _Malformed(f'{f.name}: length {{n}} out of range', pos)")
        c("e = pos + n")
        c(f"{target} = {read}")
        c("pos = e")

    def array_body(self, c: Code, f: FieldSpec, target: str, end: str, nullable: bool,
                   compact: bool) -> None:
        if nullable:
            with c.block("if n < 0:"):
                c(f"{target} = None")
        with c.block_if(nullable, "else:"):
            self._array_items(c, f, target, end, nullable)

    def fixed_layout(self, spec: StructSpec) -> list[FieldSpec] | None:
        """The fields of `spec` if, in this version, every element has the same size.

        That is: only fixed-width fields (no uuids, which need converting) and, when flexible,
        no tagged fields, so the element ends with its one-byte (usually empty) tag section.
        """
        present = [f for f in spec.fields if f.present(self.v)]
        if not present or any(not f.is_fixed or f.type == "uuid" for f in present):
            return None
        if self.flex and any(f.tagged(self.v) for f in present):
            return None
        return present

    def _array_items(self, c: Code, f: FieldSpec, target: str, end: str, nullable: bool) -> None:
        fmt = PACKABLE_ELEMENTS.get(f.type)
        fixed = self.fixed_layout(f.struct) if f.is_struct else None
        if fmt:
            size = FIXED_SIZES[fmt]
        elif fixed:
            size = sum(FIXED_SIZES[FIXED_FORMATS[g.type]] for g in fixed) + self.flex
        else:
            size = 1
        # every element takes at least `size` bytes: a count beyond the bytes left is malformed
        bound = f"n > {end} - pos" if size == 1 else f"n * {size} > {end} - pos"
        if not nullable:
            bound = "n < 0 or " + bound
        with c.block(f"if {bound}:"):
            c(f"raise _Malformed(f'{f.name}: array length {{n}} out of range', pos)")
        if fmt is not None:
            c(f"{target} = list({self.b.struct_table('>{0}' + fmt)}[n].unpack_from(buf, pos))")
            c(f"pos += {size} * n" if size > 1 else "pos += n")
            return
        items = self.fresh("l")
        c(f"{items} = []")
        if fixed:
            self._fixed_struct_items(c, f, fixed, items, size, end)
        else:
            self._struct_items(c, f, items, end)
        c(f"{target} = {items}")

    def _fixed_struct_items(self, c: Code, f: FieldSpec, fixed: list[FieldSpec], items: str,
                            size: int, end: str) -> None:
        """Same-size elements: one iter_unpack over the array, no per-element reads."""
        spec = f.struct
        fmt = "".join(FIXED_FORMATS[g.type] for g in fixed) + ("x" if self.flex else "")
        const = self.b.struct_const(fmt)
        c(f"e = pos + n * {size}")
        # Worth its setup from about 8 elements; when flexible, only if every element's tagged
        # section is empty (one zero byte), else the general loop below reads them.
        check = f" and (chunk := bytes(buf[pos:e]))[{size - 1}::{size}].count(0) == n" \
            if self.flex else ""
        with c.block(f"if n > {FIXED_ARRAY_MIN - 1}{check}:"):
            source = "chunk" if self.flex else "buf[pos:e]"
            with c.block(f"for t in {const}.iter_unpack({source}):"):
                obj = self.fresh("o")
                c(f"{obj} = _new({self.b.class_alias(self.msg, spec)})")
                for g in spec.fields:
                    if g not in fixed:
                        c(f"{obj}.{g.attr} = {self.default_expr(g)}")
                c(", ".join(f"{obj}.{g.attr}" for g in fixed) + (", = t" if len(fixed) == 1 else " = t"))
                c(f"{items}.append({obj})")
            c("pos = e")
        with c.block("else:"):
            self._struct_items(c, f, items, end)

    def _struct_items(self, c: Code, f: FieldSpec, items: str, end: str) -> None:
        with c.block("for _ in range(n):"):
            if f.is_struct:
                obj = self.struct(c, f.struct, end)
                c(f"{items}.append({obj})")
            else:
                elem = self.fresh("x")
                run = Run(self.b)
                self.value(c, f, f.type, elem, end, run, False, f.compact(self.v, self.flex))
                run.flush_read(c)
                c(f"{items}.append({elem})")

    def tags_helper(self, spec: StructSpec, tagged: list[FieldSpec]) -> str:
        """The function that reads a non-empty tagged-field section of `spec`."""
        if not tagged:
            return "_skip_tagged_fields"
        sub = DecodeGen(self.b, self.msg, self.v)
        c = Code()
        c("end = len(buf)")
        c("count, pos = _read_uvarint(buf, pos)")
        with c.block("if count > end - pos:"):
            c("raise _Malformed(f'tagged field count {count} out of range', pos)")
        with c.block("for _ in range(count):"):
            c("tag, pos = _read_uvarint(buf, pos)")
            c("size, pos = _read_uvarint(buf, pos)")
            c("te = pos + size")
            with c.block("if te > end:"):
                c("raise _Malformed(f'tagged field {tag} of {size} bytes runs past the end', pos)")
            for i, f in enumerate(sorted(tagged, key=lambda f: f.tag)):
                with c.block(f"{'if' if i == 0 else 'elif'} tag == {f.tag}:"):
                    run = Run(self.b)
                    sub.field(c, f, f"o0.{f.attr}", "te", run)
                    run.flush_read(c)
            with c.block("if pos > te:"):
                c("raise _Malformed(f'tagged field {tag} overruns its size', pos)")
            c("pos = te")
        c("return pos")
        return self.b.define(_fn_name(self.msg, "decode_tags", self.v) + "_" + spec.name,
                             _with_prologue(f"def {FN}(buf, pos, o0):", c))


def _with_prologue(def_line: str, body: Code, *prologue: str) -> Code:
    """Prefix a function body with its def line and setup lines (a memoryview if needed)."""
    c = Code(level=0)
    c(def_line)
    for line in prologue:
        c("    " + line)
    if any("mv[" in line for line in body.lines):
        c("    mv = memoryview(buf)  # records are zero-copy slices of the input")
    c.lines += body.lines
    return c


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------

class EncodeGen:
    """Emits the encoder of one message version: a function returning a list of parts."""

    def __init__(self, builder: ModuleBuilder, msg: MessageSpec, version: int):
        self.b = builder
        self.msg = msg
        self.v = version
        self.flex = msg.flexible(version)
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def function(self) -> str:
        c = Code()
        c("parts = []")
        c("ap = parts.append")
        run = Run(self.b)
        self.struct(c, self.msg.root, "o0", run)
        run.flush_write(c)
        c("return parts")
        return self.b.define(_fn_name(self.msg, "encode", self.v),
                             _with_prologue(f"def {FN}(o0, ext):", c))

    def struct(self, c: Code, spec: StructSpec, obj: str, run: Run) -> None:
        present = [f for f in spec.fields if f.present(self.v)]
        tagged = [f for f in present if self.flex and f.tagged(self.v)]
        for f in present:
            if f not in tagged:
                self.field(c, f, f"{obj}.{f.attr}", run)
        if not self.flex:
            return
        if not tagged:
            run.add("x", None)   # an empty tagged-field section is one zero byte
            return
        run.flush_write(c)
        # tagged fields are written only when they differ from their defaults
        with c.if_all([self.is_default(f, f"{obj}.{f.attr}") for f in tagged]):
            c("ap(b'\\x00')")
        with c.block("else:"):
            c(f"ap({self.tags_helper(spec, tagged)}({obj}))")

    def is_default(self, f: FieldSpec, expr: str) -> str:
        """A Python expression that is true when `expr` equals the field's default."""
        lit = default_literal(f)
        if lit == "None":
            return f"{expr} is None"
        if lit == "[]":
            return f"{expr} == []"
        if lit == "STRUCT":
            parts = [self.is_default(g, f"{expr}.{g.attr}")
                     for g in f.struct.fields if g.present(self.v)]
            return " and ".join(parts) if parts else "True"
        return f"{expr} == {lit}"

    def field(self, c: Code, f: FieldSpec, expr: str, run: Run) -> None:
        compact = f.compact(self.v, self.flex)
        nullable = f.nullable(self.v)
        if f.is_array:
            x = self.fresh("x")
            c(f"{x} = {expr}")
            fmt = PACKABLE_ELEMENTS.get(f.type)
            if fmt is not None and not nullable:
                count = self.fresh("c")
                c(f"{count} = len({x})")
                run.add(ArrayPart(fmt, x, count, compact), None)
            elif fmt is not None and compact:
                run.flush_write(c)
                with c.block(f"if {x} is None:"):
                    c("ap(b'\\x00')")
                with c.block("else:"):
                    count = self.fresh("c")
                    c(f"{count} = len({x})")
                    inner = Run(self.b)
                    inner.add(ArrayPart(fmt, x, count, True), None)
                    inner.flush_write(c)
            elif nullable:
                self.length(c, run, compact, "i", x, nullable=True)
                with c.block(f"if {x} is not None:"):
                    self.array_body(c, f, x)
            else:
                self.length(c, run, compact, "i", x, nullable=False)
                self.array_body(c, f, x)
        elif f.is_struct:
            obj = self.fresh("o")
            c(f"{obj} = {expr}")
            if nullable:
                run.add("b", f"-1 if {obj} is None else 1")
                run.flush_write(c)
                with c.block(f"if {obj} is not None:"):
                    inner = Run(self.b)
                    self.struct(c, f.struct, obj, inner)
                    inner.flush_write(c)
            else:
                self.struct(c, f.struct, obj, run)
        else:
            self.value(c, f.type, expr, run, nullable, compact)

    def length(self, c: Code, run: Run, compact: bool, fmt: str, var: str,
               nullable: bool) -> None:
        """Write the length of `var` (None meaning null) as a length prefix."""
        size = f"len({var})"
        if compact:
            run.flush_write(c)
            if nullable:
                with c.block(f"if {var} is None:"):
                    c("ap(b'\\x00')")
            with c.block_if(nullable, "else:"):
                c(f"n = {size} + 1")
                c("ap(_UV1[n] if n < 128 else _uvarint(n))")
        else:
            run.add(fmt, f"-1 if {var} is None else {size}" if nullable else size)
            run.flush_write(c)

    def value(self, c: Code, type_: str, expr: str, run: Run, nullable: bool,
              compact: bool) -> None:
        fmt = FIXED_FORMATS.get(type_)
        if fmt == "16s":
            run.add(fmt, f"{expr}.bytes")
            return
        if fmt is not None:
            run.add(fmt, expr)
            return
        s = self.fresh("s")
        if type_ == "string":
            if nullable:
                c(f"{s} = {expr}")
                with c.block(f"if {s} is not None:"):
                    c(f"{s} = {s}.encode()")
            else:
                c(f"{s} = {expr}.encode()")
        else:
            c(f"{s} = {expr}")
        if compact:
            run.flush_write(c)
            if nullable:
                with c.block(f"if {s} is None:"):
                    c("ap(b'\\x00')")
            with c.block_if(nullable, "else:"):
                c(f"n = len({s}) + 1")
                c("ap(_UV1[n] if n < 128 else _uvarint(n))")
                self._append_payload(c, type_, s)
            return
        fmt = "h" if type_ == "string" else "i"
        run.add(fmt, f"-1 if {s} is None else len({s})" if nullable else f"len({s})")
        run.flush_write(c)
        with c.block_if(nullable, f"if {s} is not None:"):
            self._append_payload(c, type_, s)

    @staticmethod
    def _append_payload(c: Code, type_: str, s: str) -> None:
        if type_ == "records":
            # an ExternalRecords part: note its index so encode_parts() can keep it separate
            with c.block(f"if {s}.__class__ not in _PLAIN_BUFFERS:"):
                c("ext.append(len(parts))")
        c(f"ap({s})")

    def array_body(self, c: Code, f: FieldSpec, x: str) -> None:
        fmt = PACKABLE_ELEMENTS.get(f.type)
        if fmt is not None:
            c(f"ap({self.b.struct_table('>{0}' + fmt)}[len({x})].pack(*{x}))")
            return
        elem = self.fresh("o" if f.is_struct else "e")
        with c.block(f"for {elem} in {x}:"):
            run = Run(self.b)
            if f.is_struct:
                self.struct(c, f.struct, elem, run)
            else:
                self.value(c, f.type, elem, run, False, f.compact(self.v, self.flex))
            run.flush_write(c)

    def tags_helper(self, spec: StructSpec, tagged: list[FieldSpec]) -> str:
        """The function that writes the tagged-field section of `spec` (some non-default)."""
        sub = EncodeGen(self.b, self.msg, self.v)
        c = Code()
        c("fields = []")
        for f in sorted(tagged, key=lambda f: f.tag):
            with c.block(f"if not ({self.is_default(f, f'o0.{f.attr}')}):"):
                c("parts = []")
                c("ap = parts.append")
                run = Run(self.b)
                sub.field(c, f, f"o0.{f.attr}", run)
                run.flush_write(c)
                c("body = b''.join(parts)")
                c(f"fields.append({_uvarint_bytes(f.tag)!r} + _uvarint(len(body)) + body)")
        c("return _uvarint(len(fields)) + b''.join(fields)")
        return self.b.define(_fn_name(self.msg, "encode_tags", self.v) + "_" + spec.name,
                             _with_prologue(f"def {FN}(o0):", c))


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
