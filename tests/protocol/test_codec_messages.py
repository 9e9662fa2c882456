"""Generated message classes: layout, defaults, tagged fields, zero-copy records, decode errors."""
from __future__ import annotations

import struct
import uuid

import pytest

from kafkapy.protocol.errors import DecodeError
from kafkapy.protocol.messages import (
    REQUEST_TYPES, RESPONSE_TYPES, ApiVersionsResponse, DescribeTopicPartitionsRequest,
    FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse,
)
from kafkapy.protocol.primitives import ExternalRecords


class SegmentSlice(ExternalRecords):
    """A stand-in for a log segment slice."""

    def __init__(self, data: bytes):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def tobytes(self) -> bytes:
        return self.data


# ---- shape -----------------------------------------------------------------------------------

def test_class_attributes():
    assert ProduceRequest.API_KEY == 0
    assert ProduceRequest.VALID_VERSIONS == (0, 13)  # v12-13 from Kafka 4.4 (tools/protocol-4.0)
    assert ProduceRequest.FLEXIBLE_VERSION == 9
    assert FetchResponse.VALID_VERSIONS == (0, 18)
    assert REQUEST_TYPES[18] is not None and RESPONSE_TYPES[0] is ProduceResponse
    from kafkapy.protocol.messages import OffsetDeleteRequest
    assert OffsetDeleteRequest.FLEXIBLE_VERSION is None


def test_every_broker_api_is_generated_and_only_those():
    assert set(REQUEST_TYPES) == set(RESPONSE_TYPES)
    for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 32, 33,
                35, 36, 37, 42, 44, 46, 47, 60, 68, 69, 75,
                4, 5, 6, 7, 56, 67):  # the last six: ZooKeeper-mode inter-broker APIs (cluster mode)
        assert key in REQUEST_TYPES, key
    for controller_only in (52, 53, 54, 58, 59, 62, 63, 70, 73, 82):
        assert controller_only not in REQUEST_TYPES, controller_only
    for key, cls in REQUEST_TYPES.items():
        assert cls.API_KEY == key and RESPONSE_TYPES[key].API_KEY == key
        assert cls.__name__.endswith("Request")


def test_nested_structs_and_field_names():
    p = MetadataResponse.MetadataResponsePartition(isr_nodes=[1], leader_id=3)
    assert p.isr_nodes == [1] and p.offline_replicas == []
    assert repr(p).startswith("MetadataResponse.MetadataResponsePartition(")
    assert FetchResponse.AbortedTransaction(producer_id=1, first_offset=2).first_offset == 2
    assert ProduceResponse.PartitionProduceResponse().current_leader == \
        ProduceResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert hasattr(FetchRequest(), "__slots__") and not hasattr(FetchRequest(), "__dict__")


def test_defaults_from_json():
    req = FetchRequest()
    assert req.max_bytes == 0x7FFFFFFF          # "0x7fffffff"
    assert req.replica_id == -1 and req.isolation_level == 0 and req.session_epoch == -1
    assert req.cluster_id is None                # "null"
    assert req.rack_id == ""                     # explicit empty default
    assert req.topics == [] and req.topics is not FetchRequest().topics
    assert MetadataRequest().allow_auto_topic_creation is True    # "true"
    assert FetchRequest.FetchPartition().replica_directory_id == uuid.UUID(int=0)
    assert ProduceRequest.PartitionProduceData().records is None
    assert DescribeTopicPartitionsRequest().cursor is None
    assert DescribeTopicPartitionsRequest().response_partition_limit == 2000


# ---- tagged fields ---------------------------------------------------------------------------

def test_default_tagged_fields_write_no_bytes():
    resp = ApiVersionsResponse(error_code=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    encoded = resp.encode(3)
    # error code, compact array (1 entry), entry + its empty tag section, throttle, empty tags
    expected = (struct.pack(">h", 0) + b"\x02" + struct.pack(">hhh", 18, 0, 4) + b"\x00"
                + struct.pack(">i", 0) + b"\x00")
    assert encoded == expected


def test_non_default_tagged_fields_round_trip():
    resp = ApiVersionsResponse(finalized_features_epoch=5, zk_migration_ready=True,
                               supported_features=[ApiVersionsResponse.SupportedFeatureKey(
                                   name="metadata.version", min_version=1, max_version=20)])
    encoded = resp.encode(3)
    assert encoded.endswith(b"\x03\x01\x01")   # tag 3 (ZkMigrationReady), 1 byte, true
    assert ApiVersionsResponse.decode(encoded, 3) == resp
    assert ApiVersionsResponse.decode(encoded, 3).finalized_features_epoch == 5


def test_tagged_struct_default_is_omitted_and_non_default_written():
    part = FetchResponse.PartitionData(partition_index=1, records=b"")
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic_id=uuid.uuid4(), partitions=[part])])
    plain = resp.encode(13)
    part.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=7)
    tagged = resp.encode(13)
    assert len(tagged) > len(plain)
    assert FetchResponse.decode(tagged, 13).responses[0].partitions[0].current_leader.leader_id == 2
    assert FetchResponse.decode(plain, 13).responses[0].partitions[0].current_leader == \
        FetchResponse.LeaderIdAndEpoch()


def test_unknown_tagged_fields_are_skipped():
    resp = ApiVersionsResponse(error_code=0, throttle_time_ms=9)
    encoded = resp.encode(3)
    assert encoded[-1] == 0
    # replace the empty section by: 2 fields, tag 1000 (3 bytes of payload), tag 1 (epoch = 77)
    tags = b"\x02" + b"\xe8\x07" + b"\x03abc" + b"\x01\x08" + struct.pack(">q", 77)
    decoded = ApiVersionsResponse.decode(encoded[:-1] + tags, 3)
    assert decoded.throttle_time_ms == 9 and decoded.finalized_features_epoch == 77


def test_nullable_struct_field():
    req = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name="t")],
        cursor=DescribeTopicPartitionsRequest.Cursor(topic_name="t", partition_index=3))
    assert DescribeTopicPartitionsRequest.decode(req.encode(0), 0) == req
    req.cursor = None
    encoded = req.encode(0)
    assert encoded[-2:] == b"\xff\x00"   # null marker, then the empty tagged section
    assert DescribeTopicPartitionsRequest.decode(encoded, 0).cursor is None


def test_fields_absent_from_version_keep_defaults():
    req = ProduceRequest(transactional_id="tx", acks=1, timeout_ms=5)
    decoded = ProduceRequest.decode(req.encode(2), 2)   # TransactionalId is v3+
    assert decoded.transactional_id is None and decoded.acks == 1


# ---- records ---------------------------------------------------------------------------------

def _produce(records) -> ProduceRequest:
    return ProduceRequest(acks=-1, timeout_ms=100, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])


@pytest.mark.parametrize("version", [3, 9])
def test_records_decode_zero_copy(version):
    payload = bytes(range(256)) * 64
    wire = bytearray(_produce(payload).encode(version))
    decoded = ProduceRequest.decode(wire, version)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records == payload
    assert records.obj is wire          # a view of the input, not a copy
    assert ProduceRequest.decode(_produce(None).encode(version), version) \
        .topic_data[0].partition_data[0].records is None


def test_encode_parts_keeps_external_records_separate():
    chunk = SegmentSlice(b"R" * 1000)
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(partition_index=0, records=chunk),
                               FetchResponse.PartitionData(partition_index=1, records=b"xy")])])
    for version in (4, 12):
        parts = resp.encode_parts(version)
        assert sum(p is chunk for p in parts) == 1
        assert all(isinstance(p, bytes) or p is chunk for p in parts)
        joined = b"".join(p.tobytes() if p is chunk else p for p in parts)
        assert joined == resp.encode(version)
        decoded = FetchResponse.decode(joined, version)
        assert decoded.responses[0].partitions[0].records == chunk.data
    assert ProduceRequest(acks=1).encode_parts(3) == [ProduceRequest(acks=1).encode(3)]


def test_records_accept_bytes_like():
    for value in (b"abc", bytearray(b"abc"), memoryview(b"abc")):
        decoded = ProduceRequest.decode(_produce(value).encode(9), 9)
        assert decoded.topic_data[0].partition_data[0].records == b"abc"


# ---- decode errors ---------------------------------------------------------------------------

def _decode_error(cls, data, version) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        cls.decode(data, version)
    err = info.value
    assert err.api_key == cls.API_KEY and err.api_version == version
    assert err.offset is not None
    return err


def test_huge_array_count_fails_fast():
    # Metadata v1: topics array with count 2^31-1 and ten bytes left
    data = struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 10
    err = _decode_error(MetadataRequest, data, 1)
    assert err.offset == 4
    # compact: a 5-byte varint count of 2^32-1
    data = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    _decode_error(MetadataRequest, data, 9)


def test_huge_int_array_count_fails_fast():
    resp = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(
        name="t", partitions=[MetadataResponse.MetadataResponsePartition(replica_nodes=[1, 2])])])
    data = bytearray(resp.encode(1))
    count_at = data.index(struct.pack(">ii", 2, 1))   # replica count then first replica
    data[count_at:count_at + 4] = struct.pack(">i", 0x40000000)
    _decode_error(MetadataResponse, bytes(data), 1)


def test_string_longer_than_buffer():
    data = struct.pack(">ih", 1, 30000) + b"abc"
    err = _decode_error(MetadataRequest, data, 1)
    assert "Name" in str(err) and err.offset == 6


def test_non_nullable_string_null():
    _decode_error(MetadataRequest, struct.pack(">ih", 1, -1), 1)


def test_invalid_utf8():
    data = struct.pack(">ih", 1, 2) + b"\xc3\x28"
    err = _decode_error(MetadataRequest, data, 1)
    assert "UTF-8" in str(err)


def test_truncated_everywhere():
    encoded = _produce(b"x" * 50).encode(9)
    for cut in range(len(encoded)):
        _decode_error(ProduceRequest, encoded[:cut], 9)


def test_overlong_varint():
    _decode_error(MetadataRequest, b"\x80\x80\x80\x80\x80\x01", 9)


def test_unsupported_version():
    err = _decode_error(ProduceRequest, b"", 14)
    assert "version" in str(err)
    with pytest.raises(ValueError):
        ProduceRequest().encode(14)


def test_tagged_field_overrunning_its_size():
    encoded = ApiVersionsResponse().encode(3)
    # tag 1 (FinalizedFeaturesEpoch, int64) declared as 2 bytes long
    bad = encoded[:-1] + b"\x01\x01\x02" + struct.pack(">q", 1)
    _decode_error(ApiVersionsResponse, bad, 3)


# ---- same-size struct arrays (read with one iter_unpack) ---------------------------------------

def _fetch_v13(partition_tags: list[bytes]) -> bytes:
    """A hand-built Fetch v13 request: one topic whose partitions carry the given tag sections."""
    topic_id = uuid.UUID(int=42)
    parts = b"".join(struct.pack(">iiqiqi", i, 5, 1000 + i, 4, -1, 1 << 20) + tags
                     for i, tags in enumerate(partition_tags))
    return (struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1) + b"\x02" + topic_id.bytes
            + bytes([len(partition_tags) + 1]) + parts + b"\x00" + b"\x01" + b"\x01" + b"\x00")


@pytest.mark.parametrize("count", [3, 8, 20])
@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_fixed_size_struct_arrays(count, wrap):
    plain = _fetch_v13([b"\x00"] * count)
    tagged = _fetch_v13([b"\x00"] * (count - 1) + [b"\x01\x05\x02ab"])   # one unknown tag
    expected = [FetchRequest.FetchPartition(partition=i, current_leader_epoch=5,
                                            fetch_offset=1000 + i, last_fetched_epoch=4,
                                            log_start_offset=-1, partition_max_bytes=1 << 20)
                for i in range(count)]
    for data in (plain, tagged):
        decoded = FetchRequest.decode(wrap(data), 13)
        assert decoded.topics[0].partitions == expected
        assert decoded.topics[0].topic_id == uuid.UUID(int=42) and decoded.rack_id == ""
    assert FetchRequest.decode(plain, 13).encode(13) == plain


def test_fixed_size_struct_array_truncated():
    data = _fetch_v13([b"\x00"] * 10)
    with pytest.raises(DecodeError):
        FetchRequest.decode(data[:200], 13)


# ---- arrays of primitives (one pack per struct; long arrays written piecewise) -------------------

@pytest.mark.parametrize("version", [1, 8, 9, 12])
@pytest.mark.parametrize("lengths", [(0, 0, 0), (3, 2, 1), (126, 1, 0), (127, 0, 3), (300, 200, 130)])
def test_int_arrays_of_every_length(version, lengths):
    r, i, o = (list(range(n)) for n in lengths)
    resp = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(
        name="t", partitions=[MetadataResponse.MetadataResponsePartition(
            partition_index=7, leader_id=1, replica_nodes=r, isr_nodes=i,
            offline_replicas=o if version >= 5 else [])])])
    decoded = MetadataResponse.decode(resp.encode(version), version)
    assert decoded == resp


@pytest.mark.parametrize("elr", [None, [], [1, 2], list(range(200))])
def test_nullable_int_arrays(elr):
    from kafkapy.protocol.messages import DescribeTopicPartitionsResponse as DTP
    resp = DTP(topics=[DTP.DescribeTopicPartitionsResponseTopic(name="t", partitions=[
        DTP.DescribeTopicPartitionsResponsePartition(eligible_leader_replicas=elr,
                                                     last_known_elr=elr)])])
    assert DTP.decode(resp.encode(0), 0) == resp
