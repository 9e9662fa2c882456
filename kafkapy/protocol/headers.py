"""Request and response headers: which header version an api version uses, and their codecs.

Request header v0 is api key, api version and correlation id (Kafka sends it only for
ControlledShutdown v0); v1 adds a nullable int16-length client id; v2 (flexible request versions)
adds a tagged-field section. The client id stays a non-compact string even in v2
(RequestHeader.json marks it "flexibleVersions": "none"). Response header v0 is the correlation
id; v1 adds a tagged-field section.

Both sides live here: the broker decodes request headers and encodes response headers; clients
(net/client.py, admin/client.py, devcluster) encode request headers and decode response headers.
"""
from __future__ import annotations

import struct

from .errors import DecodeError
from .messages import REQUEST_TYPES
from .primitives import Malformed, skip_tagged_fields

__all__ = ["RequestHeader", "decode_request_header", "decode_response_header", "encode_request_header",
           "encode_response_header", "request_header_version", "response_header_version"]

API_VERSIONS_KEY = 18

_HEADER_FIXED = struct.Struct(">hhih")   # api key, api version, correlation id, client id length
_HEADER_V0 = struct.Struct(">hhi")       # api key, api version, correlation id
_CORRELATION = struct.Struct(">i")
_NULL_STRING = b"\xff\xff"


class RequestHeader:
    """The header in front of every request body. A plain slotted class: built for every request,
    where a NamedTuple costs twice as much to create and to read, and off the start-up path's
    dataclasses (docs/benchmarks.md, start-up)."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None = None):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id

    def __eq__(self, other: object) -> bool:
        if type(other) is not RequestHeader:
            return NotImplemented
        return (self.api_key, self.api_version, self.correlation_id, self.client_id) == (
            other.api_key, other.api_version, other.correlation_id, other.client_id)

    __hash__ = None

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


def _flexible(api_key: int, api_version: int) -> bool | None:
    """Whether the api version is flexible; None when the api key or version is unknown."""
    try:
        message = REQUEST_TYPES[api_key]  # a plain dict lookup once the API's module is imported
    except KeyError:
        return None
    lo, hi = message.VALID_VERSIONS
    if not lo <= api_version <= hi:
        return None
    first = message.FLEXIBLE_VERSION
    return first is not None and api_version >= first


def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version (1 or 2) a request of this api version carries.

    Unknown api keys and versions are read as v1 so the broker can still answer, except
    ApiVersions above its max: KIP-511 clients send those with header v2.
    """
    flexible = _flexible(api_key, api_version)
    if flexible is None:
        if api_key == API_VERSIONS_KEY and api_version > REQUEST_TYPES[API_VERSIONS_KEY].VALID_VERSIONS[1]:
            return 2
        return 1
    return 2 if flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version (0 or 1); ApiVersions responses always use v0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if _flexible(api_key, api_version) else 0


def decode_request_header(buf: bytes | bytearray | memoryview,
                          header_version: int | None = None) -> tuple[RequestHeader, int]:
    """Decode a request header at the start of `buf`; returns it and the body's offset.

    The header version follows from the api key and version (`request_header_version`) unless
    given; only a given 0 reads a header without a client id."""
    if isinstance(buf, memoryview) and (buf.format != "B" or buf.ndim != 1):
        buf = buf.cast("B")
    end = len(buf)
    if header_version == 0 and end >= 8:
        api_key, api_version, correlation_id = _HEADER_V0.unpack_from(buf, 0)
        return RequestHeader(api_key, api_version, correlation_id, None), 8
    if end < 10:
        if end >= 4:
            api_key, api_version = struct.unpack_from(">hh", buf, 0)
            raise DecodeError("request header truncated", api_key, api_version, end)
        raise DecodeError("request header truncated", offset=end)
    api_key, api_version, correlation_id, n = _HEADER_FIXED.unpack_from(buf, 0)
    pos = 10
    if n < 0:
        client_id = None
    else:
        if n > end - pos:
            raise DecodeError(f"client id length {n} runs past the end", api_key, api_version, pos)
        try:
            client_id = str(buf[pos:pos + n], "utf-8")
        except UnicodeDecodeError:
            raise DecodeError("client id is not valid UTF-8", api_key, api_version, pos) from None
        pos += n
    if (header_version or request_header_version(api_key, api_version)) == 2:
        try:
            pos = skip_tagged_fields(buf, pos)
        except Malformed as exc:
            raise DecodeError(f"request header: {exc.reason}", api_key, api_version,
                              exc.offset) from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_response_header(correlation_id: int, api_key: int, api_version: int) -> bytes:
    """The response header for a response to this api version."""
    header = _CORRELATION.pack(correlation_id)
    if response_header_version(api_key, api_version) == 1:
        return header + b"\x00"
    return header


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                          header_version: int | None = None) -> bytes:
    """The request header for a request of this api version (header version from
    `request_header_version` unless given: 0 drops the client id, 2 adds empty tagged fields)."""
    if header_version is None:
        header_version = request_header_version(api_key, api_version)
    if header_version == 0:
        return _HEADER_V0.pack(api_key, api_version, correlation_id)
    if client_id is None:
        header = _HEADER_V0.pack(api_key, api_version, correlation_id) + _NULL_STRING
    else:
        raw = client_id.encode()
        header = _HEADER_FIXED.pack(api_key, api_version, correlation_id, len(raw)) + raw
    if header_version == 2:
        return header + b"\x00"
    return header


def decode_response_header(buf: bytes | bytearray | memoryview, api_key: int, api_version: int,
                           header_version: int | None = None) -> tuple[int, int]:
    """The correlation id of a response frame (size prefix removed) and its body's offset.

    The header version follows from the request's api key and version unless given. Raises
    DecodeError for a truncated header or malformed tagged fields."""
    if len(buf) < 4:
        raise DecodeError("response header truncated", api_key, api_version, len(buf))
    correlation_id = _CORRELATION.unpack_from(buf, 0)[0]
    if header_version is None:
        header_version = response_header_version(api_key, api_version)
    if header_version == 0:
        return correlation_id, 4
    try:
        return correlation_id, skip_tagged_fields(buf, 4)
    except Malformed as exc:
        raise DecodeError(f"response header: {exc.reason}", api_key, api_version, exc.offset) from None

