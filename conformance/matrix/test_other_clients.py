"""The non-Java cells of the client matrix (Python, Go, Node, kcat) against one kafkapy broker.

Every cell's program runs the scenario contract (conformance/matrix/README.md) and each scenario
must `pass`, or be `unsupported` for the reason its cells.py gives (expected_unsupported). The
cells of the selected tests run concurrently (MATRIX_PARALLEL at a time, default 4): their time
is mostly waiting on the broker and on client timers, so on two cores the whole set takes about
as long as its slowest cells. The broker has an authorizer (allow-everyone without ACLs), so
error_not_authorized runs too.

Each run's JSON lines are kept in the results dir (KAFKAPY_MATRIX_RESULTS_DIR, else pytest's temp
dir) for scripts/client_matrix.py, which runs these cells too (conformance/matrix/runner.py).

A cell whose runtime or packages cannot be had (no go, no npm registry, no PyPI for the old
confluent-kafka) skips loudly; with KAFKAPY_REQUIRE_CLIENTS=1 (or KAFKAPY_REQUIRE_JAVA=1) that is
a failure instead.
"""
from __future__ import annotations

import os
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pytest

from conformance.matrix.cells import SCENARIOS, Cell
from conformance.matrix.go import cells as go_cells
from conformance.matrix.kcat import cells as kcat_cells
from conformance.matrix.node import cells as node_cells
from conformance.matrix.python import cells as python_cells
from conformance.matrix.runner import CellRun, run_cell, write_run
from conformance.pytest_broker import is_external_broker

REQUIRE_ENVS = ("KAFKAPY_REQUIRE_CLIENTS", "KAFKAPY_REQUIRE_JAVA")
RESULTS_ENV = "KAFKAPY_MATRIX_RESULTS_DIR"
PARALLEL = int(os.environ.get("MATRIX_PARALLEL", "4"))

pytestmark = pytest.mark.timeout(600)

ExpectedUnsupported = Callable[[Cell, str], "str | None"]
CELL_BY_NAME: dict[str, tuple[Cell, ExpectedUnsupported]] = {
    cell.name: (cell, module.expected_unsupported)
    for module in (python_cells, go_cells, node_cells, kcat_cells)
    for cell in module.CELLS
}


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true", "auto.create.topics.enable": "false",
            # As Kafka's shipped server.properties: the 3 s default would cost every group join 3 s.
            "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get(RESULTS_ENV)
    return Path(configured) if configured else tmp_path_factory.mktemp("matrix-results")


@pytest.fixture(scope="module")
def cell_runs(broker, results_dir: Path, request: pytest.FixtureRequest) -> dict[str, CellRun]:
    """Run the cells of this session's selected tests, PARALLEL at a time, once per module."""
    wanted = [item.callspec.params["cell_name"] for item in request.session.items
              if item.module is request.module and hasattr(item, "callspec")
              and "cell_name" in item.callspec.params]
    env = {} if is_external_broker() else {"MATRIX_AUTHORIZER": "1"}

    def run(name: str) -> CellRun:
        cell = CELL_BY_NAME[name][0]
        prefix = "m-" + re.sub(r"[^A-Za-z0-9._-]", "-", cell.name) + f"-{uuid.uuid4().hex[:6]}"
        result = run_cell(cell, broker.bootstrap, prefix, env=env)
        write_run(result, results_dir)
        return result

    with ThreadPoolExecutor(max_workers=max(1, PARALLEL)) as pool:
        futures = {name: pool.submit(run, name) for name in wanted}
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
    context = f"\n----- {cell_name} stderr (tail) -----\n{run.stderr_tail[-2500:]}"
    assert run.error is None, f"{cell_name}: {run.error}{context}"
    by_scenario = run.by_scenario()
    assert list(by_scenario) == list(SCENARIOS), f"{cell_name}: not the contract's scenarios in its order"
    wrong = []
    for scenario, line in by_scenario.items():
        reason = expected_unsupported(cell, scenario)
        if scenario == "error_not_authorized" and is_external_broker():
            reason = reason or "no authorizer (external broker)"
        want = "unsupported" if reason else "pass"
        if line["status"] != want:
            wrong.append(f"{scenario}: {line['status']} (expected {want}{': ' + reason if reason else ''}) "
                         f"observed={line['observed']} detail={line['detail']}")
    assert not wrong, f"{cell_name}:\n" + "\n".join(wrong) + context
