"""Fault injection's request recorder (issue 12): one `RecordedRequest` per decoded request, and
`to_json`, the JSON form the control endpoint returns (bytes and records as base64). The
injector (faults.py) keeps the records, in arrival order.
"""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..protocol.primitives import ExternalRecords, GeneratedStruct

__all__ = ["RecordedRequest", "to_json"]


@dataclass(slots=True)
class RecordedRequest:
    """One request as the broker decoded it, in arrival order (`seq` counts from 1 per broker)."""

    seq: int
    time: float                 # time.time() when it was decoded
    api_key: int
    api: str                    # Kafka's name, e.g. "Produce"
    version: int
    client_id: str | None
    correlation_id: int
    peer: str
    body: Any = field(repr=False)   # the decoded request message (in-process); a dict in JSON form

    def to_json(self) -> dict[str, Any]:
        """The record as the control endpoint returns it; bytes in the body are base64."""
        return {"seq": self.seq, "time": self.time, "api_key": self.api_key, "api": self.api,
                "version": self.version, "client_id": self.client_id, "correlation_id": self.correlation_id,
                "peer": self.peer, "body": to_json(self.body)}


def to_json(value: Any) -> Any:
    """A decoded message as JSON-ready data: structs as dicts, bytes and records as base64, UUIDs as text."""
    if isinstance(value, GeneratedStruct):
        return {name: to_json(getattr(value, name)) for name in value.__match_args__}
    if isinstance(value, list):
        return [to_json(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, ExternalRecords):
        return base64.b64encode(value.tobytes()).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)
