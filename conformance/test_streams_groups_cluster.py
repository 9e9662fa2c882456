"""A streams group in a three-broker cluster: its coordinator's broker is SIGKILLed and the broker
that takes over __consumer_offsets' partition loads the group (records written with acks=all):
the same group epoch, members, tasks and topology, and the member goes on with its epoch."""
from __future__ import annotations

import pytest

from conformance.cluster_harness import cluster_fixture, wait_until
from conformance.test_cluster_coordinators import find_coordinator
from conformance.test_streams_groups_wire import _active, _beat, _group, _join, _topology, _Wire
from kafkapy.protocol.messages import StreamsGroupDescribeRequest

pytestmark = pytest.mark.timeout(240)

cluster = cluster_fixture(3, {
    "offsets.topic.num.partitions": "6",
    "offsets.topic.replication.factor": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "zookeeper.session.timeout.ms": "6000",
    "group.streams.initial.rebalance.delay.ms": "0",
})


def test_group_survives_its_coordinator(cluster, topic_name):
    group = _group()
    coordinator = find_coordinator(cluster, group, 0)
    for node in cluster.brokers.values():  # CreateTopics goes to the controller
        creator = _Wire(node.bootstrap)
        try:
            if creator.create_topic(topic_name, 2, 3) != 41:
                break
        finally:
            creator.close()
    wire = _Wire(cluster.broker(coordinator).bootstrap)
    try:
        r = wire.send(_join(group, "m1", _topology(topic_name, group)))
        for _ in range(50):
            r = wire.send(_beat(group, "m1", r.member_epoch, _active(r) or {}))
            if _active(r) and not r.status:
                break
            wire.loop.run_until_complete(__import__("asyncio").sleep(0.2))
        assert _active(r) == {"0": [0, 1]}, r
        epoch = r.member_epoch
    finally:
        wire.close()
    cluster.broker(coordinator).kill9()
    try:
        successor = wait_until(lambda: (lambda c: c if c not in (None, -1, coordinator) else None)(
            find_coordinator(cluster, group, 0)), 60, interval=0.5, message="a new coordinator")
        wire = _Wire(cluster.broker(successor).bootstrap)
        try:
            d = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
            g = d.groups[0]
            assert g.error_code == 0, g
            assert g.group_state == "Stable" and [(m.member_id, m.member_epoch) for m in g.members] == [("m1", epoch)]
            assert {t.subtopology_id: sorted(t.partitions) for t in g.members[0].assignment.active_tasks} == \
                {"0": [0, 1]}
            assert g.topology.subtopologies[0].source_topics == [topic_name]
            r = wire.send(_beat(group, "m1", epoch, {"0": [0, 1]}))
            assert r.error_code == 0 and r.member_epoch == epoch
        finally:
            wire.close()
    finally:
        cluster.broker(coordinator).start()
