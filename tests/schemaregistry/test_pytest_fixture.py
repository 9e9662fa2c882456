"""The pytest plugin's `schema_registry_url` fixture, used as a user's project would: the session broker
runs the built-in registry when a test asks for it, and confluent-kafka's client talks to it."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytest.importorskip("confluent_kafka.schema_registry")
pytest.importorskip("avro")

pytestmark = pytest.mark.timeout(120)

TEST = '''
import json
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

def test_register(kafka_broker, schema_registry_url):
    assert schema_registry_url == kafka_broker.schema_registry_url
    client = SchemaRegistryClient({"url": schema_registry_url})
    schema = Schema(json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}), "AVRO")
    assert client.register_schema("t-value", schema) == 1
    assert client.get_latest_version("t-value").version == 1

def test_without_registry_the_url_is_none_elsewhere(kafka_broker_factory):
    assert kafka_broker_factory().schema_registry_url is None
'''


def test_schema_registry_url_fixture(pytester):
    pytester.makepyfile(test_registry=TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", timeout=100)
    result.assert_outcomes(passed=2)
