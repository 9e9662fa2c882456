"""KIP-848 consumer groups (group.protocol=consumer) against a real kafkapy process: a quick smoke test.

Three confluent-kafka consumers join one group on a 6-partition topic one after the other, one
leaves, and together they read every record; from what each consumer's rebalance callbacks report
(assigned at the start of on_assign, given back at the start of on_revoke/on_lost) no partition is
ever owned by two members at once, and the final commits equal the log end. The long mixed-client
campaigns are in test_consumer_groups_*.py.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

PARTITIONS = 6
RECORDS = 3000

pytestmark = pytest.mark.timeout(90) if hasattr(pytest.mark, "timeout") else []


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "group.consumer.heartbeat.interval.ms": "300",
        "group.consumer.min.heartbeat.interval.ms": "300",
    }


class Member(threading.Thread):
    """One consumer polling in its own thread, logging ownership changes and records."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, events: list, lock: threading.Lock):
        super().__init__(name=name, daemon=True)
        self.events, self.lock = events, lock
        self.seen: set[tuple[int, int]] = set()
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 200,
            "client.id": name})
        self.topic = topic

    def _log(self, kind: str, partitions) -> None:
        now = time.monotonic()
        with self.lock:
            self.events.extend((now, self.name, kind, p.partition) for p in partitions)

    def run(self) -> None:
        try:
            self.consumer.subscribe([self.topic], on_assign=lambda c, ps: self._log("A", ps),
                                    on_revoke=lambda c, ps: self._log("V", ps),
                                    on_lost=lambda c, ps: self._log("V", ps))
            while not self.halt.is_set():
                msg = self.consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    self.seen.add((msg.partition(), msg.offset()))
            self.consumer.close()  # commits what was read, then leaves (revoking everything)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def check_exclusive(events: list) -> None:
    """No partition is between an A and its V in two members at once."""
    owner: dict[int, str] = {}
    for _, member, kind, partition in sorted(events):
        if kind == "A":
            assert partition not in owner, f"partition {partition} given to {member} while {owner[partition]} owns it"
            owner[partition] = member
        elif owner.get(partition) == member:
            del owner[partition]


def test_consumer_protocol_members_split_partitions_without_overlap(broker):
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"kip848-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=str(i % 97).encode(), value=str(i).encode())
    assert producer.flush(15) == 0

    events: list = []
    lock = threading.Lock()
    members = [Member(f"m{i}", broker.bootstrap, group, topic, events, lock) for i in range(3)]
    try:
        members[0].start()
        deadline = time.monotonic() + 20
        while not members[0].seen and time.monotonic() < deadline:
            time.sleep(0.05)
        members[1].start()
        time.sleep(1.5)
        members[2].start()
        time.sleep(1.5)
        members[1].stop()  # leaves mid-way: its partitions move to the others
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if len(set().union(*(m.seen for m in members))) >= RECORDS:
                break
            time.sleep(0.1)
    finally:
        for m in members:
            if m.is_alive():
                m.stop()
    for m in members:
        assert m.error is None, f"{m.name}: {m.error!r}"
    seen = set().union(*(m.seen for m in members))
    assert len(seen) == RECORDS, f"read {len(seen)} of {RECORDS} records"
    # every member owned something at some point, and ownership never overlapped
    assert {e[1] for e in events if e[2] == "A"} == {"m0", "m1", "m2"}
    check_exclusive(events)

    checker = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        ends = [checker.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        checker.close()
    assert [c.offset for c in committed] == ends
