"""Requests whose counts would make the broker work without bound get Kafka's refusal instead."""
from __future__ import annotations

import time

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import CreatePartitionsRequest, CreateTopicsRequest
from tests.broker.inprocess import InProcessBroker

MAX_INT32 = 2**31 - 1


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path / "data")
    yield b
    b.close()


def test_create_topics_over_the_partition_batch_limit_is_a_policy_violation(broker):
    """KRaft's MAX_PARTITIONS_PER_BATCH (10,000 per request): found by the fuzz campaign, where
    num_partitions=2**31-1 kept the event loop busy planning replicas until memory ran out."""
    started = time.monotonic()
    request = CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name="huge", num_partitions=MAX_INT32, replication_factor=1),
        CreateTopicsRequest.CreatableTopic(name="small", num_partitions=1, replication_factor=1)],
        timeout_ms=1000)
    response = broker.call(request, 7)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("huge", ErrorCode.POLICY_VIOLATION), ("small", ErrorCode.POLICY_VIOLATION)]
    assert response.topics[0].error_message == "Excessively large number of partitions per request."
    split = CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=f"half-{i}", num_partitions=5001, replication_factor=1)
        for i in range(2)], timeout_ms=1000)
    assert {t.error_code for t in broker.call(split, 4).topics} == {ErrorCode.POLICY_VIOLATION}
    assert broker.broker.partitions.topic("huge") is None
    assert time.monotonic() - started < 5


def test_create_partitions_over_the_partition_batch_limit_is_a_policy_violation(broker):
    broker.create_topic("grown", 1)
    request = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name="grown", count=MAX_INT32, assignments=None)], timeout_ms=1000)
    [result] = broker.call(request, 3).results
    assert result.error_code == ErrorCode.POLICY_VIOLATION
    assert len(broker.broker.partitions.topic("grown").partitions) == 1
    request = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name="grown", count=3, assignments=None)], timeout_ms=1000)
    assert broker.call(request, 3).results[0].error_code == 0


def test_deleting_a_topic_with_the_longest_legal_name(broker, caplog):
    """A 249-character topic (Kafka's limit): its `-delete` dir name is cut to 255 bytes as Kafka's
    UnifiedLog.logDeleteDirName does (found by the fuzz campaign: ENAMETOOLONG, an ERROR line, the
    partition dir left behind)."""
    from kafkapy.protocol.messages import DeleteTopicsRequest

    name = "x" * 249
    broker.create_topic(name, 1)
    log_dir = broker.broker.logs.get(name, 0).dir.parent
    assert (log_dir / f"{name}-0").is_dir()
    [result] = broker.call(DeleteTopicsRequest(topic_names=[name], timeout_ms=1000), 5).responses
    assert result.error_code == 0
    assert not (log_dir / f"{name}-0").exists()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
