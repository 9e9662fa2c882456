"""Building blocks for tools/genprotocol.py's code generation: indented code, fixed-width runs, defaults.

A `Run` collects consecutive fixed-width values so the generated code reads them with one
precompiled `struct.Struct.unpack_from` or writes them with one `pack`.
"""
from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from genprotocol import FieldSpec, MessageSpec, ModuleBuilder

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

NO_VERSIONS = (1, 0)   # an empty version range
MAX_VERSION = 0x7FFF   # the upper end of "N+"

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


def snake_case(name: str) -> str:
    """Kafka JSON name -> Python attribute name (the contract's rule)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def fn_name(msg: MessageSpec, what: str, version: int) -> str:
    """The name of a generated function, e.g. _decode_fetch_request_v13."""
    return f"_{what}_{re.sub(r'(?<=[a-z0-9])(?=[A-Z])', '_', msg.name).lower()}_v{version}"


def with_prologue(def_line: str, body: Code, *prologue: str) -> Code:
    """Prefix a function body with its def line and those setup lines it uses (and a memoryview
    if it slices records)."""
    c = Code(level=0)
    c(def_line)
    for line in prologue:
        target = line.split(" = ")[0]
        if any(re.search(rf"\b{target}\b", used) for used in body.lines):   # else unused
            c("    " + line)
    if any("mv[" in line for line in body.lines):
        c("    mv = memoryview(buf)  # records are zero-copy slices of the input")
    c.lines += body.lines
    return c
