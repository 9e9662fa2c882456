"""The non-Java cells of the client matrix (Python, Go, Node, kcat) against one kafkapy broker.

Every cell's program runs the scenario contract (conformance/matrix/README.md) and each scenario
must `pass`, or be `unsupported` for the reason its cells.py gives (expected_unsupported). The
cells of the selected tests run concurrently (MATRIX_PARALLEL at a time, default 4): their time
is mostly waiting on the broker and on client timers, so on two cores the whole set takes about
as long as its slowest cells. The broker has an authorizer (allow-everyone without ACLs), so
error_not_authorized runs too.

A cell whose runtime or packages cannot be had (no go, no npm registry, no PyPI for the old
confluent-kafka) skips loudly; with KAFKAPY_REQUIRE_CLIENTS=1 (or KAFKAPY_REQUIRE_JAVA=1) that is
a failure instead.
"""
from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import pytest

from conformance.matrix.cells import SCENARIOS, Cell, CellUnavailable, parse_results
from conformance.matrix.python import cells as python_cells

REQUIRE_ENVS = ("KAFKAPY_REQUIRE_CLIENTS", "KAFKAPY_REQUIRE_JAVA")
PARALLEL = int(os.environ.get("MATRIX_PARALLEL", "4"))

pytestmark = pytest.mark.timeout(600)


def _language_cells() -> list[tuple[Cell, Callable[[Cell, str], str | None]]]:
    found = [(cell, python_cells.expected_unsupported) for cell in python_cells.CELLS]
    for module_name in ("go", "node", "kcat"):
        try:
            module = __import__(f"conformance.matrix.{module_name}.cells", fromlist=["CELLS"])
        except ModuleNotFoundError:
            continue
        found.extend((cell, module.expected_unsupported) for cell in module.CELLS)
    return found


CELLS = _language_cells()
CELL_BY_NAME = {cell.name: (cell, expected) for cell, expected in CELLS}


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true", "auto.create.topics.enable": "false"}


@dataclass(slots=True)
class CellRun:
    """What one cell's program did: its scenario lines, or why it could not run."""

    unavailable: str | None = None
    results: list[dict] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


def _run_cell(cell: Cell, bootstrap: str) -> CellRun:
    started = time.monotonic()
    try:
        cell.prepare()
    except CellUnavailable as exc:
        return CellRun(unavailable=str(exc), seconds=time.monotonic() - started)
    prefix = "m-" + re.sub(r"[^A-Za-z0-9._-]", "-", cell.name) + f"-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, **cell.env, "MATRIX_AUTHORIZER": "1"}
    try:
        done = subprocess.run(cell.command(bootstrap, prefix), capture_output=True, text=True, env=env,
                              timeout=cell.timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout
        return CellRun(error=f"did not finish within {cell.timeout_s:.0f} s; stdout so far:\n{out}",
                       seconds=time.monotonic() - started)
    run = CellRun(seconds=time.monotonic() - started)
    try:
        run.results = parse_results(done.stdout)
    except ValueError as exc:
        run.error = f"{exc}\n----- stderr -----\n{done.stderr[-3000:]}"
    if done.returncode != 0:
        run.error = f"exited {done.returncode}\n----- stderr -----\n{done.stderr[-3000:]}"
    return run


@pytest.fixture(scope="module")
def cell_runs(broker, request: pytest.FixtureRequest) -> dict[str, CellRun]:
    """Run the cells of this session's selected tests, PARALLEL at a time, once per module."""
    wanted = [item.callspec.params["cell_name"] for item in request.session.items
              if item.module is request.module and hasattr(item, "callspec")
              and "cell_name" in item.callspec.params]
    with ThreadPoolExecutor(max_workers=max(1, PARALLEL)) as pool:
        futures = {name: pool.submit(_run_cell, CELL_BY_NAME[name][0], broker.bootstrap) for name in wanted}
        return {name: future.result() for name, future in futures.items()}


def _unavailable(reason: str) -> None:
    message = f"!!! client matrix cell NOT RUN: {reason}"
    required = [env for env in REQUIRE_ENVS if os.environ.get(env) == "1"]
    if required:
        pytest.fail(f"{message} ({required[0]}=1)", pytrace=False)
    pytest.skip(message)


@pytest.mark.parametrize("cell_name", sorted(CELL_BY_NAME))
def test_cell_runs_every_scenario(cell_name: str, cell_runs: dict[str, CellRun]) -> None:
    """Each scenario passes, or is unsupported for the reason the cell's registry gives."""
    cell, expected_unsupported = CELL_BY_NAME[cell_name]
    run = cell_runs[cell_name]
    if run.unavailable:
        _unavailable(f"{cell_name}: {run.unavailable}")
    print(f"{cell_name}: {run.seconds:.1f} s")
    for line in run.results:
        print(f"  {line['scenario']}: {line['status']} {line['observed']} {line['detail']}")
    assert run.error is None, f"{cell_name}: {run.error}"
    by_scenario = {line["scenario"]: line for line in run.results}
    assert list(by_scenario) == list(SCENARIOS), f"{cell_name}: scenarios out of contract order"
    wrong = []
    for scenario, line in by_scenario.items():
        reason = expected_unsupported(cell, scenario)
        want = "unsupported" if reason else "pass"
        if line["status"] != want:
            wrong.append(f"{scenario}: {line['status']} (expected {want}{': ' + reason if reason else ''}) "
                         f"observed={line['observed']} detail={line['detail']}")
    assert not wrong, f"{cell_name}:\n" + "\n".join(wrong)
