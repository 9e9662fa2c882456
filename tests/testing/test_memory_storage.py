"""storage="memory": a test broker whose logs live on a memory file system, in both isolations and
from `kafkapy serve --ephemeral --storage memory`, with a real client (confluent-kafka).

The log's own unit, property and conformance tests also run on memory storage: scripts/test.sh runs
them a second time with their temporary directories under `memory_root()` (docs/testing.md).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.testing.children import stop_child

from kafkapy.testing import KafkaBroker, KafkaBrokerError
from kafkapy.testing.storage import MEMORY_DIR_ENV, _mounts, _on_memory_file_system, memory_root
from tests.testing.test_kafka_broker import read_all

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(120)

try:
    MEMORY_ROOT: Path | None = memory_root()
except RuntimeError:
    MEMORY_ROOT = None
needs_memory = pytest.mark.skipif(MEMORY_ROOT is None, reason="!!! no memory file system (tmpfs) on this machine")


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def test_the_memory_root_is_a_memory_file_system():
    mounts = [("/", "ext4"), ("/dev/shm", "tmpfs"), ("/mnt/ram", "ramfs"), ("/mnt/ram/disk", "xfs")]
    assert _on_memory_file_system(Path("/dev/shm"), mounts)
    assert _on_memory_file_system(Path("/mnt/ram/x"), mounts)
    assert not _on_memory_file_system(Path("/mnt/ram/disk/x"), mounts)  # the longest mount point decides
    assert not _on_memory_file_system(Path("/tmp"), mounts)
    if MEMORY_ROOT is not None and not os.environ.get(MEMORY_DIR_ENV):
        assert _on_memory_file_system(MEMORY_ROOT, _mounts())


def test_a_named_memory_dir_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv(MEMORY_DIR_ENV, str(tmp_path / "missing"))
    broker = KafkaBroker(storage="memory")
    with pytest.raises(KafkaBrokerError, match=MEMORY_DIR_ENV):
        broker.start()
    assert not broker.running
    with pytest.raises(ValueError, match="storage"):
        KafkaBroker(storage="ram")


@needs_memory
@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_memory_storage_keeps_records_across_restart_and_kill_and_leaves_nothing(isolation):
    with KafkaBroker(isolation=isolation, storage="memory") as broker:
        data_dir = broker.data_dir
        assert data_dir.parent == MEMORY_ROOT
        broker.create_topic("mem", partitions=1)
        values = [f"m{i}".encode() for i in range(50)]
        produce(broker.bootstrap_servers, "mem", values)
        assert read_all(broker.bootstrap_servers, "mem", 50) == values
        assert any((data_dir / "mem-0").glob("*.log"))  # segment files, as on disk
        broker.restart()
        assert read_all(broker.bootstrap_servers, "mem", 50) == values
        broker.kill()
        broker.start()
        produce(broker.bootstrap_servers, "mem", [b"after"])
        assert read_all(broker.bootstrap_servers, "mem", 51) == values + [b"after"]
    assert not data_dir.exists()
    assert not list(MEMORY_ROOT.glob(f"{data_dir.name}*"))  # no data dir, no process log


@needs_memory
def test_serve_ephemeral_with_memory_storage():
    before = set(MEMORY_ROOT.glob("kafkapy-ephemeral-*"))
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy", "serve", "--ephemeral", "--storage", "memory",
                             "--log-level", "WARNING"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = proc.stdout.readline().decode().strip()
        assert line.startswith("KAFKAPY_BOOTSTRAP=127.0.0.1:"), (line, proc.stderr.read(2000) if proc.poll() else "")
        bootstrap = line.split("=", 1)[1]
        created = set(MEMORY_ROOT.glob("kafkapy-ephemeral-*")) - before
        assert len(created) == 1
        produce(bootstrap, "eph", [b"x", b"y"])
        assert read_all(bootstrap, "eph", 2) == [b"x", b"y"]
        assert (created.pop() / "eph-0").is_dir()
    finally:
        stop_child(proc)
    assert set(MEMORY_ROOT.glob("kafkapy-ephemeral-*")) == before


@needs_memory
def test_a_cluster_on_memory_storage_replicates_and_leaves_nothing():
    from kafkapy.testing import KafkaCluster

    with KafkaCluster(brokers=2, storage="memory", **{"zookeeper.session.timeout.ms": "2000"}) as cluster:
        cluster_dir = cluster.directory
        assert cluster_dir.parent == MEMORY_ROOT
        cluster.create_topic("replicated", partitions=1, replication_factor=2)
        values = [f"r{i}".encode() for i in range(20)]
        produce(cluster.bootstrap_servers, "replicated", values)
        assert read_all(cluster.bootstrap_servers, "replicated", 20) == values
        for broker_id in (1, 2):  # both replicas hold the partition's files on the memory file system
            assert any((cluster_dir / f"broker-{broker_id}" / "replicated-0").glob("*.log"))
    assert not cluster_dir.exists()
