"""Running a matrix cell's program against a broker, and the results files the docs are written from.

A run's results are two files in a results directory: `<cell>.jsonl`, the program's stdout as it
printed it (one scenario object per line), and `<cell>.meta.json` (client, version, date, return
code, why it did not run, the tail of its stderr). scripts/client_matrix.py reads them back with
`read_runs` to write docs/compatibility.md.
"""
from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from conformance.matrix.cells import Cell, CellUnavailable, parse_results

__all__ = ["CellRun", "discover_cells", "read_runs", "run_cell", "write_run"]

MATRIX_DIR = Path(__file__).resolve().parent
STDERR_TAIL_CHARS = 4000


@dataclass(slots=True)
class CellRun:
    """What one cell's program reported: its scenario lines, or why there are none."""

    client: str
    version: str
    date: str
    results: list[dict] = field(default_factory=list)
    returncode: int | None = None
    unavailable: str | None = None        # the cell could not be prepared (no runtime/package)
    error: str | None = None              # it ran but its output is not the contract's
    stderr_tail: str = ""
    seconds: float = 0.0
    kafkapy_commit: str = ""              # the kafkapy checkout the broker ran from, when known

    @property
    def name(self) -> str:
        return f"{self.client}-{self.version}"

    def by_scenario(self) -> dict[str, dict]:
        return {r["scenario"]: r for r in self.results}


def discover_cells() -> list[Cell]:
    """Every language's CELLS: conformance/matrix/<language>/cells.py, languages in name order."""
    cells: list[Cell] = []
    for path in sorted(MATRIX_DIR.glob("*/cells.py")):
        module = importlib.import_module(f"conformance.matrix.{path.parent.name}.cells")
        cells.extend(getattr(module, "CELLS", []))
    return cells


def run_cell(cell: Cell, bootstrap: str, prefix: str, env: dict[str, str] | None = None,
             prepare: bool = True) -> CellRun:
    """Prepare (unless told not to) and run one cell's program; never raises for the cell's own failures."""
    run = CellRun(client=cell.client, version=cell.version, date=_dt.date.today().isoformat())
    started = time.monotonic()
    if prepare:
        try:
            cell.prepare()
        except CellUnavailable as exc:
            run.unavailable = str(exc)
            return run
        except Exception as exc:  # a program that does not build is the cell's failure, not the caller's
            run.error = f"prepare failed: {type(exc).__name__}: {exc}"
            run.seconds = round(time.monotonic() - started, 2)
            return run
    argv = cell.command(bootstrap, prefix)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=cell.timeout_s,
                              stdin=subprocess.DEVNULL, env={**os.environ, **cell.env, **(env or {})})
    except subprocess.TimeoutExpired as expired:
        run.error = f"did not finish within {cell.timeout_s:.0f} s"
        stdout = _text(expired.stdout)
        run.stderr_tail = _text(expired.stderr)[-STDERR_TAIL_CHARS:]
    else:
        run.returncode = done.returncode
        stdout = done.stdout
        run.stderr_tail = done.stderr[-STDERR_TAIL_CHARS:]
        if done.returncode != 0:
            run.error = f"exited {done.returncode}"
    try:
        run.results = parse_results(stdout)
    except ValueError as exc:                     # json.JSONDecodeError is a ValueError too
        run.error = f"{run.error + '; ' if run.error else ''}stdout is not the contract's: {exc}"
        run.results = []
        for line in stdout.splitlines():
            try:
                run.results.extend(parse_results(line))
            except ValueError:
                pass
    run.seconds = round(time.monotonic() - started, 2)
    return run


def _file_stem(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")


def write_run(run: CellRun, results_dir: Path) -> Path:
    """Write `<cell>.jsonl` (the scenario lines) and `<cell>.meta.json`; returns the .jsonl path."""
    results_dir.mkdir(parents=True, exist_ok=True)
    stem = _file_stem(run.name)
    lines = results_dir / f"{stem}.jsonl"
    lines.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in run.results))
    meta = asdict(run)
    del meta["results"]
    (results_dir / f"{stem}.meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return lines


def read_runs(results_dir: Path) -> list[CellRun]:
    """The runs written by write_run into results_dir, in file name order."""
    runs = []
    for meta_path in sorted(results_dir.glob("*.meta.json")):
        meta = json.loads(meta_path.read_text())
        lines_path = meta_path.with_name(meta_path.name[: -len(".meta.json")] + ".jsonl")
        results = parse_results(lines_path.read_text()) if lines_path.exists() else []
        runs.append(CellRun(results=results, **meta))
    return runs


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
