"""Kafka's default message of an error code (Errors.message() in kafka-clients), for the answers that carry it.

Kafka puts this text in an error_message field where it answers with an error and no message of its
own (FindCoordinator v1-3, DescribeConfigs of an unauthorized resource, DescribeProducers). Only the
codes kafkapy answers that way are listed; any other code falls back to the code's name, which is what
Errors.message() gives for a code without an exception (NONE).
"""
from __future__ import annotations

from .error_codes import ErrorCode

__all__ = ["default_message"]

_MESSAGES: dict[int, str] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the "
                                      "broker is not the current leader. For requests intended for any replica, "
                                      "this error indicates that the broker is not a replica of the topic partition.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.UNSUPPORTED_VERSION: "The version of API is not supported.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library "
                               "or the message was sent to an incompatible broker. See the broker logs for more "
                               "details.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}


def default_message(code: int) -> str:
    """Errors.forCode(code).message(): the error's default text, or its name where Kafka has none."""
    message = _MESSAGES.get(code)
    if message is not None:
        return message
    try:
        return ErrorCode(code).name
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR.name
