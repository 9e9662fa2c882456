"""The tables of topics with kafkapy.iceberg.mode, read by pyiceberg, DuckDB and Spark (issue 34).

Each reader sees the same rows: partition, offset, timestamp, key, headers and value of every
record, and the snapshot's `kafkapy.next-offsets`. DuckDB's Iceberg extension comes from PyPI
(duckdb-extension-iceberg and -avro); Spark is pyspark 4.0 with Iceberg's Spark runtime and
sqlite-jdbc from Maven Central over the same SQLite catalog file (Iceberg's JdbcCatalog reads the
iceberg_tables layout pyiceberg's SqlCatalog writes). Spark skips loudly without pyspark, Java or
Maven, and fails instead under KAFKAPY_REQUIRE_SPARK=1; DuckDB likewise under KAFKAPY_REQUIRE_JAVA's
sibling KAFKAPY_REQUIRE_TABLE_READERS=1 or CI.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pa = pytest.importorskip("pyarrow")

from conformance.tables.readers import (  # noqa: E402
    ReaderUnavailable, TableLocation, duckdb_connect, duckdb_rows, next_offsets, pyiceberg_rows, spark_rows,
)

pytestmark = pytest.mark.timeout(180)


def unavailable(reader: str, error: Exception) -> None:
    """Skip loudly; fail when CI requires the reader (Spark: KAFKAPY_REQUIRE_SPARK, DuckDB: CI)."""
    message = f"!!! {reader} table reader NOT RUN: {error}"
    required = os.environ.get("KAFKAPY_REQUIRE_SPARK") == "1" if reader == "Spark" else os.environ.get("CI") == "true"
    if required:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def kafka_struct():
    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.struct([pa.field("partition", pa.int32(), False), pa.field("offset", pa.int64(), False),
                      pa.field("timestamp", pa.timestamp("us", tz="UTC"), False), pa.field("key", pa.binary()),
                      pa.field("headers", pa.list_(header))])


def write_contract_table(location: TableLocation, topic: str, batches: list[list[dict]]) -> None:
    """A key_value table exactly as docs/tables.md lays it out, one commit per batch."""
    from conformance.tables.readers import load_catalog

    location.warehouse_path.mkdir(parents=True, exist_ok=True)
    catalog = load_catalog(location)
    catalog.create_namespace_if_not_exists("kafka")
    schema = pa.schema([pa.field("kafka", kafka_struct(), False), pa.field("value", pa.binary())])
    table = catalog.create_table(f"kafka.{topic}", schema=schema)
    covered: dict[str, int] = {}
    for batch in batches:
        for row in batch:
            covered[str(row["kafka"]["partition"])] = row["kafka"]["offset"] + 1
        table.append(pa.Table.from_pylist(batch, schema=schema),
                     snapshot_properties={"kafkapy.next-offsets": json.dumps(covered)})


def contract_rows(count: int) -> list[dict]:
    start = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)
    rows = []
    for i in range(count):
        rows.append({"kafka": {
            "partition": i % 3, "offset": i // 3, "timestamp": start + datetime.timedelta(milliseconds=i),
            "key": None if i % 5 == 0 else f"key-{i % 7}".encode(),
            "headers": [{"key": "trace", "value": bytes([i % 256])}, {"key": "empty", "value": None}] if i % 4 == 0 else [],
        }, "value": None if i % 11 == 0 else b"\x00\xff" + str(i).encode()})
    return rows


@pytest.fixture(scope="module")
def contract_table(tmp_path_factory) -> tuple[TableLocation, str, list[dict]]:
    location = TableLocation(tmp_path_factory.mktemp("tables") / "data")
    rows = contract_rows(300)
    write_contract_table(location, "layout", [rows[:120], rows[120:]])
    return location, "layout", rows


def test_pyiceberg_reads_the_documented_layout(contract_table) -> None:
    location, topic, rows = contract_table
    read = pyiceberg_rows(location, topic)
    assert len(read) == len(rows)
    assert read[0]["kafka"] == {"partition": 0, "offset": 0, "timestamp": 1767323045678000, "key": None,
                                "headers": [{"key": "trace", "value": b"\x00"}, {"key": "empty", "value": None}]}
    assert next_offsets(location, topic) == {0: 100, 1: 100, 2: 100}


def test_duckdb_reads_the_same_rows_as_pyiceberg(contract_table) -> None:
    location, topic, _ = contract_table
    try:
        connection = duckdb_connect()
    except ReaderUnavailable as error:
        unavailable("DuckDB", error)
    assert duckdb_rows(location, topic, connection) == pyiceberg_rows(location, topic)


def test_spark_reads_the_same_rows_and_offsets_as_pyiceberg(contract_table, tmp_path: Path) -> None:
    location, topic, _ = contract_table
    try:
        rows, snapshots = spark_rows(location, topic, tmp_path)
    except ReaderUnavailable as error:
        unavailable("Spark", error)
    assert rows == pyiceberg_rows(location, topic)
    assert [json.loads(s["summary"]["kafkapy.next-offsets"]) for s in snapshots] == [
        {"0": 40, "1": 40, "2": 40}, {"0": 100, "1": 100, "2": 100}]
