"""The differential runs' own client cells, beside the matrix's (conformance/matrix/<language>/cells.py)."""
from __future__ import annotations

import sys

from conformance.matrix.cells import Cell, CellUnavailable

__all__ = ["CELLS", "CONFLUENT_KAFKA"]


def _confluent_version() -> str:
    try:
        import confluent_kafka
    except ImportError:
        return "unavailable"
    version = confluent_kafka.version()
    return version[0] if isinstance(version, tuple) else str(version)


def _prepare_confluent() -> None:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as exc:
        raise CellUnavailable(f"confluent-kafka not installed ({exc}): pip install -e '.[test]'") from None


CONFLUENT_KAFKA = Cell(
    client="confluent-kafka (differential)",
    version=_confluent_version(),
    command=lambda bootstrap, prefix: [sys.executable, "-m", "conformance.differential.confluent_scenarios",
                                       bootstrap, prefix],
    prepare=_prepare_confluent,
    timeout_s=240.0,
)

CELLS: list[Cell] = [CONFLUENT_KAFKA]
