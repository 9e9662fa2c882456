"""Dynamic per-broker configs through DescribeConfigs / IncrementalAlterConfigs (Kafka 3.9 semantics)."""
from __future__ import annotations

import pytest

from kafkapy.protocol.messages import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from tests.broker.inprocess import InProcessBroker

BROKER = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_CONFIG = 2
SET = 0


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path / "data")
    yield b
    b.close()


def describe(broker, name):
    response = broker.call(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=BROKER, resource_name="0", configuration_keys=[name])], include_synonyms=True), 3)
    [result] = response.results
    assert result.error_code == 0
    [entry] = result.configs
    return entry


def test_advertised_listeners_is_a_dynamic_per_broker_config(broker):
    entry = describe(broker, "advertised.listeners")
    assert entry.config_source == DEFAULT_CONFIG and entry.read_only is False and entry.synonyms == []

    alter = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=BROKER, resource_name="0", configs=[IncrementalAlterConfigsRequest.AlterableConfig(
            name="advertised.listeners", config_operation=SET, value="PLAINTEXT://kafkapy.example:19093")])])
    [result] = broker.call(alter, 1).responses
    assert result.error_code == 0

    entry = describe(broker, "advertised.listeners")
    assert entry.config_source == DYNAMIC_BROKER_CONFIG
    assert entry.value == "PLAINTEXT://kafkapy.example:19093"
    metadata = broker.call(MetadataRequest(topics=[]), 12)
    assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(0, "kafkapy.example", 19093)]


def test_advertised_listeners_cannot_be_a_cluster_default(broker):
    alter = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=BROKER, resource_name="", configs=[IncrementalAlterConfigsRequest.AlterableConfig(
            name="advertised.listeners", config_operation=SET, value="PLAINTEXT://x:1")])])
    [result] = broker.call(alter, 1).responses
    assert result.error_code == 42  # INVALID_REQUEST, as Kafka: per-broker only
