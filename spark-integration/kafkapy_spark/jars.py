"""Find Spark's Kafka connector jars: a local directory if it has them all, else Maven Central.

The connector (spark-sql-kafka-0-10) is not part of the pyspark wheel. It and its dependencies
(kafka-clients, commons-pool2, the token provider) come from Maven Central through
conformance.maven, which lets `mvn` resolve them into ~/.m2 (cached); the jars pyspark already
ships (Scala, Hadoop, lz4, snappy, slf4j) are left out. A machine without Maven Central can put the
jars in a directory instead:

    $KAFKAPY_SPARK_JARS (default ~/.cache/kafkapy/spark-jars) holding
        spark-sql-kafka-0-10_<scala>-<spark version>.jar
        spark-token-provider-kafka-0-10_<scala>-<spark version>.jar
        commons-pool2-*.jar
        kafka-clients-*.jar

<scala> is 2.13 for Spark 4 and 2.12 for pyspark 3.5.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

JARS_DIR_ENV = "KAFKAPY_SPARK_JARS"
SCALA_BINARY_VERSION = "2.13"  # Spark 4; pyspark 3.x is built for Scala 2.12
CONNECTOR_ARTIFACT = f"spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}"
TOKEN_PROVIDER_ARTIFACT = f"spark-token-provider-kafka-0-10_{SCALA_BINARY_VERSION}"

# Shown whenever the jars cannot be had; tests print exactly this line when they skip.
HOW_TO_PROVIDE = (
    "make Maven Central reachable for `mvn` (conformance/maven.py resolves "
    "org.apache.spark:spark-sql-kafka-0-10_<scala>:<spark version> into ~/.m2), or put "
    "spark-sql-kafka-0-10_<scala>-<ver>.jar, spark-token-provider-kafka-0-10_<scala>-<ver>.jar, "
    f"commons-pool2-*.jar and kafka-clients-*.jar into ${JARS_DIR_ENV} (default ~/.cache/kafkapy/spark-jars)"
)

# What the connector's dependencies pull in that pyspark already ships: not downloaded
# (hadoop-client-runtime alone is ~30 MB) and, should Maven bring it anyway, filtered out by name.
SHIPPED_WITH_PYSPARK = (
    "org.apache.hadoop:hadoop-client-runtime",
    "org.apache.hadoop:hadoop-client-api",
    "org.scala-lang:scala-library",
    "org.scala-lang.modules:scala-parallel-collections_2.13",
    "org.lz4:lz4-java",
    "org.xerial.snappy:snappy-java",
    "org.slf4j:slf4j-api",
    "com.github.luben:zstd-jni",
    "com.google.code.findbugs:jsr305",
    "org.apache.spark:spark-tags_2.12",
    "org.apache.spark:spark-tags_2.13",
)


# The connector version the tests pin for each Spark minor release (kafkapy_spark.runtimes uses
# the same pyspark versions): both are on Maven Central.
PINNED_CONNECTORS = {"4.0": "4.0.0", "3.5": "3.5.7"}


def scala_binary_version(spark_version: str) -> str:
    """The Scala version pyspark's jars are built for: 2.12 for 3.x, 2.13 from Spark 4 on."""
    return "2.12" if spark_version.startswith("3.") else "2.13"


class ConnectorUnavailable(RuntimeError):
    """Neither a jar directory nor Maven Central could provide the Kafka connector."""


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


def _newest(directory: Path, pattern: str) -> Path | None:
    matches = sorted(p for p in directory.glob(pattern) if p.is_file() and p.stat().st_size > 0)
    return matches[-1] if matches else None


def jars_from_directory(directory: Path, spark_version: str) -> ConnectorJars | None:
    """The connector jars found in `directory`, or None when any of them is missing.

    A connector built for another patch release of the same Spark minor version is accepted
    (the jars are binary compatible within a minor release); the exact version wins if present.
    """
    if not directory.is_dir():
        return None
    minor = ".".join(spark_version.split(".")[:2])
    found: list[Path] = []
    scala = scala_binary_version(spark_version)
    for artifact in (f"spark-sql-kafka-0-10_{scala}", f"spark-token-provider-kafka-0-10_{scala}"):
        jar = directory / f"{artifact}-{spark_version}.jar"
        if not jar.is_file():
            jar = _newest(directory, f"{artifact}-{minor}.*.jar")
        if jar is None:
            return None
        found.append(jar)
    pool = _newest(directory, "commons-pool2-*.jar")
    clients = _newest(directory, "kafka-clients*.jar")
    if pool is None or clients is None:
        return None
    return ConnectorJars(jars=[*found, pool, clients], source=f"jars in {directory}")


def maven_coordinates(spark_version: str) -> str:
    """The connector's Maven coordinates for a pyspark version."""
    return f"org.apache.spark:spark-sql-kafka-0-10_{scala_binary_version(spark_version)}:{spark_version}"


_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d+\.[^_]*\.jar$")  # the version: digits, a dot, no "_"


def artifact_name(jar: str | Path) -> str:
    """`kafka-clients-3.4.1.jar` -> `kafka-clients` (a jar's name without its version)."""
    name = Path(jar).name
    match = _VERSIONED_JAR.match(name)
    return match.group("artifact") if match else name.removesuffix(".jar")


def maven_connector_jars(spark_version: str, pyspark_jars_dir: Path | None) -> list[Path]:
    """The connector's jars from Maven Central (via mvn, cached in ~/.m2), less those pyspark ships."""
    from conformance.maven import MavenUnavailable, jars

    coordinate = maven_coordinates(spark_version)
    try:
        resolved = jars([coordinate], exclusions=SHIPPED_WITH_PYSPARK)
    except MavenUnavailable as error:
        raise ConnectorUnavailable(f"{coordinate} from Maven Central: {error}") from error
    shipped = ({artifact_name(jar) for jar in pyspark_jars_dir.glob("*.jar")}
               if pyspark_jars_dir is not None and pyspark_jars_dir.is_dir() else set())
    wanted = [Path(jar) for jar in resolved if artifact_name(jar) not in shipped]
    if not any(artifact_name(jar) == "kafka-clients" for jar in wanted):
        raise ConnectorUnavailable(f"{coordinate} resolved without kafka-clients: {resolved}")
    return wanted


def resolve_connector(spark_version: str | None = None) -> ConnectorJars:
    """Local jars when the jar directory has them all, else the connector from Maven Central.

    Raises ConnectorUnavailable (naming how to provide the jars) when neither works.
    """
    pyspark_jars: Path | None = None
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
        pyspark_jars = Path(pyspark.__file__).resolve().parent / "jars"
    local = jars_from_directory(jars_dir(), spark_version)
    if local is not None:
        return local
    # The exact version first; else the pinned connector of the same minor release (binary
    # compatible; e.g. pyspark 4.0.5 from `pip install -e '.[spark]'` with connector 4.0.0).
    candidates = [spark_version]
    pinned = PINNED_CONNECTORS.get(".".join(spark_version.split(".")[:2]))
    if pinned and pinned != spark_version:
        candidates.append(pinned)
    errors = []
    for version in candidates:
        try:
            found = maven_connector_jars(version, pyspark_jars)
        except ConnectorUnavailable as error:
            errors.append(str(error))
            continue
        return ConnectorJars(jars=found, source=f"Maven Central ({maven_coordinates(version)})")
    raise ConnectorUnavailable(f"{'; '.join(errors)}; {HOW_TO_PROVIDE}")
