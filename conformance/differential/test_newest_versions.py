"""The request versions Kafka 4.1-4.4 added that kafkapy serves, on the wire, next to real Kafka 4.4 (issue 32).

Produce v13 (topics by id, KIP-516), Fetch v18 (a follower's tagged HighWatermark, KIP-1166), ListOffsets
v10-11 (TimeoutMs, KIP-1075; EARLIEST_PENDING_UPLOAD -6, KIP-1023), Metadata v13 (top-level ErrorCode,
KIP-1102) and ApiVersions v5 (ClusterId/NodeId checked, KIP-1242): each request is built with kafkapy's
generated codecs and sent over a plain socket (conformance/differential/wire_versions.WireClient) to a
kafkapy process and to Kafka 4.4.0 in KRaft mode (conformance/real_kafka.py, started once for the module);
the answers that matter are compared. The read-only ones of these versions are also compared field by
field in test_wire_versions.py. Without java or the Maven jars the Kafka side skips loudly (fails under
KAFKAPY_REQUIRE_JAVA=1); the kafkapy side always runs. About 10 s.
"""
from __future__ import annotations

import os
import uuid

import pytest

from conformance.differential.runner import kafkapy_target, reference_broker
from conformance.differential.wire_versions import WireClient
from conformance.real_kafka import RealKafkaUnavailable
from kafkapy.protocol.error_codes import ErrorCode
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from kafkapy.protocol.records import build_batch, iter_batch_headers

pytestmark = pytest.mark.timeout(180)

REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
REFERENCE = "kafka-4.4.0-kraft"
TOPIC = "newest-versions"


class Side:
    """One broker: its bootstrap, and the topic's id, its cluster id and node id as its Metadata tells."""

    def __init__(self, name: str, bootstrap: str):
        self.name = name
        self.bootstrap = bootstrap
        self.client = WireClient(bootstrap, timeout_s=15)
        created = self.call(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=1)], timeout_ms=15000), 7)
        assert created["topics"][0]["error_code"] == 0, created
        meta = self.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 12)
        self.topic_id = meta["topics"][0]["topic_id"]
        self.cluster_id = meta["cluster_id"]
        self.node_id = meta["brokers"][0]["node_id"]

    def call(self, request, version: int) -> dict:
        answer = self.client.exchange(request, version)
        assert answer.decoded is not None, f"{self.name}: {answer.error}"
        return answer.decoded

    def produce_v13(self, topic_id: uuid.UUID, value: bytes) -> dict:
        batch = build_batch([(b"k", value)])
        return self.call(ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
            topic_id=topic_id, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 13)

    def list_offset(self, timestamp: int, version: int) -> dict:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
        return self.call(request, version)["topics"][0]["partitions"][0]

    def api_versions_v5(self, cluster_id: str | None, node_id: int) -> dict:
        return self.call(ApiVersionsRequest(client_software_name="newest-versions", client_software_version="1",
                                            cluster_id=cluster_id, node_id=node_id), 5)


def _unavailable(reason: str) -> None:
    message = f"!!! Kafka 4.4 side NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def kafkapy_side(tmp_path_factory):
    with kafkapy_target(tmp_path_factory.mktemp("kafkapy"), {}, authorizer=False) as broker:
        side = Side("kafkapy", broker.bootstrap)
        try:
            yield side
        finally:
            side.client.close()


@pytest.fixture(scope="module")
def kafka_side(tmp_path_factory):
    try:
        with reference_broker(REFERENCE, tmp_path_factory.mktemp(REFERENCE), {}, authorizer=False) as real:
            side = Side(REFERENCE, real.bootstrap)
            try:
                yield side
            finally:
                side.client.close()
    except RealKafkaUnavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(params=["kafkapy", REFERENCE])
def side(request) -> Side:
    return request.getfixturevalue("kafkapy_side" if request.param == "kafkapy" else "kafka_side")


def test_produce_v13_by_topic_id_then_fetch_v18(side: Side) -> None:
    """Produce v13 names the topic by id and is answered by id; Fetch v18 (with a HighWatermark) reads it."""
    before = side.list_offset(-1, 11)["offset"]
    answer = side.produce_v13(side.topic_id, b"by-id")
    topic = answer["responses"][0]
    assert topic["topic_id"] == side.topic_id
    partition = topic["partition_responses"][0]
    assert (partition["error_code"], partition["base_offset"]) == (0, before)
    fetch = side.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                   session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                       topic_id=side.topic_id, partitions=[FetchRequest.FetchPartition(
                                           partition=0, fetch_offset=before, partition_max_bytes=1 << 20,
                                           high_watermark=before)])]), 18)
    assert fetch["error_code"] == 0
    got = fetch["responses"][0]["partitions"][0]
    assert got["error_code"] == 0 and got["high_watermark"] == before + 1
    headers = list(iter_batch_headers(memoryview(bytes(got["records"]))))
    assert headers and headers[0].base_offset == before
    assert side.list_offset(-1, 10)["offset"] == before + 1


def test_produce_v13_unknown_topic_id(side: Side) -> None:
    """An id the broker does not know: UNKNOWN_TOPIC_ID for each partition, nothing created."""
    unknown = uuid.uuid4()
    answer = side.produce_v13(unknown, b"nowhere")
    topic = answer["responses"][0]
    assert topic["topic_id"] == unknown
    assert [p["error_code"] for p in topic["partition_responses"]] == [ErrorCode.UNKNOWN_TOPIC_ID]


def test_list_offsets_earliest_pending_upload(side: Side) -> None:
    """-6 (KIP-1023) at v11 without tiered storage: offset -1; below v11 it is UNSUPPORTED_VERSION."""
    answer = side.list_offset(-6, 11)
    assert (answer["error_code"], answer["offset"], answer["timestamp"], answer["leader_epoch"]) == (0, -1, -1, -1)
    assert side.list_offset(-6, 10)["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    # the tiered-storage offsets answer the same way (no remote storage here)
    assert side.list_offset(-5, 11)["offset"] == -1


def test_metadata_v13(side: Side) -> None:
    answer = side.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 13)
    assert answer["error_code"] == 0
    assert answer["topics"][0]["topic_id"] == side.topic_id
    assert answer["cluster_id"] == side.cluster_id


@pytest.mark.parametrize("case", ["match", "none", "other-cluster", "other-node", "id-without-node"])
def test_api_versions_v5_cluster_check(side: Side, case: str) -> None:
    """ApiVersions v5 (KIP-1242): the expected cluster and node are checked; mismatches ask for rebootstrap."""
    cluster_id, node_id, code = {
        "match": (side.cluster_id, side.node_id, 0),
        "none": (None, -1, 0),
        "other-cluster": ("AAAAAAAAAAAAAAAAAAAAAA", side.node_id, ErrorCode.REBOOTSTRAP_REQUIRED),
        "other-node": (side.cluster_id, side.node_id + 1, ErrorCode.REBOOTSTRAP_REQUIRED),
        "id-without-node": (side.cluster_id, -1, ErrorCode.INVALID_REQUEST),
    }[case]
    answer = side.api_versions_v5(cluster_id, node_id)
    assert answer["error_code"] == code
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    if code:
        assert keys == {}, "Kafka answers these errors without the API list"
    else:
        assert keys[18] == (0, 5) and keys[0][1] == 13 and keys[1][1] == 18
