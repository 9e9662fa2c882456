"""Self-tests of conformance/broker_process.py against a stand-in broker (no kafkapy needed).

The stand-in is a tiny Python TCP server that understands the same command line as
`python -m kafkapy serve --override ...`, so start/ready/stop/restart/kill9 and the
start-failure messages are checked without depending on the real broker.
"""

from __future__ import annotations

import signal
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.broker_process import BrokerProcess, BrokerStartError, free_port, port_accepts

pytestmark = pytest.mark.timeout(60)

STAND_IN = textwrap.dedent(
    """
    import os, signal, socket, sys, time
    args = sys.argv[1:]
    assert args[:3] == ["-m", "kafkapy", "serve"], args
    props = dict(a.split("=", 1) for a in args[4::2])
    mode = props.get("stand.in.mode", "ok")
    if mode == "crash":
        sys.exit("stand-in: refusing to start (crash mode)")
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    os.makedirs(props["log.dirs"], exist_ok=True)
    with open(os.path.join(props["log.dirs"], "starts"), "a") as f:
        f.write("x")
    if mode == "never-listen":
        time.sleep(60)
    host, port = props["listeners"].split("//")[1].rsplit(":", 1)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, int(port)))
    srv.listen()
    print("stand-in listening", port, flush=True)
    while True:
        conn, _ = srv.accept()
        if conn.recv(4096):  # a request (the harness's ApiVersions): answer with a bare frame
            conn.sendall(b"\\0\\0\\0\\4" + b"\\0\\0\\0\\1")
        conn.close()
    """
)


@pytest.fixture
def stand_in(tmp_path: Path):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    launcher = tmp_path / "python"
    # BrokerProcess runs `<python> -m kafkapy serve ...`; this launcher runs the stand-in instead.
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    launcher.chmod(0o755)
    made: list[BrokerProcess] = []

    def make(**overrides: str) -> BrokerProcess:
        work = tmp_path / f"work{len(made)}"
        work.mkdir()
        proc = BrokerProcess(port=free_port(), data_dir=work / "data", work_dir=work,
                             overrides=overrides, python=str(launcher))
        made.append(proc)
        return proc

    yield make
    for proc in made:
        proc.close()


def test_start_stop_restart_kill9(stand_in):
    node = stand_in()
    node.start(timeout=10)
    assert node.bootstrap == f"127.0.0.1:{node.port}"
    assert port_accepts("127.0.0.1", node.port)
    assert "--override" in node.command() and f"log.dirs={node.data_dir}" in node.command()

    node.restart()
    assert port_accepts("127.0.0.1", node.port)
    assert (node.data_dir / "starts").read_text() == "xx", "restart must reuse the data dir"

    node.kill9()
    assert not node.is_running() and node.proc.returncode == -signal.SIGKILL
    assert not port_accepts("127.0.0.1", node.port)
    node.start(timeout=10)
    assert (node.data_dir / "starts").read_text() == "xxx"

    assert node.stop() == 0 and not node.last_stop_needed_kill


def test_stop_escalates_to_sigkill(stand_in):
    node = stand_in(**{"stand.in.mode": "ignore-term"})
    node.start(timeout=10)
    assert node.stop(timeout=1) == -signal.SIGKILL
    assert node.last_stop_needed_kill


def test_start_failure_shows_output(stand_in):
    node = stand_in(**{"stand.in.mode": "crash"})
    with pytest.raises(BrokerStartError) as exc_info:
        node.start(timeout=10)
    message = str(exc_info.value)
    assert "exited with code 1" in message and "refusing to start" in message


def test_start_timeout(stand_in):
    node = stand_in(**{"stand.in.mode": "never-listen"})
    with pytest.raises(BrokerStartError, match="did not accept connections within 1 s"):
        node.start(timeout=1)
    assert not node.is_running()


def test_missing_kafkapy_main_gives_hint(tmp_path):
    """When `python -m kafkapy` is not runnable, the error says so plainly."""
    launcher = tmp_path / "python"
    # What CPython prints when the package has no __main__ module.
    launcher.write_text(
        "#!/bin/sh\necho \"$0: No module named kafkapy.__main__; 'kafkapy' is a package and "
        "cannot be directly executed\" >&2\nexit 1\n"
    )
    launcher.chmod(0o755)
    node = BrokerProcess(port=free_port(), data_dir=tmp_path / "data", work_dir=tmp_path, python=str(launcher))
    with pytest.raises(BrokerStartError) as exc_info:
        node.start(timeout=10)
    assert "python -m kafkapy serve` is not runnable" in str(exc_info.value)


def test_transform_loop_process_restarts_a_stalled_run_and_counts_every_run():
    """conformance/transform_loop.py's watchdog, with a stand-in application: a run that stops
    reporting commits is killed and started again; commits of every run add up."""
    import time

    from conformance.transform_loop import TransformLoopProcess

    loop = TransformLoopProcess("127.0.0.1:1", "g", "in", "out", "t", stall_s=3.0, max_restarts=2)
    # commits 5 records, then hangs (as a client deadlocked inside librdkafka would)
    loop.argv = [sys.executable, "-c", "import time; print('committed 5', flush=True); time.sleep(60)"]
    loop.start()
    try:
        deadline = time.monotonic() + 45
        while len(loop.restarts) < 2 and time.monotonic() < deadline:
            loop.check()
            time.sleep(0.1)
        assert len(loop.restarts) == 2 and not loop.errors
        while loop.committed < 15 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert loop.committed == 15  # three runs
        time.sleep(3.2)
        assert loop.progress(15, 100) == ["no progress for 3 s after 2 restarts"]
    finally:
        loop.stop(5)
    assert loop._proc.poll() is not None


def test_tailing_consumer_replaces_a_stalled_consumer(broker, topic_name, monkeypatch):
    """conformance/replication_workload.py's TailingConsumer: a consumer thread that stops
    delivering (as one deadlocked inside librdkafka) is replaced by one that goes on from the
    positions reached, and the abandoned thread's late records are ignored."""
    import threading

    confluent_kafka = pytest.importorskip("confluent_kafka")
    from conformance.replication_workload import TailingConsumer

    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        producer.produce(topic_name, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    release = threading.Event()

    class Stalling(TailingConsumer):
        STALL_S = 1.0

        def _run(self, generation, starts):
            if generation == 0:  # stuck until released, then delivers something stale
                release.wait(30)
                self._record(0, 0, 0, b"stale")
                return
            super()._run(generation, starts)

    consumer = Stalling(broker.bootstrap, topic_name, 1)
    consumer.start()
    stalled = consumer._thread
    try:
        assert consumer.wait_caught_up([50], 30)
        assert consumer.restarts == 1
    finally:
        release.set()
        stalled.join(10)
        consumer.stop()
    assert consumer.seen()[0][0] == b"v0" and not consumer.changed
