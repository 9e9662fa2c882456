"""Valid message values built from the generated classes' SCHEMA, for the codec tests.

`message_strategy` gives hypothesis strategies and `random_message` seeded-random instances; both
fill only fields present in the version (others keep their defaults), use null only where the
version allows it, and keep integers in their type's range.
"""
from __future__ import annotations

import random
import string
import uuid
from functools import lru_cache

from hypothesis import strategies as st

from kafkapy.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES
from kafkapy.protocol.primitives import FieldSchema

INT_RANGES = {
    "int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
}
MAX_LIST = 3


def all_message_versions() -> list[tuple[type, int]]:
    """Every (message class, version) of the generated package, requests then responses."""
    cases = []
    for types in (REQUEST_TYPES, RESPONSE_TYPES):
        for cls in types.values():
            lo, hi = cls.VALID_VERSIONS
            cases += [(cls, v) for v in range(lo, hi + 1)]
    return cases


def case_id(case: tuple[type, int]) -> str:
    cls, version = case
    return f"{cls.__name__}-v{version}"


# ------------------------------------------------------------------------------------------
# hypothesis
# ------------------------------------------------------------------------------------------

def _scalar_strategy(type_: str) -> st.SearchStrategy:
    if type_ in INT_RANGES:
        lo, hi = INT_RANGES[type_]
        return st.integers(lo, hi)
    if type_ == "bool":
        return st.booleans()
    if type_ == "float64":
        return st.floats(allow_nan=False)
    if type_ == "string":
        return st.text(max_size=8)
    if type_ in ("bytes", "records"):
        return st.binary(max_size=12)
    if type_ == "uuid":
        return st.uuids()
    raise AssertionError(type_)


def _field_strategy(f: FieldSchema, version: int) -> st.SearchStrategy:
    if f.type == "struct":
        elem = message_strategy(f.struct, version)
    else:
        elem = _scalar_strategy(f.type)
    value = st.lists(elem, max_size=MAX_LIST) if f.is_array else elem
    if f.nullable(version):
        value = st.none() | value
    return value


@lru_cache(maxsize=None)
def message_strategy(cls: type, version: int) -> st.SearchStrategy:
    """Instances of `cls` whose every field is valid for `version`."""
    fields = {f.attr: _field_strategy(f, version) for f in cls.SCHEMA if f.present(version)}
    return st.builds(cls, **fields)


# ------------------------------------------------------------------------------------------
# seeded random (fast; for the fuzzer and benchmarks)
# ------------------------------------------------------------------------------------------

_TEXT = string.ascii_letters + string.digits + "._-é€"


def _random_scalar(type_: str, rng: random.Random):
    if type_ in INT_RANGES:
        lo, hi = INT_RANGES[type_]
        if rng.random() < 0.5:
            return rng.choice((0, 1, -1 if lo < 0 else 2, lo, hi))
        return rng.randint(lo, hi)
    if type_ == "bool":
        return rng.random() < 0.5
    if type_ == "float64":
        return rng.uniform(-1e6, 1e6)
    if type_ == "string":
        return "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 10)))
    if type_ in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 40))
    if type_ == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(type_)


def _random_value(f: FieldSchema, version: int, rng: random.Random, depth: int):
    if f.nullable(version) and rng.random() < 0.15:
        return None
    if f.type == "struct":
        make = lambda: random_message(f.struct, version, rng, depth + 1)  # noqa: E731
    else:
        make = lambda: _random_scalar(f.type, rng)  # noqa: E731
    if f.is_array:
        return [make() for _ in range(rng.randint(0, MAX_LIST if depth < 3 else 1))]
    return make()


def random_message(cls: type, version: int, rng: random.Random, depth: int = 0):
    """A random instance of `cls` valid for `version`."""
    values = {f.attr: _random_value(f, version, rng, depth)
              for f in cls.SCHEMA if f.present(version) and rng.random() < 0.9}
    return cls(**values)


def test_random_messages_round_trip():
    rng = random.Random(7)
    for cls, version in all_message_versions():
        message = random_message(cls, version, rng)
        assert cls.decode(message.encode(version), version) == message, (cls.__name__, version)
