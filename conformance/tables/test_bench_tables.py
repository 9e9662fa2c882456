"""bench/tables/bench_tables.py --quick runs and prints its table (the numbers are docs/benchmarks.md's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")

pytestmark = pytest.mark.timeout(120)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "tables" / "bench_tables.py"


def test_bench_quick_reports_ratio_translation_and_lag(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(BENCH), "--quick", "--json", str(tmp_path / "out.json")],
                            capture_output=True, text=True, timeout=100, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for line in ("| on/off |", "| translation", "| lag at 2,000 rec/s"):
        assert line in result.stdout, result.stdout
    import json

    out = json.loads((tmp_path / "out.json").read_text())
    assert out["ratio"] > 0 and out["translation_mb_s"] > 0 and out["steady"]["sent"] > 0
