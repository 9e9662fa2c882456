"""Topics as Iceberg tables on a full disk (issue 34): the warehouse is a 4 MiB tmpfs, mounted in a
mount namespace of the broker's own (`unshare --mount`), so nothing outside the broker sees it and
it goes away with the broker. A filler file takes the free space; the table's commits then fail with
ENOSPC: the topic shows the stopped state with the error on /metrics and in `kafkapy tables
describe`, the broker keeps taking and serving records, and once the filler is deleted the table
catches up with every record exactly once.

Needs root (CAP_SYS_ADMIN) for the namespace and the mount, as CI has; elsewhere it skips, and the
regular-file fault of test_tables_stopped.py covers the same path. The test reads the table inside
the broker's namespace (`nsenter --mount`), where the warehouse's files are.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.timeout(240)

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from conformance.broker_process import BrokerProcess, free_port  # noqa: E402
from conformance.test_tables_core import create_topic, log_end_offsets, metric, scrape  # noqa: E402

TMPFS_SIZE = "4m"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mounts_possible(tmp_path) -> str | None:
    """Why a tmpfs in a private mount namespace cannot be had here (None: it can)."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return "unshare/nsenter (util-linux) are not installed"
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           f"mount -t tmpfs -o size=1m probe {probe}"], capture_output=True, text=True, timeout=20)
    return None if done.returncode == 0 else f"cannot mount a tmpfs in a mount namespace: {done.stderr.strip()}"


def _wrapper(tmp_path, warehouse) -> str:
    """A `python` for BrokerProcess: the broker runs in a new mount namespace with the warehouse a
    tmpfs (unshare and sh exec, so the pid is the broker's)."""
    script = tmp_path / "python-in-tmpfs-namespace"
    script.write_text(
        "#!/bin/sh\n"
        "exec unshare --mount --propagation private /bin/sh -c "
        f"'mount -t tmpfs -o size={TMPFS_SIZE} kafkapy-warehouse \"$0\" && exec \"$@\"' "
        f"'{warehouse}' '{sys.executable}' \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def _in_broker_namespace(pid: int, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["nsenter", "--target", str(pid), "--mount", f"--wd={REPO}", *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


READ_TABLE = """
import json, sys
from kafkapy.tables.catalog import CatalogSettings, open_catalog
settings = CatalogSettings.from_config({"kafkapy.iceberg.warehouse": sys.argv[2]}.get, [sys.argv[1]])
table = open_catalog(settings, create_dirs=False).load_table(("kafka", sys.argv[3]))
rows = table.scan(selected_fields=("kafka", "value")).to_arrow().to_pylist()
print(json.dumps([[r["kafka"]["partition"], r["kafka"]["offset"], r["value"].decode()] for r in rows]))
"""


def _wait_metric(port: int, name: str, value: float, timeout: float = 60, **labels) -> None:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = metric(scrape(port), name, **labels)
        if seen == value:
            return
        time.sleep(0.2)
    raise AssertionError(f"{name}{labels} is {seen}, not {value}, after {timeout} s")


def test_a_full_warehouse_stops_the_table_and_it_catches_up(tmp_path, topic_name):
    why = _mounts_possible(tmp_path)
    if why is not None:
        pytest.skip(why)
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    port = free_port()
    broker = BrokerProcess(port=free_port(), data_dir=tmp_path / "broker" / "data", work_dir=tmp_path / "broker",
                           overrides={"kafkapy.iceberg.commit.interval.ms": "300",
                                      "kafkapy.iceberg.warehouse": str(warehouse),
                                      "kafkapy.metrics.listener": f"http://127.0.0.1:{port}"},
                           python=_wrapper(tmp_path, warehouse))
    try:
        broker.start()
        pid = broker.pid
        df = _in_broker_namespace(pid, ["df", "-k", str(warehouse)])
        assert "kafkapy-warehouse" in df.stdout, df  # the broker's warehouse is the tmpfs
        create_topic(broker.bootstrap, topic_name, 2, {"kafkapy.iceberg.mode": "key_value"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for i in range(100):
            producer.produce(topic_name, value=b"a%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        for partition in (0, 1):
            _wait_metric(port, "kafkapy_iceberg_committed_offset", 50, topic=topic_name, partition=partition)

        # the disk fills up: a filler takes every free block of the tmpfs
        filled = _in_broker_namespace(pid, ["sh", "-c", f"dd if=/dev/zero of={warehouse}/filler bs=64k; "
                                                        f"df -k {warehouse}"])
        assert "No space left on device" in filled.stderr, filled
        for i in range(100, 300):
            producer.produce(topic_name, value=b"a%d" % i, partition=i % 2)
        assert producer.flush(30) == 0  # the broker still takes writes (its log is not on the tmpfs)
        _wait_metric(port, "kafkapy_iceberg_state", 1, topic=topic_name)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "full-disk-reader",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 150 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert len(got) == 150  # and serves reads
        assert metric(scrape(port), "kafkapy_iceberg_lag_records", topic=topic_name, partition=0) == 100
        described = subprocess.run(
            [sys.executable, "-m", "kafkapy", "tables", "describe", "--override", f"log.dirs={broker.data_dir}",
             "--warehouse", str(warehouse), topic_name, "--json"], capture_output=True, text=True, timeout=60,
            cwd=REPO)
        assert described.returncode == 0, described.stderr
        (info,) = json.loads(described.stdout)
        assert info["state"] == "stopped" and "No space left on device" in info["error"], info
        print("stopped with:", info["error"])

        # space is freed: the table catches up, every record once
        freed = _in_broker_namespace(pid, ["rm", f"{warehouse}/filler"])
        assert freed.returncode == 0, freed
        ends = log_end_offsets(broker.bootstrap, topic_name, 2)
        assert ends == {0: 150, 1: 150}
        for partition in (0, 1):
            _wait_metric(port, "kafkapy_iceberg_committed_offset", 150, timeout=90, topic=topic_name,
                         partition=partition)
        _wait_metric(port, "kafkapy_iceberg_state", 0, topic=topic_name)
        read = _in_broker_namespace(pid, [sys.executable, "-c", READ_TABLE, str(broker.data_dir), str(warehouse),
                                          topic_name])
        assert read.returncode == 0, read.stderr
        rows = json.loads(read.stdout)
        count = collections.Counter((p, o) for p, o, _ in rows)
        assert len(count) == 300 and set(count.values()) == {1}
        assert sorted(v for _, _, v in rows) == sorted("a%d" % i for i in range(300))
        text = broker.log_path.read_text()
        assert "translation stopped" in text and "No space left on device" in text
        assert "translation running again" in text
    finally:
        broker.close()
