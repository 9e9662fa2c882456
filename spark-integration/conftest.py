"""Fixtures for the Spark integration tests: a real kafkapy broker and Spark 4.0 and 3.5 drivers.

Spark 4.0 (pyspark 4.0.0) runs in this process: its venv's site-packages (pyspark and py4j only)
goes first on sys.path, and one SparkSession is shared by the tests. Spark 3.5 (pyspark 3.5.7) runs
in a child process with its venv's python (kafkapy_spark.child_process). Both venvs are made on
first use (kafkapy_spark.runtimes; scripts/install-spark.sh does the same ahead of time) and the
Kafka connector jars come from Maven Central (conformance.maven).

When a runtime or its jars cannot be had the Spark tests skip with one line saying why; under
KAFKAPY_REQUIRE_SPARK=1 (CI) they fail instead. Nothing else skips.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Iterator, NoReturn

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

REQUIRE_SPARK_ENV = "KAFKAPY_REQUIRE_SPARK"
SPARK_TEST_TIMEOUT_S = 180


def spark_unavailable(message: str) -> NoReturn:
    """Skip loudly, or fail when the run requires Spark (KAFKAPY_REQUIRE_SPARK=1)."""
    if os.environ.get(REQUIRE_SPARK_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_SPARK_ENV}=1: the Spark tests must run)", pytrace=False)
    pytest.skip(f"!!! {message}")


def spark_runtime(minor: str):
    """The pinned runtime of Spark `minor`, its venv made if missing (skip/fail when it cannot be)."""
    from kafkapy_spark.runtimes import RUNTIMES, RuntimeUnavailable, ensure_venv

    runtime = RUNTIMES[minor]
    try:
        ensure_venv(runtime)
    except RuntimeUnavailable as error:
        spark_unavailable(f"Spark tests need pyspark=={runtime.spark_version} (bash scripts/install-spark.sh): {error}")
    return runtime


def connector_jars(runtime) -> list[Path]:
    """The runtime's Kafka connector jars from Maven Central (skip/fail when they cannot be had)."""
    from kafkapy_spark.jars import ConnectorUnavailable
    from kafkapy_spark.runtimes import connector_jars as resolve

    try:
        return resolve(runtime)
    except ConnectorUnavailable as error:
        spark_unavailable(f"Spark's Kafka connector jars are not available: {error}")


def _import_pyspark_40():
    """Import the 4.0 venv's pyspark into this process."""
    runtime = spark_runtime("4.0")
    site = str(runtime.site_packages)
    if site not in sys.path:
        sys.path.insert(0, site)  # the venv was made without pip: it holds pyspark and py4j only
    import pyspark

    if pyspark.__version__ != runtime.spark_version:
        spark_unavailable(f"Spark tests need pyspark=={runtime.spark_version} from {site}, "
                          f"but pyspark {pyspark.__version__} was imported from {pyspark.__file__}")
    return runtime


@pytest.fixture(scope="session")
def pyspark_40_env() -> dict[str, str]:
    """Environment for a child process run with this interpreter that imports pyspark 4.0."""
    runtime = _import_pyspark_40()
    connector_jars(runtime)  # resolved (and cached) here, so the child finds them in ~/.m2 at once
    path = os.pathsep.join(p for p in (str(runtime.site_packages), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] Spark 4.0 SparkSession in this process (UI off, 2 shuffle partitions) with the connector."""
    runtime = _import_pyspark_40()
    from kafkapy_spark.jars import ConnectorJars, ConnectorUnavailable
    from kafkapy_spark.session import build_spark_session

    jars = connector_jars(runtime)
    try:
        session = build_spark_session(
            "local[2]", "kafkapy-spark-tests",
            connector=ConnectorJars(jars=jars + _iceberg_jars(), source="Maven Central"),
            shuffle_partitions=2, ui=False,
            extra_conf={
                "spark.driver.memory": "1g",
                # Each test module has its own broker; Spark's cached producers for a stopped
                # broker are closed soon instead of retrying for the default 10 minutes.
                "spark.kafka.producer.cache.timeout": "15s",
                "spark.kafka.producer.cache.evictorThreadRunInterval": "5s",
            },
        )
    except ConnectorUnavailable as error:
        spark_unavailable(f"Spark's Kafka connector jars are not available: {error}")
    try:
        yield session
    finally:
        session.stop()
        stop_jvm()


_ICEBERG_UNAVAILABLE: list[str] = []  # why the session was started without Iceberg's runtime


def _iceberg_jars() -> list[Path]:
    """Iceberg's Spark runtime and sqlite-jdbc for the table tests (none, and the reason kept, if Maven fails)."""
    from conformance.maven import MavenUnavailable, jars
    from conformance.tables.readers import ICEBERG_SPARK_RUNTIME, SQLITE_JDBC

    try:
        return [Path(jar) for jar in jars([ICEBERG_SPARK_RUNTIME, SQLITE_JDBC])]
    except MavenUnavailable as error:
        _ICEBERG_UNAVAILABLE.append(f"{ICEBERG_SPARK_RUNTIME} from Maven Central: {error}")
        return []


@pytest.fixture
def iceberg_spark(spark):
    """`iceberg_spark(log_dir)`: a new session of the shared SparkContext whose catalog `kafkapy` is
    the embedded catalog under a broker's first log dir (docs/tables.md).

    The catalog must be named `kafkapy`: Iceberg's JdbcCatalog only sees the rows of its own name
    in iceberg_tables, and pyiceberg wrote them as `kafkapy`. Spark caches a catalog by name for a
    session's life, so each broker's catalog gets a session of its own (spark.newSession()).
    """
    from kafkapy_spark.table_history import iceberg_catalog_conf

    if _ICEBERG_UNAVAILABLE:
        spark_unavailable(_ICEBERG_UNAVAILABLE[0])

    def session_for(log_dir):
        session = spark.newSession()
        for key, value in iceberg_catalog_conf("kafkapy", str(log_dir)).items():
            session.conf.set(key, value)
        return session

    return session_for


def stop_jvm(timeout_s: float = 20.0) -> None:
    """End the driver JVM that pyspark started in this process, not only its SparkContext.

    After SparkSession.stop() the JVM lives on until this process exits, and its Kafka producer
    cache keeps logging connection failures to the brokers the tests have stopped (after pytest's
    closing line, which must stay the run's last).
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception as error:  # the JVM is ended below anyway
        logging.getLogger(__name__).warning("py4j gateway shutdown: %s", error)
    if proc is not None:
        try:
            proc.stdin.close()  # the JVM that pyspark launched exits when its stdin closes
            proc.wait(timeout_s)
        except Exception:
            proc.kill()
            proc.wait(timeout_s)
    SparkContext._gateway = None
    SparkContext._jvm = None


@pytest.fixture(scope="module")
def spark35(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Spark 3.5 driver (pyspark 3.5.7, kafka-clients 3.4.1) in a child process, one per module."""
    from kafkapy_spark.child_process import SparkChild

    runtime = spark_runtime("3.5")
    jars = connector_jars(runtime)
    log_path = tmp_path_factory.mktemp("spark35") / "driver.log"
    with SparkChild(runtime.python, jars, log_path) as child:
        yield child


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> str:
    """A fresh checkpoint location for one streaming query."""
    return str(tmp_path / "checkpoint")
