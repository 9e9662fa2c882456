"""kafkapy.testing.KafkaCluster with a real client (confluent-kafka): leader moves, a clean stop and a
kill of the leader while a producer with acks=all keeps sending, brokers rejoining the ISR, a cluster
of child processes, and nothing left behind (processes, threads, ports, directories)."""
from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from kafkapy.testing.cluster import KafkaCluster

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402

pytestmark = pytest.mark.timeout(120)

TOPIC = "events"


class BackgroundProducer:
    """An idempotent acks=all producer sending numbered records from a thread until stopped."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})
        self._stop = threading.Event()
        self._sent = 0
        self._thread = threading.Thread(target=self._run, name="test-producer", daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._producer.produce(self.topic, value=f"r{self._sent:06d}".encode(), on_delivery=self._delivered)
            self._sent += 1
            self._producer.poll(0.01)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        return len(self.acked)

    def wait_for_more(self, more: int = 20, timeout: float = 30.0) -> None:
        """Wait until `more` further records have been acknowledged."""
        target = len(self.acked) + more
        deadline = time.monotonic() + timeout
        while len(self.acked) < target:
            assert time.monotonic() < deadline, f"only {len(self.acked)} of {target} acknowledged; {self.errors[:3]}"
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(60) == 0


def read_all(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(500, 0.5) if not m.error()]
    finally:
        consumer.close()
    return got


def client_view_of_leader(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def wait_until(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


_threads_before: set[int] = set()


@pytest.fixture(autouse=True)
def threads_before():
    """The threads alive before the test: in a whole-suite run, other tests' in-process brokers may
    have left theirs, and only what this test's cluster started must be gone."""
    _threads_before.clear()
    _threads_before.update(t.ident for t in threading.enumerate())


def assert_cleaned_up(directory: Path, ports: list[int], pids: list[int] = ()) -> None:
    assert not directory.exists()
    leftover = [t.name for t in threading.enumerate() if t.ident not in _threads_before and
                (t.name.startswith("kafkapy-") or "zk_loop" in t.name)]
    assert not leftover, leftover
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def ports_of(cluster: KafkaCluster) -> list[int]:
    return [b.port for b in cluster.brokers.values()] + [cluster.zookeeper.port]


def test_leader_moves_while_a_producer_keeps_delivering():
    with KafkaCluster(brokers=3) as cluster:
        directory, ports = cluster.directory, ports_of(cluster)
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        assert len(cluster.describe(TOPIC)[0].isr) == 3
        with BackgroundProducer(cluster.bootstrap_servers, TOPIC) as producer:
            producer.wait_for_more()
            first = cluster.leader(TOPIC, 0)
            for target in [b for b in (1, 2, 3) if b != first] + [first]:
                cluster.move_leader(TOPIC, 0, to=target)
                assert cluster.leader(TOPIC, 0) == target
                assert cluster.describe(TOPIC)[0].replicas[0] == target
                wait_until(lambda: client_view_of_leader(cluster.bootstrap_servers, TOPIC) == target,
                           what=f"clients to see broker {target} as the leader")
                producer.wait_for_more()
        assert not producer.errors
        assert read_all(cluster.bootstrap_servers, TOPIC, len(producer.acked)) == producer.acked

        # to a broker that is not a replica: it is added (first), the others stay
        cluster.create_topic("narrow", replication_factor=2)
        before = cluster.describe("narrow")[0].replicas
        outsider = ({1, 2, 3} - set(before)).pop()
        cluster.move_leader("narrow", 0, to=outsider)
        after = cluster.describe("narrow")[0]
        assert after.leader == outsider and after.replicas == (outsider, *before)
    assert_cleaned_up(directory, ports)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_losing_the_leader_loses_nothing_acknowledged_and_it_rejoins(how):
    with KafkaCluster(brokers=3) as cluster:
        directory, ports = cluster.directory, ports_of(cluster)
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        with BackgroundProducer(cluster.bootstrap_servers, TOPIC) as producer:
            producer.wait_for_more()
            leader = cluster.leader(TOPIC, 0)
            if how == "stop":
                cluster.stop_broker(leader)  # controlled shutdown: leadership moves before it goes
            else:
                cluster.kill_broker(leader)  # the controller notices when its ZooKeeper session expires
                # as after a real kill -9: no session close, so the registration outlives the broker
                assert cluster.zookeeper.get(f"/brokers/ids/{leader}") is not None
            assert not cluster.broker(leader).running
            new_leader = wait_until(lambda: (lambda l: l if l not in (None, leader) else None)(
                cluster.leader(TOPIC, 0)), timeout=20, what="a new leader")
            producer.wait_for_more(timeout=30)
            assert leader not in cluster.describe(TOPIC)[0].isr
            cluster.start_broker(leader)
            wait_until(lambda: leader in cluster.describe(TOPIC)[0].isr, what=f"broker {leader} back in the ISR")
            producer.wait_for_more()
        assert not producer.errors
        assert new_leader != leader
        got = read_all(cluster.bootstrap_servers, TOPIC, len(producer.acked))
        assert got == producer.acked  # idempotent producer: every acknowledged record, once, in order
    assert_cleaned_up(directory, ports)


def test_a_cluster_of_processes():
    # a short session timeout: the killed leader's partition moves within about 2 s
    with KafkaCluster(brokers=2, isolation="process", **{"zookeeper.session.timeout.ms": "2000"}) as cluster:
        directory, ports = cluster.directory, ports_of(cluster)
        pids = [b._proc.pid for b in cluster.brokers.values()]
        cluster.create_topic(TOPIC, partitions=1)
        assert len(cluster.describe(TOPIC)[0].replicas) == 2
        producer = cluster.producer(acks="all")  # KafkaClients: closed when the cluster stops
        values = [f"v{i}".encode() for i in range(50)]
        for value in values:
            producer.produce(TOPIC, value=value)
        assert producer.flush(30) == 0
        cluster.kill_broker(cluster.leader(TOPIC, 0))
        assert read_all(cluster.bootstrap_servers, TOPIC, len(values)) == values
    assert_cleaned_up(directory, ports, pids)


def test_async_with_and_fault_injection():
    async def main() -> None:
        async with KafkaCluster(brokers=1, **{"num.partitions": "1"}) as cluster:
            cluster.create_topic("faulty")
            if not hasattr(cluster.broker(1), "inject"):
                pytest.skip("KafkaBroker has no fault injection (testing/faults.py) in this checkout")
            rule = cluster.inject("Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
            producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                                 "enable.idempotence": True})
            producer.produce("faulty", value=b"once")
            assert await asyncio.to_thread(producer.flush, 30) == 0
            assert len(cluster.recorded("Produce")) >= 2  # the failed attempt and the retry
            assert read_all(cluster.bootstrap_servers, "faulty", 1) == [b"once"]
            rule.remove()
            cluster.set_latency(300)
            started = time.monotonic()
            assert cluster.leader("faulty", 0) == 1  # a Metadata request, answered 300 ms later
            assert time.monotonic() - started >= 0.3
            cluster.set_latency(0)

    asyncio.run(main())
