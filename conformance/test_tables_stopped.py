"""Topics as Iceberg tables when the warehouse fails (issue 34): the warehouse directory is replaced by
a regular file under a running broker (what root, which ignores permissions, cannot write into either),
so writing data files fails. The topic's translation shows the stopped state with the error on /metrics
(kafkapy_iceberg_state 1) and in `kafkapy tables describe`; the broker keeps serving produce and fetch;
once the directory is back, the table catches up with nothing lost and nothing twice.

Also `kafkapy tables list|describe` (with --bootstrap-server: lag) against a running broker.
"""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.timeout(240)

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from conformance.broker_process import free_port  # noqa: E402
from conformance.test_tables_core import (  # noqa: E402
    create_topic,
    log_end_offsets,
    metric,
    open_table_catalog,
    scrape,
    table_rows,
    wait_for_table,
)


def _tables_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkapy", "tables", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _wait_metric(port: int, name: str, value: float, timeout: float = 60, **labels) -> None:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = metric(scrape(port), name, **labels)
        if seen == value:
            return
        time.sleep(0.2)
    raise AssertionError(f"{name}{labels} is {seen}, not {value}, after {timeout} s")


def test_stopped_state_then_catch_up(broker_factory, topic_name, tmp_path):
    warehouse = tmp_path / "warehouse"
    port = free_port()
    instance = broker_factory({"kafkapy.iceberg.commit.interval.ms": "300", "kafkapy.iceberg.warehouse": str(warehouse),
                               "kafkapy.metrics.listener": f"http://127.0.0.1:{port}"})
    create_topic(instance.bootstrap, topic_name, 2, {"kafkapy.iceberg.mode": "key_value"})
    producer = Producer({"bootstrap.servers": instance.bootstrap, "enable.idempotence": True})
    for i in range(100):
        producer.produce(topic_name, value=b"a%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    catalog = open_table_catalog(instance.data_dir, warehouse=str(warehouse))
    wait_for_table(catalog, topic_name, {0: 50, 1: 50})
    _wait_metric(port, "kafkapy_iceberg_state", 0, topic=topic_name)

    # the fault: the warehouse directory is gone, a regular file has its name
    moved = tmp_path / "warehouse.away"
    warehouse.rename(moved)
    warehouse.write_text("not a directory\n")
    try:
        for i in range(100, 300):
            producer.produce(topic_name, value=b"a%d" % i, partition=i % 2)
        assert producer.flush(30) == 0  # the broker still takes writes
        _wait_metric(port, "kafkapy_iceberg_state", 1, topic=topic_name)
        # and still serves reads
        consumer = Consumer({"bootstrap.servers": instance.bootstrap, "group.id": "stopped-reader",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 150 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert len(got) == 150
        lag = metric(scrape(port), "kafkapy_iceberg_lag_records", topic=topic_name, partition=0)
        assert lag == 100
        described = _tables_cli("describe", "--override", f"log.dirs={instance.data_dir}", "--warehouse",
                                str(warehouse), topic_name, "--json")
        assert described.returncode == 0, described.stderr
        (info,) = json.loads(described.stdout)
        assert info["state"] == "stopped" and info["error"], info
        assert info["unreadable"]  # its metadata lives in the failing warehouse too
        print("stopped with:", info["error"])
    finally:
        warehouse.unlink()
        moved.rename(warehouse)
    # fault removed: the table catches up, every record once
    ends = log_end_offsets(instance.bootstrap, topic_name, 2)
    assert ends == {0: 150, 1: 150}
    wait_for_table(catalog, topic_name, ends, timeout=90)
    _wait_metric(port, "kafkapy_iceberg_state", 0, topic=topic_name)
    rows = table_rows(catalog, topic_name)
    count = collections.Counter((r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows)
    assert len(count) == 300 and set(count.values()) == {1}
    assert sorted(r["value"] for r in rows) == sorted(b"a%d" % i for i in range(300))
    with open(instance.log_path) as log:
        text = log.read()
    assert "translation stopped" in text and "translation running again" in text


def test_tables_cli_list_and_describe(broker_factory, topic_name):
    instance = broker_factory({"kafkapy.iceberg.commit.interval.ms": "300"})
    create_topic(instance.bootstrap, topic_name, 2, {"kafkapy.iceberg.mode": "key_value"})
    producer = Producer({"bootstrap.servers": instance.bootstrap})
    for i in range(40):
        producer.produce(topic_name, value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    catalog = open_table_catalog(instance.data_dir)
    wait_for_table(catalog, topic_name, {0: 20, 1: 20})
    listed = _tables_cli("list", "--override", f"log.dirs={instance.data_dir}")
    assert listed.returncode == 0, listed.stderr
    assert f"kafka.{topic_name}" in listed.stdout and " 40" in listed.stdout
    described = _tables_cli("describe", "--override", f"log.dirs={instance.data_dir}", "--bootstrap-server",
                            instance.bootstrap, topic_name)
    assert described.returncode == 0, described.stderr
    text = described.stdout
    assert f"Table: kafka.{topic_name}" in text and "Rows: 40" in text and "State: running" in text
    lines = [line.split() for line in text.splitlines() if line.strip() and line.split()[0].isdigit()]
    assert lines == [["0", "20", "0"], ["1", "20", "0"]]
    as_json = _tables_cli("describe", "--override", f"log.dirs={instance.data_dir}", "-b", instance.bootstrap, "--json")
    (info,) = json.loads(as_json.stdout)
    assert info["lag"] == {"0": 0, "1": 0} and info["rows"] == 40 and info["columns"] == ["kafka", "value"]
    missing = _tables_cli("describe", "--override", f"log.dirs={instance.data_dir}", "no-such-topic")
    assert missing.returncode == 1 and "no table" in missing.stderr
