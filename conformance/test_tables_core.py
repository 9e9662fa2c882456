"""Topics as Iceberg tables (issue 34, docs/tables.md): a real `kafkapy serve` process with
kafkapy.iceberg.mode=key_value topics; records produced with confluent-kafka are read back from the
table with pyiceberg, through the catalog the broker writes (SQLite under the first log dir).

Also: the mode set at creation and turned on later with IncrementalAlterConfigs (the table then starts
at the log start offset), INVALID_CONFIG for an unknown mode, transactions (aborted records never
become rows, committed ones do) and the metrics of /metrics.
"""
from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.timeout(240)

from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from conformance.broker_process import free_port  # noqa: E402

COMMIT_INTERVAL_MS = 500
WAIT_S = 60


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def broker_overrides(metrics_port) -> dict[str, str]:
    return {"kafkapy.iceberg.commit.interval.ms": str(COMMIT_INTERVAL_MS),
            "kafkapy.metrics.listener": f"http://127.0.0.1:{metrics_port}"}


# -- helpers other table tests import -----------------------------------------------------------------

def open_table_catalog(data_dir: Path, catalog_uri: str | None = None, warehouse: str | None = None):
    """The broker's catalog as a reader opens it (pyiceberg's SqlCatalog over its SQLite file)."""
    from kafkapy.tables.catalog import CatalogSettings, open_catalog

    settings = CatalogSettings.from_config(
        {"kafkapy.iceberg.catalog.uri": catalog_uri, "kafkapy.iceberg.warehouse": warehouse}.get, [str(data_dir)])
    if settings.uri.startswith("sqlite:///"):
        # the broker's worker makes the catalog file on its first table: until then SQLite cannot open it
        path = Path(settings.uri[len("sqlite:///"):])
        deadline = time.monotonic() + WAIT_S
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    return open_catalog(settings, create_dirs=False)


def table_offsets(catalog, topic: str) -> dict[int, int]:
    from pyiceberg.exceptions import NoSuchTableError

    from kafkapy.tables.catalog import next_offsets

    try:
        return next_offsets(catalog.load_table(("kafka", topic)))
    except NoSuchTableError:
        return {}


def wait_for_table(catalog, topic: str, wanted: dict[int, int], timeout: float = WAIT_S) -> dict[int, int]:
    """Wait until the table's kafkapy.next-offsets reach `wanted` (partition -> next offset)."""
    deadline = time.monotonic() + timeout
    offsets: dict[int, int] = {}
    while time.monotonic() < deadline:
        offsets = table_offsets(catalog, topic)
        if all(offsets.get(p, -1) >= o for p, o in wanted.items()):
            return offsets
        time.sleep(0.2)
    raise AssertionError(f"table kafka.{topic} reached {offsets}, not {wanted}, within {timeout} s")


def table_rows(catalog, topic: str) -> list[dict]:
    table = catalog.load_table(("kafka", topic))
    return table.scan().to_arrow().to_pylist()


def log_end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tables-test-offsets",
                         "isolation.level": "read_uncommitted"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def create_topic(bootstrap: str, topic: str, partitions: int = 1, configs: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(15)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def metric(text: str, name: str, **labels) -> float | None:
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if head == name or all(f'{k}="{v}"' in head for k, v in labels.items()) and head.startswith(name + "{"):
            return float(value)
    return None


# -- the tests ----------------------------------------------------------------------------------------

def test_key_value_round_trip(broker, topic_name, metrics_port):
    create_topic(broker.bootstrap, topic_name, 3, {"kafkapy.iceberg.mode": "key_value"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    acked: dict[tuple[int, int], tuple] = {}
    base_ts = int(time.time() * 1000) - 10_000
    for i in range(600):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        value = None if i % 11 == 0 else f"value-{i}".encode() * (1 + i % 5)
        headers = [("h1", f"x{i}".encode()), ("h2", None)] if i % 3 == 0 else None
        record = (key, value, headers, base_ts + i)
        producer.produce(topic_name, key=key, value=value, headers=headers, partition=i % 3, timestamp=base_ts + i,
                         on_delivery=lambda err, msg, record=record: acked.__setitem__(
                             (msg.partition(), msg.offset()), record) if err is None else pytest.fail(str(err)))
    assert producer.flush(30) == 0
    assert len(acked) == 600
    ends = log_end_offsets(broker.bootstrap, topic_name, 3)
    catalog = open_table_catalog(broker.data_dir)
    offsets = wait_for_table(catalog, topic_name, ends)
    assert offsets == ends
    rows = table_rows(catalog, topic_name)
    assert len(rows) == 600
    seen = {}
    for row in rows:
        meta = row["kafka"]
        seen[(meta["partition"], meta["offset"])] = row
    assert set(seen) == set(acked)
    for position, (key, value, headers, ts) in acked.items():
        row = seen[position]
        assert row["kafka"]["key"] == key
        assert row["value"] == value
        assert int(row["kafka"]["timestamp"].timestamp() * 1000) == ts
        assert (row["kafka"]["headers"] or []) == [{"key": k, "value": v} for k, v in (headers or [])]
    # the table's schema: the kafka struct and value (contract, docs/tables.md)
    schema = catalog.load_table(("kafka", topic_name)).schema()
    assert [f.name for f in schema.fields] == ["kafka", "value"]
    assert schema.find_field("kafka").required
    text = scrape(metrics_port)
    assert metric(text, "kafkapy_iceberg_commits_total") >= 1
    assert metric(text, "kafkapy_iceberg_rows_total") >= 600
    assert metric(text, "kafkapy_iceberg_translated_bytes_total") > 0
    assert metric(text, "kafkapy_iceberg_state", topic=topic_name) == 0
    for p in range(3):
        deadline = time.monotonic() + 10
        while metric(scrape(metrics_port), "kafkapy_iceberg_lag_records", topic=topic_name, partition=p) != 0:
            assert time.monotonic() < deadline, scrape(metrics_port)
            time.sleep(0.2)


def test_invalid_mode_is_invalid_config(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic_name, 1, 1, config={"kafkapy.iceberg.mode": "parquet"})])
    with pytest.raises(KafkaException) as info:
        futures[topic_name].result(15)
    error = info.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert "kafkapy.iceberg.mode" in error.str() and "key_value" in error.str()


def test_turned_on_later_starts_at_the_log_start(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        producer.produce(topic_name, value=b"before-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    catalog = open_table_catalog(broker.data_dir)
    time.sleep(COMMIT_INTERVAL_MS / 1000 * 2)
    assert table_offsets(catalog, topic_name) == {}  # disabled: no table
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("kafkapy.iceberg.mode", "key_value", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic_name)])
    entries = next(iter(described.values())).result(15)
    assert entries["kafkapy.iceberg.mode"].value == "key_value"
    for i in range(100):
        producer.produce(topic_name, value=b"after-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    wait_for_table(catalog, topic_name, {0: 100, 1: 100})
    values = sorted(row["value"] for row in table_rows(catalog, topic_name))
    assert values == sorted([b"before-%d" % i for i in range(100)] + [b"after-%d" % i for i in range(100)])
    # and off again: nothing more reaches the table, what it has stays
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("kafkapy.iceberg.mode", "disabled", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    time.sleep(0.5)
    producer.produce(topic_name, value=b"off", partition=0)
    assert producer.flush(30) == 0
    time.sleep(COMMIT_INTERVAL_MS / 1000 * 3)
    assert table_offsets(catalog, topic_name) == {0: 100, 1: 100}


def test_transactions_only_committed_records(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2, {"kafkapy.iceberg.mode": "key_value"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-txn"})
    producer.init_transactions(30)
    expected = []
    for round_number in range(6):
        producer.begin_transaction()
        values = [f"r{round_number}-{i}".encode() for i in range(20)]
        for i, value in enumerate(values):
            producer.produce(topic_name, value=value, partition=i % 2)
        producer.flush(30)
        if round_number % 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            expected.extend(values)
    # a transaction left open: its records are past the last stable offset, not in the table
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open", partition=0)
    producer.flush(30)
    ends = log_end_offsets(broker.bootstrap, topic_name, 2)
    catalog = open_table_catalog(broker.data_dir)
    # the open transaction holds partition 0 back at its first offset
    offsets = wait_for_table(catalog, topic_name, {0: ends[0] - 1, 1: ends[1]})
    assert offsets[0] == ends[0] - 1
    values = sorted(row["value"] for row in table_rows(catalog, topic_name))
    assert values == sorted(expected)
    producer.commit_transaction(30)
    ends = log_end_offsets(broker.bootstrap, topic_name, 2)
    wait_for_table(catalog, topic_name, ends)
    assert sorted(row["value"] for row in table_rows(catalog, topic_name)) == sorted(expected + [b"open"])


def test_restart_resumes_without_duplicates(broker_factory, topic_name):
    instance = broker_factory({"kafkapy.iceberg.commit.interval.ms": str(COMMIT_INTERVAL_MS)})
    create_topic(instance.bootstrap, topic_name, 1, {"kafkapy.iceberg.mode": "key_value"})
    producer = Producer({"bootstrap.servers": instance.bootstrap})
    for i in range(200):
        producer.produce(topic_name, value=b"%d" % i)
    assert producer.flush(30) == 0
    catalog = open_table_catalog(instance.data_dir)
    wait_for_table(catalog, topic_name, {0: 200})
    instance.restart()
    producer = Producer({"bootstrap.servers": instance.bootstrap})
    for i in range(200, 300):
        producer.produce(topic_name, value=b"%d" % i)
    assert producer.flush(30) == 0
    wait_for_table(catalog, topic_name, {0: 300})
    offsets = [row["kafka"]["offset"] for row in table_rows(catalog, topic_name)]
    assert sorted(offsets) == list(range(300))
    summary = catalog.load_table(("kafka", topic_name)).current_snapshot().summary
    assert json.loads(summary["kafkapy.next-offsets"]) == {"0": 300}


def test_a_type_change_the_table_cannot_take_becomes_dead_letters(broker_factory, topic_name):
    """value_schema_id_prefix mode: a later schema changing a column's type (int -> string, allowed by
    the registry at compatibility NONE) cannot evolve the table; those records become dead letters with
    the reason, the others stay rows, and every offset is in one table or the other."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    port = free_port()
    instance = broker_factory({"kafkapy.iceberg.commit.interval.ms": str(COMMIT_INTERVAL_MS),
                               "kafkapy.schema.registry.listener": f"http://127.0.0.1:{port}"})
    create_topic(instance.bootstrap, topic_name, 1, {"kafkapy.iceberg.mode": "value_schema_id_prefix"})
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
    registry.set_compatibility(subject_name=f"{topic_name}-value", level="NONE")
    context = SerializationContext(topic_name, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": instance.bootstrap})
    first = AvroSerializer(registry, '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}')
    for i in range(5):
        producer.produce(topic_name, value=first({"a": i}, context))
    assert producer.flush(30) == 0
    catalog = open_table_catalog(instance.data_dir)
    wait_for_table(catalog, topic_name, {0: 5})
    changed = AvroSerializer(registry, '{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}')
    for i in range(3):
        producer.produce(topic_name, value=changed({"a": "x"}, context))
    assert producer.flush(30) == 0
    wait_for_table(catalog, topic_name, {0: 8})
    for i in range(5, 7):
        producer.produce(topic_name, value=first({"a": i}, context))
    assert producer.flush(30) == 0
    wait_for_table(catalog, topic_name, {0: 10})
    rows = {r["kafka"]["offset"]: r["a"] for r in table_rows(catalog, topic_name)}
    assert rows == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 8: 5, 9: 6}
    dead = catalog.load_table(("kafka", f"{topic_name}~dlq")).scan().to_arrow().to_pylist()
    assert sorted(r["kafka"]["offset"] for r in dead) == [5, 6, 7]
    # refused against the table's columns (values.py), before pyiceberg's union_by_name would say
    # "Cannot change column type: a: int -> string"
    assert all("field 'a' is int32 in one schema and string in another" in r["reason"] for r in dead), dead
    assert all(r["value"] == changed({"a": "x"}, context) for r in dead)
