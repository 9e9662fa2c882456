"""Differential runs in CI (issue 30): the same client cells against kafkapy and real Apache Kafka.

kafkapy (one process) and each reference broker (conformance/real_kafka.py: Kafka 4.4.0 in KRaft
mode, Kafka 3.9.1 in ZooKeeper mode, one JVM at a time) start with the same Kafka properties (an
authorizer, no auto-creation, RF-1 internal topics); the confluent-kafka cell of
conformance/differential/cells.py, and the Java matrix's kafka-clients 4.4.0 cell when it is
registered, run the scenario contract against each. Every scenario must be the same on both, except
the differences known_differences.py lists (each also explained in docs/compatibility.md).
scripts/differential.py runs the wider set and writes build/differential.json.

About 1 minute per reference with the confluent-kafka cell alone on the 2-core machine, the real
brokers starting in 2-5 s. Without java or the Maven jars the tests skip loudly (fail under
KAFKAPY_REQUIRE_JAVA=1).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conformance.differential.known_differences import KNOWN_DIFFERENCES
from conformance.differential.runner import (
    Target,
    all_cells,
    differential_rows,
    kafkapy_target,
    prepare,
    reference_broker,
    run_cell,
)
from conformance.real_kafka import RealKafkaUnavailable

REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
REPO_ROOT = Path(__file__).resolve().parent.parent.parent
REFERENCES = ("kafka-4.4.0-kraft", "kafka-3.9.1-zk")
# The CI slice's cells: the confluent-kafka stand-in, and Java 4.4.0 where the matrix has it.
SLICE_CELLS = ("confluent-kafka (differential)", "kafka-clients (Java)-4.4.0")

pytestmark = pytest.mark.timeout(300)


def _unavailable(reason: str) -> None:
    message = f"!!! differential run NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def cells():
    chosen = [c for c in all_cells() if any(c.name.startswith(name) for name in SLICE_CELLS)]
    ready, skipped = prepare(chosen)
    for name, why in skipped.items():
        print(f"!!! cell {name} NOT RUN: {why}")
    if not ready:
        _unavailable(f"no client cell can run: {skipped}")
    return ready


@pytest.fixture(scope="module")
def kafkapy_runs(cells, tmp_path_factory):
    """Each slice cell's results against one kafkapy process, by cell name."""
    with kafkapy_target(tmp_path_factory.mktemp("kafkapy"), {}) as kafkapy:
        target = Target("kafkapy", kafkapy.bootstrap, authorizer=True)
        return {cell.name: run_cell(cell, target) for cell in cells}


@pytest.mark.parametrize("reference", REFERENCES)
def test_same_as_real_kafka(reference: str, cells, kafkapy_runs, tmp_path) -> None:
    """Every scenario's status and observed values are kafkapy's and the reference's alike."""
    try:
        with reference_broker(reference, tmp_path / reference, {}) as real:
            target = Target(reference, real.bootstrap, authorizer=True)
            theirs = {cell.name: run_cell(cell, target) for cell in cells}
    except RealKafkaUnavailable as exc:
        _unavailable(str(exc))
    rows = []
    for cell in cells:
        ours = kafkapy_runs[cell.name]
        assert ours.error is None and theirs[cell.name].error is None, (ours.error, theirs[cell.name].error)
        rows.extend(differential_rows(ours, theirs[cell.name]))
    assert rows
    for row in rows:  # the reference passes what the contract asks (else the scenario is wrong), bar known ones
        assert row["reference"]["status"] in ("pass", "unsupported") or row["known_difference"], row
    defects = [row for row in rows if not row["accepted"]]
    assert not defects, "kafkapy differs from " + reference + ":\n" + "\n".join(
        f"{r['client']} {r['version']} {r['scenario']}:\n  kafkapy:   {r['kafkapy']['status']} "
        f"{json.dumps(r['kafkapy']['observed'], sort_keys=True)} {r['kafkapy']['detail']}\n"
        f"  reference: {r['reference']['status']} {json.dumps(r['reference']['observed'], sort_keys=True)}"
        for r in defects)


def test_known_differences_are_explained_in_the_docs() -> None:
    """An accepted difference is one docs/compatibility.md explains, with the same one-line reason."""
    docs = (REPO_ROOT / "docs" / "compatibility.md").read_text()
    missing = [d.reason for d in KNOWN_DIFFERENCES if " ".join(d.reason.split()) not in " ".join(docs.split())]
    assert not missing, ("conformance/differential/known_differences.py lists differences that "
                         "docs/compatibility.md does not show:\n" + "\n".join(missing))
