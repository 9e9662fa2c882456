"""kafka-python's own integration suite (from its PyPI sdist) against the broker.

Failures must be listed in conformance/kafka_python_allow.txt with a reason; counts go to
build/kafka-python-suite.txt. See conformance/kafka_python_suite.py for how it is run.
"""

from __future__ import annotations

import pytest

from conformance import kafka_python_suite as suite

pytestmark = pytest.mark.timeout(suite.SUITE_TIMEOUT_S + 120)


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    # kafka-python's fixtures run broker id 0, and some tests name it (CreatePartitions assignments).
    return {"broker.id": "0"}


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
