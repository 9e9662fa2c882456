"""Typed errors of the protocol layer and of the broker, each carrying a Kafka error code."""
from __future__ import annotations

from .error_codes import RETRIABLE, ErrorCode

__all__ = ["ConnectionClosed", "ErrorCode", "KafkaError", "DecodeError", "CorruptRecordError", "is_retriable"]


def is_retriable(code: int) -> bool:
    """True if Kafka marks the error code as retriable."""
    return code in RETRIABLE


class ConnectionClosed(Exception):
    """Raised to close the client connection instead of answering (Kafka closes on a request it
    cannot or must not answer); the message is logged once. Here, below the broker, so that
    security/session.py can raise it too."""


class KafkaError(Exception):
    """An error with a Kafka error code; handlers turn it into the response's error field."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: int | None = None):
        super().__init__(message or self.__class__.__name__)
        if code is not None:
            self.code = ErrorCode(code)

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)


class DecodeError(KafkaError):
    """Bytes that do not decode as the message they claim to be.

    Names the api key, version and byte offset where decoding failed, so one log
    line is enough to find the problem.
    """

    code = ErrorCode.INVALID_REQUEST

    def __init__(self, message: str, api_key: int | None = None, api_version: int | None = None,
                 offset: int | None = None):
        self.api_key = api_key
        self.api_version = api_version
        self.offset = offset
        where = []
        if api_key is not None:
            where.append(f"api_key={api_key}")
        if api_version is not None:
            where.append(f"version={api_version}")
        if offset is not None:
            where.append(f"offset={offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


class CorruptRecordError(KafkaError):
    """A record batch whose header, length or CRC is invalid (CORRUPT_MESSAGE)."""

    code = ErrorCode.CORRUPT_MESSAGE
