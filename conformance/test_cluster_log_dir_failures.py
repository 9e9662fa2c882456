"""A 3-broker ZooKeeper-mode cluster (real ZooKeeper, real `python -m kafkapy serve` processes)
where the leader's log dir fills up (ENOSPC injected through broker 1's control endpoint): the
broker tells the controller (/log_dir_event_notification), the controller moves leadership to a
replica on a healthy broker and takes the full replica out of the ISR, the idempotent acks=all
producer goes on on the new leader; once space is back the replica catches up and rejoins the
ISR; nothing acknowledged is lost or duplicated."""
from __future__ import annotations

import json
import os
import urllib.request
import uuid

import pytest

from conformance.broker_process import PYTHON_ENV
from conformance.cluster_harness import describe, wait_for_isr, wait_for_leader, wait_until
from conformance.test_log_dir_failures import AckedProducer, AdminClient, NewTopic
from kafkapy.devcluster.brokers import LocalCluster, LocalClusterStartError
from kafkapy.devcluster.launcher import free_ports, stop_children_on_sigterm
from kafkapy.devcluster.zookeeper import JavaZooKeeper, ZooKeeperStartError

pytestmark = pytest.mark.timeout(240)


def _control(port: int, method: str, path: str, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


class _Endpoint:
    """What AckedProducer needs of a broker: the bootstrap servers."""

    def __init__(self, bootstrap: str):
        self.bootstrap_servers = bootstrap


def test_the_leaders_log_dir_fills_up_and_leadership_moves(tmp_path):
    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available, cluster tests cannot run: {reason}")
    stop_children_on_sigterm()
    cluster = LocalCluster(tmp_path, brokers=3, python=os.environ.get(PYTHON_ENV) or None, overrides={
        "min.insync.replicas": "2", "kafkapy.log.dir.space.check.interval.ms": "300",
        "offsets.topic.num.partitions": "1"})
    control_ports = dict(zip(cluster.brokers, free_ports(3)))
    for broker_id, node in cluster.brokers.items():
        node.overrides["kafkapy.control.listener"] = f"127.0.0.1:{control_ports[broker_id]}"
    try:
        try:
            cluster.start(90)
        except (LocalClusterStartError, ZooKeeperStartError) as exc:
            pytest.fail(f"kafkapy cluster could not start:\n{exc}", pytrace=False)
        topic = f"full-leader-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic].result(30)
        wait_for_isr(cluster, topic, 3)
        assert describe(cluster, topic)[0].leader == 1
        full_dir = str(cluster.broker(1).log_dir)
        with AckedProducer(_Endpoint(cluster.bootstrap), topic, 1) as producer:
            wait_until(lambda: len(producer.acked[0]) > 50, 30, message="first acks")
            _control(control_ports[1], "POST", "/storage-faults", {"log_dir": full_dir, "error": "ENOSPC"})
            new_leader = wait_for_leader(cluster, topic, 0, not_in=(1,), timeout=30)
            state = wait_until(lambda: (lambda s: s if 1 not in s.isr else None)(describe(cluster, topic)[0]), 30,
                               message="the full replica out of the ISR")
            assert state.leader == new_leader and 1 in state.offline_replicas
            moved = len(producer.acked[0])
            # 60 s: on a loaded machine (the whole suite) the new leader's follower may first have to
            # catch up from the new leader before acks=all (min.insync.replicas=2) completes again
            wait_until(lambda: len(producer.acked[0]) > moved + 50, 60, message="acks from the new leader")
            assert [d["status"] for d in _control(control_ports[1], "GET", "/log-dirs")["log_dirs"]] == ["full"]
            _control(control_ports[1], "DELETE", "/storage-faults")
            wait_until(lambda: _control(control_ports[1], "GET", "/log-dirs")["log_dirs"][0]["status"] == "online",
                       30, message="the dir to come back")
            back = wait_for_isr(cluster, topic, 3, timeout=60)[0]
            assert back.offline_replicas == ()
            resumed = len(producer.acked[0])
            wait_until(lambda: len(producer.acked[0]) > resumed + 20, 30, message="acks with the whole ISR")
        producer.check_nothing_lost(_Endpoint(cluster.bootstrap))
    finally:
        cluster.stop()
