"""What every Python client of the matrix shares: scenario names, the result line, record contents."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SCENARIOS = (
    "metadata",
    "create_delete_topic",
    *(f"produce_{codec}" for codec in CODECS),
    "group_consume_commit",
    "transactions",
    "admin_describe_configs",
    "error_unknown_topic",
    "error_fenced_producer",
    "error_not_authorized",
)
RECORD_COUNT = 100
TXN_RECORDS = 10
# The second consumer of group_consume_commit reads these, written after the first one committed.
SECOND_BATCH = 10
RETENTION_MS_AFTER = "3600000"


class Unsupported(Exception):
    """This client (version) cannot run the scenario; the message says why."""


@dataclass(slots=True)
class ScenarioResult:
    """One line of the contract's output."""

    scenario: str
    status: str
    observed: dict[str, Any] = field(default_factory=dict)
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "status": self.status, "observed": self.observed, "detail": self.detail}


def record(i: int) -> tuple[bytes, bytes]:
    """Key and value of the i-th record a scenario writes."""
    return f"key-{i}".encode(), f"value-{i}-".encode() + bytes(range(256)) * 2


def authorizer_enabled() -> bool:
    return os.environ.get("MATRIX_AUTHORIZER") == "1"


def require_authorizer() -> None:
    if not authorizer_enabled():
        raise Unsupported("no authorizer")


def wait_until(check: Callable[[], bool], timeout_s: float = 10.0, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval_s)
    return check()


def round_trips(pairs: list[tuple[bytes | None, bytes | None]], start: int = 0) -> bool:
    """True when the (key, value) pairs read back are record(start), record(start+1), ... in order."""
    return all((key, value) == record(start + i) for i, (key, value) in enumerate(pairs))
