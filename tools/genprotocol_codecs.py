"""Straight-line decoders and encoders for one message version (used by tools/genprotocol.py).

Decoders build objects with `object.__new__` and assign slots directly; nested structs and arrays
are inlined into the message's function, so a version is one function with no per-field dispatch.
Tagged-field sections take a helper call only when they are non-empty (decode) or hold a
non-default value (encode).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from genprotocol_codegen import (
    FIXED_ARRAY_MIN, FIXED_FORMATS, FIXED_SIZES, FN, PACKABLE_ELEMENTS, ArrayPart, Code, Run,
    default_literal, fn_name, with_prologue,
)

if TYPE_CHECKING:
    from genprotocol import FieldSpec, MessageSpec, StructSpec, ModuleBuilder


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
        return self.b.define(fn_name(self.msg, "decode", self.v), with_prologue(
            f"def {FN}(buf, pos):", c, "end = len(buf)"))

    def default_expr(self, f: FieldSpec) -> str:
        lit = default_literal(f)
        if lit == "STRUCT":
            return f"{self.b.class_alias(self.msg, f.struct)}()"
        return lit

    def struct(self, c: Code, spec: StructSpec, end: str, run: Run | None = None) -> str:
        """Emit the decoding of one struct; returns the variable holding the object.

        Given the parent's `run`, the struct's leading fixed-width fields join it.
        """
        obj = self.fresh("o")
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
            self.array_body(c, f, target, end, nullable)
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

    def array_body(self, c: Code, f: FieldSpec, target: str, end: str, nullable: bool) -> None:
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
        return self.b.define(fn_name(self.msg, "decode_tags", self.v) + "_" + spec.name,
                             with_prologue(f"def {FN}(buf, pos, o0):", c))


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
        run = Run(self.b)
        self.struct(c, self.msg.root, "o0", run)
        run.flush_write(c)
        c("return parts")
        return self.b.define(fn_name(self.msg, "encode", self.v), with_prologue(
            f"def {FN}(o0, ext):", c, "parts = []", "ap = parts.append"))

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
        return self.b.define(fn_name(self.msg, "encode_tags", self.v) + "_" + spec.name,
                             with_prologue(f"def {FN}(o0):", c))


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
