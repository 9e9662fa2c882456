"""Joining and staying in a cluster: start-up faults and ZooKeeper session expiry.

- ZooKeeper unreachable at start: one line naming zookeeper.connect, a non-zero exit after
  zookeeper.connection.timeout.ms.
- A second broker with the id of a live broker refuses to start, with a clear message.
- A data directory formatted for another cluster (meta.properties cluster.id) refuses to start.
- A broker whose ZooKeeper session expires (paused past zookeeper.session.timeout.ms) registers
  again with a new broker epoch, follows the leader elected meanwhile, and rejoins the ISR; it never
  serves as leader with its old epoch.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conformance.cluster_harness import cluster_fixture, describe, wait_for_isr, wait_for_leader, wait_until
from kafkapy.devcluster.brokers import REPO_ROOT, free_ports

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(240)

cluster = cluster_fixture(3, {
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.lag.time.max.ms": "4000",
    "auto.leader.rebalance.enable": "false",
})


def serve(tmp_path, *overrides: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run `kafkapy serve` in the foreground (it is expected to exit by itself)."""
    port = free_ports(1)[0]
    argv = [sys.executable, "-m", "kafkapy", "serve",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={tmp_path / 'data'}"]
    for override in overrides:
        argv += ["--override", override]
    return subprocess.run(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def test_zookeeper_unreachable_at_start(tmp_path):
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    started = time.monotonic()
    result = serve(tmp_path, f"zookeeper.connect={dead}", "zookeeper.connection.timeout.ms=3000", "broker.id=5")
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert dead in result.stderr and "zookeeper.connect" in result.stderr, result.stderr[-2000:]
    assert elapsed < 30
    assert "Traceback" not in result.stderr


def test_duplicate_broker_id_refuses_to_start(cluster, tmp_path):
    result = serve(tmp_path, f"zookeeper.connect={cluster.zookeeper_connect}", "broker.id=2")
    assert result.returncode != 0
    assert "broker.id" in result.stderr and "already registered" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert cluster.broker(2).is_running()


def test_data_directory_of_another_cluster_refuses_to_start(cluster, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=0\nbroker.id=7\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n")
    result = serve(tmp_path, f"zookeeper.connect={cluster.zookeeper_connect}", "broker.id=7")
    assert result.returncode != 0
    assert "doesn't match stored clusterId" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_session_expiry_reregisters_with_a_new_epoch(cluster):
    topic = f"expiry-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=30)[topic].result(60)
    wait_for_isr(cluster, topic, 3)
    leader = describe(cluster, topic)[0].leader
    node = cluster.broker(leader)
    log_before = node.log_path.read_text(errors="replace")
    os.kill(node.pid, signal.SIGSTOP)
    try:
        new_leader = wait_for_leader(cluster, topic, 0, not_in=(leader,), timeout=40)
    finally:
        os.kill(node.pid, signal.SIGCONT)
    wait_until(lambda: "re-registering" in node.log_path.read_text(errors="replace")[len(log_before):], 30,
               message="the paused broker noticed its session expired")
    # asked of the new leader: the paused broker's own cache is stale until the controller updates it
    state = wait_until(lambda: (s := describe(cluster, topic, via=new_leader)) and len(s[0].isr) == 3 and s, 60,
                       message="ISR of 3 again")
    assert state[0].leader == new_leader
    wait_until(lambda: describe(cluster, topic, via=leader)[0].leader == new_leader, 30,
               message="the re-registered broker's cache shows the new leader")
    log_after = node.log_path.read_text(errors="replace")[len(log_before):]
    first = [int(m) for m in re.findall(r"czxid \(broker epoch\) (\d+)", log_before)]
    again = [int(m) for m in re.findall(r"czxid \(broker epoch\) (\d+)", log_after)]
    assert first and again and again[-1] > first[-1], (first, again)
    # the broker follows the new leader; it did not keep leading with its old epoch
    assert f"follows {topic}-0 from leader {new_leader}" in log_after
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    delivered = []
    producer.produce(topic, b"after-expiry", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None]
