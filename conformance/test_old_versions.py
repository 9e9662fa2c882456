"""Every version Kafka 3.9 serves, served on the wire: the oldest ones with their own semantics.

kafkapy advertises the union of old and new clients' versions (VERSION-POLICY.md): from v0 for
every API, as Kafka 3.9 does. These tests talk to a real kafkapy process with requests built by
kafkapy's codecs (and, for the old consumer, by kafka-python pinned to Kafka 0.10's versions).
"""

from __future__ import annotations

import socket
import time

import pytest

from conformance.kafka_wire import ConnectionClosed, RawConnection
from kafkapy.net.client import encode_request
from kafkapy.protocol.compression import GZIP, NONE
from kafkapy.protocol.headers import response_header_version
from kafkapy.protocol.legacy_records import iter_legacy_records, iter_message_set
from kafkapy.protocol.messages import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from kafkapy.protocol.primitives import skip_tagged_fields
from kafkapy.protocol.records import build_batch

pytestmark = pytest.mark.timeout(120)

UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_VERSION = 35
UNSUPPORTED_COMPRESSION_TYPE = 76
LATEST, EARLIEST = -1, -2


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"num.partitions": "1", "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}


def call(bootstrap: str, request, version: int, conn: RawConnection | None = None, correlation_id: int = 7):
    """Send one request built by kafkapy's codecs; the decoded response of that version."""
    own = conn is None
    conn = conn or RawConnection(bootstrap, timeout=15)
    try:
        conn.send(b"".join(encode_request(request, version, correlation_id, "old-versions-test")))
        frame = conn.receive()
    finally:
        if own:
            conn.close()
    assert int.from_bytes(frame[:4], "big", signed=True) == correlation_id
    pos = 4
    if response_header_version(request.API_KEY, version) == 1:
        pos = skip_tagged_fields(frame, pos)
    return RESPONSE_TYPES[request.API_KEY].decode(frame, version, pos)


def create_topic(bootstrap: str, name: str, configs: dict[str, str] | None = None, version: int = 0) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    Config = CreateTopicsRequest.CreatableTopicConfig
    topic = Topic(name=name, num_partitions=1, replication_factor=1,
                  configs=[Config(name=k, value=v) for k, v in (configs or {}).items()])
    response = call(bootstrap, CreateTopicsRequest(topics=[topic], timeout_ms=10_000), version)
    assert [(t.name, t.error_code) for t in response.topics] == [(name, 0)]


def produce(bootstrap: str, topic: str, batch: bytes) -> int:
    """Produce one v2 batch (Produce v3, acks=all); its base offset."""
    Data = ProduceRequest.TopicProduceData
    Part = ProduceRequest.PartitionProduceData
    request = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
        Data(name=topic, partition_data=[Part(index=0, records=batch)])])
    response = call(bootstrap, request, 3)
    part = response.responses[0].partition_responses[0]
    assert part.error_code == 0
    return part.base_offset


def fetch(bootstrap: str, topic: str, version: int, offset: int = 0, max_bytes: int = 1 << 20):
    Topic = FetchRequest.FetchTopic
    Part = FetchRequest.FetchPartition
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, topics=[
        Topic(topic=topic, partitions=[Part(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    response = call(bootstrap, request, version)
    return response.responses[0].partitions[0]


def list_offsets_v0(bootstrap: str, topic: str, timestamp: int, max_num: int, partition: int = 0,
                    replica_id: int = -1):
    Topic = ListOffsetsRequest.ListOffsetsTopic
    Part = ListOffsetsRequest.ListOffsetsPartition
    request = ListOffsetsRequest(replica_id=replica_id, topics=[Topic(name=topic, partitions=[
        Part(partition_index=partition, timestamp=timestamp, max_num_offsets=max_num)])])
    return call(bootstrap, request, 0).topics[0].partitions[0]


# ------------------------------------------------------------------ every advertised version

def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    response = call(bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    assert response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def minimal_request(api_key: int):
    request = REQUEST_TYPES[api_key]()
    if api_key == 0:
        request.acks = -1   # acks=0 would get no answer at all
    if api_key == 18:
        request.client_software_name, request.client_software_version = "t", "1"
    return request


def test_every_api_minimum_is_kafka_39s(broker):
    """The broker advertises every API it serves from Kafka 3.9's minimum (v0) to its maximum."""
    ranges = advertised(broker.bootstrap)
    for key, (lo, hi) in ranges.items():
        assert (lo, hi) == REQUEST_TYPES[key].VALID_VERSIONS, key


def test_every_advertised_version_answers(broker):
    """For every advertised (api, version), a minimal request gets a decodable answer of that version."""
    ranges = advertised(broker.bootstrap)
    failures = []
    answered = 0
    for key, (lo, hi) in sorted(ranges.items()):
        for version in range(lo, hi + 1):
            try:
                call(broker.bootstrap, minimal_request(key), version, correlation_id=1000 + key)
                answered += 1
            except (ConnectionClosed, socket.timeout, Exception) as exc:  # noqa: BLE001 (listed below)
                failures.append(f"{REQUEST_TYPES[key].__name__} v{version}: {type(exc).__name__} {exc}")
    assert not failures, "\n".join(failures)
    assert answered == sum(hi - lo + 1 for lo, hi in ranges.values())


# ------------------------------------------------------------------ ListOffsets v0

def test_list_offsets_v0_lists_segment_bases_and_log_end(broker, topic_name):
    # tiny segments: every batch of ~190 bytes rolls a new one
    create_topic(broker.bootstrap, topic_name, {"segment.bytes": "300"})
    for i in range(4):
        produce(broker.bootstrap, topic_name, build_batch([(b"k", b"v" * 50)] * 2))
    p = list_offsets_v0(broker.bootstrap, topic_name, LATEST, 10)
    assert p.error_code == 0
    # newest first: the log end offset, then each segment's base offset
    assert p.old_style_offsets[0] == 8
    assert p.old_style_offsets == sorted(p.old_style_offsets, reverse=True)
    assert p.old_style_offsets[-1] == 0 and {2, 4, 6} <= set(p.old_style_offsets)
    assert list_offsets_v0(broker.bootstrap, topic_name, LATEST, 1).old_style_offsets == [8]
    assert list_offsets_v0(broker.bootstrap, topic_name, EARLIEST, 5).old_style_offsets == [0]
    # a time after every segment was written: from the log end offset on; before any: nothing
    future = list_offsets_v0(broker.bootstrap, topic_name, int(time.time() * 1000) + 60_000, 2)
    assert future.old_style_offsets == p.old_style_offsets[:2]
    assert list_offsets_v0(broker.bootstrap, topic_name, 1, 5).old_style_offsets == []
    # v0 knows only LATEST and EARLIEST among negative timestamps; a negative count is Kafka's generic error
    assert list_offsets_v0(broker.bootstrap, topic_name, -3, 1).error_code == UNSUPPORTED_VERSION
    assert list_offsets_v0(broker.bootstrap, topic_name, LATEST, -1).error_code == UNKNOWN_SERVER_ERROR
    assert list_offsets_v0(broker.bootstrap, topic_name, LATEST, 1, partition=5).error_code == \
        UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_v0_of_empty_partition(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    # an empty last segment has no log end entry: only its base offset
    assert list_offsets_v0(broker.bootstrap, topic_name, LATEST, 10).old_style_offsets == [0]
    assert list_offsets_v0(broker.bootstrap, topic_name, EARLIEST, 10).old_style_offsets == [0]


# ------------------------------------------------------------------ Fetch v0-3

@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_fetch_v0_to_v3_answers_message_sets(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name, build_batch(
        [(b"k0", b"v0", [("h", b"x")], 1_700_000_000_000), (None, b"v1", [], 1_700_000_000_001)],
        compression=codec))
    produce(broker.bootstrap, topic_name, build_batch([(b"k2", None, [], 1_700_000_000_002)], compression=codec))
    for version in range(0, 4):
        magic = 0 if version <= 1 else 1
        data = fetch(broker.bootstrap, topic_name, version)
        assert data.error_code == 0 and data.high_watermark == 3
        records = bytes(data.records)
        assert {m.magic for m in iter_message_set(records)} == {magic}
        messages = list(iter_legacy_records(records))
        assert [(m.offset, m.key, m.value) for m in messages] == [
            (0, b"k0", b"v0"), (1, None, b"v1"), (2, b"k2", None)], version
        expected_ts = [-1] * 3 if magic == 0 else [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002]
        assert [m.timestamp for m in messages] == expected_ts
        assert {m.compression for m in messages} == {codec}
        # from the middle of an uncompressed batch, the earlier records are left out
        middle = list(iter_legacy_records(bytes(fetch(broker.bootstrap, topic_name, version, offset=1).records)))
        assert middle[0].offset == (0 if codec else 1)


def test_fetch_v0_answers_are_bounded_by_the_bytes_read(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    for _ in range(5):
        produce(broker.bootstrap, topic_name, build_batch([(None, b"x")] * 50))
    # 50 small records take fewer bytes in a v2 batch than as 50 magic 0 messages: like Kafka's lazy
    # down-conversion the answer is no larger than the batches read, or than the first batch converted
    # (here cut at a whole message); the consumer goes on from the next offset
    offset, seen = 0, []
    while offset < 250:
        records = bytes(fetch(broker.bootstrap, topic_name, 0, offset=offset).records)
        messages = list(iter_message_set(records))
        # the rest of the batch holding `offset` at least
        assert len(messages) >= 50 - offset % 50
        assert len(records) <= max(5 * len(build_batch([(None, b"x")] * 50)), 50 * 27)
        seen += [m.offset for m in messages]
        offset = messages[-1].offset + 1
    assert seen == list(range(250))
    # below v3 (no KIP-74) the limit is hard: a first batch larger than partition_max_bytes is not
    # returned at all (Kafka 3.9's answer, conformance/differential/test_wire_versions.py); from v3 it
    # goes whole
    for version in (0, 1, 2):
        assert bytes(fetch(broker.bootstrap, topic_name, version, max_bytes=10).records or b"") == b""
    small = list(iter_message_set(bytes(fetch(broker.bootstrap, topic_name, 3, max_bytes=10).records)))
    assert [m.offset for m in small] == list(range(50))


def test_fetch_before_v10_of_zstd_topic_or_disabled_down_conversion(broker, topic_name):
    # clients before Fetch v10 may not know zstd: Kafka refuses them a zstd topic
    create_topic(broker.bootstrap, topic_name + "-z", {"compression.type": "zstd"})
    for version in (0, 3, 4, 9):
        assert fetch(broker.bootstrap, topic_name + "-z", version).error_code == UNSUPPORTED_COMPRESSION_TYPE
    for version in (10, 12):
        assert fetch(broker.bootstrap, topic_name + "-z", version).error_code == 0
    create_topic(broker.bootstrap, topic_name, {"message.downconversion.enable": "false"})
    assert fetch(broker.bootstrap, topic_name, 2).error_code == UNSUPPORTED_VERSION
    assert fetch(broker.bootstrap, topic_name, 4).error_code == 0


def test_kafka_python_pinned_to_kafka_0_10_round_trip(broker, topic_name):
    """A real client speaking Kafka 0.10's versions (Produce v2, Fetch v2-3, ListOffsets v0-1)."""
    kafka = pytest.importorskip("kafka")
    create_topic(broker.bootstrap, topic_name)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 0))
    try:
        for i in range(5):
            producer.send(topic_name, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(10)
    finally:
        producer.close(5)
    consumer = kafka.KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, api_version=(0, 10, 0),
                                   auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        got = [(m.offset, m.key, m.value) for m in consumer]
    finally:
        consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]


# ------------------------------------------------------------------ OffsetCommit v0-1, OffsetFetch v0

def test_offset_commit_v0_v1_and_offset_fetch_v0(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    group = topic_name + "-g"
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Part = OffsetCommitRequest.OffsetCommitRequestPartition
    v0 = OffsetCommitRequest(group_id=group, topics=[Topic(name=topic_name, partitions=[
        Part(partition_index=0, committed_offset=17, committed_metadata="m0")])])
    # the first FindCoordinator creates __consumer_offsets; commits answer NOT_COORDINATOR until then
    deadline = time.monotonic() + 20
    while call(broker.bootstrap, FindCoordinatorRequest(key=group), 0).error_code != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    response = call(broker.bootstrap, v0, 0)
    assert response.topics[0].partitions[0].error_code == 0
    FetchTopic = OffsetFetchRequest.OffsetFetchRequestTopic
    fetch_v0 = OffsetFetchRequest(group_id=group, topics=[FetchTopic(name=topic_name, partition_indexes=[0, 7])])
    parts = call(broker.bootstrap, fetch_v0, 0).topics[0].partitions
    # a partition without a commit (here one that does not exist) answers -1 without an error, as Kafka
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in parts] == [
        (0, 17, "m0", 0), (7, -1, "", 0)]
    # v1: a simple group (generation -1) with a commit timestamp; newer versions read it too
    v1 = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        Topic(name=topic_name, partitions=[Part(partition_index=0, committed_offset=23, commit_timestamp=1234)])])
    assert call(broker.bootstrap, v1, 1).topics[0].partitions[0].error_code == 0
    for version in (0, 1, 5):
        parts = call(broker.bootstrap, fetch_v0, version).topics[0].partitions
        assert (parts[0].committed_offset, parts[0].metadata) == (23, "")
    # an unknown topic: Kafka's request layer refuses it before the coordinator
    unknown = OffsetCommitRequest(group_id=group, topics=[Topic(name=topic_name + "-nope", partitions=[
        Part(partition_index=0, committed_offset=1)])])
    assert call(broker.bootstrap, unknown, 0).topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


# ------------------------------------------------------------------ the other v0s

def test_offset_for_leader_epoch_v0_v1(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name, build_batch([(None, b"a"), (None, b"b")]))
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Part = OffsetForLeaderEpochRequest.OffsetForLeaderPartition
    request = OffsetForLeaderEpochRequest(topics=[Topic(topic=topic_name, partitions=[
        Part(partition=0, leader_epoch=0)])])
    for version in (0, 1, 2):
        p = call(broker.bootstrap, request, version).topics[0].partitions[0]
        assert (p.error_code, p.end_offset) == (0, 2), version
        # v0 carries no leader epoch: the decoder leaves the default
        assert p.leader_epoch == (-1 if version == 0 else 0), version


def test_create_topics_v0_and_describe_configs_v0(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, {"retention.ms": "12345"}, version=0)
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[Resource(resource_type=2, resource_name=topic_name,
                                                         configuration_keys=["retention.ms", "segment.bytes"])])
    result = call(broker.bootstrap, request, 0).results[0]
    assert result.error_code == 0
    by_name = {c.name: c for c in result.configs}
    assert (by_name["retention.ms"].value, by_name["retention.ms"].is_default) == ("12345", False)
    assert by_name["segment.bytes"].is_default is True


def test_delete_topics_v0_and_describe_log_dirs_v0(broker, topic_name):
    from kafkapy.protocol.messages import DeleteTopicsRequest, DescribeLogDirsRequest

    create_topic(broker.bootstrap, topic_name)
    results = call(broker.bootstrap, DescribeLogDirsRequest(topics=None), 0).results
    assert [r.error_code for r in results] == [0]
    assert topic_name in {t.name for t in results[0].topics}
    response = call(broker.bootstrap, DeleteTopicsRequest(topic_names=[topic_name], timeout_ms=10_000), 0)
    assert [(r.name, r.error_code) for r in response.responses] == [(topic_name, 0)]


def test_acl_apis_v0_imply_literal_patterns(broker_factory):
    from kafkapy.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

    b = broker_factory({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                        "super.users": "User:ANONYMOUS"})
    TOPIC, READ, ALLOW, LITERAL, PREFIXED, ANY = 2, 3, 3, 3, 4, 1
    Creation = CreateAclsRequest.AclCreation
    prefixed = Creation(resource_type=TOPIC, resource_name="pre", resource_pattern_type=PREFIXED,
                        principal="User:p", host="*", operation=READ, permission_type=ALLOW)
    assert [r.error_code for r in call(b.bootstrap, CreateAclsRequest(creations=[prefixed]), 1).results] == [0]
    # v0 carries no pattern type: LITERAL
    literal = Creation(resource_type=TOPIC, resource_name="lit", principal="User:l", host="*", operation=READ,
                       permission_type=ALLOW)
    assert [r.error_code for r in call(b.bootstrap, CreateAclsRequest(creations=[literal]), 0).results] == [0]
    describe = DescribeAclsRequest(resource_type_filter=TOPIC, resource_name_filter=None, principal_filter=None,
                                   host_filter=None, operation=ANY, permission_type=ANY)
    v0 = call(b.bootstrap, describe, 0)
    assert v0.error_code == 0 and [(r.resource_name, r.pattern_type) for r in v0.resources] == [("lit", LITERAL)]
    describe.pattern_type_filter = ANY
    v1 = call(b.bootstrap, describe, 1)
    assert sorted((r.resource_name, r.pattern_type) for r in v1.resources) == [("lit", LITERAL), ("pre", PREFIXED)]
    delete = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=TOPIC, resource_name_filter=None, principal_filter=None, host_filter=None,
        operation=ANY, permission_type=ANY)])
    deleted = call(b.bootstrap, delete, 0).filter_results
    assert [[a.resource_name for a in r.matching_acls] for r in deleted] == [["lit"]]
    describe.pattern_type_filter = ANY
    assert [r.resource_name for r in call(b.bootstrap, describe, 1).resources] == ["pre"]


def test_librdkafka_with_kafka_0_9_fallback_round_trip(broker, topic_name):
    """librdkafka without ApiVersions, as against Kafka 0.9: Produce v1, Fetch v1 (magic 0 message sets),
    ListOffsets v0, JoinGroup v0, OffsetCommit v2, OffsetFetch v1."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    conf = {"bootstrap.servers": broker.bootstrap, "api.version.request": False, "broker.version.fallback": "0.9.0",
            "log_level": 3}
    producer = confluent_kafka.Producer(conf)
    for i in range(5):
        producer.produce(topic_name, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer({**conf, "group.id": topic_name, "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic_name])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append((message.offset(), message.key(), message.value()))
        assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(5)]
        consumer.commit(asynchronous=False)
        assert [tp.offset for tp in consumer.committed(consumer.assignment(), timeout=10)] == [5]
    finally:
        consumer.close()
