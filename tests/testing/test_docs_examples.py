"""The examples in docs/testing.md run as they are written there.

A fenced block preceded by an HTML comment `<!-- test: KIND -->` is run; KIND says how:
- `pytest`: the block is a test file, run by pytest in a fresh directory (the kafkapy plugin loads
  from its entry point, as in a user's project), and must pass;
- `unittest`: the block is a module run with `python -m unittest`, and must pass;
- `python`: the block is a script, run with this interpreter, and must exit 0;
- `sh`: the block is a bash script (`set -euo pipefail`), and must exit 0.
Every run has a time limit and its own temporary directory; the examples clean up after themselves.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
KINDS = ("pytest", "unittest", "python", "sh")
_BLOCK = re.compile(r"<!-- test: (\w+) -->\s*\n```[\w-]*\n(.*?)\n```", re.S)

pytestmark = pytest.mark.timeout(240)


def examples() -> list[tuple[str, int, str]]:
    """(kind, line number, code) of every runnable block in docs/testing.md."""
    text = DOC.read_text()
    found = []
    for match in _BLOCK.finditer(text):
        kind = match.group(1)
        if kind not in KINDS:
            raise ValueError(f"docs/testing.md line {text.count(chr(10), 0, match.start()) + 1}: "
                             f"unknown example kind {kind!r} (one of {', '.join(KINDS)})")
        found.append((kind, text.count("\n", 0, match.start()) + 1, match.group(2)))
    return found


EXAMPLES = examples()


def test_the_guide_has_runnable_examples_of_every_kind():
    assert {kind for kind, _, _ in EXAMPLES} == set(KINDS)


@pytest.mark.parametrize("kind,line,code", EXAMPLES, ids=[f"{k}-line{n}" for k, n, _ in EXAMPLES])
def test_example_runs(kind, line, code, tmp_path):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    if kind == "pytest":
        (tmp_path / "test_example.py").write_text(code + "\n")
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"]
    elif kind == "unittest":
        (tmp_path / "example_test.py").write_text(code + "\n")
        argv = [sys.executable, "-m", "unittest", "-v", "example_test"]
    elif kind == "python":
        (tmp_path / "example.py").write_text(code + "\n")
        argv = [sys.executable, "example.py"]
    else:
        (tmp_path / "example.sh").write_text("set -euo pipefail\n" + code + "\n")
        argv = ["bash", "example.sh"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        out, err = "", "(timed out after 180 s)"
    finally:
        # whatever the example started goes with it, even when it failed
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            out, err = proc.communicate()
    assert proc.returncode == 0, (f"docs/testing.md line {line} ({kind}) failed with {proc.returncode}:\n"
                                  f"{out[-3000:]}\n{err[-3000:]}")
