"""Differential runs: the same client cells against kafkapy and against real Apache Kafka.

A cell (conformance/matrix/cells.py) is run once against a kafkapy process and once against each
reference broker (conformance/real_kafka.py), every broker started with the same Kafka properties
(base_properties plus the caller's). The two result lines of each scenario are compared on `status`
and `observed`; `same` is plain equality, `accepted` also lets the paths known_differences.py lists
differ. scripts/differential.py is the command line; conformance/differential/test_differential.py
the CI slice.
"""
from __future__ import annotations

import copy
import importlib
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from conformance.broker_process import start_broker
from conformance.differential.known_differences import allowed_paths
from conformance.matrix.cells import Cell, CellUnavailable, parse_results
from conformance.real_kafka import REFERENCES, RealKafka, base_properties

__all__ = ["CellRun", "Target", "all_cells", "compare", "differential_rows", "run_cell"]

# The matrix's per-language registries, each optional (a helper may not have written it yet).
CELL_MODULES = ("conformance.matrix.java.cells", "conformance.matrix.python.cells",
                "conformance.differential.cells")


def all_cells() -> list[Cell]:
    """Every registered cell whose module imports here (a missing module is no cell, not an error)."""
    cells: list[Cell] = []
    for module_name in CELL_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cells.extend(getattr(module, "CELLS", ()))
    return cells


@dataclass(slots=True)
class CellRun:
    """One cell's program run against one broker: its result lines by scenario, or why there are none."""

    cell: Cell
    target: str
    results: dict[str, dict] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0


@dataclass(slots=True)
class Target:
    """A broker the cells run against: kafkapy or a reference, started with the same properties."""

    name: str
    bootstrap: str
    authorizer: bool


def run_cell(cell: Cell, target: Target, *, scenarios: Iterable[str] = ()) -> CellRun:
    """Run `cell`'s program against `target` with a fresh prefix; failures become `error`, not raises."""
    run = CellRun(cell, target.name)
    env = {**os.environ, **cell.env}
    if target.authorizer:
        env["MATRIX_AUTHORIZER"] = "1"
    only = ",".join(scenarios)
    if only:
        env["MATRIX_SCENARIOS"] = only
    prefix = f"diff-{uuid.uuid4().hex[:8]}"
    begin = time.monotonic()
    try:
        result = subprocess.run(cell.command(target.bootstrap, prefix), capture_output=True, text=True,
                                timeout=cell.timeout_s, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as expired:
        run.error = f"{cell.name} did not finish within {cell.timeout_s:.0f} s against {target.name}"
        stdout = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout
        result = None
    else:
        stdout = result.stdout
        if result.returncode != 0:
            run.error = f"{cell.name} exited {result.returncode} against {target.name}: {result.stderr[-2000:]}"
    run.seconds = time.monotonic() - begin
    try:
        run.results = {line["scenario"]: line for line in parse_results(stdout or "")}
    except ValueError as exc:
        run.error = f"{run.error or ''} {exc}".strip()
    if result is not None and run.error is None and not run.results:
        run.error = f"{cell.name} printed no scenario line against {target.name}: {result.stderr[-2000:]}"
    return run


def _without(observed: object, path: tuple[str, ...]) -> object:
    if not path or not isinstance(observed, dict) or path[0] not in observed:
        return observed
    if len(path) == 1:
        return {k: v for k, v in observed.items() if k != path[0]}
    return {**observed, path[0]: _without(observed[path[0]], path[1:])}


def compare(reference: str, scenario: str, ours: Mapping, theirs: Mapping) -> tuple[bool, bool, list[str]]:
    """(same, accepted, reasons): equal status and observed; equal once the known differences are left out."""
    mine = {"status": ours.get("status"), "observed": ours.get("observed")}
    other = {"status": theirs.get("status"), "observed": theirs.get("observed")}
    if mine == other:
        return True, True, []
    reasons = []
    known_differences = allowed_paths(reference, scenario)
    whole = [known.reason for known in known_differences if not known.path]
    if whole:
        return False, True, whole
    a, b = copy.deepcopy(mine["observed"]), copy.deepcopy(other["observed"])
    for known in known_differences:
        a2, b2 = _without(a, known.path), _without(b, known.path)
        if a2 != a or b2 != b:
            reasons.append(known.reason)
        a, b = a2, b2
    accepted = mine["status"] == other["status"] and a == b
    return False, accepted, reasons if accepted else []


def differential_rows(ours: CellRun, theirs: CellRun) -> list[dict]:
    """build/differential.json's rows for one cell: a row per scenario either run printed."""
    rows = []
    names = list(ours.results) + [s for s in theirs.results if s not in ours.results]
    for scenario in names:
        mine = ours.results.get(scenario, {"status": "missing", "observed": None, "detail": ours.error or ""})
        other = theirs.results.get(scenario, {"status": "missing", "observed": None, "detail": theirs.error or ""})
        same, accepted, reasons = compare(theirs.target, scenario, mine, other)
        rows.append({
            "client": ours.cell.client, "version": ours.cell.version, "scenario": scenario,
            "kafkapy": {"status": mine["status"], "observed": mine["observed"], "detail": mine.get("detail", "")},
            "reference": {"name": theirs.target, "status": other["status"], "observed": other["observed"],
                          "detail": other.get("detail", "")},
            "same": same, "accepted": accepted, "known_difference": reasons,
        })
    return rows


def kafkapy_target(work_dir: Path, overrides: Mapping[str, str], authorizer: bool = True):
    """Start kafkapy with base_properties (ZooKeeper-mode authorizer name) plus `overrides`."""
    props = {**base_properties("zk", authorizer=authorizer), **overrides}
    return start_broker(overrides=props, work_dir=work_dir)


def reference_broker(name: str, work_dir: Path, overrides: Mapping[str, str], authorizer: bool = True) -> RealKafka:
    return RealKafka(REFERENCES[name], work_dir, overrides, authorizer=authorizer)


def prepare(cells: Iterable[Cell]) -> tuple[list[Cell], dict[str, str]]:
    """The cells that prepare() here, and why the others cannot run."""
    ready, skipped = [], {}
    for cell in cells:
        try:
            cell.prepare()
        except CellUnavailable as exc:
            skipped[cell.name] = str(exc)
        else:
            ready.append(cell)
    return ready, skipped
