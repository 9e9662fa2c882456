"""Request/response headers and the advertised version table."""
from __future__ import annotations

import struct

import pytest

from kafkapy.protocol.api_versions import SUPPORTED_VERSIONS
from kafkapy.protocol.errors import DecodeError
from kafkapy.protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    request_header_version,
    response_header_version,
)
from kafkapy.protocol.messages import REQUEST_TYPES, RESPONSE_TYPES, MetadataRequest


def _header(key, version, corr, client_id, tagged=None) -> bytes:
    if client_id is None:
        out = struct.pack(">hhih", key, version, corr, -1)
    else:
        raw = client_id.encode()
        out = struct.pack(">hhih", key, version, corr, len(raw)) + raw
    return out + (tagged or b"")


def test_v1_header():
    body = MetadataRequest(topics=None).encode(4)
    frame = _header(3, 4, 42, "console-producer") + body
    header, pos = decode_request_header(frame)
    assert header == RequestHeader(3, 4, 42, "console-producer")
    assert MetadataRequest.decode(frame, 4, pos) == MetadataRequest(topics=None)


def test_v2_header_skips_tagged_fields():
    frame = _header(3, 12, 7, None, b"\x01\x05\x02hi") + b"BODY"
    header, pos = decode_request_header(frame)
    assert header.client_id is None and frame[pos:] == b"BODY"


def test_client_id_is_not_compact_in_v2():
    frame = _header(18, 3, 1, "rdkafka", b"\x00")
    header, pos = decode_request_header(memoryview(frame))
    assert header.client_id == "rdkafka" and pos == len(frame)


def test_unknown_key_and_version_read_as_v1():
    assert request_header_version(1000, 0) == 1
    assert request_header_version(3, 14) == 1          # above Metadata's max (v13, Kafka 4.x)
    assert request_header_version(58, 0) == 1          # Envelope: KRaft forwarding, not served
    assert request_header_version(4, 7) == 2           # LeaderAndIsr v7 (ZooKeeper mode) is flexible
    frame = _header(1000, 5, 9, "x") + b"\x00"
    header, pos = decode_request_header(frame)
    assert header.api_key == 1000 and pos == len(frame) - 1


def test_api_versions_above_max_is_v2():
    assert request_header_version(18, 5) == 2
    assert request_header_version(18, 2) == 1
    assert request_header_version(18, 3) == 2
    frame = _header(18, 9, 1, "new-client", b"\x00") + b"body"
    header, pos = decode_request_header(frame)
    assert header.api_version == 9 and frame[pos:] == b"body"


def test_header_versions_follow_flexibility():
    for key, cls in REQUEST_TYPES.items():
        lo, hi = cls.VALID_VERSIONS
        for v in range(lo, hi + 1):
            flexible = cls.FLEXIBLE_VERSION is not None and v >= cls.FLEXIBLE_VERSION
            assert request_header_version(key, v) == (2 if flexible else 1)
            expected = 0 if key == 18 else (1 if flexible else 0)
            assert response_header_version(key, v) == expected


def test_encode_response_header():
    assert encode_response_header(5, 3, 8) == struct.pack(">i", 5)
    assert encode_response_header(5, 3, 9) == struct.pack(">i", 5) + b"\x00"
    assert encode_response_header(-2, 18, 3) == struct.pack(">i", -2)   # ApiVersions: always v0
    assert encode_response_header(1, 9999, 0) == struct.pack(">i", 1)


@pytest.mark.parametrize("frame", [
    b"", b"\x00\x03", b"\x00\x03\x00\x04\x00\x00", _header(3, 4, 1, "abc")[:-1],
    struct.pack(">hhih", 3, 4, 1, 2) + b"\xff\xfe", _header(3, 12, 1, None),
    _header(3, 12, 1, None, b"\x01\x00\x05ab"),
])
def test_bad_headers(frame):
    with pytest.raises(DecodeError) as info:
        decode_request_header(frame)
    assert info.value.offset is not None


def test_supported_versions_policy():
    for key, (lo, hi) in SUPPORTED_VERSIONS.items():
        vlo, vhi = REQUEST_TYPES[key].VALID_VERSIONS
        assert vlo <= lo <= hi <= vhi, key
        assert RESPONSE_TYPES[key].VALID_VERSIONS == (vlo, vhi)
    # the union of old and new clients: every version Kafka 3.9 serves, from v0 (ListOffsets v0,
    # Fetch v0-3 down-converted, OffsetCommit v0-1, ... as well)
    # (the share group APIs excepted: Kafka 4.1 removed their v0, 4.0's early access)
    share_apis = {76, 77, 78, 79}
    assert SUPPORTED_VERSIONS[90] == (0, 1)
    assert all(lo == REQUEST_TYPES[key].VALID_VERSIONS[0] == 0 for key, (lo, _) in SUPPORTED_VERSIONS.items()
               if key not in share_apis)
    assert all(SUPPORTED_VERSIONS[key][0] == REQUEST_TYPES[key].VALID_VERSIONS[0] == 1 for key in share_apis)
    # Kafka 4.4's newest of these (issue 32: docs/compatibility.md)
    assert SUPPORTED_VERSIONS[0] == (0, 13)
    assert SUPPORTED_VERSIONS[1] == (0, 18)
    assert SUPPORTED_VERSIONS[2] == (0, 11)
    assert SUPPORTED_VERSIONS[3] == (0, 13)
    assert SUPPORTED_VERSIONS[11] == (0, 9)
    assert SUPPORTED_VERSIONS[18] == (0, 5)
    assert SUPPORTED_VERSIONS[17] == (0, 1) and SUPPORTED_VERSIONS[36] == (0, 2)   # SASL (KIP-152, KIP-368)
    assert {2, 8, 9, 10, 12, 13, 14, 15, 16, 19, 20, 21, 22, 23, 32, 33, 35, 37, 42, 44, 46, 47,
            60, 69, 75} <= set(SUPPORTED_VERSIONS)


# -- the client side: request header encode, response header decode ---------------------------


@pytest.mark.parametrize("client_id", ["kafkapy-broker-1", "", None, "ünï"])
def test_request_header_round_trip_every_api_version(client_id):
    """v1 for every non-flexible version, v2 (tagged fields) for every flexible one."""
    for key, cls in REQUEST_TYPES.items():
        lo, hi = cls.VALID_VERSIONS
        for version in range(lo, hi + 1):
            raw = encode_request_header(key, version, 12345, client_id) + b"BODY"
            header, pos = decode_request_header(raw)
            assert header == RequestHeader(key, version, 12345, client_id)
            assert raw[pos:] == b"BODY"
            flexible = cls.FLEXIBLE_VERSION is not None and version >= cls.FLEXIBLE_VERSION
            client_id_size = 2 + len((client_id or "").encode())
            assert pos == 8 + client_id_size + (1 if flexible else 0)


@pytest.mark.parametrize("header_version", [0, 1, 2])
def test_request_header_round_trip_each_header_version(header_version):
    raw = encode_request_header(7, 0, -5, "cid", header_version=header_version)
    assert len(raw) == {0: 8, 1: 13, 2: 14}[header_version]
    header, pos = decode_request_header(raw + b"x", header_version=header_version)
    assert header == RequestHeader(7, 0, -5, None if header_version == 0 else "cid")
    assert pos == len(raw)


def test_request_header_bytes_are_kafkas():
    assert encode_request_header(3, 4, 42, "ab") == struct.pack(">hhih", 3, 4, 42, 2) + b"ab"
    assert encode_request_header(3, 12, 42, None) == struct.pack(">hhih", 3, 12, 42, -1) + b"\x00"
    assert encode_request_header(18, 0, 1, "c", header_version=0) == struct.pack(">hhi", 18, 0, 1)


def test_response_header_round_trip_every_api_version():
    """The broker's encode_response_header read back by the client's decoder: v0 when not flexible
    (and always for ApiVersions), v1 with its tagged fields when flexible."""
    for key, cls in REQUEST_TYPES.items():
        lo, hi = cls.VALID_VERSIONS
        for version in range(lo, hi + 1):
            raw = encode_response_header(-77, key, version) + b"BODY"
            correlation_id, pos = decode_response_header(raw, key, version)
            assert correlation_id == -77 and raw[pos:] == b"BODY"
            assert pos == 4 + (response_header_version(key, version) == 1)


@pytest.mark.parametrize("header_version", [0, 1])
def test_response_header_each_header_version(header_version):
    tagged = b"\x01\x00\x02hi" if header_version == 1 else b""   # v1 may carry unknown tagged fields
    raw = struct.pack(">i", 9) + tagged + b"rest"
    assert decode_response_header(raw, 3, 0, header_version=header_version) == (9, 4 + len(tagged))


def test_response_header_errors():
    with pytest.raises(DecodeError):
        decode_response_header(b"\x00\x01", 3, 12)
    with pytest.raises(DecodeError):
        decode_response_header(struct.pack(">i", 1) + b"\x05\x00", 3, 12)   # 5 tagged fields, 1 byte left
