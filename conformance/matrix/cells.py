"""One cell of the client matrix: a client library at one pinned version, and how to run it.

Every language directory under conformance/matrix/ (java, python, go, node, ...) has a `cells.py`
that exposes `CELLS: list[Cell]`. A cell's program takes `BOOTSTRAP PREFIX` and prints one JSON
line per scenario (the scenario contract: conformance/matrix/README.md); scripts/client_matrix.py
and the per-language tests only go through this interface:

    cell.prepare()                       # install/compile; raises CellUnavailable(reason)
    argv = cell.command(bootstrap, prefix)
    subprocess.run(argv, env={**os.environ, **cell.env}, ...)
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Cell", "CellUnavailable", "SCENARIOS", "STATUSES", "parse_results"]

# The contract's scenarios, in the order every program runs them.
SCENARIOS: tuple[str, ...] = (
    "metadata",
    "create_delete_topic",
    "produce_none",
    "produce_gzip",
    "produce_snappy",
    "produce_lz4",
    "produce_zstd",
    "group_consume_commit",
    "transactions",
    "admin_describe_configs",
    "error_unknown_topic",
    "error_fenced_producer",
    "error_not_authorized",
)
STATUSES: tuple[str, ...] = ("pass", "fail", "unsupported")


class CellUnavailable(RuntimeError):
    """The cell's client cannot be had on this machine (no runtime, no package, no compiler)."""


def _nothing_to_prepare() -> None:
    return None


@dataclass(slots=True)
class Cell:
    """A client at one version: `command(bootstrap, prefix)` is the argv of its scenario program."""

    client: str                                   # e.g. "kafka-clients (Java)", "kafka-python"
    version: str                                  # the pinned version, e.g. "3.9.1"
    command: Callable[[str, str], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[], None] = _nothing_to_prepare
    timeout_s: float = 300.0                      # the whole program, all scenarios

    @property
    def name(self) -> str:
        return f"{self.client}-{self.version}"


def parse_results(stdout: str) -> list[dict]:
    """The scenario objects of a program's stdout; a line that is not such an object raises ValueError."""
    results = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        if not isinstance(obj, dict) or "scenario" not in obj or obj.get("status") not in STATUSES:
            raise ValueError(f"not a scenario result line: {line!r}")
        results.append(obj)
    return results
