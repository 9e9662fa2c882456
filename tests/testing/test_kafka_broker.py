"""kafkapy.testing.KafkaBroker, used as a test suite would: in this process and as a child
process, with a real client (confluent-kafka), restart and kill, and `kafkapy serve --ephemeral`."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from kafkapy.testing import KafkaBroker, KafkaBrokerError

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(120)


def round_trip(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    return read_all(bootstrap, topic, len(values))


def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 0.5) if not m.error()]
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_broker_serves_a_client_and_cleans_up(isolation):
    with KafkaBroker(isolation=isolation, **{"num.partitions": "2"}) as broker:
        data_dir = broker.data_dir
        assert broker.running and broker.bootstrap_servers.startswith("127.0.0.1:")
        broker.create_topic("t", partitions=1)
        values = [f"v{i}".encode() for i in range(20)]
        assert round_trip(broker.bootstrap_servers, "t", values) == values
        assert (data_dir / "t-0").is_dir()
    assert not broker.running
    assert not data_dir.exists()


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_restart_and_kill_keep_acknowledged_records(isolation):
    with KafkaBroker(isolation=isolation) as broker:
        broker.create_topic("keep")
        values = [f"k{i}".encode() for i in range(10)]
        assert round_trip(broker.bootstrap_servers, "keep", values) == values
        port = broker.port
        broker.restart()
        assert broker.port == port
        assert read_all(broker.bootstrap_servers, "keep", 10) == values
        broker.kill()
        assert not broker.running
        broker.start()
        assert read_all(broker.bootstrap_servers, "keep", 10) == values


def test_async_with_and_two_brokers_side_by_side():
    async def main() -> tuple[str, str]:
        async with KafkaBroker() as first, KafkaBroker() as second:
            assert first.port != second.port
            return first.bootstrap_servers, second.bootstrap_servers

    first, second = asyncio.run(main())
    assert first != second


def test_a_bad_property_is_an_error_naming_it():
    with pytest.raises(Exception, match="num.partitions"):
        KafkaBroker(**{"num.partitions": "zero"}).start()
    with pytest.raises(KafkaBrokerError):
        KafkaBroker(isolation="process", **{"num.partitions": "zero"}).start(timeout=20)


def test_serve_ephemeral_prints_its_address_and_removes_its_data():
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy", "serve", "--ephemeral"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = proc.stdout.readline().decode().strip()
        assert line.startswith("KAFKAPY_BOOTSTRAP=127.0.0.1:"), line
        bootstrap = line.split("=", 1)[1]
        assert round_trip(bootstrap, "eph", [b"x"]) == [b"x"]  # auto-created topic
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(20) == 0
        log = proc.stderr.read().decode(errors="replace")
        data_dirs = [part.split("data in ", 1)[1].split(",")[0] for part in log.splitlines() if "data in " in part]
        assert data_dirs and not os.path.exists(data_dirs[0])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
