"""Null where a request may carry null, and null where a response should: against a real kafkapy process.

- Every advertised API and version, each nullable request field sent as null (the rest filled from
  the generated schema): the broker answers, or closes the connection with one WARNING line; never an
  ERROR traceback, and it keeps serving.
- Metadata v10/v11 naming a topic by a null name (by id) gets INVALID_REQUEST as Kafka 3.9 answers it;
  v12 gets UNKNOWN_TOPIC_ID for an unknown id and the topic for a known one.
- Real clients' codecs (kafka-python) see a null error_message on success from CreateTopics (also
  validate_only), DeleteTopics and AlterConfigs.
"""
from __future__ import annotations

import asyncio
import random
import re
import time
import uuid

import pytest

from conformance.broker_process import start_broker
from conformance.kafka_wire import RawConnection
from conformance.request_fuzzer import (
    KNOWN_TOPIC,
    Outcome,
    WireClient,
    build_request,
    encode_request,
    nullable_paths,
    request_class,
    response_body,
    set_path,
)
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    MetadataRequest,
    MetadataResponse,
)
from tests.broker.test_nullable_responses import nullable_string_violations

pytestmark = pytest.mark.timeout(120)

INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100
ERROR_LINE = re.compile(r"\] (ERROR|CRITICAL) |^Traceback ", re.MULTILINE)


def roundtrip(bootstrap: str, request, version: int, correlation_id: int = 1):
    with RawConnection(bootstrap) as conn:
        payload = conn.roundtrip(encode_request(request, version, correlation_id))
    return response_body(request.API_KEY, version, payload[4:])


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    response = roundtrip(bootstrap, ApiVersionsRequest(), 0)
    assert isinstance(response, ApiVersionsResponse) and response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def error_lines(log_text: str) -> list[str]:
    return [m.group(0) + log_text[m.end():log_text.find("\n", m.end())] for m in ERROR_LINE.finditer(log_text)]


@pytest.fixture(scope="module")
def nullable_broker():
    """A broker of our own (its log is read), with the topic the generated requests name."""
    with start_broker() as broker:
        response = roundtrip(broker.bootstrap, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=KNOWN_TOPIC, num_partitions=1, replication_factor=1)], timeout_ms=10_000), 4)
        assert response.topics[0].error_code == 0
        yield broker


def test_metadata_null_topic_name_before_v12_is_invalid_request(nullable_broker):
    for version in (10, 11):
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=uuid.uuid4()),
                                          MetadataRequest.MetadataRequestTopic(name=KNOWN_TOPIC)],
                                  allow_auto_topic_creation=False)
        response = roundtrip(nullable_broker.bootstrap, request, version)
        assert [(t.error_code, t.name) for t in response.topics] == [(INVALID_REQUEST, ""),
                                                                     (INVALID_REQUEST, KNOWN_TOPIC)]
        # a topic id before v12 is refused the same way, even beside a name
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=KNOWN_TOPIC,
                                                                               topic_id=uuid.uuid4())])
        response = roundtrip(nullable_broker.bootstrap, request, version)
        assert [(t.error_code, t.name) for t in response.topics] == [(INVALID_REQUEST, KNOWN_TOPIC)]
    assert nullable_broker.is_running()


def test_metadata_v12_topic_by_id(nullable_broker):
    known = roundtrip(nullable_broker.bootstrap, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=KNOWN_TOPIC)]), 12).topics[0]
    assert known.error_code == 0 and known.topic_id != uuid.UUID(int=0)
    unknown_id = uuid.uuid4()
    response = roundtrip(nullable_broker.bootstrap, MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name=None, topic_id=unknown_id),
        MetadataRequest.MetadataRequestTopic(name=None, topic_id=known.topic_id)]), 12)
    assert isinstance(response, MetadataResponse)
    by_id = {t.topic_id: t for t in response.topics}
    assert by_id[unknown_id].error_code == UNKNOWN_TOPIC_ID and by_id[unknown_id].name is None
    assert by_id[known.topic_id].error_code == 0 and by_id[known.topic_id].name == KNOWN_TOPIC


async def _send_all_nulls(bootstrap: str, versions: dict[int, tuple[int, int]]) -> tuple[dict, list[str]]:
    host, port = bootstrap.rsplit(":", 1)
    client = WireClient(host, int(port))
    outcomes: dict[str, int] = {}
    violations: list[str] = []
    correlation_id = 0
    try:
        for api_key, (low, high) in sorted(versions.items()):
            cls = request_class(api_key)
            for version in range(low, high + 1):
                paths = nullable_paths(cls, version)
                # the plausible request (its response checked too), each nullable field alone, then all at once
                for chosen in [[]] + [[path] for path in paths] + ([paths] if len(paths) > 1 else []):
                    request = build_request(cls, version, random.Random(api_key * 100 + version))
                    # outer fields last: nulling an array first would hide the fields inside it
                    if not all([set_path(request, path, None) for path in sorted(chosen, key=len, reverse=True)]):
                        continue
                    path = chosen[0] if len(chosen) == 1 else ("<all nullable fields>" if chosen else "<none>",)
                    correlation_id += 1
                    outcome, payload = await client.exchange(encode_request(request, version, correlation_id),
                                                             correlation_id, wait=5.0)
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    where = f"{cls.__name__} v{version} {'.'.join(path)}" + ("=null" if chosen else "")
                    if outcome == Outcome.SILENT:
                        violations.append(f"{where}: neither answered nor closed in 5 s")
                    elif outcome == Outcome.ANSWERED:
                        try:
                            response = response_body(api_key, version, payload)
                        except Exception as exc:   # an answer kafkapy's own decoder cannot read
                            violations.append(f"{where}: undecodable response: {exc}")
                            continue
                        violations += [f"{where}: {p}" for p in nullable_string_violations(response, version)]
    finally:
        await client.close()
    return outcomes, violations


def test_every_nullable_request_field_as_null(nullable_broker):
    versions = advertised(nullable_broker.bootstrap)
    log_start = nullable_broker.log_path.stat().st_size
    started = time.monotonic()
    outcomes, violations = asyncio.run(_send_all_nulls(nullable_broker.bootstrap, versions))
    elapsed = time.monotonic() - started
    assert nullable_broker.is_running(), nullable_broker.stderr_tail()
    advertised(nullable_broker.bootstrap)     # still serving
    with open(nullable_broker.log_path) as f:
        f.seek(log_start)
        log_text = f.read()
    assert error_lines(log_text) == [], log_text[-4000:]
    warnings = log_text.count("] WARNING ")
    assert warnings <= sum(outcomes.values()), f"{warnings} WARNING lines for {outcomes}: at most one per request"
    assert violations == []
    assert sum(outcomes.values()) > 300, outcomes
    print(f"nullable request fields: {outcomes} in {elapsed:.1f} s")


# ---------------------------------------------------------------- real clients' codecs

def _kafka_python_roundtrip(bootstrap: str, request, response_cls, version: int):
    request.with_header(correlation_id=7, client_id="kafkapy-conformance")
    with RawConnection(bootstrap) as conn:
        body = conn.roundtrip(bytes(request.encode(version=version, header=True, framed=True)))
    return response_cls.decode(body, version=version, header=True)


def test_kafka_python_sees_null_error_messages(nullable_broker):
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse, DeleteTopicsRequest, DeleteTopicsResponse

    bootstrap = nullable_broker.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        checked = admin.create_topics([NewTopic("nullable-created", 1, 1)], validate_only=True)
        assert [(t["error_code"], t["error_message"]) for t in checked["topics"]] == [(0, None)]
        created = admin.create_topics([NewTopic("nullable-created", 1, 1)])
        assert [(t["error_code"], t["error_message"]) for t in created["topics"]] == [(0, None)]
        deleted = admin.delete_topics(["nullable-created"])
        assert [(t["error_code"], t["error_message"]) for t in deleted["topics"]] == [(0, None)]
    finally:
        admin.close()
    roundtrip(bootstrap, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name="nullable-configured", num_partitions=1, replication_factor=1)], timeout_ms=10_000), 4)
    for version in range(0, 3):
        request = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name="nullable-configured",
            configs=[AlterConfigsRequest.AlterConfigsResource.AlterableConfig(name="retention.ms", value="3600000")])],
            validate_only=version == 1)
        response = _kafka_python_roundtrip(bootstrap, request, AlterConfigsResponse, version)
        assert [(r.error_code, r.error_message) for r in response.responses] == [(0, None)], version
    for version in range(1, 7):
        name = f"nullable-deleted-{version}"
        roundtrip(bootstrap, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1)], timeout_ms=10_000), 4)
        if version >= 6:
            request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)], timeout_ms=10_000)
        else:
            request = DeleteTopicsRequest(topic_names=[name], timeout_ms=10_000)
        response = _kafka_python_roundtrip(bootstrap, request, DeleteTopicsResponse, version)
        results = [(r.error_code, r.error_message if version >= 5 else None) for r in response.responses]
        assert results == [(0, None)], version
