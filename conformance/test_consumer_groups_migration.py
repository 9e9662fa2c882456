"""Online migration of a live group between the classic and the consumer protocol (Kafka 4.0, KIP-848),
with real clients against a real kafkapy process.

A group of three classic consumers (confluent-kafka with group.protocol=classic, and kafka-python)
consumes a 6-partition topic while records are produced. They are replaced one by one with
consumer-protocol confluent-kafka consumers: the first one converts the classic group into a
consumer group whose classic members keep being served (JoinGroup/SyncGroup/Heartbeat answered
from the consumer group's server-side assignment). Then the reverse: classic consumers replace the
consumer-protocol ones, and when the last of those leaves the group is a classic group again.
Throughout: every record is read, no partition is owned by two members at once (from the
assign/revoke times each consumer reports), committed offsets never go backwards, and at the end
they equal the log end offsets.

Run as a script, this file is also the kafka-python consumer process of the test (the event
lines of conformance/consumer_group_clients.py, with wall-clock times):

    python conformance/test_consumer_groups_migration.py --bootstrap H:P --group G --topic T \\
        --out FILE --stop-file F --client-id NAME
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pytest  # noqa: E402

from conformance.java.test_java_clients import java_programs  # noqa: E402,F401  (fixture)

from conformance.consumer_group_clients import (  # noqa: E402
    CONSUMER_PROTOCOL_OVERRIDES,
    confluent_member,
    describe_consumer_group,
    java_member,
    now_us,
    ownership_overlaps,
    stop_members,
)
from conformance.test_groups_tools import (  # noqa: E402
    ConsumerProcess,
    Consumption,
    EventLog,
    committed_offsets,
    create_topic,
    end_offsets,
    keep_running,
    produce,
    wait_until,
)

PARTITIONS = 6
RECORDS = 30_000
RATE = 1_500  # records/s: production spans the whole migration (~20 s)
GROUP_ID_NOT_FOUND = 69


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return dict(CONSUMER_PROTOCOL_OVERRIDES)


def kafka_python_member(bootstrap: str, group: str, topic: str, work: Path, name: str) -> ConsumerProcess:
    out, stop_file = work / f"{name}.events", work / f"{name}.stop"
    argv = [sys.executable, str(Path(__file__).resolve()), "--bootstrap", bootstrap, "--group", group,
            "--topic", topic, "--out", str(out), "--stop-file", str(stop_file), "--client-id", name]
    return ConsumerProcess(name, argv, out, stop_file)


class CommitSampler(threading.Thread):
    """The group's committed offsets (OffsetFetch through librdkafka), sampled until halted."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        super().__init__(daemon=True)
        self.args = (bootstrap, group, topic, PARTITIONS)
        self.samples: list[dict[int, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.3):
            try:
                self.samples.append(committed_offsets(*self.args))
            except Exception:  # noqa: BLE001 - a failed sample (coordinator moving) is skipped
                continue

    def backwards(self) -> list[str]:
        best: dict[int, int] = {}
        found = []
        for i, sample in enumerate(self.samples):
            for partition, offset in sample.items():
                if 0 <= offset < best.get(partition, -1):
                    found.append(f"sample {i}: partition {partition} went back from {best[partition]} to {offset}")
                best[partition] = max(best.get(partition, -1), offset)
        return found


def settled(members: list[ConsumerProcess]) -> bool:
    """Every partition owned by exactly one running member, and every member owns one."""
    owned = [m.assigned() for m in members]
    return all(owned) and sum(map(len, owned)) == PARTITIONS and len(set().union(*owned)) == PARTITIONS


def group_type(bootstrap: str, group: str) -> str:
    """'consumer' if ConsumerGroupDescribe knows the group, 'classic' if it answers GROUP_ID_NOT_FOUND."""
    described = describe_consumer_group(bootstrap, group)
    if described.error_code == 0:
        return "consumer"
    assert described.error_code == GROUP_ID_NOT_FOUND, (described.error_code, described.error_message)
    return "classic"


def test_group_migrates_from_classic_to_consumer_and_back(broker, tmp_path: Path) -> None:
    bs = broker.bootstrap
    topic, group = f"migrate-{uuid.uuid4().hex[:8]}", f"migrate-group-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic, PARTITIONS)
    classic = [confluent_member(bs, group, topic, tmp_path, "classic-ck-1", protocol="classic"),
               kafka_python_member(bs, group, topic, tmp_path, "classic-kp-1"),
               confluent_member(bs, group, topic, tmp_path, "classic-ck-2", protocol="classic")]
    modern = [confluent_member(bs, group, topic, tmp_path, f"consumer-ck-{i}") for i in range(1, 4)]
    back = [confluent_member(bs, group, topic, tmp_path, "classic-ck-3", protocol="classic"),
            kafka_python_member(bs, group, topic, tmp_path, "classic-kp-2"),
            confluent_member(bs, group, topic, tmp_path, "classic-ck-4", protocol="classic")]
    everyone = classic + modern + back
    sampler = CommitSampler(bs, group, topic)
    producer_error: list[BaseException] = []
    types: list[str] = []

    def produce_all() -> None:
        try:
            produce(bs, topic, RECORDS, rate_per_s=RATE)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            producer_error.append(exc)

    def replace(old: ConsumerProcess, new: ConsumerProcess, running: list[ConsumerProcess]) -> None:
        new.start()
        running.append(new)
        wait_until(lambda: new.assigned(), 30, f"{new.name} to get partitions")
        old.stop()
        old.wait(30)
        running.remove(old)
        wait_until(lambda: settled(running), 30, f"the group to settle after {old.name} left")

    started = time.monotonic()
    producer = threading.Thread(target=produce_all, daemon=True)
    running: list[ConsumerProcess] = []
    try:
        for member in classic:
            member.start()
            running.append(member)
        wait_until(lambda: settled(running), 40, "the classic group to share every partition")
        types.append(group_type(bs, group))
        sampler.start()
        producer.start()
        for old, new in zip(classic, modern):  # upgrade: the first newcomer converts the group
            replace(old, new, running)
            types.append(group_type(bs, group))
        for old, new in zip(modern, back):  # downgrade: the last consumer-protocol member's exit converts it back
            replace(old, new, running)
            types.append(group_type(bs, group))
        producer.join(60)
        assert not producer.is_alive(), "producer did not finish"
        assert not producer_error, producer_error
        ends = end_offsets(bs, topic, PARTITIONS)
        assert sum(ends.values()) == RECORDS
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == ends, 30,
                   "the group's commits to reach the log end")
    finally:
        stop_members(everyone, timeout=30)
        sampler.halt.set()
        if sampler.is_alive():
            sampler.join(10)
    elapsed = time.monotonic() - started

    assert types == ["classic", "consumer", "consumer", "consumer", "consumer", "consumer", "classic"], types
    seen = Consumption()
    for member in everyone:
        seen.add(member)
        assert member.events() and member.events()[-1] == ["CLOSED"], f"{member.name}:\n{member.tail()}"
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == [], f"{len(seen.missing(ends))} records never consumed"
    overlaps = ownership_overlaps(everyone)
    assert not overlaps, overlaps[:10]
    assert not sampler.backwards(), sampler.backwards()[:10]
    assert committed_offsets(bs, group, topic, PARTITIONS) == ends
    print(f"classic -> consumer -> classic: {RECORDS} records, {seen.deliveries} deliveries, {elapsed:.1f} s")


def test_cooperative_java_classic_members_inside_a_consumer_group(broker, java_programs, tmp_path: Path) -> None:
    """kafka-clients 3.9.1 classic consumers with the cooperative-sticky assignor (they report what
    they own when they rejoin, so the consumer group revokes before it reassigns) share the group
    with a consumer-protocol member while it is upgraded, then downgraded when that member leaves."""
    bs = broker.bootstrap
    topic, group = f"migrate-coop-{uuid.uuid4().hex[:8]}", f"migrate-coop-group-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic, PARTITIONS)
    java = [java_member(java_programs, bs, group, topic, tmp_path, f"java-classic-{i}", protocol="classic",
                        assignor="cooperative-sticky") for i in (1, 2)]
    modern = confluent_member(bs, group, topic, tmp_path, "consumer-ck")
    everyone = [*java, modern]
    sampler = CommitSampler(bs, group, topic)
    types: list[str] = []
    try:
        for member in java:
            member.start()
        wait_until(lambda: settled(java), 60, "the classic Java members to share every partition")
        types.append(group_type(bs, group))
        sampler.start()
        produce(bs, topic, RECORDS // 3)
        modern.start()
        wait_until(lambda: settled(everyone), 40, "the consumer-protocol member to get its share")
        types.append(group_type(bs, group))
        produce(bs, topic, RECORDS // 3, start=RECORDS // 3)
        modern.stop()
        modern.wait(30)
        wait_until(lambda: settled(java), 40, "the classic members to settle after the downgrade")
        types.append(group_type(bs, group))
        produce(bs, topic, RECORDS // 3, start=2 * (RECORDS // 3))
        ends = end_offsets(bs, topic, PARTITIONS)
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == ends, 30,
                   "the group's commits to reach the log end")
    finally:
        stop_members(everyone, timeout=30)
        sampler.halt.set()
        if sampler.is_alive():
            sampler.join(10)
    assert types == ["classic", "consumer", "classic"], types
    seen = Consumption()
    for member in everyone:
        seen.add(member)
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == [], f"{len(seen.missing(ends))} records never consumed"
    overlaps = ownership_overlaps(everyone)
    assert not overlaps, overlaps[:10]
    assert not sampler.backwards(), sampler.backwards()[:10]


# -- the kafka-python consumer process ------------------------------------------------------------
def _consume_kafka_python(args, events: EventLog) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            t = now_us()
            for tp in revoked:
                events.write(f"V {tp.partition} {t}")
            events.flush()

        def on_partitions_assigned(self, assigned):
            t = now_us()
            for tp in assigned:
                events.write(f"A {tp.partition} {t}")
            events.flush()

    events.write(f"S {now_us()}")
    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
                             auto_offset_reset="earliest", enable_auto_commit=True, auto_commit_interval_ms=1000,
                             partition_assignment_strategy=[RangePartitionAssignor], session_timeout_ms=10_000,
                             heartbeat_interval_ms=1000, fetch_max_wait_ms=200, max_poll_records=2000)
    consumer.subscribe([args.topic], listener=Listener())
    while keep_running(args):
        for tp, records in consumer.poll(timeout_ms=200).items():
            for r in records:
                events.write(f"R {tp.partition} {r.offset} {r.value.decode()}")
        events.flush()
    consumer.close()
    events.write(f"C {now_us()}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--client-id", required=True)
    args = parser.parse_args(argv)
    args.parent_pid = os.getppid()
    events = EventLog(args.out)
    _consume_kafka_python(args, events)
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
