"""Build a SparkSession that has Spark's Kafka connector loaded."""

from __future__ import annotations

import logging
import os
from typing import Mapping

from .jars import HOW_TO_PROVIDE, ConnectorJars, ConnectorUnavailable, resolve_connector

log = logging.getLogger(__name__)

KAFKA_PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def build_spark_session(
    master: str = "local[*]",
    app_name: str = "kafkapy-spark",
    connector: ConnectorJars | None = None,
    shuffle_partitions: int = 4,
    ui: bool = False,
    extra_conf: Mapping[str, str] | None = None,
):
    """Start (or reuse) a SparkSession with the Kafka connector on its classpath.

    Raises ConnectorUnavailable when the connector can be had neither from the jar directory
    nor from Maven Central (or, given as `connector.packages`, through spark.jars.packages).
    """
    from pyspark.sql import SparkSession

    connector = connector or resolve_connector()
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        # Windows print in UTC, so counts and reports do not depend on the machine's zone.
        .config("spark.sql.session.timeZone", "UTC")
        # Streaming state stays small in the examples; RocksDB is not needed.
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
    )
    if master.startswith("local"):
        # Loopback only: a local run must not bind or advertise an external interface.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    for key, value in {**connector.spark_conf(), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    log.info("starting Spark %s with the Kafka connector from %s", master, connector.source)
    try:
        spark = builder.getOrCreate()
    except Exception as error:  # the JVM dies when Ivy cannot resolve spark.jars.packages
        if connector.packages:
            raise ConnectorUnavailable(
                f"spark.jars.packages={connector.packages} could not be resolved ({_first_line(error)}); "
                + HOW_TO_PROVIDE
            ) from error
        raise
    spark.sparkContext.setLogLevel("WARN")
    if not connector_loaded(spark):
        spark.stop()
        raise ConnectorUnavailable(f"{KAFKA_PROVIDER_CLASS} is not loadable from {connector.source}; {HOW_TO_PROVIDE}")
    return spark


def connector_loaded(spark) -> bool:
    """True if the driver can load Spark's Kafka data source."""
    jvm = spark.sparkContext._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass(KAFKA_PROVIDER_CLASS)
        loader.loadClass("org.apache.kafka.clients.producer.KafkaProducer")
        return True
    except Exception as error:  # py4j wraps ClassNotFoundException
        log.warning("Kafka connector classes not loadable: %s", _first_line(error))
        return False


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
