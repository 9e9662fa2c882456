"""Differential tests against kafka-python's protocol classes (kafka.protocol, 3.0.x).

For every (api, version) both implement with the same field layout: bytes we encode decode with
kafka-python to the same values, bytes kafka-python encodes decode with ours to the same message,
and both encoders produce identical bytes. Field names are matched through both projects'
snake_case rules from the same Kafka JSON names; kafka-python's few renames (authorized
operations as bit sets, zero uuids as None) are normalised.
"""
from __future__ import annotations

import importlib
import pkgutil
import random
import re
import uuid
import warnings

import pytest

from kafkapy.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES
from kafkapy.protocol.primitives import FieldSchema

from test_codec_values import random_message

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with a deprecated importlib.resources call
    warnings.simplefilter("ignore", DeprecationWarning)
    kafka_protocol = pytest.importorskip("kafka.protocol")
    from kafka.protocol.api_message import ApiMessage  # noqa: E402

ZERO_UUID = uuid.UUID(int=0)


def _their_classes() -> dict[tuple[int, str], type]:
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or "generate_stubs" in info.name:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            importlib.import_module(info.name)
    found = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        if getattr(cls, "_class_version", None) is None and cls.__dict__.get("_json"):
            found[(cls.API_KEY, cls.type)] = cls
    return found


THEIRS = _their_classes()


def their_name(kafka_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kafka_name).lower()


class LayoutMismatch(Exception):
    """The two schemas disagree for this version (e.g. kafka-python's JSON is from a newer Kafka)."""


def _their_field(their_struct, f: FieldSchema):
    fields = their_struct.fields
    tf = fields.get(their_name(f.name))
    if tf is None and f.name.endswith("AuthorizedOperations"):
        tf = fields.get("authorized_operations")
    if tf is None:
        raise LayoutMismatch(f"kafka-python has no field {f.name}")
    return tf


def _check_layout(our_cls: type, their_struct, version: int) -> None:
    ours = [f for f in our_cls.SCHEMA if f.present(version)]
    theirs = [tf for tf in their_struct._fields if tf.for_version_q(version)]
    if len(ours) != len(theirs):
        raise LayoutMismatch(f"{our_cls.__name__}: {len(ours)} fields vs {len(theirs)}")
    for f, tf in zip(ours, theirs):
        if _their_field(their_struct, f) is not tf or f.tagged(version) != tf.tagged_field_q(version):
            raise LayoutMismatch(f"{our_cls.__name__}.{f.name} differs")
        if f.type == "struct":
            _check_layout(f.struct, tf.array_of if f.is_array else tf, version)


def _is_bitfield(tf) -> bool:
    return getattr(tf, "_type_str", None) == "bitfield"


def _to_bits(value: int):
    bits = {i for i in range(32) if value & (1 << i)}
    return None if bits == {31} else bits


def to_theirs(ours, their_cls, version: int):
    """kafka-python's object for our message/struct `ours`."""
    kwargs = {}
    defaults = type(ours)()
    for f in type(ours).SCHEMA:
        if not f.present(version):
            continue
        tf = _their_field(their_cls._struct, f)
        value = getattr(ours, f.attr)
        if f.tagged(version) and value == getattr(defaults, f.attr):
            continue   # kafka-python writes every tagged field it is given
        if value is not None:
            if f.type == "struct":
                inner = tf.data_class
                value = ([to_theirs(v, inner, version) for v in value] if f.is_array
                         else to_theirs(value, inner, version))
            elif _is_bitfield(tf):
                value = _to_bits(value)
            elif f.type == "records":
                value = bytes(value)
        kwargs[tf.name] = value
    return their_cls(version=version, **kwargs)


def assert_same(ours, theirs, version: int, path: str) -> None:
    """Our message equals kafka-python's decoded one, field by field."""
    for f in type(ours).SCHEMA:
        if not f.present(version):
            continue
        tf = _their_field(type(theirs)._struct, f)
        ov, tv = getattr(ours, f.attr), getattr(theirs, tf.name)
        where = f"{path}.{f.attr}"
        if f.type == "struct":
            if f.is_array:
                assert (ov is None) == (tv is None), where
                if ov is not None:
                    assert len(ov) == len(tv), where
                    for i, (o, t) in enumerate(zip(ov, tv)):
                        assert_same(o, t, version, f"{where}[{i}]")
            elif tv is None:
                # kafka-python leaves an absent tagged struct as None; ours is a default instance
                assert ov is None or ov == type(ov)(), where
            else:
                assert_same(ov, tv, version, where)
        elif _is_bitfield(tf):
            assert _to_bits(ov) == tv, where
        elif f.type == "uuid":
            assert (None if ov == ZERO_UUID else ov) == (None if tv == ZERO_UUID else tv), where
        elif f.type in ("records", "bytes"):
            assert (None if ov is None else bytes(ov)) == (None if tv is None else bytes(tv)), where
        elif f.type == "float64":
            assert ov == pytest.approx(tv), where
        else:
            assert ov == tv, where


def _cases() -> list[tuple[type, type, int]]:
    cases = []
    for kind, types in (("request", REQUEST_TYPES), ("response", RESPONSE_TYPES)):
        for key, ours in types.items():
            theirs = THEIRS.get((key, kind))
            if theirs is None:
                continue
            lo = max(ours.VALID_VERSIONS[0], theirs.valid_versions[0])
            hi = min(ours.VALID_VERSIONS[1], theirs.valid_versions[1])
            cases += [(ours, theirs, v) for v in range(lo, hi + 1)]
    return cases


CASES = _cases()
SKIPPED: dict[str, str] = {}


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0].__name__}-v{c[2]}" for c in CASES])
def test_same_as_kafka_python(case):
    ours_cls, theirs_cls, version = case
    try:
        _check_layout(ours_cls, theirs_cls._struct, version)
    except LayoutMismatch as exc:
        SKIPPED[f"{ours_cls.__name__} v{version}"] = str(exc)
        pytest.skip(str(exc))
    rng = random.Random(f"{ours_cls.__name__}{version}")
    for _ in range(6):
        ours = random_message(ours_cls, version, rng)
        if ours_cls.__name__ == "ApiVersionsResponse":
            ours.error_code = 0   # kafka-python reads any error response as v0 (KIP-511)
        encoded = ours.encode(version)
        # ours -> bytes -> kafka-python
        assert_same(ours, theirs_cls.decode(encoded, version=version), version, "ours->theirs")
        # kafka-python -> bytes -> ours
        their_bytes = to_theirs(ours, theirs_cls, version).encode(version=version)
        assert ours_cls.decode(their_bytes, version) == ours
        assert their_bytes == encoded


def test_coverage_of_served_apis():
    """kafka-python covers every API the broker serves except the ones it lacks entirely."""
    from kafkapy.protocol.api_versions import SUPPORTED_VERSIONS
    covered = {(c[0].API_KEY) for c in CASES}
    # ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848), GetTelemetrySubscriptions and
    # PushTelemetry (KIP-714), the share group APIs (KIP-932) and the streams group ones (KIP-1071):
    # not in kafka-python
    assert set(SUPPORTED_VERSIONS) - covered <= {68, 69, 71, 72, 76, 77, 78, 79, 88, 89, 90, 91, 92}
