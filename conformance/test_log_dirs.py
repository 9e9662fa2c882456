"""AlterReplicaLogDirs and DescribeLogDirs with kafka-python against real brokers with two log.dirs:
a partition moves from one dir to the other while a producer (acks=all) writes to it, and every
acknowledged record is still there, once and in order; a kill -9 during a move keeps the original.
In a cluster, the moving replica is a follower fed by the replica fetcher; once moved, its log
(read from its files after a clean stop) holds every acknowledged record.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

kafka = pytest.importorskip("kafka", reason="!!! kafka-python not installed: pip install -e '.[test]'")

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer  # noqa: E402
from kafka import errors as kafka_errors  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.structs import TopicPartition, TopicPartitionReplica  # noqa: E402

from conformance.broker_process import start_broker  # noqa: E402
from conformance.cluster_harness import start_cluster, wait_for_isr  # noqa: E402
from kafkapy.log import LogConfig, LogManager  # noqa: E402
from kafkapy.protocol.records import iter_batch_headers, iter_records  # noqa: E402

pytestmark = pytest.mark.timeout(240)

TOPIC = "moving"
VALUE = b"x" * 900


class NumberedProducer:
    """Produces records numbered 0, 1, 2... in a thread (acks=all); remembers which were acked."""

    def __init__(self, bootstrap: str):
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, enable_idempotence=True,
                                      max_in_flight_requests_per_connection=1, retries=5)
        self.acked: list[int] = []
        self.failed: list[tuple[int, Exception]] = []
        self.sent = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    def wait_for(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} of {count} records acked"
            assert not self.failed, self.failed[:3]
            time.sleep(0.05)

    def _run(self) -> None:
        while not self._stop.is_set():
            n = self.sent
            self.sent += 1
            future = self.producer.send(TOPIC, key=b"%d" % n, value=b"%09d:" % n + VALUE, partition=0)
            future.add_callback(self._acked, n)
            future.add_errback(self._failed, n)
            if n % 200 == 199:
                self.producer.flush()

    def _acked(self, n: int, _metadata) -> None:
        with self._lock:
            self.acked.append(n)

    def _failed(self, n: int, exc: Exception) -> None:
        with self._lock:
            self.failed.append((n, exc))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(30)
        self.producer.close(30)


def partition_dirs(describe: list[dict], broker_id: int | None = None) -> dict[str, list[tuple[bool, int, int]]]:
    """log dir -> [(is future, size, offset lag)] of the partition, from kafka-python's describe_log_dirs."""
    found: dict[str, list[tuple[bool, int, int]]] = {}
    for broker in describe:
        if broker_id is not None and broker.get("broker_id", broker_id) != broker_id:
            continue
        for log_dir in broker["log_dirs"]:
            for topic in log_dir["topics"]:
                if topic["name"] != TOPIC:
                    continue
                for p in topic["partitions"]:
                    found.setdefault(log_dir["log_dir"], []).append(
                        (p["is_future_key"], p["partition_size"], p["offset_lag"]))
    return found


def wait_moved(admin: KafkaAdminClient, src: Path, dst: Path, broker_id: int = 0, timeout: float = 120) -> bool:
    """Poll DescribeLogDirs until the partition is reported only in `dst`; returns whether the
    future replica was seen in `dst` meanwhile (with the current one still in `src`)."""
    seen_future = False
    deadline = time.monotonic() + timeout
    while True:
        found = partition_dirs(admin.describe_log_dirs(brokers=[broker_id]), broker_id)
        if any(future for future, _, _ in found.get(str(dst), [])):
            seen_future = True
            assert [future for future, _, _ in found[str(src)]] == [False], found
        if list(found) == [str(dst)]:
            assert [future for future, _, _ in found[str(dst)]] == [False], found
            return seen_future
        assert time.monotonic() < deadline, f"the move did not finish: {found}"
        time.sleep(0.05)


def consume_all(bootstrap: str, end: int | None = None) -> list[int]:
    """The record numbers of the partition up to `end` (default: the high watermark)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, fetch_max_bytes=8 << 20)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    if end is None:
        end = consumer.end_offsets([tp])[tp]
    numbers = []
    try:
        while consumer.position(tp) < end:
            for records in consumer.poll(timeout_ms=2000, max_records=5000).values():
                numbers += [int(r.value[:9]) for r in records]
    finally:
        consumer.close()
    return numbers


def numbers_in_files(log_dirs: list[Path]) -> list[int]:
    """The record numbers in the partition's files, read with kafkapy's log (the broker is stopped)."""
    manager = LogManager([str(d) for d in log_dirs], LogConfig())
    manager.load()
    try:
        plog = manager.get(TOPIC, 0)
        numbers = []
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            result = plog.read(offset, 8 << 20)
            data = result.records.tobytes()
            position = 0
            for header in iter_batch_headers(data, validate=True):
                header.position = position
                position += header.size
                numbers += [int(record.value[:9]) for record in iter_records(data, header)]
            offset = result.next_offset
        return numbers
    finally:
        manager.close()


@pytest.fixture
def two_dir_broker(tmp_path):
    dirs = [tmp_path / "disk1", tmp_path / "disk2"]
    broker = start_broker(overrides={"log.dirs": ",".join(map(str, dirs)), "broker.id": "0",
                                     "offsets.topic.num.partitions": "1"}, work_dir=tmp_path / "work")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        # Small segments, so that the move sees many segments and rolls while it copies.
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={"segment.bytes": str(1 << 20)})])
        yield broker, admin, dirs
    finally:
        admin.close()
        broker.close()


def home_of(dirs: list[Path]) -> Path:
    homes = [d for d in dirs if (d / f"{TOPIC}-0").is_dir()]
    assert len(homes) == 1, homes
    return homes[0]


def test_move_while_producing(two_dir_broker):
    broker, admin, dirs = two_dir_broker
    producer = NumberedProducer(broker.bootstrap).start()
    try:
        producer.wait_for(20000)  # ~19 MB before the move
        src = home_of(dirs)
        dst = next(d for d in dirs if d != src)
        replica = TopicPartitionReplica(TOPIC, 0, 0)
        assert admin.alter_replica_log_dirs({replica: str(dst)}) == {replica: kafka_errors.NoError}
        # Asking again for the same destination changes nothing.
        assert admin.alter_replica_log_dirs({replica: str(dst)}) == {replica: kafka_errors.NoError}
        seen_future = wait_moved(admin, src, dst)
        moved_at = len(producer.acked)
        producer.wait_for(moved_at + 3000)  # and the moved log keeps taking writes
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:3]
    acked = sorted(producer.acked)
    numbers = consume_all(broker.bootstrap, end=producer.sent)
    # Every acknowledged record once, in order (nothing unacknowledged was sent out of order either).
    assert numbers == list(range(len(numbers)))
    assert set(acked) <= set(numbers)
    # The files moved: the destination holds the partition, the source nothing of it.
    assert home_of(dirs) == dst
    assert not any(p.name.startswith(f"{TOPIC}-0") for p in src.iterdir())
    assert len(list((dst / f"{TOPIC}-0").glob("*.log"))) > 10
    print(f"future replica seen: {seen_future}; records acked before the switch: {moved_at}")
    # A restart finds the partition in its new dir, with everything.
    broker.restart()
    assert consume_all(broker.bootstrap, end=len(numbers)) == numbers
    assert home_of(dirs) == dst


def test_kill9_during_a_move_keeps_the_original(two_dir_broker):
    broker, admin, dirs = two_dir_broker
    producer = NumberedProducer(broker.bootstrap).start()
    try:
        producer.wait_for(60000)  # ~57 MB: the move takes a while
    finally:
        producer.stop()
    acked = len(producer.acked)
    src = home_of(dirs)
    dst = next(d for d in dirs if d != src)
    replica = TopicPartitionReplica(TOPIC, 0, 0)
    assert admin.alter_replica_log_dirs({replica: str(dst)}) == {replica: kafka_errors.NoError}
    deadline = time.monotonic() + 30
    while True:
        found = partition_dirs(admin.describe_log_dirs())
        if list(found) == [str(dst)]:
            pytest.skip("the move finished before the kill")
        future = [size for is_future, size, _ in found.get(str(dst), []) if is_future]
        if future and future[0] > 0:
            break
        assert time.monotonic() < deadline, found
        time.sleep(0.01)
    broker.kill9()
    assert list(dst.glob(f"{TOPIC}-0.*-future"))
    broker.start()
    numbers = consume_all(broker.bootstrap, end=producer.sent)  # served once the logs are loaded
    assert numbers[:acked] == list(range(acked))
    assert home_of(dirs) == src
    assert not list(dst.glob("*-future"))


def test_move_a_follower_replica_in_a_cluster(tmp_path):
    cluster = start_cluster(tmp_path, brokers=2, overrides={"min.insync.replicas": "2",
                                                            "unclean.leader.election.enable": "false",
                                                            "offsets.topic.replication.factor": "2"})
    admin = None
    try:
        leader_id, follower_id = sorted(cluster.brokers)
        follower = cluster.broker(follower_id)
        dirs = [Path(follower.log_dir), Path(f"{follower.log_dir}-disk2")]
        follower.overrides["log.dirs"] = ",".join(map(str, dirs))
        follower.restart()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [leader_id, follower_id]},
                                      topic_configs={"segment.bytes": str(1 << 20)})])
        wait_for_isr(cluster, TOPIC, 2)
        producer = NumberedProducer(cluster.bootstrap).start()
        try:
            producer.wait_for(15000)
            src = home_of(dirs)
            dst = next(d for d in dirs if d != src)
            replica = TopicPartitionReplica(TOPIC, 0, follower_id)
            assert admin.alter_replica_log_dirs({replica: str(dst)}) == {replica: kafka_errors.NoError}
            wait_moved(admin, src, dst, broker_id=follower_id)
            producer.wait_for(len(producer.acked) + 3000)
        finally:
            producer.stop()
        assert not producer.failed, producer.failed[:3]
        assert home_of(dirs) == dst and not any(p.name.startswith(f"{TOPIC}-0") for p in src.iterdir())
        numbers = consume_all(cluster.bootstrap)
        assert numbers == list(range(len(numbers))) and set(producer.acked) <= set(numbers)
        # The moved follower's own files: acks=all put every acknowledged record there, once, in order.
        wait_for_isr(cluster, TOPIC, 2)
        time.sleep(1)  # its last fetch
        follower.stop()
        replicated = numbers_in_files(dirs)
        assert replicated == list(range(len(replicated)))
        assert set(producer.acked) <= set(replicated)
    finally:
        if admin is not None:
            admin.close()
        cluster.stop()
