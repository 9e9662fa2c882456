"""Fixtures of the streams group tests: one real Kafka 4.4 broker for the package, and `bootstrap`,
parametrized over that reference and a private kafkapy broker with the same streams group configs."""
from __future__ import annotations

import pytest

from conformance.real_kafka import REFERENCES, RealKafka, RealKafkaStartError, RealKafkaUnavailable
from conformance.streams_groups.harness import STREAMS_BROKER_CONFIG, unavailable

TARGETS = ["kafka-4.4", "kafkapy"]


@pytest.fixture(scope="package")
def real_kafka(tmp_path_factory: pytest.TempPathFactory):
    """A Kafka 4.4.0 KRaft broker (streams.version=1 is finalized by default) with kafkapy's timings."""
    work = tmp_path_factory.mktemp("kafka-4.4")
    kafka = RealKafka(REFERENCES["kafka-4.4.0-kraft"], work, STREAMS_BROKER_CONFIG)
    try:
        kafka.start()
    except RealKafkaUnavailable as exc:
        unavailable(f"Kafka 4.4.0: {exc}")
    except RealKafkaStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(params=TARGETS)
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The broker under test: the Kafka 4.4 reference, or a private kafkapy process."""
    if request.param == "kafka-4.4":
        return request.getfixturevalue("real_kafka").bootstrap
    return request.getfixturevalue("broker_factory")(STREAMS_BROKER_CONFIG).bootstrap
