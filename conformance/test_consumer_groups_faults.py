"""KIP-848 consumer groups (group.protocol=consumer) under faults, with real clients and real
kafkapy processes.

- Static membership: a Java consumer with group.instance.id that closes (a static leave, member
  epoch -2) and comes back within the session timeout gets its partitions back; the other
  member sees no revocation or assignment meanwhile.
- Session expiry: a SIGKILLed static member and a SIGKILLed dynamic member are removed after
  the session timeout (10 s here), not much earlier or later, and their partitions move to the
  member left; no partition is ever owned twice. A replacement for the killed static member
  started at once gets UNRELEASED_INSTANCE_ID (its instance id is still held), as from Kafka.
- Broker SIGKILL mid-group: while records are produced, the broker is SIGKILLed (with the group
  Stable, or while it reconciles a member that just joined), stays down 3 s and restarts on the same data directory; the group is reloaded from __consumer_offsets
  (ConsumerGroupDescribe: same member ids, group epoch not lower) and its members simply
  continue (none is fenced, no partition reported lost), committed offsets are not lost and
  never go backwards, every record is read.
- Bad members: Java and librdkafka consumers asking for an unknown server assignor get
  UNSUPPORTED_ASSIGNOR; the group's other members see nothing (same epochs, no rebalance).

Broker overrides (CONSUMER_PROTOCOL_OVERRIDES in conformance/consumer_group_clients.py), for
speed: group.consumer.heartbeat.interval.ms=1000 (min 500), group.consumer.session.timeout.ms=10000
(min 1000), group.coordinator.rebalance.protocols=classic,consumer.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from conformance.consumer_group_clients import (
    CONSUMER_PROTOCOL_OVERRIDES,
    WireCommitMonitor,
    assigned_at,
    confluent_member,
    describe_consumer_group,
    java_member,
    kill_member,
    now_us,
    ownership_overlaps,
    settled,
    stop_members,
    unique,
)
from conformance.java.test_java_clients import JavaPrograms, java_programs  # noqa: F401  (fixture)
from conformance.test_groups_tools import (
    ConsumerProcess,
    Consumption,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    wait_until,
)

SESSION_TIMEOUT_S = int(CONSUMER_PROTOCOL_OVERRIDES["group.consumer.session.timeout.ms"]) / 1000
HEARTBEAT_S = int(CONSUMER_PROTOCOL_OVERRIDES["group.consumer.heartbeat.interval.ms"]) / 1000
BROKER_DOWN_S = 3.0


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return dict(CONSUMER_PROTOCOL_OVERRIDES)


def rebalance_events(member: ConsumerProcess) -> list[list[str]]:
    return [e for e in member.events() if e[0] in "AV"]


def test_static_member_returns_and_killed_members_expire_after_session_timeout(
        broker, java_programs: JavaPrograms, tmp_path: Path) -> None:
    bs = broker.bootstrap
    partitions = 6
    topic, group = unique("kip848-static-topic"), unique("kip848-static-group")
    create_topic(bs, topic, partitions)
    watcher = confluent_member(bs, group, topic, tmp_path, "watcher")
    static = java_member(java_programs, bs, group, topic, tmp_path, "static", instance_id="static-1")
    members = [watcher, static]
    killed: dict[str, int] = {}
    try:
        watcher.start()
        static.start()
        wait_until(lambda: settled([watcher, static], partitions), 60, "a stable two-member group")
        produce(bs, topic, 600)
        time.sleep(2)

        # 1. the static member closes (epoch -2) and comes back within the session timeout
        before = rebalance_events(watcher)
        owned = static.assigned()
        left_at = time.monotonic()
        static.stop()
        static.wait(30)
        again = java_member(java_programs, bs, group, topic, tmp_path, "static-again", instance_id="static-1")
        members.append(again.start())
        wait_until(lambda: again.assigned(), 60, "the restarted static member's assignment")
        back_after = time.monotonic() - left_at
        assert back_after < SESSION_TIMEOUT_S, f"restart took {back_after:.1f} s: the test proves nothing"
        assert again.assigned() == owned
        time.sleep(3 * HEARTBEAT_S)
        assert rebalance_events(watcher) == before, "the other member saw a rebalance"
        described = {m.instance_id: m for m in describe_consumer_group(bs, group).members}
        assert set(described) == {None, "static-1"}, described

        # 2. a static and a dynamic member are SIGKILLed: they expire after the session timeout
        victim = confluent_member(bs, group, topic, tmp_path, "dynamic-victim")
        members.append(victim.start())
        wait_until(lambda: settled([watcher, again, victim], partitions), 60, "a stable three-member group")
        static_owned, victim_owned = again.assigned(), victim.assigned()
        time.sleep(2 * HEARTBEAT_S)
        killed[again.name] = kill_member(again)
        killed[victim.name] = kill_member(victim)
        kill_time = min(killed.values())
        # 3. the killed static member's instance id is not released until its session expires: a
        # replacement started at once gets UNRELEASED_INSTANCE_ID (fatal in the Java client)
        replacement = java_member(java_programs, bs, group, topic, tmp_path, "static-replacement",
                                  instance_id="static-1")
        members.append(replacement.start())
        wait_until(lambda: watcher.assigned() == set(range(partitions)), SESSION_TIMEOUT_S + 30,
                   "the member left to own every partition")
        started = [int(e[1]) for e in replacement.events() if e[0] == "S"]
        if started and (started[0] - kill_time) / 1e6 < SESSION_TIMEOUT_S - 4:  # it asked in time
            assert replacement.proc.wait(30) != 0, "the replacement joined with an unreleased instance id"
            assert "UnreleasedInstanceIdException" in replacement.tail(300), replacement.tail()
            assert not replacement.assigned()
        else:
            print(f"the replacement started too late to check UNRELEASED_INSTANCE_ID: {started}")
        expiries = {name: (assigned_at(watcher, owned_set, kill_time) - killed[name]) / 1e6
                    for name, owned_set in ((again.name, static_owned), (victim.name, victim_owned))}
        print(f"session timeout {SESSION_TIMEOUT_S:.0f} s, heartbeat {HEARTBEAT_S:.0f} s: partitions of"
              f" killed members moved after {', '.join(f'{n} {s:.2f} s' for n, s in expiries.items())}")
        for name, seconds in expiries.items():
            # expiry comes a session timeout after the last heartbeat (up to one interval before
            # the kill); the watcher learns of it at its next heartbeat
            assert SESSION_TIMEOUT_S - HEARTBEAT_S - 0.5 <= seconds <= SESSION_TIMEOUT_S + 2 * HEARTBEAT_S + 3, \
                (name, seconds)
        described = describe_consumer_group(bs, group)
        assert [m.client_id for m in described.members] == ["watcher"], described.members
    finally:
        stop_members(members)
    overlaps = ownership_overlaps(members, killed)
    assert not overlaps, overlaps[:10]
    seen = Consumption()
    for member in members:
        seen.add(member)
    assert not seen.problems, seen.problems[:10]


@pytest.mark.parametrize("moment", ["stable", "reconciling"])
def test_broker_sigkill_keeps_the_group_and_its_offsets(broker_factory, java_programs: JavaPrograms,
                                                        tmp_path: Path, moment: str) -> None:
    """The broker is SIGKILLed while the group is Stable, or while it reconciles a member that
    just joined (partitions pending revocation): after the restart it goes on from there."""
    instance = broker_factory(CONSUMER_PROTOCOL_OVERRIDES)
    bs = instance.bootstrap
    partitions, records = 6, 60_000
    topic, group = unique("kip848-crash-topic"), unique("kip848-crash-group")
    create_topic(bs, topic, partitions)
    members = [java_member(java_programs, bs, group, topic, tmp_path, "java"),
               confluent_member(bs, group, topic, tmp_path, "confluent")]
    late = confluent_member(bs, group, topic, tmp_path, "confluent-late")
    expected = members + [late] if moment == "reconciling" else list(members)
    monitor = WireCommitMonitor(bs, group, topic, partitions)
    producer_error: list[BaseException] = []

    def produce_all() -> None:
        try:
            produce(bs, topic, records, rate_per_s=5_000)
        except BaseException as exc:  # reported by the main thread
            producer_error.append(exc)

    try:
        for member in members:
            member.start()
        wait_until(lambda: settled(members, partitions), 60, "a stable two-member group")
        monitor.start()
        producer = threading.Thread(target=produce_all, daemon=True)
        producer.start()
        time.sleep(5)
        if moment == "reconciling":
            late.start()

            def reconciling():
                group_now = describe_consumer_group(bs, group)
                return group_now if group_now.group_state in ("Assigning", "Reconciling") else None

            before = wait_until(reconciling, 30, "the group to reconcile the new member", interval=0.02)
        else:
            before = describe_consumer_group(bs, group)
        committed_before = committed_offsets(bs, group, topic, partitions)
        assert before.error_code == 0 and len(before.members) == len(expected), before
        assert any(offset > 0 for offset in committed_before.values()), committed_before
        killed_at = now_us()
        instance.kill9()
        time.sleep(BROKER_DOWN_S)  # longer than a heartbeat interval, shorter than the session timeout
        instance.start()
        restarted_at = now_us()

        def described_again():
            group_now = describe_consumer_group(bs, group)
            return group_now if group_now.error_code == 0 else None

        after = wait_until(described_again, 30, "ConsumerGroupDescribe to answer after the restart")
        assert after.group_state != "Dead" and after.group_epoch >= before.group_epoch, (before, after)
        # the members continue: same member ids (a member the coordinator forgot would be fenced
        # and rejoin under a new id) and no partition reported lost
        assert {m.member_id for m in after.members} == {m.member_id for m in before.members}, (before, after)
        committed_after = committed_offsets(bs, group, topic, partitions)
        lost = {p: (committed_before[p], committed_after[p]) for p in range(partitions)
                if committed_after[p] < committed_before[p]}
        assert not lost, f"committed offsets went back over the restart: {lost}"
        producer.join(120)
        assert not producer.is_alive(), "producer did not finish"
        assert not producer_error, producer_error
        ends = end_offsets(bs, topic, partitions)
        assert sum(ends.values()) == records
        wait_until(lambda: committed_offsets(bs, group, topic, partitions) == ends, 90,
                   "the group's committed offsets to reach the log end")
        wait_until(lambda: settled(expected, partitions), 30, "every member to own partitions again")
        final = describe_consumer_group(bs, group)
        assert final.error_code == 0 and final.group_state == "Stable", final
        assert sorted(m.client_id for m in final.members) == sorted(m.name for m in expected), final
        assert {m.member_id for m in final.members} == {m.member_id for m in before.members}, (before, final)
        print(f"{moment}: broker down {(restarted_at - killed_at) / 1e6:.2f} s; state {before.group_state} at the"
              f" kill, {after.group_state} at reload; group epoch {before.group_epoch} before,"
              f" {after.group_epoch} at reload, {final.group_epoch} at the end; member epochs"
              f" {[m.member_epoch for m in final.members]}")
    finally:
        stop_members(members + [late])
        monitor.halt.set()
        monitor.join(10)

    for member in expected:
        assert member.events() and member.events()[-1] == ["CLOSED"], f"{member.name}:\n{member.tail()}"
    seen = Consumption()
    for member in expected:
        seen.add(member)
    assert not seen.problems, seen.problems[:10]
    assert seen.missing(ends) == [], f"{len(seen.missing(ends))} records never consumed"
    assert len(monitor.samples) > 10, monitor.errors[:5]
    assert not monitor.backwards(), monitor.backwards()[:10]
    overlaps = ownership_overlaps(expected)
    assert not overlaps, overlaps[:10]
    lost = [(m.name, e) for m in expected for e in m.events() if e[0] == "V" and e[-1] == "lost"]
    assert not lost, lost[:10]


def test_members_asking_for_an_unknown_assignor_do_not_disturb_the_group(
        broker, java_programs: JavaPrograms, tmp_path: Path) -> None:
    """Java and librdkafka consumers asking for group.remote.assignor=no-such-assignor get
    UNSUPPORTED_ASSIGNOR (a fatal error for both clients, as against Kafka); the group's members
    see no rebalance and the group epoch stays."""
    from confluent_kafka import Consumer

    bs = broker.bootstrap
    partitions = 4
    topic, group = unique("kip848-bad-topic"), unique("kip848-bad-group")
    create_topic(bs, topic, partitions)
    good = [java_member(java_programs, bs, group, topic, tmp_path, "java-good"),
            confluent_member(bs, group, topic, tmp_path, "confluent-good")]
    bad_java = java_member(java_programs, bs, group, topic, tmp_path, "java-bad", assignor="no-such-assignor")
    try:
        for member in good:
            member.start()
        wait_until(lambda: settled(good, partitions), 60, "a stable two-member group")
        time.sleep(2 * HEARTBEAT_S)
        before = describe_consumer_group(bs, group)
        events_before = [rebalance_events(m) for m in good]

        errors: list[str] = []
        bad = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                        "group.remote.assignor": "no-such-assignor"})
        try:
            bad.subscribe([topic])
            deadline = time.monotonic() + 20
            while not errors and time.monotonic() < deadline:
                errors += [str(m.error()) for m in bad.consume(10, timeout=0.2) if m.error() is not None]
            assert errors and "assignor" in errors[0], errors
        finally:
            bad.close()
        bad_java.start()
        assert bad_java.proc.wait(60) != 0, "the Java consumer with an unknown assignor kept running"
        assert "UnsupportedAssignorException" in bad_java.tail(200), bad_java.tail()

        time.sleep(2 * HEARTBEAT_S)
        after = describe_consumer_group(bs, group)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
        assert [rebalance_events(m) for m in good] == events_before, "a member saw a rebalance"
    finally:
        stop_members(good + [bad_java])
