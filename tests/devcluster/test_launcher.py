"""The broker launcher (kafkapy/devcluster/launcher.py) with real brokers: ready at the first
ApiVersions answer, SIGSTOP/SIGCONT, kill -9 and restart on the same port and log dir, in either
mode, and nothing left behind by close()."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from kafkapy.devcluster.launcher import BrokerLauncher, BrokerStartError, answers_api_versions, port_accepts

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_start_kill_restart_close(mode: str) -> None:
    launcher = BrokerLauncher({"num.partitions": "2"}, mode=mode)
    try:
        launcher.start()
        port, log_dir = launcher.port, launcher.log_dir
        assert launcher.running and answers_api_versions(port)
        assert launcher.settings()["listeners"] == f"PLAINTEXT://127.0.0.1:{port}"
        launcher.kill9()
        assert not launcher.running and not port_accepts(port)
        launcher.start()
        assert (launcher.port, launcher.log_dir) == (port, log_dir)
        launcher.restart()
        assert launcher.running and launcher.port == port
    finally:
        launcher.close()
    assert not launcher.running and not port_accepts(port)
    assert not log_dir.exists()


def test_pause_resume_and_output() -> None:
    with BrokerLauncher(mode="process") as launcher:
        launcher.start()
        launcher.pause()
        assert not answers_api_versions(launcher.port, timeout=0.3)
        launcher.resume()
        assert answers_api_versions(launcher.port)
        assert "started in" in launcher.output()  # this run's output, after the command line
        assert "serve --override" in launcher.log_path.read_text()
        launcher.pause()  # a paused broker still stops on SIGTERM (it is woken up for it)
        assert launcher.stop(signal.SIGTERM, timeout=20) == 0
        log_path = launcher.log_path
    assert not log_path.exists()


def test_a_broker_that_cannot_start_says_why_and_leaves_no_process(tmp_path: Path) -> None:
    launcher = BrokerLauncher({"no.such.property.type.check": None, "num.partitions": "not-a-number"},
                              mode="process", log_dir=tmp_path / "data")
    with pytest.raises(BrokerStartError, match="num.partitions"):
        launcher.start(timeout=20)
    assert not launcher.running
    assert (tmp_path / "data" / "broker.log").exists()  # a given log dir is kept, with the output
