"""The Python cells of the client matrix: kafka-python (negotiated and pinned api_version), aiokafka,
confluent-kafka (installed) and the oldest confluent-kafka with a wheel for this Python (2.0.2).

All run scenarios.py next to this file. The installed libraries come from the project's test
dependencies; confluent-kafka 2.0.2 is pip-installed from PyPI into a throwaway venv under
~/.cache/kafkapy/venvs/ (never into the main environment) on the first prepare().
"""
from __future__ import annotations

import fcntl
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from conformance.matrix.cells import Cell, CellUnavailable

__all__ = ["CELLS", "OLD_CONFLUENT_KAFKA", "expected_unsupported", "venv_python"]

SCENARIOS_PY = Path(__file__).resolve().parent / "scenarios.py"
# The oldest confluent-kafka with a cp311 manylinux wheel on PyPI (1.9.2 has none for 3.11).
OLD_CONFLUENT_KAFKA = "2.0.2"
VENV_ROOT = Path(os.environ.get("KAFKAPY_VENV_CACHE", Path.home() / ".cache" / "kafkapy" / "venvs"))
PROGRAM_TIMEOUT_S = 300.0

# What a kafka-python client pinned to an old api_version cannot do (the broker features it lacks).
_PINNED_UNSUPPORTED: dict[str, dict[str, str]] = {
    "0.10": {
        "create_delete_topic": "CreateTopics needs Kafka 0.10.1",
        "produce_zstd": "zstd needs Kafka 2.1",
        "transactions": "transactions need Kafka 0.11",
        "admin_describe_configs": "DescribeConfigs needs Kafka 0.11",
        "error_fenced_producer": "transactions need Kafka 0.11",
    },
    "1.0": {"produce_zstd": "zstd needs Kafka 2.1"},
    "2.0": {"produce_zstd": "zstd needs Kafka 2.1"},
}


def _installed(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not-installed"


def _require_import(module: str, dist: str) -> Callable[[], None]:
    def prepare() -> None:
        result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                                timeout=60)
        if result.returncode != 0:
            raise CellUnavailable(f"{dist} is not importable ({result.stderr.strip()[-300:]}): "
                                  "pip install -e '.[test]'")
    return prepare


def _scenarios_command(python: Callable[[], str], client: str) -> Callable[[str, str], list[str]]:
    def command(bootstrap: str, prefix: str) -> list[str]:
        return [python(), str(SCENARIOS_PY), client, bootstrap, prefix]
    return command


def venv_python(name: str, requirement: str) -> str:
    """The python of a venv holding `requirement` (pip-installed once, cached; safe across processes)."""
    venv = VENV_ROOT / name
    python = venv / "bin" / "python"
    if (venv / ".complete").is_file():
        return str(python)
    VENV_ROOT.mkdir(parents=True, exist_ok=True)
    with open(VENV_ROOT / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / ".complete").is_file():
            return str(python)
        shutil.rmtree(venv, ignore_errors=True)
        steps = [[sys.executable, "-m", "venv", str(venv)],
                 [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  "--only-binary=:all:", requirement]]
        for step in steps:
            try:
                result = subprocess.run(step, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                raise CellUnavailable(f"{' '.join(step[:4])} did not finish within 300 s") from None
            if result.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                raise CellUnavailable(f"installing {requirement} into {venv} failed: "
                                      f"{(result.stdout + result.stderr).strip()[-800:]}")
        (venv / ".complete").write_text(requirement + "\n")
    return str(python)


def _old_confluent_python() -> str:
    return venv_python(f"confluent-kafka-{OLD_CONFLUENT_KAFKA}", f"confluent-kafka=={OLD_CONFLUENT_KAFKA}")


def _prepare_old_confluent() -> None:
    _old_confluent_python()


def expected_unsupported(cell: Cell, scenario: str) -> str | None:
    """Why `scenario` is legitimately unsupported by this cell against a broker with an authorizer
    (MATRIX_AUTHORIZER=1), or None if it must pass there."""
    pinned = cell.version.partition("+api")[2]
    return _PINNED_UNSUPPORTED.get(pinned, {}).get(scenario)


def _cells() -> list[Cell]:
    this_python = lambda: sys.executable  # noqa: E731
    kafka_python = _installed("kafka-python")
    cells = [Cell("kafka-python", kafka_python, _scenarios_command(this_python, "kafka-python"),
                  prepare=_require_import("kafka", "kafka-python"), timeout_s=PROGRAM_TIMEOUT_S)]
    for pinned in ("0.10", "1.0", "2.0"):
        cells.append(Cell("kafka-python", f"{kafka_python}+api{pinned}",
                          _scenarios_command(this_python, f"kafka-python-{pinned}"),
                          prepare=_require_import("kafka", "kafka-python"), timeout_s=PROGRAM_TIMEOUT_S))
    cells.append(Cell("aiokafka", _installed("aiokafka"), _scenarios_command(this_python, "aiokafka"),
                      prepare=_require_import("aiokafka", "aiokafka"), timeout_s=PROGRAM_TIMEOUT_S))
    cells.append(Cell("confluent-kafka", _installed("confluent-kafka"),
                      _scenarios_command(this_python, "confluent-kafka"),
                      prepare=_require_import("confluent_kafka", "confluent-kafka"), timeout_s=PROGRAM_TIMEOUT_S))
    cells.append(Cell("confluent-kafka", OLD_CONFLUENT_KAFKA,
                      _scenarios_command(_old_confluent_python, "confluent-kafka"),
                      prepare=_prepare_old_confluent, timeout_s=PROGRAM_TIMEOUT_S))
    return cells


CELLS: list[Cell] = _cells()
