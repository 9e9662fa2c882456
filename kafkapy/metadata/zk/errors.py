"""Errors of the ZooKeeper client layer, so callers never need to catch kazoo's own exceptions."""
from __future__ import annotations

from ...protocol.errors import ErrorCode, KafkaError

__all__ = ["BadVersionError", "BrokerIdInUseError", "ControllerMovedError", "NoNodeError", "NodeExistsError",
           "TopicExistsError", "ZkConnectionError", "ZkError"]


class ZkError(Exception):
    """Any failure talking to ZooKeeper or an unexpected znode state."""


class ZkConnectionError(ZkError, KafkaError):
    """No ZooKeeper session could be had within the connection timeout (or the client is closed).

    Also a KafkaError (REQUEST_TIMED_OUT, retriable): a request whose ZooKeeper write cannot be
    made now (an admin call while ZooKeeper is away) is answered with it, as a Kafka client would
    see its request time out while Kafka's handler thread waits for ZooKeeper."""

    code = ErrorCode.REQUEST_TIMED_OUT


class BrokerIdInUseError(ZkError):
    """/brokers/ids/<id> exists and belongs to another live session: two brokers share a broker.id."""


class ControllerMovedError(ZkError):
    """A fenced write found /controller_epoch at another znode version: this broker is no longer controller."""


class BadVersionError(ZkError):
    """A compare-and-set write expected a znode version that is no longer current."""


class NodeExistsError(ZkError):
    """A create found the znode already there."""


class NoNodeError(ZkError):
    """A write or read needed a znode that does not exist."""


class TopicExistsError(NodeExistsError):
    """/brokers/topics/<t> already exists."""
