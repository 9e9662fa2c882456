"""The kcat cell of the client matrix: Debian's kcat (and the distribution's librdkafka) driven by
scenarios.py next to this file for the metadata/produce/consume scenarios."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from conformance.matrix.cells import Cell, CellUnavailable

__all__ = ["CELLS", "expected_unsupported"]

SCENARIOS_PY = Path(__file__).resolve().parent / "scenarios.py"
_PASSING = {"metadata", "produce_none", "produce_gzip", "produce_snappy", "produce_lz4", "produce_zstd",
            "error_unknown_topic"}


def expected_unsupported(cell: Cell, scenario: str) -> str | None:
    """Why `scenario` is legitimately unsupported by this cell, or None if it must pass."""
    return None if scenario in _PASSING else "the kcat cell runs metadata/produce/consume scenarios only"


def _version() -> str:
    kcat = shutil.which("kcat")
    if not kcat:
        return "not-installed"
    out = subprocess.run([kcat, "-V"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"Version (\S+) .*librdkafka (\S+)", out)
    return f"{match.group(1)}+librdkafka{match.group(2)}" if match else "unknown"


def _prepare() -> None:
    if not shutil.which("kcat"):
        raise CellUnavailable("kcat not found on PATH (Debian: apt-get install -y kcat)")


def _command(bootstrap: str, prefix: str) -> list[str]:
    return [sys.executable, str(SCENARIOS_PY), bootstrap, prefix]


CELLS: list[Cell] = [Cell("kcat", _version(), _command, prepare=_prepare, timeout_s=300.0)]
