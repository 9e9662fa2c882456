"""Nullable strings in responses: null unless the broker has something to say, as Kafka sends them.

Clients compare error_message (and the other nullable strings) with null; Kafka's handlers fill
them from ApiError, whose NONE has a null message. `nullable_string_violations` walks any response
with the generated SCHEMA and names every nullable string that is "" (or an error message beside a
zero error code); the wire tests (conformance/test_nullable_requests.py) use it too.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from kafkapy.protocol.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkapy.protocol.primitives import GeneratedStruct
from tests.broker.inprocess import InProcessBroker

TOPIC_RESOURCE = 2

# Where Kafka itself sends "" or a message on success, by (struct qualname, attribute).
KAFKA_SENDS_EMPTY = {
    ("OffsetFetchResponse.OffsetFetchResponsePartition", "metadata"),    # OffsetFetchResponse.NO_METADATA
    ("OffsetFetchResponse.OffsetFetchResponsePartitions", "metadata"),
    ("DescribeConfigsResponse.DescribeConfigsResourceResult", "value"),   # a config whose value is ""
    ("DescribeConfigsResponse.DescribeConfigsSynonym", "value"),
    ("CreateTopicsResponse.CreatableTopicConfigs", "value"),
    # messages Kafka's handlers leave unset, so the schema's default "" (the wire differential against
    # real Kafka, conformance/differential/test_wire_versions.py)
    ("FindCoordinatorResponse.Coordinator", "error_message"),
    ("DescribeAclsResponse", "error_message"),
    ("DescribeClientQuotasResponse", "error_message"),
    ("DescribeConfigsResponse.DescribeConfigsResult", "error_message"),
    ("DescribeUserScramCredentialsResponse", "error_message"),
}
# FindCoordinator v0-3 answers Errors.NONE.message(), "NONE", on success (KafkaApis)
KAFKA_MESSAGE_ON_SUCCESS = {
    ("FindCoordinatorResponse", "error_message"): "NONE",
}


def _nullable_strings(obj: Any, version: int, path: str) -> Iterator[tuple[str, str, Any, Any]]:
    """(path, qualname, attr, value, error_code beside it) for every nullable string under `obj`."""
    for f in type(obj).SCHEMA:
        if not f.present(version):
            continue
        value = getattr(obj, f.attr)
        if f.type == "struct":
            items = value if f.is_array else [value]
            for i, item in enumerate(items or ()):
                if isinstance(item, GeneratedStruct):
                    yield from _nullable_strings(item, version, f"{path}.{f.attr}[{i}]" if f.is_array
                                                 else f"{path}.{f.attr}")
        elif f.type == "string" and not f.is_array and f.nullable(version):
            yield f"{path}.{f.attr}", type(obj).__qualname__, f.attr, value, getattr(obj, "error_code", None)


def nullable_string_violations(response: Any, version: int) -> list[str]:
    """Nullable strings of `response` that Kafka would have sent as null."""
    problems = []
    for path, qualname, attr, value, error_code in _nullable_strings(response, version, type(response).__name__):
        if value == "" and (qualname, attr) not in KAFKA_SENDS_EMPTY:
            problems.append(f"{path} is '' (Kafka sends null)")
        elif attr == "error_message" and error_code == 0 and value not in (None, "") \
                and KAFKA_MESSAGE_ON_SUCCESS.get((qualname, attr)) != value:
            problems.append(f"{path} is {value!r} beside error_code 0 (Kafka sends null)")
    return problems


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path / "data")
    yield b
    b.close()


def _versions(broker: InProcessBroker, request_cls: type) -> range:
    low, high = broker.broker.advertised_versions[request_cls.API_KEY]
    return range(low, high + 1)


def _checked(broker: InProcessBroker, request: Any, version: int) -> Any:
    response = broker.call(request, version)
    assert nullable_string_violations(response, version) == []
    return response


@pytest.mark.parametrize("validate_only", [False, True])
def test_create_topics_success_has_null_error_message(broker, validate_only):
    for version in _versions(broker, CreateTopicsRequest):
        name = f"created-v{version}-{validate_only}"
        request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=2, replication_factor=1,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="60000")])],
            timeout_ms=5000, validate_only=validate_only and version >= 1)
        response = _checked(broker, request, version)
        [result] = response.topics
        assert result.error_code == 0, result
        if version >= 1:
            assert result.error_message is None


def test_delete_topics_success_has_null_error_message(broker):
    for version in _versions(broker, DeleteTopicsRequest):
        name = f"deleted-v{version}"
        broker.create_topic(name, 1)
        if version >= 6:
            request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)], timeout_ms=5000)
        else:
            request = DeleteTopicsRequest(topic_names=[name], timeout_ms=5000)
        [result] = _checked(broker, request, version).responses
        assert result.error_code == 0, result
        assert result.error_message is None


def test_create_partitions_success_has_null_error_message(broker):
    broker.create_topic("grown", 1)
    for count, version in enumerate(_versions(broker, CreatePartitionsRequest), start=2):
        request = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="grown", count=count, assignments=None)], timeout_ms=5000)
        [result] = _checked(broker, request, version).results
        assert result.error_code == 0 and result.error_message is None, result


@pytest.mark.parametrize("validate_only", [False, True])
def test_alter_configs_success_has_null_error_message(broker, validate_only):
    broker.create_topic("configured", 1)
    for version in _versions(broker, AlterConfigsRequest):
        request = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name="configured",
            configs=[AlterConfigsRequest.AlterableConfig(name="retention.ms", value="120000")])],
            validate_only=validate_only)
        [result] = _checked(broker, request, version).responses
        assert result.error_code == 0 and result.error_message is None, result


def test_incremental_alter_configs_success_has_null_error_message(broker):
    broker.create_topic("configured", 1)
    for version in _versions(broker, IncrementalAlterConfigsRequest):
        request = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name="configured",
            configs=[IncrementalAlterConfigsRequest.AlterableConfig(
                name="retention.ms", config_operation=0, value="180000")])])
        [result] = _checked(broker, request, version).responses
        assert result.error_code == 0 and result.error_message is None, result


def test_describe_configs_success_has_empty_message_and_null_strings(broker):
    broker.create_topic("described", 1)
    for version in _versions(broker, DescribeConfigsRequest):
        request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name="described", configuration_keys=None)],
            include_synonyms=version >= 1, include_documentation=False)
        [result] = _checked(broker, request, version).results
        assert result.error_code == 0 and result.error_message == "", result   # Kafka: the schema's default
        assert result.configs
        if version >= 3:   # documentation not asked for: null, as Kafka's ConfigHelper sends it
            assert all(c.documentation is None for c in result.configs)


def test_violations_are_found():
    """The checker itself: "" and a message beside error code 0 are reported."""
    from kafkapy.protocol.messages import CreateTopicsResponse

    response = CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(
        name="t", error_code=0, error_message="")])
    assert nullable_string_violations(response, 7) == ["CreateTopicsResponse.topics[0].error_message is '' "
                                                       "(Kafka sends null)"]
    assert CreateTopicsResponse.CreatableTopicResult().error_message is None
