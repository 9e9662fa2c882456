"""A consumer-protocol (KIP-848) group survives broker restarts: clean stop and SIGKILL.

Two confluent-kafka consumers (group.protocol=consumer) settle on a 6-partition topic and commit
everything produced. The broker is then stopped cleanly (SIGTERM) and restarted over the same data
directory, and later SIGKILLed and restarted. After each restart ConsumerGroupDescribe shows the
group exactly as before, loaded from __consumer_offsets: the same group and assignment epochs,
the same members with the same member epochs and assignments; the members, which kept
heartbeating through the outage, carry on with their epochs (no one is fenced, no partition
moves: their rebalance callbacks report nothing new), and the committed offsets are unchanged.
At the end more records are produced and the group, untouched, commits them up to the log end.

In a cluster (kafkapy.testing.KafkaCluster, 3 brokers in ZooKeeper mode) the group follows the
leader of its __consumer_offsets partition: when that leadership moves, the new leader loads the
group from its replica of the log and serves it exactly as before, to the same members.
"""
from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest

from conformance.broker_process import external_bootstrap
from conformance.consumer_group_clients import (
    CONSUMER_PROTOCOL_OVERRIDES,
    confluent_member,
    describe_consumer_group,
    stop_members,
)
from conformance.test_groups_tools import (
    ConsumerProcess,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    wait_until,
)

pytest.importorskip("confluent_kafka")

PARTITIONS = 6
RECORDS = 600
HEARTBEAT_S = int(CONSUMER_PROTOCOL_OVERRIDES["group.consumer.heartbeat.interval.ms"]) / 1000


def settled_snapshot(bootstrap: str, group: str, members: list[ConsumerProcess]):
    """A snapshot of a Stable group whose members own all partitions and report owning them."""
    found = snapshot(bootstrap, group)
    if found is None or found[0] != "Stable" or len(found[3]) != len(members):
        return None
    owned = sorted(p for m in found[3].values() for p in m[2])
    reported = sorted(p for m in members for p in m.assigned())
    return found if owned == list(range(PARTITIONS)) == reported else None


def snapshot(bootstrap: str, group: str):
    """The group as ConsumerGroupDescribe shows it: (state, group epoch, assignment epoch,
    {member id: (member epoch, client id, assigned partitions, target partitions)})."""
    described = describe_consumer_group(bootstrap, group)
    if described.error_code != 0:
        return None
    members = {m.member_id: (m.member_epoch, m.client_id,
                             sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
                             sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions))
               for m in described.members}
    return described.group_state, described.group_epoch, described.assignment_epoch, members


def rebalance_events(member: ConsumerProcess) -> list[list[str]]:
    return [e for e in member.events() if e[0] in ("A", "V")]


def test_group_and_offsets_survive_clean_and_sigkill_restarts(broker_factory, tmp_path: Path) -> None:
    instance = broker_factory(CONSUMER_PROTOCOL_OVERRIDES)
    bs = instance.bootstrap
    topic, group = f"restart-{uuid.uuid4().hex[:8]}", f"restart-group-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic, PARTITIONS)
    produce(bs, topic, RECORDS)
    members = [confluent_member(bs, group, topic, tmp_path, f"m{i}") for i in range(2)]
    try:
        for member in members:
            member.start()
        before = wait_until(lambda: settled_snapshot(bs, group, members), 30, "a stable two-member group")
        ends = end_offsets(bs, topic, PARTITIONS)
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == ends, 20,
                   "commits up to the log end")
        events = [rebalance_events(m) for m in members]

        for how in (signal.SIGTERM, signal.SIGKILL):
            started = time.monotonic()
            instance.restart(how)
            after = wait_until(lambda: snapshot(bs, group), 20, f"ConsumerGroupDescribe after the {how.name} restart")
            down_s = time.monotonic() - started
            # loaded from the log: epochs, members, their epochs and assignments exactly as before
            assert after == before, f"after {how.name}: {after}\nbefore: {before}"
            assert committed_offsets(bs, group, topic, PARTITIONS) == ends, how.name
            # the members keep heartbeating with their epochs: nobody is fenced or moved
            time.sleep(3 * HEARTBEAT_S)
            assert snapshot(bs, group) == before, f"{how.name}: the group changed after its members came back"
            assert [rebalance_events(m) for m in members] == events, f"{how.name}: members saw a rebalance"
            assert all(m.proc.poll() is None for m in members)
            print(f"{how.name}: group back after {down_s:.1f} s, epoch {before[1]}, member epochs"
                  f" {sorted(v[0] for v in before[3].values())}")

        # the restored group still works: new records are read and committed to the log end
        produce(bs, topic, RECORDS, start=RECORDS)
        ends = end_offsets(bs, topic, PARTITIONS)
        assert sum(ends.values()) == 2 * RECORDS
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == ends, 20,
                   "commits of the new records up to the log end")
        assert snapshot(bs, group) == before
    finally:
        stop_members(members, timeout=20)


@pytest.mark.skipif(external_bootstrap() is not None, reason="starts its own cluster")
def test_group_follows_the_leader_of_its_offsets_partition(tmp_path: Path) -> None:
    from kafkapy.groupcoord.offsets_topic import OFFSETS_TOPIC, partition_for
    from kafkapy.testing import KafkaCluster

    settings = {k: v for k, v in CONSUMER_PROTOCOL_OVERRIDES.items() if k != "offsets.topic.replication.factor"}
    settings["offsets.topic.num.partitions"] = "3"
    with KafkaCluster(brokers=3, **settings) as cluster:
        bs = cluster.bootstrap_servers
        topic, group = f"moving-{uuid.uuid4().hex[:8]}", f"moving-group-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
        produce(bs, topic, RECORDS)
        coordinator_partition = partition_for(group, 3)

        def stable_at_coordinator():
            leader = cluster.leader(OFFSETS_TOPIC, coordinator_partition)  # None until the topic exists
            return None if leader is None else settled_snapshot(cluster.broker(leader).bootstrap_servers, group,
                                                                members)

        members = [confluent_member(bs, group, topic, tmp_path, f"m{i}") for i in range(2)]
        try:
            for member in members:
                member.start()
            before = wait_until(stable_at_coordinator, 30, "a stable two-member group")
            ends = end_offsets(bs, topic, PARTITIONS)
            wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == ends, 20,
                       "commits up to the log end")
            events = [rebalance_events(m) for m in members]
            old = cluster.leader(OFFSETS_TOPIC, coordinator_partition)
            new = next(b for b in sorted(cluster.brokers) if b != old)
            cluster.move_leader(OFFSETS_TOPIC, coordinator_partition, to=new)
            moved_to = cluster.broker(new).bootstrap_servers
            after = wait_until(lambda: snapshot(moved_to, group), 20, "ConsumerGroupDescribe at the new coordinator")
            assert after == before, f"after the move: {after}\nbefore: {before}"
            time.sleep(3 * HEARTBEAT_S)
            assert snapshot(moved_to, group) == before, "the group changed after its members found the new coordinator"
            assert [rebalance_events(m) for m in members] == events, "members saw a rebalance"
            produce(bs, topic, RECORDS, start=RECORDS)
            ends = end_offsets(bs, topic, PARTITIONS)
            wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == ends, 20,
                       "commits of the new records up to the log end (at the new coordinator)")
        finally:
            stop_members(members, timeout=20)
