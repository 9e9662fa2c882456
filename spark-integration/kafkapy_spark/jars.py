"""Find Spark's Kafka connector jars: a local directory first, else spark.jars.packages.

The connector (spark-sql-kafka-0-10) is not part of the pyspark wheel. Spark normally pulls it
from Maven Central through `spark.jars.packages`; where that is unreachable the jars can be
put in a directory instead:

    $KAFKAPY_SPARK_JARS (default ~/.cache/kafkapy/spark-jars) holding
        spark-sql-kafka-0-10_2.13-<spark version>.jar
        spark-token-provider-kafka-0-10_2.13-<spark version>.jar
        commons-pool2-*.jar
        kafka-clients-*.jar      (or run scripts/fetch_java_clients.py, whose kafka-clients.jar
                                  in ~/.cache/kafkapy/java-clients/ is used when this one is absent)

The remaining runtime dependencies of kafka-clients (lz4, snappy, zstd, slf4j) ship with pyspark.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

JARS_DIR_ENV = "KAFKAPY_SPARK_JARS"
SCALA_BINARY_VERSION = "2.13"
CONNECTOR_ARTIFACT = f"spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}"
TOKEN_PROVIDER_ARTIFACT = f"spark-token-provider-kafka-0-10_{SCALA_BINARY_VERSION}"

# Shown whenever the jars cannot be had; tests print exactly this line when they skip.
HOW_TO_PROVIDE = (
    f"put {CONNECTOR_ARTIFACT}-<ver>.jar, {TOKEN_PROVIDER_ARTIFACT}-<ver>.jar, commons-pool2-*.jar and "
    f"kafka-clients-*.jar into ${JARS_DIR_ENV} (default ~/.cache/kafkapy/spark-jars; "
    "`python scripts/fetch_java_clients.py` supplies kafka-clients), or make Maven Central "
    "reachable for spark.jars.packages"
)


class ConnectorUnavailable(RuntimeError):
    """Neither a jar directory nor spark.jars.packages could provide the Kafka connector."""


@dataclass(slots=True)
class ConnectorJars:
    """How a SparkSession gets the Kafka connector: local jar files or Maven coordinates."""

    jars: list[Path] = field(default_factory=list)
    packages: str | None = None
    source: str = ""

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings that load the connector."""
        if self.jars:
            return {"spark.jars": ",".join(str(jar) for jar in self.jars)}
        if self.packages:
            return {"spark.jars.packages": self.packages}
        return {}


def cache_root() -> Path:
    """Return the per-user cache directory shared by kafkapy's tooling."""
    override = os.environ.get("KAFKAPY_CACHE_DIR")
    return Path(override) if override else Path.home() / ".cache" / "kafkapy"


def jars_dir() -> Path:
    """The directory searched for the connector jars ($KAFKAPY_SPARK_JARS or the cache default)."""
    override = os.environ.get(JARS_DIR_ENV)
    return Path(override).expanduser() if override else cache_root() / "spark-jars"


def java_clients_dir() -> Path:
    """Where scripts/fetch_java_clients.py leaves kafka-clients.jar."""
    return cache_root() / "java-clients"


def _newest(directory: Path, pattern: str) -> Path | None:
    matches = sorted(p for p in directory.glob(pattern) if p.is_file() and p.stat().st_size > 0)
    return matches[-1] if matches else None


def _kafka_clients_jar(directory: Path) -> Path | None:
    return _newest(directory, "kafka-clients*.jar") or _newest(java_clients_dir(), "kafka-clients*.jar")


def jars_from_directory(directory: Path, spark_version: str) -> ConnectorJars | None:
    """The connector jars found in `directory`, or None when any of them is missing.

    A connector built for another patch release of the same Spark minor version is accepted
    (the jars are binary compatible within a minor release); the exact version wins if present.
    """
    if not directory.is_dir():
        return None
    minor = ".".join(spark_version.split(".")[:2])
    found: list[Path] = []
    for artifact in (CONNECTOR_ARTIFACT, TOKEN_PROVIDER_ARTIFACT):
        jar = directory / f"{artifact}-{spark_version}.jar"
        if not jar.is_file():
            jar = _newest(directory, f"{artifact}-{minor}.*.jar")
        if jar is None:
            return None
        found.append(jar)
    pool = _newest(directory, "commons-pool2-*.jar")
    clients = _kafka_clients_jar(directory)
    if pool is None or clients is None:
        return None
    return ConnectorJars(jars=[*found, pool, clients], source=f"jars in {directory}")


def maven_coordinates(spark_version: str) -> str:
    """The spark.jars.packages value that matches the running pyspark."""
    return f"org.apache.spark:{CONNECTOR_ARTIFACT}:{spark_version}"


def resolve_connector(spark_version: str | None = None) -> ConnectorJars:
    """Local jars when the jar directory has them all, else Maven coordinates for the pyspark version."""
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    local = jars_from_directory(jars_dir(), spark_version)
    if local is not None:
        return local
    return ConnectorJars(packages=maven_coordinates(spark_version), source="spark.jars.packages (Maven)")
