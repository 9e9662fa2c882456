"""Hand-written __eq__ and __repr__ of slotted classes against their slots (issue 33).

A class with `__slots__` (or `@dataclass(slots=True)`) whose body defines __eq__ or __repr__ has to
keep them in step with its slots by hand: a slot added later and forgotten in __eq__ makes two
different objects equal. Each such class in kafkapy/ is found from the source (inherited methods,
NamedTuple's and dataclass's generated ones are not hand-written and not looked at), imported for
its runtime __slots__, and its methods parsed with `ast`:

- __eq__ must use every slot (reading it, or iterating over `__slots__`), or name in its docstring
  or a comment the slots it leaves out (and why);
- __repr__ must name every slot, or say in its docstring or a comment why it shows only some.

What a method uses includes the methods and properties of the class it calls on `self` (a `_key()`
or `to_json()` helper). Classes outside the packages that fixed theirs are listed in ALLOWED with
the reason.
"""
from __future__ import annotations

import ast
import importlib
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "kafkapy"

# (module.Class, method) -> (the slots it may leave out, why)
ALLOWED: dict[tuple[str, str], tuple[frozenset[str], str]] = {
}


@dataclass
class SlottedClass:
    module: str
    qualname: str
    path: Path
    source: str
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return f"{self.module}.{self.qualname}"


def _is_slotted(node: ast.ClassDef) -> bool:
    for statement in node.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else (
            [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets):
            return True
    return any(isinstance(d, ast.Call) and any(k.arg == "slots" and isinstance(k.value, ast.Constant) and k.value.value
                                                for k in d.keywords)
               for d in node.decorator_list)


def _hand_written(node: ast.ClassDef) -> set[str]:
    return {s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
            and s.name in ("__eq__", "__repr__")}


def _slotted_classes() -> list[SlottedClass]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "__slots__" not in source and "slots=True" not in source:
            continue
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)

        def visit(body, prefix):
            for node in body:
                if isinstance(node, ast.ClassDef):
                    if _is_slotted(node) and _hand_written(node):
                        found.append(SlottedClass(module, prefix + node.name, path, source, node))
                    visit(node.body, prefix + node.name + ".")

        visit(ast.parse(source, str(path)).body, "")
    return found


def _runtime_slots(item: SlottedClass) -> tuple[str, ...]:
    cls = importlib.import_module(item.module)
    for part in item.qualname.split("."):
        cls = getattr(cls, part)
    slots = cls.__dict__.get("__slots__", ())
    slots = (slots,) if isinstance(slots, str) else tuple(slots)
    return tuple(s for s in slots if s not in ("__weakref__", "__dict__"))


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _comments(source: str) -> str:
    out = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                out.append(token.string)
    except (tokenize.TokenError, IndentationError):
        pass
    return " ".join(out)


def _uses(item: SlottedClass, method: str) -> tuple[set[str], bool, str]:
    """The names a method reads (through the class's own methods it calls on self too), whether
    it iterates over __slots__, and its docstring and comments."""
    methods = {s.name: s for s in item.node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names: set[str] = set()
    all_slots = False
    seen: set[str] = set()
    todo = [method]
    while todo:
        current = todo.pop()
        if current in seen or current not in methods:
            continue
        seen.add(current)
        for node in ast.walk(methods[current]):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
                if node.attr == "__slots__":
                    all_slots = True
                if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in methods:
                    todo.append(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(_WORD.findall(node.value))
    function = methods[method]
    text = ast.get_docstring(function) or ""
    lines = item.source.splitlines()[function.lineno - 1:function.end_lineno]  # whole lines: trailing comments too
    text += " " + _comments(textwrap.dedent("\n".join(lines) + "\n"))
    return names, all_slots, text


CLASSES = _slotted_classes()


def test_the_scan_finds_the_known_classes():
    names = {c.name for c in CLASSES}
    assert {"kafkapy.log.config.LogConfig", "kafkapy.protocol.headers.RequestHeader",
            "kafkapy.log.segment.LogSegment"} <= names


@pytest.mark.parametrize("item", CLASSES, ids=lambda c: c.name)
def test_eq_and_repr_cover_the_slots(item: SlottedClass):
    slots = _runtime_slots(item)
    problems = []
    for method in sorted(_hand_written(item.node)):
        names, all_slots, explained = _uses(item, method)
        if all_slots:
            continue
        missing = [s for s in slots if s not in names]
        if not missing:
            continue
        allowed, _reason = ALLOWED.get((item.name, method), (frozenset(), ""))
        missing = [s for s in missing if s not in allowed]
        if method == "__eq__":
            mentioned = set(_WORD.findall(explained))
            unexplained = [s for s in missing if s not in mentioned]
            if unexplained:
                problems.append(f"__eq__ leaves out {', '.join(unexplained)} without saying why "
                                "(its docstring or a comment should name them)")
        elif missing and not explained.strip():
            problems.append(f"__repr__ leaves out {', '.join(missing)} without a docstring or comment saying why")
    assert not problems, f"{item.name} ({item.path.relative_to(ROOT.parent)}): " + "; ".join(problems)


def test_the_checker_catches_a_forgotten_slot(tmp_path):
    source = (
        "class Point:\n"
        "    __slots__ = ('x', 'y', 'label')\n"
        "    def __eq__(self, other):\n"
        "        return (self.x, self.y) == (other.x, other.y)  # label: a name, not the point\n"
        "    def __repr__(self):\n"
        "        return f'Point({self.x}, {self.y})'\n")
    node = ast.parse(source).body[0]
    item = SlottedClass("m", "Point", tmp_path / "m.py", source, node)
    names, all_slots, explained = _uses(item, "__eq__")
    assert {"x", "y"} <= names and "label" not in names and "label" in explained and not all_slots
    names, _, explained = _uses(item, "__repr__")
    assert "label" not in names and not explained.strip()
