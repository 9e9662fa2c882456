"""The topics a KIP-848 consumer group can subscribe to, as the coordinator sees them.

The broker supplies a view over its metadata (kafkapy/broker/handlers/consumer_groups.py,
BrokerTopicView); tests and tools use StaticTopicView.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from .group import TopicMetadata

__all__ = ["StaticTopicView", "TopicView"]


class TopicView(Protocol):
    """The topics a consumer group can subscribe to, as the broker's metadata has them.

    `version` changes whenever a topic is created or deleted or gains partitions (or a broker's
    rack changes); groups re-read their subscribed topics only then."""

    version: int

    def describe(self, name: str) -> TopicMetadata | None: ...

    def names(self) -> Iterable[str]: ...


class StaticTopicView:
    """A TopicView over a dict, for tests and tools: change it with put/delete."""

    def __init__(self, topics: Iterable[TopicMetadata] = ()):
        self._topics = {t.name: t for t in topics}
        self.version = 0

    def put(self, topic: TopicMetadata) -> None:
        self._topics[topic.name] = topic
        self.version += 1

    def delete(self, name: str) -> None:
        self._topics.pop(name, None)
        self.version += 1

    def describe(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def names(self) -> Iterable[str]:
        return list(self._topics)
