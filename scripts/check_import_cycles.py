"""Fail on any import cycle in kafkapy, counting every kind of import.

`lint-imports` (pyproject.toml [tool.importlinter]) holds the packages to their layers but leaves
out `if TYPE_CHECKING:` imports, and a cycle inside one layer is no breach of a layers contract.
This check builds the whole graph from the source with `ast`, nothing imported:

- every `import` and `from ... import` counts wherever it stands: module level, inside a function
  or class, under `if TYPE_CHECKING:`, in a try/except;
- relative imports are resolved against the importing module (a package's `__init__` is the
  package itself);
- `from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`;
- a package's `__init__` is a module like any other: its own imports are its edges. Importing
  `a.b.c` is an edge to `a.b.c` only, not to the packages `a` and `a.b` Python runs first (every
  submodule would otherwise be in a cycle with a package that imports it);
- the lazy maps of kafkapy/lazy_exports.py (`__getattr__, __dir__ = lazy_exports(__name__, {...})`
  in a package's `__init__`): the package imports nothing by them; the module that reads a name
  (`from kafkapy.log import PartitionLog`) imports the module the map names
  (`kafkapy.log.partition_log`), so that is the edge, from the reader. Names the map does not hold
  stay an edge to the package.

Each strongly connected component (Tarjan's algorithm) is reported with one cycle through it.
Exit status 1 if there is any, 0 with a one-line summary if there is none. The check is total:
there is no option to let a package through.

    python scripts/check_import_cycles.py [ROOT_DIR]      # ROOT_DIR defaults to this repo's kafkapy/
"""
from __future__ import annotations

import ast
import re
import sys
import time
from collections import deque
from pathlib import Path

__all__ = ["build_graph", "find_cycles", "main", "strongly_connected", "shortest_cycle"]


def _module_names(root: Path) -> dict[str, Path]:
    """Every module under the package directory `root`, by dotted name (`__init__` as the package)."""
    package = root.name
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join([package, *parts])] = path
    return modules


def _lazy_map(tree: ast.Module, package: str) -> dict[str, str]:
    """The name -> absolute module map of a `lazy_exports(__name__, {...})` call in a package's
    `__init__`, or an empty map."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "lazy_exports"
                and len(node.args) == 2 and isinstance(node.args[1], ast.Dict)):
            for key, value in zip(node.args[1].keys, node.args[1].values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    target = value.value
                    if target.startswith("."):
                        target = _resolve_relative(package, True, len(target) - len(target.lstrip(".")),
                                                   target.lstrip("."))
                    found[key.value] = target
    return found


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


# Parsing all of kafkapy with `ast` takes 3 s here; parsing only its import statements, 0.1 s. The
# statements are found as text once triple-quoted strings are cut out; a statement that does not
# parse alone (a comment with a parenthesis in an import's parentheses, say) makes the whole file be
# parsed. tests/test_import_graph.py holds the fast graph equal to the one from whole-file parsing.
_TRIPLE_QUOTED = re.compile(r'(?s)""".*?"""|\'\'\'.*?\'\'\'')
_IMPORT_STATEMENT = re.compile(
    r"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)", re.M)


def _imports(path: Path, exact: bool) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of the file at `path`, wherever it stands."""
    source = path.read_text(encoding="utf-8")
    if not exact:
        found: list[ast.Import | ast.ImportFrom] = []
        try:
            for match in _IMPORT_STATEMENT.finditer(_TRIPLE_QUOTED.sub("", source)):
                found.extend(node for node in ast.parse(match.group(0).strip()).body
                             if isinstance(node, (ast.Import, ast.ImportFrom)))
            return found
        except SyntaxError:
            pass
    return [node for node in ast.walk(ast.parse(source, str(path)))
            if isinstance(node, (ast.Import, ast.ImportFrom))]


def build_graph(root: Path, exact: bool = False) -> dict[str, set[str]]:
    """The import graph of the package directory `root`: each module to the modules of the same
    package it imports (imports of other packages are left out). `exact` parses every file whole
    instead of its import statements alone (the same graph, 30 times slower)."""
    modules = _module_names(root)
    package = root.name
    statements = {name: _imports(path, exact) for name, path in modules.items()}
    lazy = {}
    for name, path in modules.items():
        if path.name == "__init__.py":
            source = path.read_text(encoding="utf-8")
            if "lazy_exports(" in source:
                where = _lazy_map(ast.parse(source, str(path)), name)
                if where:
                    lazy[name] = where

    def own(target: str) -> str | None:
        # the longest prefix of `target` that is one of our modules
        parts = target.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in modules:
                return candidate
            parts.pop()
        return None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, nodes in statements.items():
        is_package = modules[name].name == "__init__.py"
        edges = graph[name]
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == package or alias.name.startswith(package + "."):
                        target = own(alias.name)
                        if target:
                            edges.add(target)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = _resolve_relative(name, is_package, node.level, node.module)
                else:
                    base = node.module or ""
                if base != package and not base.startswith(package + "."):
                    continue
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in modules:
                        edges.add(submodule)
                    elif base in lazy and alias.name in lazy[base]:
                        target = own(lazy[base][alias.name])
                        if target:
                            edges.add(target)
                    else:
                        target = own(base)
                        if target:
                            edges.add(target)
        edges.discard(name)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module (or one that imports
    itself), each sorted, iteratively (no recursion limit on deep graphs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    components.append(sorted(component))
    return sorted(components, key=lambda c: (-len(c), c))


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One shortest cycle inside `component`, from its first module back to it."""
    members = set(component)
    start = component[0]
    parents: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child not in members:
                continue
            if child == start:
                path = [node]
                while parents[path[-1]] is not None:
                    path.append(parents[path[-1]])  # type: ignore[arg-type]
                return [*reversed(path), start]
            if child not in parents:
                parents[child] = node
                queue.append(child)
    return [start, start]


def find_cycles(root: Path) -> tuple[dict[str, set[str]], list[list[str]]]:
    """The import graph of `root` and its cycles (strongly connected components)."""
    graph = build_graph(root)
    return graph, strongly_connected(graph)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "kafkapy"
    started = time.perf_counter()
    graph, cycles = find_cycles(root)
    elapsed = time.perf_counter() - started
    edges = sum(len(e) for e in graph.values())
    if not cycles:
        print(f"no import cycle: {len(graph)} modules, {edges} imports ({elapsed:.2f} s)")
        return 0
    for component in cycles:
        print(f"cycle of {len(component)} modules: {', '.join(component)}")
        print("  for example: " + " -> ".join(shortest_cycle(graph, component)))
    print(f"{len(cycles)} import cycles in {len(graph)} modules, {edges} imports ({elapsed:.2f} s)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
