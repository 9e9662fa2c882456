"""Log directory failures on a real `python -m kafkapy serve` process, driven by injected storage
faults (KafkaBroker.inject_storage_fault, through the control endpoint):

- two log.dirs, one fills up (ENOSPC on writes): its partition answers Produce with
  KAFKA_STORAGE_ERROR while Fetch goes on, DescribeLogDirs reports the error for that dir, the
  other dir keeps taking writes; once the fault clears the dir comes back by itself (no restart)
  and an idempotent acks=all producer that ran through it all lost nothing and duplicated nothing;
- one log dir that fills up: writes refused with KAFKA_STORAGE_ERROR, reads go on, the broker
  keeps running, writes resume when space returns;
- an I/O error (EIO) in the only log dir: the dir goes offline and the broker stops itself, as
  Kafka does once every log dir has failed.
Everything listens on 127.0.0.1; each broker is stopped even when the test fails.
"""
from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from kafkapy.net.client import BrokerConnection
from kafkapy.protocol.error_codes import ErrorCode
from kafkapy.protocol.messages import DescribeLogDirsRequest, FetchRequest, ProduceRequest
from kafkapy.protocol.records import build_batch
from kafkapy.testing import KafkaBroker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(120)

STORAGE_ERROR = ErrorCode.KAFKA_STORAGE_ERROR
FAST_RECHECK = {"kafkapy.log.dir.space.check.interval.ms": "200", "num.partitions": "1",
                "offsets.topic.num.partitions": "1"}


def _send(broker: KafkaBroker, request, version: int):
    async def go():
        connection = BrokerConnection("127.0.0.1", broker.port, client_id="log-dir-test", request_timeout_s=15)
        try:
            return await connection.send(request, version)
        finally:
            connection.close()

    return asyncio.run(go())


def produce(broker: KafkaBroker, topic: str, partition: int, value: bytes) -> int:
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[ProduceRequest.PartitionProduceData(
            index=partition, records=build_batch([(None, value)]))])])
    return _send(broker, request, 9).responses[0].partition_responses[0].error_code


def fetch(broker: KafkaBroker, topic: str, partition: int) -> tuple[int, int]:
    """(error code, high watermark) of a consumer fetch from offset 0."""
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                               FetchRequest.FetchPartition(partition=partition, fetch_offset=0,
                                                           partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    data = _send(broker, request, 11).responses[0].partitions[0]
    return data.error_code, data.high_watermark


def log_dir_errors(broker: KafkaBroker) -> dict[str, int]:
    response = _send(broker, DescribeLogDirsRequest(topics=None), 1)
    return {result.log_dir: result.error_code for result in response.results}


def create_topic(broker: KafkaBroker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def wait_for(condition, timeout_s: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def dir_status(broker: KafkaBroker, path) -> str:
    return next(d["status"] for d in broker.log_dirs() if d["path"] == str(path))


class AckedProducer:
    """An idempotent acks=all confluent-kafka producer sending numbered values to every partition
    of a topic from a thread, recording what was acknowledged."""

    def __init__(self, broker: KafkaBroker, topic: str, partitions: int):
        self.topic, self.partitions = topic, partitions
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 100})
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acked-producer", daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.partition()].append(msg.value())

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            for p in range(self.partitions):
                self.producer.produce(self.topic, f"v{n}-{p}".encode(), partition=p, on_delivery=self._delivered)
            n += 1
            self.producer.poll(0.02)

    def __enter__(self) -> AckedProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(60)

    def check_nothing_lost(self, broker: KafkaBroker, raw: set[bytes] = frozenset()) -> None:
        """Every acknowledged value is in the log once, in the order acknowledged; `raw` are the
        values the test wrote with its own requests (each must be there once too)."""
        assert not self.failed, self.failed[:5]
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "check",
                                             "enable.auto.commit": False, "enable.partition.eof": True})
        try:
            consumer.assign([confluent_kafka.TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            seen: dict[int, list[bytes]] = {p: [] for p in range(self.partitions)}
            eof: set[int] = set()
            deadline = time.monotonic() + 30
            while len(eof) < self.partitions and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        eof.add(msg.partition())
                        continue
                    raise AssertionError(msg.error())
                seen[msg.partition()].append(msg.value())
        finally:
            consumer.close()
        everything = [v for p in range(self.partitions) for v in seen[p]]
        for value in raw:
            assert everything.count(value) == 1, value
        for p in range(self.partitions):
            mine = [v for v in seen[p] if v not in raw]
            assert len(mine) == len(set(mine)), f"duplicates in partition {p}"
            assert mine == self.acked[p], f"partition {p}: {len(self.acked[p])} acknowledged, {len(mine)} read"


def test_one_of_two_log_dirs_fills_up_and_comes_back(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    topic = f"fill-{uuid.uuid4().hex[:8]}"
    with KafkaBroker(isolation="process", **{"log.dirs": ",".join(map(str, dirs)), **FAST_RECHECK}) as broker:
        create_topic(broker, topic, 2)
        where = {p: next(d for d in dirs if (d / f"{topic}-{p}").is_dir()) for p in range(2)}
        assert where[0] != where[1]
        full, other = where[0], where[1]
        with AckedProducer(broker, topic, 2) as producer:
            wait_for(lambda: all(len(v) > 20 for v in producer.acked.values()), what="first acks")
            fault = broker.inject_storage_fault(log_dir=full, error="ENOSPC")
            wait_for(lambda: dir_status(broker, full) == "full", what="the dir to fill")
            assert produce(broker, topic, 0, b"refused") == STORAGE_ERROR
            assert produce(broker, topic, 1, b"taken") == ErrorCode.NONE
            error, high_watermark = fetch(broker, topic, 0)
            assert error == ErrorCode.NONE and high_watermark > 0          # reads go on
            assert log_dir_errors(broker) == {str(full): STORAGE_ERROR, str(other): ErrorCode.NONE}
            before = len(producer.acked[1])
            wait_for(lambda: len(producer.acked[1]) > before + 20, what="the other dir to take writes")
            stalled = len(producer.acked[0])
            time.sleep(0.5)
            assert len(producer.acked[0]) == stalled                        # nothing acked on the full dir
            assert broker.clear_storage_faults(fault["id"]) == 1
            wait_for(lambda: dir_status(broker, full) == "online", what="the dir to come back")
            wait_for(lambda: len(producer.acked[0]) > stalled + 20, what="writes to resume")
        assert produce(broker, topic, 0, b"after") == ErrorCode.NONE
        producer.check_nothing_lost(broker, raw={b"taken", b"after"})
        states = {d["path"]: d for d in broker.log_dirs()}
        assert states[str(full)]["failures"] == 1 and states[str(full)]["recoveries"] == 1
        assert states[str(other)]["failures"] == 0


def test_the_only_log_dir_fills_up_reads_go_on_writes_resume(tmp_path):
    topic = f"single-{uuid.uuid4().hex[:8]}"
    with KafkaBroker(isolation="process", data_dir=tmp_path / "data", **FAST_RECHECK) as broker:
        create_topic(broker, topic, 1)
        assert produce(broker, topic, 0, b"one") == ErrorCode.NONE
        broker.inject_storage_fault(log_dir=tmp_path / "data", error="ENOSPC")
        assert produce(broker, topic, 0, b"refused") == STORAGE_ERROR
        assert produce(broker, topic, 0, b"refused") == STORAGE_ERROR
        assert fetch(broker, topic, 0) == (ErrorCode.NONE, 1)
        assert broker.running and dir_status(broker, tmp_path / "data") == "full"
        assert list(log_dir_errors(broker).values()) == [STORAGE_ERROR]
        broker.clear_storage_faults()
        wait_for(lambda: dir_status(broker, tmp_path / "data") == "online", what="the dir to come back")
        assert produce(broker, topic, 0, b"two") == ErrorCode.NONE
        assert fetch(broker, topic, 0) == (ErrorCode.NONE, 2)
        assert list(log_dir_errors(broker).values()) == [ErrorCode.NONE]


def test_an_io_error_in_the_only_log_dir_stops_the_broker(tmp_path):
    topic = f"eio-{uuid.uuid4().hex[:8]}"
    with KafkaBroker(isolation="process", data_dir=tmp_path / "data", **FAST_RECHECK) as broker:
        create_topic(broker, topic, 1)
        assert produce(broker, topic, 0, b"one") == ErrorCode.NONE
        broker.inject_storage_fault(topic=topic, partition=0, error="EIO")
        assert produce(broker, topic, 0, b"lost") == STORAGE_ERROR
        proc = broker._proc
        assert proc.wait(timeout=30) == 1   # Kafka halts once every log dir has failed


def test_an_fsync_that_fails_for_space_with_fsync_on_ack(tmp_path):
    """kafkapy.log.fsync.on.ack: the produce waits for the fsync; a failing one answers
    KAFKA_STORAGE_ERROR (the record may be in the log but is not acknowledged), the dir is full
    until the fault clears, and the flush then makes everything durable."""
    topic = f"fsync-{uuid.uuid4().hex[:8]}"
    with KafkaBroker(isolation="process", data_dir=tmp_path / "data",
                     **{"kafkapy.log.fsync.on.ack": "true", **FAST_RECHECK}) as broker:
        create_topic(broker, topic, 1)
        assert produce(broker, topic, 0, b"one") == ErrorCode.NONE
        broker.inject_storage_fault(topic=topic, partition=0, error="ENOSPC", operation="fsync")
        assert produce(broker, topic, 0, b"unsynced") == STORAGE_ERROR
        wait_for(lambda: dir_status(broker, tmp_path / "data") == "full", what="the dir to be full")
        assert produce(broker, topic, 0, b"refused") == STORAGE_ERROR
        assert broker.storage_faults()[0]["hits"] >= 1
        broker.clear_storage_faults()
        wait_for(lambda: dir_status(broker, tmp_path / "data") == "online", what="the dir to come back")
        assert produce(broker, topic, 0, b"two") == ErrorCode.NONE
        assert fetch(broker, topic, 0) == (ErrorCode.NONE, 3)


def test_a_real_full_file_system_comes_back(tmp_path):
    """A broker whose only log dir is an 8 MiB tmpfs (mounted in a private mount namespace with
    `unshare -m`, so nothing outside sees it) is filled until writes fail for real with ENOSPC; then
    the test deletes a filler file (through /proc/<pid>/root) and writes resume, every acknowledged
    record readable."""
    import os
    import shutil
    import signal
    import subprocess
    import sys

    from kafkapy.devcluster.launcher import free_ports

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("!!! a real full file system needs root and unshare (util-linux): not tested here")
    mount = tmp_path / "mnt"
    mount.mkdir()
    port = free_ports(1)[0]
    settings = {"log.dirs": f"{mount}/data", "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "kafkapy.log.dir.space.check.interval.ms": "200", "offsets.topic.num.partitions": "1",
                "log.segment.bytes": str(1 << 20)}
    serve = " ".join([sys.executable, "-m", "kafkapy", "serve"] +
                     [f"--override {key}={value}" for key, value in settings.items()])
    script = f"mount -t tmpfs -o size=8m tmpfs {mount} && head -c 3M /dev/zero > {mount}/filler && exec {serve}"
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(["unshare", "-m", "sh", "-c", script], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        class Broker:
            bootstrap_servers = f"127.0.0.1:{port}"

        broker = Broker()
        broker.port = port
        wait_for(lambda: b"listening on" in log_path.read_bytes() or proc.poll() is not None, 30,
                 what="the broker to start")
        if proc.poll() is not None:
            pytest.skip(f"!!! could not mount a tmpfs in a private namespace: {log_path.read_text()[-500:]}")
        create_topic(broker, "fill", 1)
        value = b"x" * 50000
        acked = 0
        for _ in range(400):
            code = produce(broker, "fill", 0, value)
            if code != ErrorCode.NONE:
                break
            acked += 1
        assert code == STORAGE_ERROR and acked > 10, (code, acked)
        assert b"No space left on device" in log_path.read_bytes()
        assert fetch(broker, "fill", 0) == (ErrorCode.NONE, acked)          # reads go on
        assert log_dir_errors(broker) == {f"{mount}/data": STORAGE_ERROR}
        os.unlink(f"/proc/{proc.pid}/root{mount}/filler")                 # space comes back
        wait_for(lambda: produce(broker, "fill", 0, value) == ErrorCode.NONE, 20, what="writes to resume")
        assert fetch(broker, "fill", 0) == (ErrorCode.NONE, acked + 1)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "fs",
                                             "enable.partition.eof": True})
        try:
            consumer.assign([confluent_kafka.TopicPartition("fill", 0, 0)])
            seen, deadline = 0, time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    break  # end of the partition
                assert msg.value() == value
                seen += 1
        finally:
            consumer.close()
        assert seen == acked + 1
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
