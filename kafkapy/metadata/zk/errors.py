"""Errors of the ZooKeeper client layer, so callers never need to catch kazoo's own exceptions."""
from __future__ import annotations

__all__ = ["BadVersionError", "BrokerIdInUseError", "ControllerMovedError", "NoNodeError", "NodeExistsError",
           "TopicExistsError", "ZkConnectionError", "ZkError"]


class ZkError(Exception):
    """Any failure talking to ZooKeeper or an unexpected znode state."""


class ZkConnectionError(ZkError):
    """No ZooKeeper session could be had within the connection timeout (or the client is closed)."""


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
