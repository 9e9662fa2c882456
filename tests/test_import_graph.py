"""scripts/check_import_cycles.py: the import graph it builds and the cycles it finds."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("check_import_cycles", REPO / "scripts" / "check_import_cycles.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text))
    for directory in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    return root


def test_acyclic_tree_has_no_cycle(tmp_path):
    root = _tree(tmp_path, {"a.py": "from . import b\n", "b.py": "import pkg.c\n", "c.py": "import os\n"})
    graph, cycles = check.find_cycles(root)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.c"} and graph["pkg.c"] == set()
    assert cycles == []


def test_function_level_import_closes_a_cycle(tmp_path):
    root = _tree(tmp_path, {"a.py": "from .b import f\n",
                            "b.py": "def f():\n    from .a import g\n    return g\n"})
    _, cycles = check.find_cycles(root)
    assert cycles == [["pkg.a", "pkg.b"]]


def test_type_checking_import_closes_a_cycle(tmp_path):
    root = _tree(tmp_path, {"a.py": "from pkg.b import B\n",
                            "b.py": """\
                                from typing import TYPE_CHECKING
                                if TYPE_CHECKING:
                                    from pkg.a import A
                                class B: ...
                                """})
    _, cycles = check.find_cycles(root)
    assert cycles == [["pkg.a", "pkg.b"]]


def test_relative_imports_resolve_from_packages_and_modules(tmp_path):
    root = _tree(tmp_path, {"sub/__init__.py": "from .x import X\n",
                            "sub/x.py": "from ..top import T\nfrom .. import other\n",
                            "top.py": "T = 1\n", "other.py": ""})
    graph, _ = check.find_cycles(root)
    assert graph["pkg.sub"] == {"pkg.sub.x"}
    assert graph["pkg.sub.x"] == {"pkg.top", "pkg.other"}


def test_from_package_import_submodule_is_an_edge_to_the_submodule(tmp_path):
    root = _tree(tmp_path, {"sub/__init__.py": "NAME = 1\n", "sub/mod.py": "", "a.py": "from pkg.sub import mod, NAME\n"})
    graph, _ = check.find_cycles(root)
    assert graph["pkg.a"] == {"pkg.sub.mod", "pkg.sub"}


def test_package_init_is_a_module_but_not_implied_by_its_submodules(tmp_path):
    # sub/__init__ imports sub.x, and sub.x imports a sibling: no cycle through the package
    root = _tree(tmp_path, {"sub/__init__.py": "from .x import X\n", "sub/x.py": "from .y import Y\nX = Y\n",
                            "sub/y.py": "Y = 1\n"})
    _, cycles = check.find_cycles(root)
    assert cycles == []
    # but a submodule that imports its package's __init__, which imports it, is a cycle
    root = _tree(tmp_path / "2", {"sub/__init__.py": "from .x import X\n", "sub/x.py": "from pkg.sub import Z\n"})
    _, cycles = check.find_cycles(root)
    assert cycles == [["pkg.sub", "pkg.sub.x"]]


def test_lazy_export_names_are_edges_from_their_reader(tmp_path):
    root = _tree(tmp_path, {
        "lazy_exports.py": "def lazy_exports(package, where): ...\n",
        "log/__init__.py": "from ..lazy_exports import lazy_exports\n"
                           "__getattr__, __dir__ = lazy_exports(__name__, {'Part': '.part'})\n",
        "log/part.py": "from .helpers import h\n",
        "log/helpers.py": "from pkg.log import Part\n"})
    graph, cycles = check.find_cycles(root)
    assert graph["pkg.log"] == {"pkg.lazy_exports"}
    assert graph["pkg.log.helpers"] == {"pkg.log.part"}
    assert cycles == [["pkg.log.helpers", "pkg.log.part"]]


def test_imports_in_strings_do_not_count_and_odd_statements_parse(tmp_path):
    root = _tree(tmp_path, {
        "a.py": '"""Use it as\n\n    from pkg.b import x\n"""\nfrom .c import (  # noqa (a comment)\n    y,\n)\n',
        "b.py": "from pkg.a import z\n", "c.py": ""})
    graph, _ = check.find_cycles(root)
    assert graph["pkg.a"] == {"pkg.c"}
    assert check.build_graph(root) == check.build_graph(root, exact=True)


def test_components_and_example_cycle(tmp_path):
    root = _tree(tmp_path, {"a.py": "from . import b\n", "b.py": "from . import c\n", "c.py": "from . import a\n",
                            "d.py": "from . import e\n", "e.py": "from . import d\n", "f.py": "from . import a\n"})
    graph, cycles = check.find_cycles(root)
    assert cycles == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.d", "pkg.e"]]
    assert check.shortest_cycle(graph, cycles[0]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_exit_status_and_report(tmp_path):
    clean = _tree(tmp_path / "clean", {"a.py": "from . import b\n", "b.py": ""})
    cyclic = _tree(tmp_path / "cyclic", {"a.py": "from . import b\n", "b.py": "from . import a\n"})
    script = str(REPO / "scripts" / "check_import_cycles.py")
    ok = subprocess.run([sys.executable, script, str(clean)], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("no import cycle: 3 modules")
    bad = subprocess.run([sys.executable, script, str(cyclic)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "pkg.a -> pkg.b -> pkg.a" in bad.stdout


def test_fast_graph_equals_whole_file_parsing_on_kafkapy():
    root = REPO / "kafkapy"
    assert check.build_graph(root) == check.build_graph(root, exact=True)


def test_kafkapy_has_no_import_cycle():
    """The real tree, as scripts/test.sh checks it after lint-imports: no cycle of any kind."""
    graph, cycles = check.find_cycles(REPO / "kafkapy")
    assert cycles == [], "\n".join(" -> ".join(check.shortest_cycle(graph, component)) for component in cycles)


def test_kafkapy_has_no_import_cycle():
    graph, cycles = check.find_cycles(REPO / "kafkapy")
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(check.shortest_cycle(graph, c)) for c in cycles)
