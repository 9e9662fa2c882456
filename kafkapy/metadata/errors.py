"""Typed errors of the metadata layer (topics, partitions, configs), each with its Kafka error code."""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ConfigError",
    "InconsistentClusterIdError",
    "InvalidPartitionsError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidTopicError",
    "PolicyViolationError",
    "TopicAlreadyExistsError",
    "TopicDeletionDisabledError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
]


class TopicAlreadyExistsError(KafkaError):
    """CreateTopics for a name that is already taken (TOPIC_ALREADY_EXISTS)."""

    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidTopicError(KafkaError):
    """An illegal topic name, a name colliding with another via '.'/'_', or an internal-topic misuse."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidPartitionsError(KafkaError):
    """A partition count that is not positive, or CreatePartitions that would not increase it."""

    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    """A replication factor below 1 (other than -1) or above the number of live brokers."""

    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    """A manual replica assignment naming unknown brokers, duplicates or inconsistent sizes."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class UnknownTopicOrPartitionError(KafkaError):
    """A topic name (or partition) that the metadata does not know (UNKNOWN_TOPIC_OR_PARTITION)."""

    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class UnknownTopicIdError(KafkaError):
    """A topic id that the metadata does not know (UNKNOWN_TOPIC_ID)."""

    code = ErrorCode.UNKNOWN_TOPIC_ID


class TopicDeletionDisabledError(KafkaError):
    """DeleteTopics while delete.topic.enable=false (TOPIC_DELETION_DISABLED)."""

    code = ErrorCode.TOPIC_DELETION_DISABLED


class PolicyViolationError(KafkaError):
    """A request rejected by a create-topic or alter-config policy (POLICY_VIOLATION)."""

    code = ErrorCode.POLICY_VIOLATION


class InvalidRequestError(KafkaError):
    """A well-formed request that cannot be applied, e.g. altering a read-only broker config."""

    code = ErrorCode.INVALID_REQUEST


class InconsistentClusterIdError(KafkaError):
    """The stored cluster id differs from the one this node was told to use."""

    code = ErrorCode.INCONSISTENT_CLUSTER_ID


class ConfigError(KafkaError):
    """An invalid config name or value (INVALID_CONFIG); names the key and the offending value.

    The message has Kafka's ConfigException shape:
    ``Invalid value abc for configuration num.partitions: Not a number of type INT``.
    """

    code = ErrorCode.INVALID_CONFIG

    def __init__(self, message: str, name: str | None = None, value: object = None, code: int | None = None):
        self.name = name
        self.value = value
        super().__init__(message, code)

    @classmethod
    def invalid_value(cls, name: str, value: object, reason: str | None = None) -> ConfigError:
        """Kafka's `new ConfigException(name, value, reason)`."""
        text = "null" if value is None else str(value)
        message = f"Invalid value {text} for configuration {name}" + (f": {reason}" if reason else "")
        return cls(message, name=name, value=value)
