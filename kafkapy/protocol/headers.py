"""Request and response headers: which header version an api version uses, and their codecs.

Request header v1 is api key, api version, correlation id and a nullable int16-length client id;
v2 (flexible request versions) adds a tagged-field section. The client id stays a non-compact
string even in v2 (RequestHeader.json marks it "flexibleVersions": "none"). Response header v0 is
the correlation id; v1 adds an empty tagged-field section.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import DecodeError
from .messages import REQUEST_TYPES
from .primitives import Malformed, skip_tagged_fields

__all__ = ["RequestHeader", "decode_request_header", "encode_response_header",
           "request_header_version", "response_header_version"]

API_VERSIONS_KEY = 18

_HEADER_FIXED = struct.Struct(">hhih")   # api key, api version, correlation id, client id length
_CORRELATION = struct.Struct(">i")


@dataclass(slots=True)
class RequestHeader:
    """The header in front of every request body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


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


def decode_request_header(buf: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Decode a request header at the start of `buf`; returns it and the body's offset."""
    if isinstance(buf, memoryview) and (buf.format != "B" or buf.ndim != 1):
        buf = buf.cast("B")
    end = len(buf)
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
    if request_header_version(api_key, api_version) == 2:
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
