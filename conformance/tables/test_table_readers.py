"""Tables that kafkapy writes (kafkapy.iceberg.mode=key_value) read by pyiceberg, DuckDB and Spark (issue 34).

A topic with records of every shape (keys and null keys, headers, tombstones, three partitions,
two commits) is written to its table by the broker; each reader opens the catalog as a user would
(docs/tables.md) and sees the same rows, and those rows are the log's records as a Kafka consumer
reads them: partition, offset, timestamp, key, headers, value. DuckDB's Iceberg extension comes
from PyPI (duckdb-extension-iceberg and -avro); Spark is pyspark 4.0 with Iceberg's Spark runtime
and sqlite-jdbc from Maven Central over the same SQLite catalog (Iceberg's JdbcCatalog reads the
iceberg_tables rows pyiceberg's SqlCatalog writes). A reader that cannot be had skips loudly, and
fails instead under KAFKAPY_REQUIRE_SPARK=1 (Spark) or CI=true (DuckDB, a pip package of the test extra).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conformance.tables.readers import (  # noqa: E402
    ReaderUnavailable, TableLocation, duckdb_connect, duckdb_rows, log_end_offsets, next_offsets,
    pyiceberg_rows, spark_rows, wait_for_table,
)

pytestmark = pytest.mark.timeout(180)

TOPIC = "orders.v1-readers"  # a '.' and a '-': Spark must quote it


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"kafkapy.iceberg.commit.interval.ms": "500"}


def unavailable(reader: str, error: Exception) -> None:
    """Skip loudly; fail when the run requires the reader (Spark: KAFKAPY_REQUIRE_SPARK=1, DuckDB: CI)."""
    message = f"!!! {reader} table reader NOT RUN: {error}"
    required = os.environ.get("KAFKAPY_REQUIRE_SPARK") == "1" if reader == "Spark" else os.environ.get("CI") == "true"
    if required:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def produce_round(bootstrap: str, round_number: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
        n = round_number * 1000 + i
        headers = [("trace", bytes([n % 256])), ("empty", None)] if i % 4 == 0 else None
        producer.produce(TOPIC, key=None if i % 5 == 0 else f"key-{i % 7}".encode(),
                         value=None if i % 11 == 0 else b"\x00\xff" + str(n).encode(),
                         partition=i % 3, timestamp=1_767_323_045_678 + n, headers=headers)
    assert producer.flush(30) == 0


def consumed_rows(bootstrap: str, ends: dict[int, int]) -> list[dict]:
    """The topic's records as rows of the table's layout, read with a Kafka consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "readers-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in ends])
    rows: list[dict] = []
    try:
        while len(rows) < sum(ends.values()):
            for m in consumer.consume(500, timeout=1):
                assert m.error() is None, m.error()
                rows.append({"kafka": {"partition": m.partition(), "offset": m.offset(),
                                       "timestamp": m.timestamp()[1] * 1000, "key": m.key(),
                                       "headers": [{"key": k, "value": v} for k, v in m.headers()] if m.headers() else None},
                             "value": m.value()})
    finally:
        consumer.close()
    return sorted(rows, key=lambda r: (r["kafka"]["partition"], r["kafka"]["offset"]))


@pytest.fixture(scope="module")
def written_table(broker) -> tuple[TableLocation, list[dict]]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1, config={"kafkapy.iceberg.mode": "key_value"})])[TOPIC].result(30)
    location = TableLocation(broker.data_dir)
    produce_round(broker.bootstrap, 0, 120)
    wait_for_table(location, TOPIC, log_end_offsets(broker.bootstrap, TOPIC))
    produce_round(broker.bootstrap, 1, 180)
    ends = log_end_offsets(broker.bootstrap, TOPIC)
    wait_for_table(location, TOPIC, ends)
    return location, consumed_rows(broker.bootstrap, ends)


def test_pyiceberg_reads_every_record_once_as_the_log_has_it(written_table) -> None:
    location, expected = written_table
    rows = pyiceberg_rows(location, TOPIC)
    no_headers = (None, [])  # a record without headers: the contract says null
    for row in rows:
        if row["kafka"]["headers"] in no_headers:
            row["kafka"]["headers"] = None
    assert rows == expected
    assert next_offsets(location, TOPIC) == {0: 100, 1: 100, 2: 100}


def test_duckdb_reads_the_same_rows_as_pyiceberg(written_table) -> None:
    location, _ = written_table
    try:
        connection = duckdb_connect()
    except ReaderUnavailable as error:
        unavailable("DuckDB", error)
    assert duckdb_rows(location, TOPIC, connection) == pyiceberg_rows(location, TOPIC)


def test_spark_reads_the_same_rows_and_offsets_as_pyiceberg(written_table, tmp_path: Path) -> None:
    location, _ = written_table
    try:
        rows, snapshots = spark_rows(location, TOPIC, tmp_path)
    except ReaderUnavailable as error:
        unavailable("Spark", error)
    assert rows == pyiceberg_rows(location, TOPIC)
    assert json.loads(snapshots[-1]["summary"]["kafkapy.next-offsets"]) == {"0": 100, "1": 100, "2": 100}
    assert len(snapshots) >= 2  # one commit per produce round at least
