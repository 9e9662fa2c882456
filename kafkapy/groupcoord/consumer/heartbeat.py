"""A ConsumerGroupHeartbeat as the coordinator sees it, its answer, and the checks Kafka makes
before it looks at the group (throwIfConsumerGroupHeartbeatRequestIsInvalid)."""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

from ...protocol.errors import ErrorCode, KafkaError
from .group import JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, Assignment

__all__ = ["CLIENT_GENERATED_MEMBER_ID_VERSION", "HeartbeatRequest", "HeartbeatResult", "OwnedPartitions",
           "new_member_id", "validate_heartbeat_request"]

# ConsumerGroupHeartbeat v1+: the client generates its member id (KIP-1082)
CLIENT_GENERATED_MEMBER_ID_VERSION = 1

OwnedPartitions = list[tuple[uuid.UUID, list[int]]]


def new_member_id() -> str:
    """A member id as Kafka's coordinator makes one: a random Uuid in URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat as the coordinator sees it (names resolved by the handler)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: OwnedPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    """What a ConsumerGroupHeartbeat is answered with (assignment None: unchanged)."""

    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _error(code: int, message: str) -> KafkaError:
    return KafkaError(message, code)


def _invalid(message: str) -> KafkaError:
    return KafkaError(message, ErrorCode.INVALID_REQUEST)


def validate_heartbeat_request(request: HeartbeatRequest, assignor_names: list[str]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (4.0)."""
    if not request.group_id:
        raise _invalid("GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id:
        raise _invalid("InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id:
        raise _invalid("RackId can't be empty.")
    epoch = request.member_epoch
    if request.api_version >= CLIENT_GENERATED_MEMBER_ID_VERSION and not request.member_id:
        raise _invalid("MemberId can't be empty.")
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not request.member_id:
            raise _invalid("MemberId can't be empty.")
    elif epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        has_names = bool(request.subscribed_topic_names)
        has_regex = bool(request.subscribed_topic_regex)
        if not has_names and not has_regex:
            raise _invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not request.member_id:
            raise _invalid("MemberId can't be empty.")
        if request.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    else:
        raise _invalid("MemberEpoch is invalid.")
    if request.rebalance_timeout_ms < -1:
        raise _invalid("RebalanceTimeoutMs can't be negative.")
    if request.subscribed_topic_regex:
        from .topic_regex import InvalidTopicRegex, compile_topic_regex

        try:
            compile_topic_regex(request.subscribed_topic_regex)
        except InvalidTopicRegex as exc:
            raise _error(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid regular "
                         f"expression: {exc.description}.") from None
    if request.server_assignor is not None and request.server_assignor not in assignor_names:
        raise _error(ErrorCode.UNSUPPORTED_ASSIGNOR,
                     f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                     f"{', '.join(assignor_names)}.")
