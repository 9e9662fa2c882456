"""LocalCluster, BrokerNode and `kafkapy cluster` with a real ZooKeeper and real broker processes.

What is checked is the process handling: everything starts on loopback, a broker can be killed
and started again, and stopping (or SIGTERM to `kafkapy cluster`) leaves no process behind.
Whether the brokers form a working cluster is for the cluster tests, not these.
"""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conformance.cluster_harness import cluster_fixture, controller_id, describe
from kafkapy.cli import main
from kafkapy.devcluster.brokers import (
    REPO_ROOT,
    BrokerNode,
    LocalCluster,
    LocalClusterStartError,
    cluster_defaults,
    free_ports,
    port_accepts,
)
from kafkapy.devcluster.zookeeper import JavaZooKeeper

pytestmark = pytest.mark.timeout(120)

# ZooKeeper's minimum session timeout is 4 s with its tickTime of 2 s; a broker restarted after kill9
# waits until its old session (and so its registration) has expired.
cluster2 = cluster_fixture(2, {"zookeeper.session.timeout.ms": 6000})


def _alive(pid: int) -> bool:
    """True if `pid` is a process that has not exited (a zombie counts as exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _processes_under(path: Path) -> list[int]:
    """Live processes whose command line or working directory lies in `path` (our brokers and ZooKeeper)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if (str(path) in cmdline or cwd.startswith(str(path))) and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _consecutive_free_ports(count: int) -> int:
    """A base port such that base .. base+count-1 are all free right now."""
    for _ in range(50):
        base = free_ports(1)[0]
        if base + count - 1 <= 65535 and not any(port_accepts(base + i) for i in range(count)):
            return base
    raise AssertionError(f"no {count} consecutive free ports found")


# ------------------------------------------------------------------ without processes

def test_broker_settings(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, brokers=2, zookeeper_connect="127.0.0.1:2181/kafkapy", base_port=19092,
                           overrides={"num.partitions": 4, "transaction.state.log.min.isr": None})
    assert cluster.zookeeper is None  # a connect string means no ZooKeeper of our own
    assert cluster.bootstrap == "127.0.0.1:19092,127.0.0.1:19093"
    node = cluster.broker(2)
    node.zookeeper_connect = cluster.zookeeper_connect
    assert node.settings() == {
        "broker.id": "2",
        "listeners": "PLAINTEXT://127.0.0.1:19093",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:19093",
        "log.dirs": str(tmp_path / "broker-2"),
        "zookeeper.connect": "127.0.0.1:2181/kafkapy",
        "offsets.topic.replication.factor": "2",
        "share.coordinator.state.topic.replication.factor": "2",
        "transaction.state.log.replication.factor": "2",
        "num.partitions": "4",
    }
    assert node.command()[1:4] == ["-m", "kafkapy", "serve"]
    with pytest.raises(KeyError, match=r"brokers \[1, 2\]"):
        cluster.broker(3)


def test_cluster_defaults_are_capped_by_size() -> None:
    assert cluster_defaults(1) == {"offsets.topic.replication.factor": "1",
                                   "share.coordinator.state.topic.replication.factor": "1",
                                   "transaction.state.log.replication.factor": "1",
                                   "transaction.state.log.min.isr": "1"}
    assert cluster_defaults(5)["offsets.topic.replication.factor"] == "3"
    assert cluster_defaults(5)["transaction.state.log.min.isr"] == "2"


@pytest.mark.parametrize("argv", [["cluster", "--brokers", "2", "--base-port", "65535"],
                                  ["cluster", "--brokers", "0"],
                                  ["cluster", "--override", "no-equals-sign"]])
def test_cli_rejects_bad_arguments(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2


# A stand-in for `python -m kafkapy serve`: answers every request with a few bytes and, after
# `stand.in.register.after` seconds (if set), logs what a broker logs once it is in /brokers/ids.
STAND_IN = textwrap.dedent("""
    import socket, sys, threading, time
    props = dict(arg.split("=", 1) for arg in sys.argv[5::2])
    broker_id, port = props["broker.id"], int(props["listeners"].rsplit(":", 1)[1])
    server = socket.create_server(("127.0.0.1", port))
    def register(delay):
        time.sleep(delay)
        print(f"INFO registered broker {broker_id} at path /brokers/ids/{broker_id} with addresses x", flush=True)
    if "stand.in.register.after" in props:
        threading.Thread(target=register, args=(float(props["stand.in.register.after"]),)).start()
    while True:
        conn, _ = server.accept()
        conn.recv(1024)
        conn.sendall(b"\\0\\0\\0\\4abcd")
        conn.close()
""")


@pytest.fixture
def stand_in_python(tmp_path: Path) -> str:
    """An interpreter path that runs the stand-in instead of kafkapy."""
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    launcher = tmp_path / "python"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def _stand_in_node(tmp_path: Path, python: str, **overrides: str) -> BrokerNode:
    return BrokerNode(broker_id=7, port=free_ports(1)[0], log_dir=tmp_path / "broker-7",
                      log_path=tmp_path / "broker-7.log", zookeeper_connect="127.0.0.1:1",
                      overrides=dict(overrides), python=python)


def test_start_waits_for_registration(tmp_path: Path, stand_in_python: str) -> None:
    node = _stand_in_node(tmp_path, stand_in_python, **{"stand.in.register.after": "1.0"})
    started = time.monotonic()
    try:
        node.start(timeout=10)
        assert time.monotonic() - started >= 1.0
        assert "registered broker 7 at path /brokers/ids/7" in node.log_path.read_text()
    finally:
        node.stop()


def test_start_fails_when_the_broker_never_registers(tmp_path: Path, stand_in_python: str) -> None:
    node = _stand_in_node(tmp_path, stand_in_python)
    with pytest.raises(LocalClusterStartError, match="had not registered in ZooKeeper after 2 s"):
        node.start(timeout=2)
    assert not node.is_running()
    node.await_registration = False  # then answering requests is enough
    try:
        node.start(timeout=10)
    finally:
        node.stop()


# ------------------------------------------------------------------ with ZooKeeper and brokers

def test_brokers_accept_connections(cluster2: LocalCluster) -> None:
    assert sorted(cluster2.brokers) == [1, 2]
    assert cluster2.zookeeper is not None and cluster2.zookeeper.pid is not None
    assert cluster2.bootstrap == ",".join(f"127.0.0.1:{node.port}" for node in cluster2.brokers.values())
    for node in cluster2.brokers.values():
        assert node.is_running() and port_accepts(node.port)
        assert node.log_path.exists() and node.log_dir.is_dir()
        assert f"zookeeper.connect={cluster2.zookeeper_connect}" in node.log_path.read_text()


def test_harness_reads_metadata_while_a_broker_is_down(cluster2: LocalCluster) -> None:
    assert controller_id(cluster2) in (-1, 1, 2)
    assert cluster2.controller_id() in (None, 1, 2)
    assert describe(cluster2, "no-such-topic") == {}
    assert cluster2.broker(1).stop() == 0
    try:
        assert controller_id(cluster2) in (-1, 2)  # answered by broker 2, the only one left
    finally:
        cluster2.broker(1).start()


def test_kill9_and_restart_one_broker(cluster2: LocalCluster) -> None:
    victim, bystander = cluster2.broker(1), cluster2.broker(2)
    old_pid, bystander_pid = victim.pid, bystander.pid
    assert old_pid is not None
    assert victim.kill9() == -signal.SIGKILL
    assert not victim.is_running() and not _alive(old_pid)
    assert not port_accepts(victim.port)
    victim.start()
    assert victim.pid != old_pid and port_accepts(victim.port)
    assert bystander.pid == bystander_pid and bystander.is_running()
    victim.restart()  # graceful stop, then start
    assert victim.is_running() and port_accepts(victim.port)


def test_stop_leaves_no_process(tmp_path: Path) -> None:
    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available: {reason}")
    with LocalCluster(tmp_path, brokers=2) as cluster:
        assert cluster.zookeeper is not None
        pids = [node.pid for node in cluster.brokers.values()] + [cluster.zookeeper.pid]
        ports = [node.port for node in cluster.brokers.values()]
        assert all(pid is not None and _alive(pid) for pid in pids)
    assert [pid for pid in pids if pid is not None and _alive(pid)] == []
    assert [port for port in ports if port_accepts(port)] == []
    assert _processes_under(tmp_path) == []


def test_cli_cluster_stops_on_sigterm(tmp_path: Path) -> None:
    available, reason = JavaZooKeeper.available()
    if not available:
        pytest.skip(f"!!! ZooKeeper is not available: {reason}")
    base = _consecutive_free_ports(2)
    argv = [sys.executable, "-m", "kafkapy", "cluster", "--brokers", "2", "--dir", str(tmp_path / "cluster"),
            "--base-port", str(base)]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
    output: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while "Ctrl-C stops the cluster." not in output:  # the last line of the start report
            assert time.monotonic() < deadline and proc.poll() is None, f"cluster not reported started: {output}"
            try:
                output.append(lines.get(timeout=0.5).rstrip("\n"))
            except queue.Empty:
                pass
        assert f"bootstrap servers: 127.0.0.1:{base},127.0.0.1:{base + 1}" in output
        assert any(line.startswith(f"broker 2  127.0.0.1:{base + 1}  log ") for line in output)
        assert any(line.startswith("zookeeper.connect: 127.0.0.1:") for line in output)
        assert port_accepts(base) and port_accepts(base + 1)

        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert time.monotonic() - started < 30
        assert not port_accepts(base) and not port_accepts(base + 1)
        assert _processes_under(tmp_path) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _processes_under(tmp_path):  # only what this test started: it runs in tmp_path
            os.kill(pid, signal.SIGKILL)
