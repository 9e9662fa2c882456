"""Metadata that auto-creates a topic: the creating request answers the name, no partitions and
LEADER_NOT_AVAILABLE (ZooKeeper-mode Kafka's KafkaApis.createTopic); a later request shows it."""
from __future__ import annotations

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import MetadataRequest
from tests.broker.inprocess import InProcessBroker


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path / "data", **{"num.partitions": "3"})
    yield b
    b.close()


def _ask(broker, name: str, version: int, auto_create: bool = True):
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                              allow_auto_topic_creation=auto_create)
    (topic,) = broker.call(request, version).topics
    return topic


@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_the_creating_request_answers_leader_not_available_then_the_topic_shows(broker, version):
    first = _ask(broker, "fresh", version)
    assert (first.name, first.error_code, list(first.partitions)) == ("fresh", ErrorCode.LEADER_NOT_AVAILABLE, [])
    assert broker.broker.partitions.topic("fresh") is not None  # created all the same
    second = _ask(broker, "fresh", version)
    assert second.error_code == ErrorCode.NONE
    assert sorted(p.partition_index for p in second.partitions) == [0, 1, 2]
    assert all(p.error_code == ErrorCode.NONE and p.leader_id == 0 for p in second.partitions)


def test_without_auto_creation_an_unknown_topic_stays_unknown(broker):
    assert _ask(broker, "absent", 9, auto_create=False).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.broker.partitions.topic("absent") is None
