"""Every pinned kafka-clients version (2.0.1 to 4.4.0) runs the matrix's scenarios against kafkapy.

One kafkapy broker for the module, with an authorizer (ACLs allow everything no ACL matches) and
broker-side topic auto-creation off. Each cell's Matrix.java program runs once (on its first test)
and its JSON lines are kept in the results dir (KAFKAPY_MATRIX_RESULTS_DIR, else pytest's temp
dir) for scripts/client_matrix.py; each (cell, scenario) is a test that asserts `pass`, or
`unsupported` where that client version cannot do it (zstd before 2.1, KIP-848 before 4.0, share
groups (KafkaShareConsumer) before 4.2).

Java, javac or Maven missing skips loudly; KAFKAPY_REQUIRE_JAVA=1 makes that a failure.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from conformance.matrix.cells import SCENARIOS, Cell
from conformance.matrix.java.cells import CELLS, expected_unsupported
from conformance.matrix.runner import CellRun, run_cell, write_run
from conformance.pytest_broker import is_external_broker

REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
RESULTS_ENV = "KAFKAPY_MATRIX_RESULTS_DIR"
ALL_SCENARIOS = (*SCENARIOS, "group_consume_commit_kip848", "share_consume", "share_consume_explicit")

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "auto.create.topics.enable": "false",
        # Kafka's shipped server.properties sets 0 too; the 3 s default would cost each group join 3 s.
        "group.initial.rebalance.delay.ms": "0",
    }


def _unavailable(reason: str) -> None:
    message = f"!!! Java client matrix NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get(RESULTS_ENV)
    return Path(configured) if configured else tmp_path_factory.mktemp("matrix-results")


@pytest.fixture(scope="module")
def matrix_runs(broker, results_dir: Path):
    """Runs a cell's program on first use (against the module's broker) and keeps its CellRun."""
    runs: dict[str, CellRun] = {}
    env = {} if is_external_broker() else {"MATRIX_AUTHORIZER": "1"}

    def get(cell: Cell) -> CellRun:
        if cell.name not in runs:
            prefix = f"jm-{cell.version.replace('.', '')}-{uuid.uuid4().hex[:6]}"
            run = run_cell(cell, broker.bootstrap, prefix, env=env)
            write_run(run, results_dir)
            runs[cell.name] = run
        return runs[cell.name]

    return get


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.version)
def test_java_client(cell: Cell, scenario: str, matrix_runs) -> None:
    run: CellRun = matrix_runs(cell)
    if run.unavailable:
        _unavailable(f"{cell.name}: {run.unavailable}")
    result = run.by_scenario().get(scenario)
    context = f"\n----- {cell.name} stderr (tail) -----\n{run.stderr_tail[-2500:]}"
    if result is None:
        pytest.fail(f"{cell.name} printed no line for {scenario} ({run.error or 'no error'}){context}", pytrace=False)
    status, detail, observed = result["status"], result.get("detail", ""), result.get("observed", {})
    why_unsupported = expected_unsupported(cell.version, scenario)
    if status == "unsupported" and (why_unsupported or (scenario == "error_not_authorized" and is_external_broker())):
        return  # this client version cannot do it, and says so: the expected answer
    assert status == "pass", f"{cell.name} {scenario}: {status}: {detail}\nobserved: {observed}{context}"
    assert why_unsupported is None, f"{cell.name} {scenario} passed but was expected unsupported ({why_unsupported})"
