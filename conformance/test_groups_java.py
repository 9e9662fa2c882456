"""Consumer groups with the Java client (kafka-clients 3.9.1), alone and mixed with librdkafka
and kafka-python in one group, against a real kafkapy process.

- GroupAdminCheck: the AdminClient's consumer-group calls answer as Kafka's do.
- Static membership: a Java consumer with group.instance.id restarting within its session
  timeout causes no rebalance (the other member sees nothing, the generation stays).
- The mixed group: Java (range, and cooperative-sticky-capable), confluent-kafka and
  kafka-python consumers read a 12-partition topic while 200,000 keyed records are produced
  and members join and leave; every record is read at least once, in order within each
  partition and assignment, committed offsets never go backwards, and at the end they equal
  the log end offsets.
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

import pytest

from conformance.java.test_java_clients import JVM_OPTIONS, JavaPrograms, java_programs  # noqa: F401
from conformance.test_groups_tools import (
    GROUP_BROKER_OVERRIDES,
    CommitMonitor,
    ConsumerProcess,
    Consumption,
    create_topic,
    end_offsets,
    produce,
    python_consumer,
    wait_until,
)

MIXED_PARTITIONS = 12
MIXED_RECORDS = 200_000
MIXED_RATE = 10_000  # records/s: production spans ~20 s, long enough for members to come and go


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return dict(GROUP_BROKER_OVERRIDES)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def java_consumer(programs: JavaPrograms, bootstrap: str, group: str, topic: str, work: Path, name: str,
                  assignors: str = "range", instance_id: str | None = None,
                  session_timeout_ms: int = 10_000) -> ConsumerProcess:
    out = work / f"{name}.events"
    stop_file = work / f"{name}.stop"
    argv = [programs.java, *JVM_OPTIONS, "-cp", f"{programs.classes_dir}{os.pathsep}{programs.classpath}",
            "GroupConsumer", bootstrap, group, topic, str(out), str(stop_file), assignors,
            instance_id or "-", str(session_timeout_ms)]
    return ConsumerProcess(name, argv, out, stop_file)


def stop_all(consumers: list[ConsumerProcess]) -> None:
    for c in consumers:
        if c.proc is not None and c.proc.poll() is None:
            c.stop()
    for c in consumers:
        if c.proc is not None:
            c.wait(40)


def test_java_admin_consumer_group_calls(broker, java_programs: JavaPrograms) -> None:
    java_programs.run("GroupAdminCheck", broker.bootstrap, unique("java-groups"), timeout=90)


def test_java_static_member_restart_causes_no_rebalance(broker, java_programs: JavaPrograms,
                                                        tmp_path: Path) -> None:
    topic, group = unique("jstatic-topic"), unique("jstatic-group")
    create_topic(broker.bootstrap, topic, 4)
    watcher = java_consumer(java_programs, broker.bootstrap, group, topic, tmp_path, "watcher").start()
    static = java_consumer(java_programs, broker.bootstrap, group, topic, tmp_path, "static",
                           instance_id="java-static-1", session_timeout_ms=30_000).start()
    restarted = None
    try:
        wait_until(lambda: watcher.assigned() and static.assigned()
                   and len(watcher.assigned() | static.assigned()) == 4, 60, "a stable two-member group")
        produce(broker.bootstrap, topic, 400)
        time.sleep(2)
        before = [e for e in watcher.events() if e[0] != "R"]
        owned = static.assigned()
        static.stop()  # a static member's close() sends no LeaveGroup
        static.wait(30)
        restarted = java_consumer(java_programs, broker.bootstrap, group, topic, tmp_path, "static-again",
                                  instance_id="java-static-1", session_timeout_ms=30_000).start()
        def generations() -> list[str]:
            return [e[1] for e in restarted.events() if e[0] == "G" and e[1] != "-1"]
        wait_until(lambda: restarted.assigned() and generations(), 60, "the restarted static member's assignment")
        assert restarted.assigned() == owned
        generations = generations()
        watcher_generations = [e[1] for e in before if e[0] == "G"]
        assert generations and generations[0] == watcher_generations[-1], (generations, watcher_generations)
        time.sleep(3)
        assert [e for e in watcher.events() if e[0] != "R"] == before, "the other member saw a rebalance"
    finally:
        stop_all([c for c in (watcher, static, restarted) if c is not None])


def test_mixed_clients_group_with_members_coming_and_going(broker, java_programs: JavaPrograms,
                                                           tmp_path: Path) -> None:
    bs = broker.bootstrap
    topic, group = unique("mixed-topic"), unique("mixed-group")
    create_topic(bs, topic, MIXED_PARTITIONS)
    java_range = java_consumer(java_programs, bs, group, topic, tmp_path, "java-range", "range")
    java_coop = java_consumer(java_programs, bs, group, topic, tmp_path, "java-coop", "cooperative-sticky,range")
    kp1 = python_consumer("kafka-python", bs, group, topic, tmp_path, name="kafka-python-1")
    kp2 = python_consumer("kafka-python", bs, group, topic, tmp_path, name="kafka-python-2")
    ck = python_consumer("confluent", bs, group, topic, tmp_path, name="confluent")
    everyone = [java_range, java_coop, kp1, kp2, ck]
    monitor = CommitMonitor(bs, group, topic, MIXED_PARTITIONS)
    producer_error: list[BaseException] = []

    def produce_all() -> None:
        try:
            produce(bs, topic, MIXED_RECORDS, rate_per_s=MIXED_RATE)
        except BaseException as exc:  # reported by the main thread
            producer_error.append(exc)

    started = time.monotonic()
    try:
        java_range.start()
        kp1.start()
        wait_until(lambda: len(java_range.assigned() | kp1.assigned()) == MIXED_PARTITIONS, 60,
                   "the first two members to own every partition")
        monitor.start()
        producer = threading.Thread(target=produce_all, daemon=True)
        producer.start()
        # members come and go while records flow
        time.sleep(3)
        ck.start()
        time.sleep(3)
        java_coop.start()
        time.sleep(4)
        kp1.stop()
        kp1.wait(40)
        time.sleep(2)
        kp2.start()
        time.sleep(3)
        java_range.stop()
        java_range.wait(40)
        producer.join(120)
        assert not producer.is_alive(), "producer did not finish"
        assert not producer_error, producer_error
        ends = end_offsets(bs, topic, MIXED_PARTITIONS)
        assert sum(ends.values()) == MIXED_RECORDS
        wait_until(lambda: monitor.latest() == ends, 90, "the group's committed offsets to reach the log end")
    finally:
        stop_all(everyone)
        monitor.halt.set()
        monitor.join(10)
    elapsed = time.monotonic() - started

    seen = Consumption()
    for c in everyone:
        seen.add(c)
        assert c.events() and c.events()[-1] == ["CLOSED"], f"{c.name} did not close cleanly:\n{c.tail()}"
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == [], f"{len(seen.missing(ends))} records never consumed"
    assert not monitor.backwards(), monitor.backwards()[:10]
    # after every member closed (committing), the committed offsets are still the log end
    from conformance.test_groups_tools import committed_offsets

    assert committed_offsets(bs, group, topic, MIXED_PARTITIONS) == ends
    per_member = {c.name: sum(1 for e in c.events() if e[0] == "R") for c in everyone}
    print(f"mixed group: {MIXED_RECORDS} records, {seen.deliveries} deliveries "
          f"({seen.deliveries - MIXED_RECORDS} re-reads), {elapsed:.1f} s, per member {per_member}")
    assert all(per_member.values()), per_member


def test_cooperative_group_java_and_librdkafka(broker, java_programs: JavaPrograms, tmp_path: Path) -> None:
    """Incremental (cooperative-sticky) rebalancing across Java and librdkafka members."""
    bs = broker.bootstrap
    topic, group = unique("jcoop-topic"), unique("jcoop-group")
    create_topic(bs, topic, 6)
    first = java_consumer(java_programs, bs, group, topic, tmp_path, "java-coop-1", "cooperative-sticky").start()
    second = python_consumer("confluent", bs, group, topic, tmp_path, name="confluent-coop",
                             assignor="cooperative-sticky")
    third = java_consumer(java_programs, bs, group, topic, tmp_path, "java-coop-2", "cooperative-sticky")
    everyone = [first, second, third]
    try:
        wait_until(lambda: len(first.assigned()) == 6, 60, "the first member to own every partition")
        producer = threading.Thread(target=produce, args=(bs, topic, 20_000), kwargs={"rate_per_s": 5_000},
                                    daemon=True)
        producer.start()
        second.start()
        wait_until(lambda: second.assigned(), 60, "the librdkafka member's first partitions")
        third.start()
        wait_until(lambda: third.assigned() and len(first.assigned() | second.assigned() | third.assigned()) == 6,
                   60, "three members sharing the partitions")
        events = [e for e in first.events() if e[0] in "AV"]
        # incremental: the first member only gave partitions away, none was revoked and re-assigned
        assert len([e for e in events if e[0] == "A"]) == 6, events
        assert len([e for e in events if e[0] == "V"]) == 6 - len(first.assigned()), events
        second.stop()
        second.wait(40)
        producer.join(60)
        ends = end_offsets(bs, topic, 6)
        from conformance.test_groups_tools import committed_offsets

        wait_until(lambda: committed_offsets(bs, group, topic, 6) == ends, 60, "committed offsets at the log end")
    finally:
        stop_all(everyone)
    seen = Consumption()
    for c in everyone:
        seen.add(c)
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == []
