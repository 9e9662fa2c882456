#!/usr/bin/env python3
"""Differential runs (issue 30): the same client cells against kafkapy and against real Apache Kafka.

    python scripts/differential.py                                  # default cells, both references
    python scripts/differential.py --references kafka-4.4.0-kraft --cells confluent
    python scripts/differential.py --set min.insync.replicas=2 --no-authorizer

Starts kafkapy (conformance.broker_process) once and each reference (conformance/real_kafka.py: Kafka
3.9.1 in ZooKeeper mode, Kafka 4.4.0 in KRaft mode, jars from Maven Central cached in ~/.m2) once, all
with the same Kafka properties, runs every chosen cell's scenario program against each, and writes
build/differential.json: one row per cell, reference and scenario with both results and `same`
(`accepted` also allows the differences of conformance/differential/known_differences.py). Prints the
differences; exits 1 when one is neither the same nor accepted, 2 when nothing could run.

Default cells: the Java matrix's 3.7.x and 4.4.0 cells and the kafka-python and confluent-kafka cells
of the Python matrix, when those registries exist, plus the confluent-kafka cell of
conformance/differential/cells.py.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from conformance.differential.runner import (  # noqa: E402
    Target,
    all_cells,
    differential_rows,
    kafkapy_target,
    prepare,
    reference_broker,
    run_cell,
)
from conformance.real_kafka import REFERENCES, RealKafkaStartError, RealKafkaUnavailable  # noqa: E402


def default_cell(cell) -> bool:
    """Java 3.7.x and 4.4.0, kafka-python and confluent-kafka at their own protocol (no api_version pin)."""
    client = cell.client.lower()
    if "java" in client:
        return cell.version.startswith("3.7.") or cell.version == "4.4.0"
    return client.startswith(("kafka-python", "confluent-kafka")) and "+" not in cell.version


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--references", default=",".join(REFERENCES),
                        help=f"comma-separated, of {', '.join(REFERENCES)}")
    parser.add_argument("--cells", default="",
                        help="comma-separated substrings of cell names (client-version); default: see above")
    parser.add_argument("--scenarios", default="", help="comma-separated scenario names (default: all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka property for every broker (kafkapy and references)")
    parser.add_argument("--no-authorizer", action="store_true", help="start the brokers without an authorizer")
    parser.add_argument("--output", default=str(REPO_ROOT / "build" / "differential.json"))
    parser.add_argument("--keep", action="store_true", help="keep the brokers' work dir (logs, data) after a clean run")
    args = parser.parse_args()

    overrides = dict(item.split("=", 1) for item in args.set)
    authorizer = not args.no_authorizer
    scenarios = [s for s in args.scenarios.split(",") if s]
    wanted = [w for w in args.cells.split(",") if w]
    cells = [c for c in all_cells() if (any(w in c.name for w in wanted) if wanted else default_cell(c))]
    cells, skipped = prepare(cells)
    for name, why in skipped.items():
        print(f"!!! cell {name} NOT RUN: {why}", file=sys.stderr)
    if not cells:
        print("!!! no cell can run", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="kafkapy-differential-"))
    print(f"work dir {work}; cells: {', '.join(c.name for c in cells)}", file=sys.stderr)
    ours: dict[str, object] = {}
    begin = time.monotonic()
    with kafkapy_target(work / "kafkapy", overrides, authorizer) as kafkapy:
        target = Target("kafkapy", kafkapy.bootstrap, authorizer)
        for cell in cells:
            ours[cell.name] = run_cell(cell, target, scenarios=scenarios)
            print(f"kafkapy: {cell.name} in {ours[cell.name].seconds:.1f} s", file=sys.stderr)

    rows: list[dict] = []
    for name in [r for r in args.references.split(",") if r]:
        try:
            with reference_broker(name, work / name, overrides, authorizer) as reference:
                print(f"{name} serving after {reference.started_in_s:.1f} s", file=sys.stderr)
                target = Target(name, reference.bootstrap, authorizer)
                for cell in cells:
                    theirs = run_cell(cell, target, scenarios=scenarios)
                    print(f"{name}: {cell.name} in {theirs.seconds:.1f} s", file=sys.stderr)
                    rows.extend(differential_rows(ours[cell.name], theirs))
        except (RealKafkaUnavailable, RealKafkaStartError) as exc:
            print(f"!!! reference {name} NOT RUN: {exc}", file=sys.stderr)

    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    differences = [r for r in rows if not r["same"]]
    for row in differences:
        verdict = "accepted (known_differences.py)" if row["accepted"] else "DIFFERENT"
        print(f"{verdict}: {row['client']} {row['version']} {row['scenario']} vs {row['reference']['name']}\n"
              f"    kafkapy:   {row['kafkapy']['status']} {json.dumps(row['kafkapy']['observed'], sort_keys=True)}\n"
              f"    reference: {row['reference']['status']} "
              f"{json.dumps(row['reference']['observed'], sort_keys=True)}")
    print(f"{len(rows)} comparisons, {len(rows) - len(differences)} same, "
          f"{sum(r['accepted'] for r in differences)} accepted differences, "
          f"{sum(not r['accepted'] for r in differences)} defects; {time.monotonic() - begin:.0f} s; {output}")
    if not rows:
        return 2
    if any(not r["accepted"] for r in rows):
        print(f"brokers' logs and data kept in {work}", file=sys.stderr)
        return 1
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
