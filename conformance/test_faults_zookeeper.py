"""ZooKeeper down for a minute under a recorded workload (issue 23).

Kafka's brokers in ZooKeeper mode serve on with the metadata they have while ZooKeeper is away:
produce (acks=all included, while the ISR is whole) and fetch for existing partitions go on, and
what needs ZooKeeper (creating a topic: the controller writes it there) fails with Kafka's error
codes. When ZooKeeper returns everything converges: sessions are re-established or brokers
re-register, the controller works again and the topic can be created. The history checker
(kafkapy.testing.history) judges what the idempotent producer, a tailing consumer and an
exactly-once transform application saw throughout.
"""
from __future__ import annotations

import time
import uuid

import pytest

from conformance.cluster_harness import start_cluster, wait_for_isr, wait_until
from conformance.fault_workload import FAULT_OVERRIDES, FaultWorkload

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.timeout(420)

OUTAGE_S = 60.0  # the minute


def create_topic(bootstrap: str, topic: str, timeout_s: float) -> str | None:
    """None when the topic was created, else the Kafka error's name."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    future = admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=timeout_s,
                                 operation_timeout=timeout_s)[topic]
    try:
        future.result(timeout=timeout_s + 15)
    except confluent_kafka.KafkaException as exc:
        return exc.args[0].name()
    return None


def test_zookeeper_down_for_a_minute(tmp_path):
    cluster = start_cluster(tmp_path, 3, FAULT_OVERRIDES)
    with cluster:
        workload = FaultWorkload(cluster, tmp_path)
        workload.start()
        assert cluster.zookeeper is not None
        cluster.zookeeper.stop()
        down_at = time.monotonic()
        progress_while_down = []
        admin_error = None
        try:
            while time.monotonic() - down_at < OUTAGE_S:
                # produce (acks=all) and the transactional application keep going with ZooKeeper away
                progress_while_down.append(round(workload.wait_progress(30, "with ZooKeeper down"), 1))
                if admin_error is None:
                    admin_error = create_topic(cluster.bootstrap, f"zk-down-{uuid.uuid4().hex[:6]}", 10)
                    assert admin_error is not None, "a topic was created while ZooKeeper was down"
                time.sleep(min(5.0, max(0.0, OUTAGE_S - (time.monotonic() - down_at))))
        finally:
            cluster.zookeeper.start()
        up_at = time.monotonic()
        # converges: the controller writes to ZooKeeper again, ISRs whole, a new topic can be made
        topic = f"zk-back-{uuid.uuid4().hex[:6]}"
        wait_until(lambda: create_topic(cluster.bootstrap, topic, 10) in (None, "TOPIC_ALREADY_EXISTS"), 90,
                   interval=1, message="CreateTopics succeeds once ZooKeeper is back")
        wait_for_isr(cluster, topic, 3, timeout=60)
        wait_for_isr(cluster, workload.source, 3, timeout=60)
        workload.wait_progress(60, "after ZooKeeper returned")
        converged_s = time.monotonic() - up_at
        report = workload.finish()
    print(f"ZooKeeper down {OUTAGE_S:.0f} s: progress every {progress_while_down} s, CreateTopics answered "
          f"{admin_error}; converged {converged_s:.1f} s after it returned\n{report.text()}")
    assert report.ok, report.text()
    assert report.totals()["acked"] > 0
