"""Helpers shared by the consumer-group conformance tests (test_groups*.py); no tests here.

Also a runnable consumer process, so that every client library runs in its own process with
its own threads, exactly as an application would:

    python conformance/test_groups_tools.py consume --client confluent --bootstrap H:P \\
        --group G --topic T --out FILE --stop-file F [--assignor range] [--instance-id I]

It writes one line per event to FILE: `A <partition>` when a partition is assigned,
`V <partition>` when revoked (or lost), `R <partition> <offset> <value>` per record, `G <gen>`
when the group generation it knows changes (where the client exposes it), and `CLOSED` after
a clean close. It runs until the stop file exists, then closes (committing its offsets).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

# Single broker: __consumer_offsets must fit on one broker (Kafka's default of 3 would make
# FindCoordinator answer COORDINATOR_NOT_AVAILABLE forever, as Kafka does).
GROUP_BROKER_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


# -- admin helpers (confluent-kafka's AdminClient: librdkafka, not kafkapy's codec) --------
def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=20).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 20
    while True:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {name} not ready: {meta}"
        time.sleep(0.2)


def produce(bootstrap: str, topic: str, count: int, start: int = 0, rate_per_s: float | None = None,
            partition: int | None = None) -> None:
    """Produce keyed records `k<i % 997>` = `v<i>`, optionally paced, and wait for every ack."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                         "queue.buffering.max.messages": 1_000_000})
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))

    began = time.monotonic()
    for i in range(start, start + count):
        kwargs = {} if partition is None else {"partition": partition}
        while True:
            try:
                producer.produce(topic, key=f"k{i % 997}".encode(), value=f"v{i}".encode(),
                                 on_delivery=on_delivery, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        if rate_per_s and (i - start) % 500 == 499:
            ahead = (i - start + 1) / rate_per_s - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
            producer.poll(0)
    assert producer.flush(60) == 0, "records still unacknowledged after 60 s"
    assert not errors, errors[:5]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkapy-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch through librdkafka); -1001 where none."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=20)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


class CommitMonitor(threading.Thread):
    """Samples the group's committed offsets every 0.3 s until `halt` is set (OffsetFetch via
    librdkafka's AdminClient; subclasses choose another client through `_sampler`)."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int):
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic, self.partitions = bootstrap, group, topic, partitions
        self.samples: list[dict[int, int]] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def _sampler(self):
        """A function returning one sample: {partition: committed offset}."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        request = [ConsumerGroupTopicPartitions(self.group, [TopicPartition(self.topic, p)
                                                            for p in range(self.partitions)])]

        def sample() -> dict[int, int]:
            result = admin.list_consumer_group_offsets(request)[self.group].result(timeout=10)
            return {tp.partition: tp.offset for tp in result.topic_partitions}

        return sample

    def run(self) -> None:
        sample = self._sampler()
        while not self.halt.wait(0.3):
            try:
                self.samples.append(sample())
            except Exception as exc:  # the broker may be down: a failed sample is reported, not fatal
                self.errors.append(repr(exc))

    def latest(self) -> dict[int, int]:
        return self.samples[-1] if self.samples else {}

    def backwards(self) -> list[str]:
        found = []
        best: dict[int, int] = {}
        for i, sample in enumerate(self.samples):
            for partition, offset in sample.items():
                if offset < 0:
                    continue
                if offset < best.get(partition, -1):
                    found.append(f"sample {i}: partition {partition} went back from {best[partition]} to {offset}")
                best[partition] = max(best.get(partition, -1), offset)
        return found


def wait_until(condition, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# -- consumer processes ---------------------------------------------------------------------
@dataclass
class ConsumerProcess:
    """A consumer in its own process, writing events to `out`; stop() makes it close cleanly."""

    name: str
    argv: list[str]
    out: Path
    stop_file: Path
    proc: subprocess.Popen | None = None
    log: Path | None = None

    def start(self) -> "ConsumerProcess":
        self.stop_file.unlink(missing_ok=True)
        self.log = self.out.with_suffix(".log")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=REPO_ROOT, start_new_session=True)
        return self

    def stop(self) -> None:
        self.stop_file.write_text("stop\n")

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"consumer {self.name} did not exit within {timeout:.0f} s after stop;"
                                 f" log tail:\n{self.tail()}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "<no log>"

    def events(self) -> list[list[str]]:
        if not self.out.exists():
            return []
        return [line.split(" ", 3) for line in self.out.read_text().splitlines() if line]

    def assigned(self) -> set[int]:
        """Partitions assigned right now, according to the events written so far."""
        owned: set[int] = set()
        for event in self.events():
            if event[0] == "A":
                owned.add(int(event[1]))
            elif event[0] == "V":
                owned.discard(int(event[1]))
        return owned


def python_consumer(client: str, bootstrap: str, group: str, topic: str, work: Path, name: str | None = None,
                    assignor: str = "range", instance_id: str | None = None,
                    session_timeout_ms: int = 10_000) -> ConsumerProcess:
    name = name or f"{client}-{uuid.uuid4().hex[:6]}"
    out = work / f"{name}.events"
    stop_file = work / f"{name}.stop"
    argv = [sys.executable, str(Path(__file__).resolve()), "consume", "--client", client, "--bootstrap", bootstrap,
            "--group", group, "--topic", topic, "--out", str(out), "--stop-file", str(stop_file),
            "--assignor", assignor, "--session-timeout-ms", str(session_timeout_ms)]
    if instance_id:
        argv += ["--instance-id", instance_id]
    return ConsumerProcess(name, argv, out, stop_file)


@dataclass
class Consumption:
    """Everything a set of consumers saw, checked the way the mixed-group test needs."""

    records: dict[tuple[int, int], str] = field(default_factory=dict)
    deliveries: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, consumer: ConsumerProcess) -> None:
        expected: dict[int, int | None] = {}  # partition -> next offset within the current assignment
        for event in consumer.events():
            kind = event[0]
            if kind == "A":
                expected[int(event[1])] = None
            elif kind == "V":
                expected.pop(int(event[1]), None)
            elif kind == "R":
                partition, offset, value = int(event[1]), int(event[2]), event[3]
                self.deliveries += 1
                if partition not in expected:
                    self.problems.append(f"{consumer.name}: record {partition}@{offset} from an unassigned partition")
                nxt = expected.get(partition)
                if nxt is not None and offset != nxt:
                    self.problems.append(f"{consumer.name}: partition {partition} went from offset {nxt - 1}"
                                         f" to {offset} within one assignment")
                expected[partition] = offset + 1
                seen = self.records.setdefault((partition, offset), value)
                if seen != value:
                    self.problems.append(f"offset {partition}@{offset} read as {seen!r} and as {value!r}")

    def missing(self, log_end: dict[int, int]) -> list[tuple[int, int]]:
        return [(p, o) for p, end in log_end.items() for o in range(end) if (p, o) not in self.records]


# -- the consumer process itself ------------------------------------------------------------
def keep_running(args) -> bool:
    """Until the stop file appears -- or the test that started us is gone (no orphans)."""
    return not os.path.exists(args.stop_file) and os.getppid() == args.parent_pid


class EventLog:
    """Buffered event lines, flushed after every poll and rebalance so that tests can follow."""

    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1 << 16)

    def write(self, line: str) -> None:
        self.file.write(line + "\n")

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.write("CLOSED\n")
        self.file.close()


def _consume_kafka_python(args, events: EventLog) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            for tp in revoked:
                events.write(f"V {tp.partition}")
            events.flush()

        def on_partitions_assigned(self, assigned):
            for tp in assigned:
                events.write(f"A {tp.partition}")
            events.flush()

    assignors = {"range": [RangePartitionAssignor, RoundRobinPartitionAssignor],
                 "roundrobin": [RoundRobinPartitionAssignor],
                 "cooperative-sticky": [CooperativeStickyAssignor]}[args.assignor]
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, client_id="kafka-python",
                             auto_offset_reset="earliest", enable_auto_commit=True, auto_commit_interval_ms=1000,
                             partition_assignment_strategy=assignors, group_instance_id=args.instance_id,
                             session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=1000,
                             fetch_max_wait_ms=200, max_poll_records=2000)
    consumer.subscribe([args.topic], listener=Listener())
    while keep_running(args):
        for tp, records in consumer.poll(timeout_ms=200).items():
            for r in records:
                events.write(f"R {tp.partition} {r.offset} {r.value.decode()}")
        events.flush()
    consumer.close()


def _consume_confluent(args, events: EventLog) -> None:
    from confluent_kafka import Consumer

    def on_assign(consumer, partitions):
        for tp in partitions:
            events.write(f"A {tp.partition}")
        events.flush()

    def on_revoke(consumer, partitions):
        for tp in partitions:
            events.write(f"V {tp.partition}")
        events.flush()

    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": "confluent-kafka",
              "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
              "session.timeout.ms": args.session_timeout_ms, "heartbeat.interval.ms": 1000,
              "fetch.wait.max.ms": 200, "partition.assignment.strategy": args.assignor}
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while keep_running(args):
        for msg in consumer.consume(1000, timeout=0.2):
            if msg.error() is not None:
                events.write(f"E {msg.error()}")
                continue
            events.write(f"R {msg.partition()} {msg.offset()} {msg.value().decode()}")
        events.flush()
    consumer.close()


def _consume_aiokafka(args, events: EventLog) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            for tp in revoked:
                events.write(f"V {tp.partition}")
            events.flush()

        async def on_partitions_assigned(self, assigned):
            for tp in assigned:
                events.write(f"A {tp.partition}")
            events.flush()

    async def run() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, client_id="aiokafka",
                                    auto_offset_reset="earliest", enable_auto_commit=True,
                                    auto_commit_interval_ms=1000, session_timeout_ms=args.session_timeout_ms,
                                    heartbeat_interval_ms=1000, fetch_max_wait_ms=200,
                                    partition_assignment_strategy={
                                        "range": (RangePartitionAssignor, RoundRobinPartitionAssignor),
                                        "roundrobin": (RoundRobinPartitionAssignor,)}[args.assignor])
        consumer.subscribe([args.topic], listener=Listener())
        await consumer.start()
        try:
            while keep_running(args):
                for tp, records in (await consumer.getmany(timeout_ms=200, max_records=2000)).items():
                    for r in records:
                        events.write(f"R {tp.partition} {r.offset} {r.value.decode()}")
                events.flush()
        finally:
            await consumer.stop()

    asyncio.run(run())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    consume = sub.add_parser("consume")
    consume.add_argument("--client", choices=["kafka-python", "confluent", "aiokafka"], required=True)
    consume.add_argument("--bootstrap", required=True)
    consume.add_argument("--group", required=True)
    consume.add_argument("--topic", required=True)
    consume.add_argument("--out", required=True)
    consume.add_argument("--stop-file", required=True)
    consume.add_argument("--assignor", default="range")
    consume.add_argument("--instance-id", default=None)
    consume.add_argument("--session-timeout-ms", type=int, default=10_000)
    args = parser.parse_args(argv)
    args.parent_pid = os.getppid()
    events = EventLog(args.out)
    runner = {"kafka-python": _consume_kafka_python, "confluent": _consume_confluent,
              "aiokafka": _consume_aiokafka}[args.client]
    runner(args, events)
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
