"""KIP-848 consumer groups (group.protocol=consumer) with real clients against a real kafkapy process.

- The mixed group (the issue's main must-show): Java consumers (kafka-clients 3.9.1) and
  confluent-kafka consumers (librdkafka 2.16), all with group.protocol=consumer, share one group
  on a 12-partition topic while 200,000 keyed records are produced and members join and leave.
  Every record is read (at least once, in order within each assignment), no partition is owned
  by two members at once (from the assign/revoke times each consumer reports), committed offsets
  never go backwards, and at the end they equal the log end offsets.
- Classic -> consumer -> classic: a group consumed with the classic protocol (Java and
  confluent-kafka) stops; consumer-protocol members take over the same group id and resume
  exactly at the committed offsets (nothing committed is read again, nothing is skipped); when
  they stop, a classic member takes the group back the same way.
- Online upgrade and downgrade: a classic group (Java and confluent-kafka members) is rolled to
  consumer-protocol members one by one while records flow, never without a member, and a
  consumer group back to classic members the same way: in between, the consumer group holds
  members of both protocols (ConsumerGroupDescribe v1 MemberType 0 and 1); every record read,
  no partition owned twice, commits never back.
- A regex subscription: librdkafka sends `^prefix-.*` as SubscribedTopicRegex and the
  coordinator resolves it, also to a topic created later, never to a non-matching one.
- The server assignor the clients ask for (group.remote.assignor=range) is the one used.

Broker overrides (conformance/consumer_group_clients.py CONSUMER_PROTOCOL_OVERRIDES), for speed:
group.consumer.heartbeat.interval.ms=1000 (min 500), group.consumer.session.timeout.ms=10000
(min 1000), group.coordinator.rebalance.protocols=classic,consumer, and the single-broker
__consumer_offsets settings of the classic group tests.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from conformance.consumer_group_clients import (
    CONSUMER_PROTOCOL_OVERRIDES,
    confluent_member,
    describe_consumer_group,
    first_offsets,
    java_member,
    ownership_overlaps,
    settled,
    stop_members,
    unique,
)
from conformance.java.test_java_clients import JavaPrograms, java_programs  # noqa: F401  (fixture)
from conformance.test_groups_tools import CommitMonitor
from conformance.test_groups_tools import (
    ConsumerProcess,
    Consumption,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    wait_until,
)

MIXED_PARTITIONS = 12
MIXED_RECORDS = 200_000
MIXED_RATE = 10_000  # records/s: production spans ~20 s, long enough for members to come and go


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return dict(CONSUMER_PROTOCOL_OVERRIDES)


def test_mixed_java_and_librdkafka_consumer_protocol_group(broker, java_programs: JavaPrograms,
                                                           tmp_path: Path) -> None:
    bs = broker.bootstrap
    topic, group = unique("kip848-mixed-topic"), unique("kip848-mixed-group")
    create_topic(bs, topic, MIXED_PARTITIONS)
    java1 = java_member(java_programs, bs, group, topic, tmp_path, "java-1")
    java2 = java_member(java_programs, bs, group, topic, tmp_path, "java-2", assignor="uniform")
    ck1 = confluent_member(bs, group, topic, tmp_path, "confluent-1")
    ck2 = confluent_member(bs, group, topic, tmp_path, "confluent-2", assignor="uniform")
    ck3 = confluent_member(bs, group, topic, tmp_path, "confluent-3")
    everyone = [java1, java2, ck1, ck2, ck3]
    monitor = CommitMonitor(bs, group, topic, MIXED_PARTITIONS)
    producer_error: list[BaseException] = []

    def produce_all() -> None:
        try:
            produce(bs, topic, MIXED_RECORDS, rate_per_s=MIXED_RATE)
        except BaseException as exc:  # reported by the main thread
            producer_error.append(exc)

    started = time.monotonic()
    try:
        java1.start()
        ck1.start()
        wait_until(lambda: settled([java1, ck1], MIXED_PARTITIONS), 60,
                   "the first two members to share every partition")
        monitor.start()
        producer = threading.Thread(target=produce_all, daemon=True)
        producer.start()
        # members come and go while records flow
        time.sleep(3)
        ck2.start()
        time.sleep(3)
        java2.start()
        time.sleep(4)
        ck1.stop()
        ck1.wait(40)
        time.sleep(2)
        ck3.start()
        time.sleep(3)
        java1.stop()
        java1.wait(40)
        producer.join(120)
        assert not producer.is_alive(), "producer did not finish"
        assert not producer_error, producer_error
        ends = end_offsets(bs, topic, MIXED_PARTITIONS)
        assert sum(ends.values()) == MIXED_RECORDS
        wait_until(lambda: monitor.latest() == ends, 90, "the group's committed offsets to reach the log end")
        remaining = [java2, ck2, ck3]
        wait_until(lambda: settled(remaining, MIXED_PARTITIONS), 30, "the three remaining members to settle")
        described = describe_consumer_group(bs, group)
        assert described.error_code == 0, (described.error_code, described.error_message)
        assert described.group_state == "Stable", described.group_state
        assert sorted(m.client_id for m in described.members) == ["confluent-2", "confluent-3", "java-2"]
        described_owned = sorted(p for m in described.members for t in m.assignment.topic_partitions
                                 for p in t.partitions)
        assert described_owned == list(range(MIXED_PARTITIONS)), described_owned
    finally:
        stop_members(everyone)
        monitor.halt.set()
        monitor.join(10)
    elapsed = time.monotonic() - started

    seen = Consumption()
    for c in everyone:
        seen.add(c)
        assert c.events() and c.events()[-1] == ["CLOSED"], f"{c.name} did not close cleanly:\n{c.tail()}"
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == [], f"{len(seen.missing(ends))} records never consumed"
    overlaps = ownership_overlaps(everyone)
    assert not overlaps, overlaps[:10]
    assert not monitor.backwards(), monitor.backwards()[:10]
    assert committed_offsets(bs, group, topic, MIXED_PARTITIONS) == ends
    described = describe_consumer_group(bs, group)
    assert (described.error_code, described.group_state, described.members) == (0, "Empty", [])
    per_member = {c.name: sum(1 for e in c.events() if e[0] == "R") for c in everyone}
    print(f"consumer-protocol mixed group: {MIXED_RECORDS} records, {seen.deliveries} deliveries "
          f"({seen.deliveries - MIXED_RECORDS} re-reads), {elapsed:.1f} s, per member {per_member}")
    assert all(per_member.values()), per_member


def resumed_at(members: list[ConsumerProcess]) -> dict[int, int]:
    """The lowest offset any of `members` read first from each partition."""
    resumed: dict[int, int] = {}
    for member in members:
        for partition, offset in first_offsets(member).items():
            resumed[partition] = min(offset, resumed.get(partition, offset))
    return resumed


def test_group_taken_over_from_classic_to_consumer_protocol_and_back(broker, java_programs: JavaPrograms,
                                                                     tmp_path: Path) -> None:
    """An empty classic group is replaced by a consumer group when a consumer-protocol member
    joins, and an empty consumer group by a classic group when a classic member joins (Kafka
    4.0); the committed offsets stay, so each generation of members resumes exactly there."""
    bs = broker.bootstrap
    partitions, batch = 6, 3_000
    topic, group = unique("kip848-upgrade-topic"), unique("kip848-upgrade-group")
    create_topic(bs, topic, partitions)
    classic = [java_member(java_programs, bs, group, topic, tmp_path, "java-classic", protocol="classic"),
               confluent_member(bs, group, topic, tmp_path, "confluent-classic", protocol="classic")]
    modern = [java_member(java_programs, bs, group, topic, tmp_path, "java-consumer"),
              confluent_member(bs, group, topic, tmp_path, "confluent-consumer")]
    back = [confluent_member(bs, group, topic, tmp_path, "confluent-classic-again", protocol="classic",
                             assignor="cooperative-sticky")]
    phases = [classic, modern, back]
    handed_over: list[dict[int, int]] = []
    produced = 0
    try:
        for number, members in enumerate(phases):
            produce(bs, topic, batch, start=produced)
            produced += batch
            if number:
                handed_over.append(committed_offsets(bs, group, topic, partitions))
            for member in members:
                member.start()
            ends = end_offsets(bs, topic, partitions)
            wait_until(lambda: settled(members, partitions) and committed_offsets(bs, group, topic, partitions)
                       == ends, 90, f"phase {number + 1}'s members to commit up to the log end")
            if members is modern:
                described = describe_consumer_group(bs, group)
                assert described.error_code == 0, (described.error_code, described.error_message)
                assert sorted(m.client_id for m in described.members) == ["confluent-consumer", "java-consumer"]
            # records the members may read but not commit before they close
            produce(bs, topic, 300, start=produced)
            produced += 300
            stop_members(members)
        described = describe_consumer_group(bs, group)
        # the last generation was classic: to ConsumerGroupDescribe the group is not a consumer group
        assert described.error_code == 69, (described.error_code, described.error_message)  # GROUP_ID_NOT_FOUND
    finally:
        stop_members(classic + modern + back)

    everyone = classic + modern + back
    for member in everyone:
        assert member.events() and member.events()[-1] == ["CLOSED"], f"{member.name}:\n{member.tail()}"
    seen = Consumption()
    for member in everyone:
        seen.add(member)
    assert not seen.problems, seen.problems[:10]
    last_committed = committed_offsets(bs, group, topic, partitions)
    assert seen.missing(last_committed) == []
    # each generation starts exactly where the previous one committed: no committed record is
    # read again, none is skipped
    for members, committed in zip(phases[1:], handed_over):
        assert resumed_at(members) == committed, (members[0].name, resumed_at(members), committed)
    assert all(last_committed[p] >= handed_over[-1][p] for p in range(partitions)), (last_committed, handed_over)
    assert not ownership_overlaps(modern)


@pytest.mark.parametrize("old, new", [("classic", "consumer"), ("consumer", "classic")],
                         ids=["upgrade", "downgrade"])
def test_group_rolled_between_protocols_online(broker, java_programs: JavaPrograms, tmp_path: Path,
                                               old: str, new: str) -> None:
    """A group whose members are replaced one by one by members of the other protocol, with
    records flowing and a member present at all times. Kafka 4.0 (group.consumer.migration.policy
    bidirectional): a classic group becomes a consumer group when the first consumer-protocol
    member joins and holds its classic members until they leave; a consumer group becomes a
    classic group again when its last consumer-protocol member leaves."""
    bs = broker.bootstrap
    partitions, records = 6, 40_000
    topic, group = unique(f"kip848-{new}-online-topic"), unique(f"kip848-{new}-online-group")
    create_topic(bs, topic, partitions)
    java_old = java_member(java_programs, bs, group, topic, tmp_path, f"java-{old}", protocol=old)
    ck_old = confluent_member(bs, group, topic, tmp_path, f"confluent-{old}", protocol=old)
    java_new = java_member(java_programs, bs, group, topic, tmp_path, f"java-{new}", protocol=new)
    ck_new = confluent_member(bs, group, topic, tmp_path, f"confluent-{new}", protocol=new)
    everyone = [java_old, ck_old, java_new, ck_new]
    member_type = {"classic": 0, "consumer": 1}
    monitor = CommitMonitor(bs, group, topic, partitions)
    producer_error: list[BaseException] = []

    def produce_all() -> None:
        try:
            produce(bs, topic, records, rate_per_s=4_000)
        except BaseException as exc:  # reported by the main thread
            producer_error.append(exc)

    try:
        java_old.start()
        ck_old.start()
        wait_until(lambda: settled([java_old, ck_old], partitions), 60, f"a stable {old} group")
        monitor.start()
        producer = threading.Thread(target=produce_all, daemon=True)
        producer.start()
        time.sleep(2)
        # a member of the new protocol joins while both old members are still there
        java_new.start()
        wait_until(lambda: settled([java_old, ck_old, java_new], partitions), 60,
                   f"the first {new}-protocol member to share the partitions with the {old} ones")
        mixed = describe_consumer_group(bs, group, version=1)
        assert mixed.error_code == 0, (mixed.error_code, mixed.error_message)
        assert sorted((m.client_id, m.member_type) for m in mixed.members) == sorted(
            (m.name, member_type[p]) for m, p in ((java_old, old), (ck_old, old), (java_new, new)))
        java_old.stop()
        java_old.wait(40)
        ck_new.start()
        wait_until(lambda: settled([ck_old, java_new, ck_new], partitions), 60,
                   f"three members after the Java {old} member left")
        ck_old.stop()
        ck_old.wait(40)
        wait_until(lambda: settled([java_new, ck_new], partitions), 60,
                   f"the {new}-protocol members to own every partition")
        producer.join(120)
        assert not producer.is_alive(), "producer did not finish"
        assert not producer_error, producer_error
        ends = end_offsets(bs, topic, partitions)
        wait_until(lambda: monitor.latest() == ends, 90, "the group's committed offsets to reach the log end")
        final = describe_consumer_group(bs, group, version=1)
        if new == "consumer":
            assert final.error_code == 0 and sorted((m.client_id, m.member_type) for m in final.members) == \
                [("confluent-consumer", 1), ("java-consumer", 1)], final
        else:  # a classic group again: not a consumer group to ConsumerGroupDescribe
            assert final.error_code == 69, (final.error_code, final.error_message)  # GROUP_ID_NOT_FOUND
    finally:
        stop_members(everyone)
        monitor.halt.set()
        monitor.join(10)

    for member in everyone:
        assert member.events() and member.events()[-1] == ["CLOSED"], f"{member.name}:\n{member.tail()}"
    seen = Consumption()
    for member in everyone:
        seen.add(member)
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == [], f"{len(seen.missing(ends))} records never consumed"
    assert not monitor.backwards(), monitor.backwards()[:10]
    overlaps = ownership_overlaps(everyone)
    assert not overlaps, overlaps[:10]
    assert committed_offsets(bs, group, topic, partitions) == ends


def test_librdkafka_regex_subscription_resolved_by_the_coordinator(broker, tmp_path: Path) -> None:
    """A confluent-kafka consumer (group.protocol=consumer) subscribed to `^prefix-.*`: the
    coordinator resolves the regex (ConsumerGroupHeartbeat v1 SubscribedTopicRegex) to the
    matching topics, including one created after the subscription, and never to others."""
    from confluent_kafka import Consumer

    bs = broker.bootstrap
    prefix = unique("kip848-re")
    topics = {f"{prefix}-a": 3, f"{prefix}-b": 2, f"{prefix}x-c": 1}  # the last does not match
    for name, count in topics.items():
        create_topic(bs, name, count)
        produce(bs, name, 30 * count)
    group = unique("kip848-re-group")
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    seen: dict[str, int] = {}

    def read_until(condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: read {seen}"
            for msg in consumer.consume(500, timeout=0.2):
                assert msg.error() is None, msg.error()
                seen[msg.topic()] = seen.get(msg.topic(), 0) + 1

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        read_until(lambda: seen == {f"{prefix}-a": 90, f"{prefix}-b": 60}, 60, "the two matching topics")
        [member] = describe_consumer_group(bs, group).members
        # librdkafka sends its regex subscriptions joined as `(^a)|(^b)`
        assert member.subscribed_topic_regex == f"(^{prefix}-.*)", member
        late = f"{prefix}-late"
        create_topic(bs, late, 2)
        produce(bs, late, 40)
        read_until(lambda: seen.get(late) == 40, 60, "the topic created after the subscription")
        assert {t.topic for t in consumer.assignment()} == {f"{prefix}-a", f"{prefix}-b", late}
        assert f"{prefix}x-c" not in seen
    finally:
        consumer.close()


def test_server_assignor_chosen_by_the_clients(broker, java_programs: JavaPrograms, tmp_path: Path) -> None:
    """Members asking for group.remote.assignor=range get Kafka's server-side range assignment
    (each member a contiguous block of every topic); ConsumerGroupDescribe names the assignor."""
    bs = broker.bootstrap
    partitions = 6
    topic, group = unique("kip848-range-topic"), unique("kip848-range-group")
    create_topic(bs, topic, partitions)
    members = [java_member(java_programs, bs, group, topic, tmp_path, "java-range", assignor="range"),
               confluent_member(bs, group, topic, tmp_path, "confluent-range", assignor="range")]
    try:
        for member in members:
            member.start()
        wait_until(lambda: settled(members, partitions), 60, "two members sharing the partitions")
        described = describe_consumer_group(bs, group)
        assert described.assignor_name == "range", described.assignor_name
        by_member = {m.member_id: sorted(p for t in m.assignment.topic_partitions for p in t.partitions)
                     for m in described.members}
        # Kafka's RangeAssignor: members in member id order, partitions in contiguous blocks
        blocks = [by_member[member_id] for member_id in sorted(by_member)]
        assert blocks == [[0, 1, 2], [3, 4, 5]], by_member
    finally:
        stop_members(members)
