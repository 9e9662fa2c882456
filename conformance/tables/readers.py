"""Read a kafkapy topic's Iceberg table the way users do: pyiceberg, DuckDB and Spark.

Every reader returns the table's rows as plain Python values, sorted by (partition, offset), so
the tests can compare them with `==`: bytes stay bytes, timestamps become microseconds since the
epoch (UTC), maps become dicts, Spark's Rows become dicts. The layout is the one docs/tables.md
describes: SQL catalog `kafkapy` at `<first log dir>/iceberg/catalog.db`, warehouse
`<first log dir>/iceberg/warehouse`, table `kafka.<topic>`.

    DuckDB: the `duckdb` wheel with the `duckdb-extension-iceberg` and `duckdb-extension-avro` wheels
            of the same version (the extension files ship inside them, no download at run time).
    Spark:  pyspark 4.0 from the project's venv (spark-integration/kafkapy_spark/runtimes.py) with
            Iceberg's Spark runtime and sqlite-jdbc from Maven Central (conformance.maven), run in a
            child process (one JVM per read: a test process may hold another pyspark session).
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ICEBERG_SPARK_RUNTIME = "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0"
SQLITE_JDBC = "org.xerial:sqlite-jdbc:3.50.3.0"
CATALOG_NAME = "kafkapy"
NAMESPACE = "kafka"
SPARK_READ_TIMEOUT_S = 150.0
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class ReaderUnavailable(RuntimeError):
    """A reader (DuckDB's Iceberg extension, pyspark, a jar) cannot be had on this machine."""


@dataclass(frozen=True, slots=True)
class TableLocation:
    """Where a broker's embedded catalog and warehouse are: under its first log dir."""

    log_dir: Path

    @property
    def catalog_path(self) -> Path:
        return self.log_dir / "iceberg" / "catalog.db"

    @property
    def warehouse_path(self) -> Path:
        return self.log_dir / "iceberg" / "warehouse"

    @property
    def catalog_uri(self) -> str:
        return f"sqlite:///{self.catalog_path}"

    @property
    def jdbc_uri(self) -> str:
        return f"jdbc:sqlite:{self.catalog_path}"

    @property
    def warehouse_uri(self) -> str:
        return f"file://{self.warehouse_path}"


def plain(value: Any) -> Any:
    """A reader's value as plain, comparable Python (see the module docstring)."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:  # Spark's, in the session time zone: UTC (the child runs with TZ=UTC)
            value = value.replace(tzinfo=datetime.timezone.utc)
        return (value - _EPOCH) // datetime.timedelta(microseconds=1)
    if isinstance(value, (datetime.date, datetime.time, decimal.Decimal)):
        return str(value)
    if hasattr(value, "asDict"):  # pyspark Row
        return {k: plain(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain(v) for v in value]
        if value and all(type(v) is tuple and len(v) == 2 for v in value):  # arrow map → pairs (a Row is a tuple too)
            return dict(items)
        return items
    return value


def sort_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: (row["kafka"]["partition"], row["kafka"]["offset"]))


# --- pyiceberg ---------------------------------------------------------------------------------

def load_catalog(location: TableLocation):
    """pyiceberg's SQL catalog over the broker's embedded catalog file."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(CATALOG_NAME, uri=location.catalog_uri, warehouse=location.warehouse_uri)


def pyiceberg_rows(location: TableLocation, topic: str) -> list[dict]:
    table = load_catalog(location).load_table((NAMESPACE, topic))
    return sort_rows([plain(row) for row in table.scan().to_arrow().to_pylist()])


def metadata_location(location: TableLocation, topic: str) -> str:
    """The current metadata file of `kafka.<topic>` (what DuckDB's iceberg_scan reads)."""
    return load_catalog(location).load_table((NAMESPACE, topic)).metadata_location


def next_offsets(location: TableLocation, topic: str) -> dict[int, int]:
    """The current snapshot's `kafkapy.next-offsets` (partition → next offset the table covers)."""
    snapshot = load_catalog(location).load_table((NAMESPACE, topic)).current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return {}
    text = snapshot.summary.additional_properties.get("kafkapy.next-offsets")
    return {int(p): int(o) for p, o in json.loads(text).items()} if text else {}


# --- DuckDB ------------------------------------------------------------------------------------

def _wheel_extension(module_name: str, extension: str) -> Path:
    try:
        module = __import__(module_name)
    except ImportError as error:
        raise ReaderUnavailable(f"DuckDB's {extension} extension needs pip install "
                                f"{module_name.replace('_', '-')} (same version as duckdb): {error}") from None
    found = sorted(Path(module.__file__).parent.glob(f"extensions/*/{extension}.duckdb_extension"))
    if not found:
        raise ReaderUnavailable(f"{module_name} holds no {extension}.duckdb_extension")
    return found[-1]


def duckdb_connect():
    """An in-memory DuckDB connection with the Iceberg extension loaded from its PyPI wheel.

    The iceberg extension reads manifests with the avro extension and would download it at LOAD
    (from DuckDB's extension site): both are loaded from their wheels, autoinstall off.
    """
    try:
        import duckdb
    except ImportError as error:
        raise ReaderUnavailable(f"pip install duckdb: {error}") from None
    connection = duckdb.connect(config={"autoinstall_known_extensions": "false"})
    for module_name, extension in (("duckdb_extension_avro", "avro"), ("duckdb_extension_iceberg", "iceberg")):
        connection.execute(f"LOAD '{_wheel_extension(module_name, extension)}'")
    return connection


def duckdb_rows(location: TableLocation, topic: str, connection=None) -> list[dict]:
    connection = connection or duckdb_connect()
    metadata = metadata_location(location, topic)
    table = connection.execute("SELECT * FROM iceberg_scan(?)", [metadata]).to_arrow_table()
    return sort_rows([plain(row) for row in table.to_pylist()])


# --- Spark -------------------------------------------------------------------------------------

def spark_jars() -> list[str]:
    """Iceberg's Spark runtime and the SQLite JDBC driver from Maven Central (cached in ~/.m2)."""
    from conformance.maven import MavenUnavailable, jars

    try:
        return jars([ICEBERG_SPARK_RUNTIME, SQLITE_JDBC])
    except MavenUnavailable as error:
        raise ReaderUnavailable(f"{ICEBERG_SPARK_RUNTIME} and {SQLITE_JDBC} from Maven Central: {error}") from None


def iceberg_spark_conf(location: TableLocation, catalog: str = CATALOG_NAME) -> dict[str, str]:
    """The Spark settings that make `<catalog>.kafka.<topic>` the broker's table (docs/tables.md)."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": location.jdbc_uri,
        f"{prefix}.warehouse": location.warehouse_uri,
        # pyiceberg's SqlCatalog writes the iceberg_tables layout with its iceberg_type column (V1)
        f"{prefix}.jdbc.schema-version": "V1",
    }


def pyspark_40_path() -> Path:
    """The site-packages of the project's pinned pyspark 4.0 venv, made if missing."""
    root = Path(__file__).resolve().parents[2] / "spark-integration"
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from kafkapy_spark.runtimes import RUNTIMES, RuntimeUnavailable, ensure_venv

    runtime = RUNTIMES["4.0"]
    try:
        ensure_venv(runtime)
    except RuntimeUnavailable as error:
        raise ReaderUnavailable(f"pyspark=={runtime.spark_version} (bash scripts/install-spark.sh): {error}") from None
    return runtime.site_packages


def spark_rows(location: TableLocation, topic: str, work_dir: Path,
               timeout_s: float = SPARK_READ_TIMEOUT_S) -> tuple[list[dict], list[dict]]:
    """The table's rows and snapshot summaries as Spark reads them (a local[1] child process)."""
    site = pyspark_40_path()
    request = {"conf": iceberg_spark_conf(location), "jars": spark_jars(),
               "table": f"{CATALOG_NAME}.{NAMESPACE}.`{topic}`", "out": str(work_dir / f"spark-{topic}.json")}
    env = {**os.environ, "TZ": "UTC", "PYTHONPATH": os.pathsep.join(
        p for p in (str(site), str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")) if p)}
    log_path = work_dir / f"spark-{topic}.log"
    with open(log_path, "w") as log:
        try:
            result = subprocess.run([sys.executable, "-m", "conformance.tables.spark_reader", json.dumps(request)],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"Spark did not read {topic} in {timeout_s:.0f} s:\n"
                                 f"{log_path.read_text()[-4000:]}") from None
    if result.returncode != 0:
        raise AssertionError(f"Spark read of {topic} exited {result.returncode}:\n{log_path.read_text()[-4000:]}")
    answer = json.loads(Path(request["out"]).read_text())
    return sort_rows([_from_json(row) for row in answer["rows"]]), answer["snapshots"]


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return bytes.fromhex(value["$bytes"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def wait_for_table(location: TableLocation, topic: str, ends: dict[int, int], timeout_s: float = 60.0) -> dict[int, int]:
    """Until the table's kafkapy.next-offsets reach the log end offsets `ends` (partition → offset)."""
    import time

    deadline = time.monotonic() + timeout_s
    covered: dict[int, int] = {}
    last_error = ""
    while time.monotonic() < deadline:
        try:
            covered = next_offsets(location, topic)
        except Exception as error:  # no catalog or no table yet
            last_error = f" ({type(error).__name__}: {error})"
        if all(covered.get(p, 0) >= end for p, end in ends.items() if end > 0):
            return covered
        time.sleep(0.2)
    raise AssertionError(f"table kafka.{topic} covers {covered}{last_error}, the log ends at {ends}, "
                         f"after {timeout_s:.0f} s")


def log_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The high watermark of every partition of `topic` (confluent-kafka)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkapy-table-readers"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()
