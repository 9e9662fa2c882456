"""The JSON of Kafka 3.7's znodes as paths.py and acl_znodes.py read and write it: compact like
Jackson's, and strict on reading (ZnodeDecodeError names the znode and what is wrong).
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any


class ZnodeDecodeError(ValueError):
    """A znode's bytes are not the JSON (or text) its path promises."""


def _dump(value: Any) -> bytes:
    # Jackson writes compact JSON; matching it keeps znodes diffable against a real cluster's.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load_object(data: bytes | None, what: str) -> dict[str, Any]:
    if not data:
        raise ZnodeDecodeError(f"{what}: the znode is empty")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZnodeDecodeError(f"{what}: not JSON: {data[:200]!r}") from exc
    if not isinstance(value, dict):
        raise ZnodeDecodeError(f"{what}: expected a JSON object, got {data[:200]!r}")
    return value


def _require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(key)
    # bool is an int in Python but never a valid Kafka number.
    if value is None or isinstance(value, bool) or not isinstance(value, kind):
        raise ZnodeDecodeError(f"{what}: missing or malformed {key!r} in {dict(obj)!r}")
    return value


def _int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = obj.get(key)
    # Kafka writes some numbers as JSON strings (timestamps, producer id blocks); accept either.
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ZnodeDecodeError(f"{what}: missing or malformed {key!r} in {dict(obj)!r}")


def _int_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ZnodeDecodeError(f"{what}: expected a list of broker ids, got {value!r}")
    return list(value)


def _now_ms() -> int:
    return int(time.time() * 1000)
