"""kafka-python's own integration suite (from its PyPI sdist) against the broker.

Failures must be listed in conformance/kafka_python_allow.txt with a reason; counts go to
build/kafka-python-suite.txt. See conformance/kafka_python_suite.py for how it is run.
"""

from __future__ import annotations

import pytest

from conformance import kafka_python_suite as suite

pytestmark = pytest.mark.timeout(suite.SUITE_TIMEOUT_S + 120)


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str | None]:
    # What kafka-python's own fixture runs Kafka < 4.0 with: servers/resources/1.0/kafka.properties
    # rendered by test/integration/fixtures.py (KafkaFixture, partitions=4, replicas=1, and
    # _acl_config()'s authorizer). Tests depend on it: test_group uses a 3 s session timeout
    # (group.min.session.timeout.ms), the ACL test needs an authorizer, and the template leaves
    # advertised.listeners unset (the broker-config test expects its DEFAULT_CONFIG source).
    return {
        "broker.id": "0",  # some tests name broker 0 (CreatePartitions assignments)
        "advertised.listeners": None,  # unset: advertise `listeners`, as the template does
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "num.partitions": "4",
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "2",
        "offsets.commit.timeout.ms": "500",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.min.session.timeout.ms": "1000",
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.enable": "false",
    }


def test_kafka_python_integration_suite(broker):
    try:
        version = suite.installed_kafka_python_version()
        suite.fetch_sdist(version)
    except Exception as exc:  # no kafka-python, no network to PyPI, odd sdist layout
        pytest.skip(f"!!! kafka-python's test suite is unavailable: {exc}")
    entries = suite.load_allow_list()
    result = suite.run_suite(broker.bootstrap)
    text, unexpected = suite.summarize(result, entries, broker.bootstrap, suite.DEFAULT_KAFKA_VERSION)
    suite.SUMMARY_DIR.mkdir(exist_ok=True)
    (suite.SUMMARY_DIR / "kafka-python-suite.txt").write_text(text)
    print(text)
    assert result.passed or result.failed, f"kafka-python's suite ran no test:\n{result.output_tail}"
    assert not unexpected, f"{len(unexpected)} kafka-python tests failed that are not allow-listed:\n{text}"
