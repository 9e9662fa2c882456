"""Generated classes behave as the dataclass(slots=True) classes they replaced: construction,
defaults, equality, repr, pattern matching; plus FieldSchema and the asdict/replace helpers."""
from __future__ import annotations

import dataclasses
import inspect
import uuid
from pathlib import Path

import pytest

from kafkapy.protocol.messages import (
    REQUEST_TYPES, RESPONSE_TYPES, ApiVersionsResponse, DescribeClientQuotasResponse,
    FetchRequest, FetchResponse, MetadataResponse, ProduceRequest, ProduceResponse,
)
from kafkapy.protocol.primitives import (
    FACTORY, FieldSchema, GeneratedStruct, Message, asdict, replace,
)


def _all_classes() -> list[type]:
    """Every generated message and struct class."""
    seen: dict[type, None] = {}
    stack = list(REQUEST_TYPES.values()) + list(RESPONSE_TYPES.values())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen[cls] = None
        stack += [f.struct for f in cls.SCHEMA if f.struct is not None]
    return list(seen)


ALL_CLASSES = _all_classes()


def test_every_class_lists_its_fields_in_schema_order():
    assert len(ALL_CLASSES) > 300
    for cls in ALL_CLASSES:
        names = tuple(f.attr for f in cls.SCHEMA)
        assert cls.__slots__ == names and cls.__match_args__ == names, cls.__qualname__
        params = list(inspect.signature(cls).parameters.values())
        assert [p.name for p in params] == list(names), cls.__qualname__
        assert all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty
                   for p in params), cls.__qualname__
        assert issubclass(cls, Message if cls in REQUEST_TYPES.values()
                          or cls in RESPONSE_TYPES.values() else GeneratedStruct)
        obj = cls()
        assert not hasattr(obj, "__dict__")
        assert cls.__hash__ is None            # mutable, compared by value: unhashable


def _as_dataclass(cls: type) -> type:
    """The dataclass(slots=True) the generator used to emit for `cls`, rebuilt from its defaults."""
    fields = []
    for p in inspect.signature(cls).parameters.values():
        if p.default is FACTORY:
            factory = type(getattr(cls(), p.name))
            fields.append((p.name, object, dataclasses.field(default_factory=factory)))
        else:
            fields.append((p.name, object, dataclasses.field(default=p.default)))
    made = dataclasses.make_dataclass(cls.__name__, fields, slots=True)
    made.__qualname__ = cls.__qualname__
    return made


def test_defaults_repr_and_equality_match_the_dataclass_they_replace():
    for cls in ALL_CLASSES:
        reference = _as_dataclass(cls)
        ours, theirs = cls(), reference()
        assert repr(ours) == repr(theirs), cls.__qualname__
        assert [getattr(ours, n) for n in cls.__slots__] == \
            [getattr(theirs, n) for n in cls.__slots__], cls.__qualname__
        assert ours == cls() and not ours != cls()
        for name in cls.__slots__:      # mutable defaults are made per instance
            value = getattr(ours, name)
            if isinstance(value, (list, GeneratedStruct)):
                assert value is not getattr(cls(), name), (cls.__qualname__, name)


def test_positional_arguments_follow_field_order():
    part = MetadataResponse.MetadataResponsePartition(5, 3, 7, 9, [1, 2], [1], [2])
    assert (part.error_code, part.partition_index, part.leader_id, part.leader_epoch,
            part.replica_nodes, part.isr_nodes, part.offline_replicas) == (5, 3, 7, 9, [1, 2], [1], [2])
    assert part == MetadataResponse.MetadataResponsePartition(
        error_code=5, partition_index=3, leader_id=7, leader_epoch=9, replica_nodes=[1, 2],
        isr_nodes=[1], offline_replicas=[2])
    with pytest.raises(TypeError):
        ProduceResponse.LeaderIdAndEpoch(1, 2, 3)
    with pytest.raises(TypeError):
        ProduceResponse.LeaderIdAndEpoch(leader=1)


def test_explicit_values_are_kept_as_given():
    topics: list = []
    req = FetchRequest(topics=topics, cluster_id=None)
    assert req.topics is topics
    leader = ProduceResponse.LeaderIdAndEpoch(1, 2)
    assert ProduceResponse.PartitionProduceResponse(current_leader=leader).current_leader is leader
    # a nullable array or struct passed as None stays None (no default substituted)
    assert FetchResponse.PartitionData(aborted_transactions=None).aborted_transactions is None


def test_equality_is_by_class_and_fields():
    a = ProduceResponse.LeaderIdAndEpoch(1, 2)
    assert a == ProduceResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=2)
    assert a != ProduceResponse.LeaderIdAndEpoch(1, 3)
    assert a != FetchResponse.LeaderIdAndEpoch(1, 2)        # same fields, other class
    assert a.__eq__((1, 2)) is NotImplemented
    assert ProduceRequest() != ProduceResponse()
    nan = float("nan")                                       # identity first, as tuples compare
    value = DescribeClientQuotasResponse.ValueData(key="k", value=nan)
    assert value == DescribeClientQuotasResponse.ValueData(key="k", value=nan)
    with pytest.raises(TypeError):
        hash(a)


def test_repr_looks_like_the_dataclass_repr():
    resp = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(18, 0, 4)])
    assert repr(resp) == (
        "ApiVersionsResponse(error_code=0, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, "
        "min_version=0, max_version=4)], throttle_time_ms=0, supported_features=[], "
        "finalized_features_epoch=-1, finalized_features=[], zk_migration_ready=False)")
    loop = ProduceResponse.PartitionProduceResponse()
    loop.current_leader = loop                               # (not a valid value) no recursion
    assert "current_leader=..." in repr(loop)


def test_match_statement_positional_patterns():
    match ProduceResponse.LeaderIdAndEpoch(4, 9):
        case ProduceResponse.LeaderIdAndEpoch(leader, epoch):
            assert (leader, epoch) == (4, 9)
        case _:
            pytest.fail("no match")


def test_asdict_and_replace():
    resp = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(18, 0, 4)])
    assert asdict(resp)["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]
    assert asdict(resp)["finalized_features_epoch"] == -1
    changed = replace(resp, error_code=35)
    assert changed.error_code == 35 and changed.api_keys is resp.api_keys
    assert resp.error_code == 0 and type(changed) is ApiVersionsResponse
    with pytest.raises(TypeError):
        replace(resp, no_such_field=1)


def test_field_schema_is_an_immutable_value():
    f = FetchRequest.SCHEMA[0]
    assert isinstance(f, FieldSchema)
    copy = FieldSchema(f.name, f.attr, f.type, f.is_array, f.struct, f.versions,
                       f.nullable_versions, f.tagged_versions, f.tag)
    assert copy == f and hash(copy) == hash(f) and copy is not f
    assert repr(f).startswith(f"FieldSchema(name={f.name!r}, attr={f.attr!r}, type=")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.name = "other"
    with pytest.raises(AttributeError):
        del f.tag
    topic = next(g for g in FetchRequest.SCHEMA if g.attr == "topics")
    assert topic.struct is FetchRequest.FetchTopic and topic.is_array and topic.type == "struct"
    assert topic.present(13) and not topic.nullable(13)
    topic_id = next(g for g in FetchRequest.FetchTopic.SCHEMA if g.attr == "topic_id")
    assert topic_id.versions == (13, 0x7FFF) and FetchRequest.FetchTopic().topic_id == uuid.UUID(int=0)


def test_schema_is_read_once_and_inherited_by_subclasses():
    class MyTopic(FetchRequest.FetchTopic):
        __slots__ = ()

    assert MyTopic.SCHEMA is FetchRequest.FetchTopic.SCHEMA is FetchRequest.FetchTopic().SCHEMA
    assert [f.attr for f in MyTopic.SCHEMA] == list(FetchRequest.FetchTopic.__slots__)
    assert MyTopic(topic="t") == MyTopic(topic="t") != FetchRequest.FetchTopic(topic="t")
    assert repr(MyTopic(topic="t")).startswith(
        "test_schema_is_read_once_and_inherited_by_subclasses.<locals>.MyTopic(topic='t', ")


def test_codecs_are_imported_on_first_use():
    """Importing the messages compiles no codec; a decode imports its API's codecs only."""
    import subprocess
    import sys
    script = (
        "import sys\n"
        "from kafkapy.protocol.messages import ApiVersionsRequest, FetchRequest\n"
        "codecs = lambda: sorted(m for m in sys.modules if '.messages.codecs.' in m)\n"
        "assert codecs() == [], codecs()\n"
        "assert ApiVersionsRequest.decode(ApiVersionsRequest().encode(2), 2) == ApiVersionsRequest()\n"
        "assert codecs() == ['kafkapy.protocol.messages.codecs.api_versions'], codecs()\n"
        "assert type(ApiVersionsRequest.__dict__['_DECODERS']) is dict\n"
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=repo)
    assert done.returncode == 0, done.stderr


def test_subclass_of_a_message_uses_its_codecs():
    from kafkapy.protocol.errors import DecodeError

    class MyRequest(ProduceRequest):
        __slots__ = ()

    encoded = MyRequest(acks=1, timeout_ms=5).encode(3)
    assert encoded == ProduceRequest(acks=1, timeout_ms=5).encode(3)
    assert ProduceRequest.decode(encoded, 3) == ProduceRequest(acks=1, timeout_ms=5)
    with pytest.raises(DecodeError):
        MyRequest.decode(encoded, 99)
