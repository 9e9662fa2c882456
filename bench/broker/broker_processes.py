"""Start broker processes for the benchmark, time their readiness and measure their memory.

kafkapy is started by the broker launcher (kafkapy/devcluster/launcher.py, the same that starts the
brokers of the tests and of `kafkapy cluster`): `python -m kafkapy serve` on a free loopback port and
a fresh log dir. Other brokers (tansu, from bench/peers.py with memory storage) are started from
their argv here. Readiness is timed here, finer than the launcher's own wait: spawn to TCP accept and
spawn to the first ApiVersions answer.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))

import peers  # noqa: E402  (bench/peers.py)

from kafkapy.devcluster.launcher import BrokerLauncher, free_port  # noqa: E402

START_TIMEOUT_S = 20.0


@dataclass(slots=True)
class BrokerKind:
    """How to launch one broker implementation on a given port and scratch directory (`command` is
    None for kafkapy: the launcher knows its argv)."""

    name: str
    command: Callable[[int, Path], list[str]] | None
    cwd: Path | None = None
    note: str = ""


def _tansu_command(port: int, work_dir: Path) -> list[str]:
    return peers.tansu_command(port)


BROKER_KINDS = {
    "kafkapy": BrokerKind("kafkapy", None, note="python -m kafkapy serve, disk log dir"),
    "tansu": BrokerKind("tansu", _tansu_command, note=f"tansu {peers.TANSU_VERSION}, memory://"),
}


class BrokerFailed(RuntimeError):
    """The broker did not start, or died, or did not answer."""


@dataclass
class RunningBroker:
    """One broker process started by this benchmark."""

    kind: BrokerKind
    port: int
    work_dir: Path
    proc: subprocess.Popen
    spawned_at: float
    log_path: Path
    launcher: BrokerLauncher | None = None  # kafkapy's

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as error:
            return f"<no log: {error}>"

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise BrokerFailed(f"{self.kind.name} exited with {self.proc.returncode}:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.launcher is not None:
            self.launcher.close()
        elif self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        try:  # the broker's session: whatever it started goes with it
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(5)
        shutil.rmtree(self.work_dir, ignore_errors=True)


def spawn(kind: BrokerKind) -> RunningBroker:
    """Start a broker process on a free loopback port (returns immediately)."""
    work_dir = Path(tempfile.mkdtemp(prefix=f"kafkapy-bench-{kind.name}-"))
    log_path = work_dir / "broker.log"
    if kind.command is None:  # kafkapy
        launcher = BrokerLauncher(mode="process", log_dir=work_dir / "data", log_path=log_path, name="bench")
        launcher.launch()
        return RunningBroker(kind, launcher.port, work_dir, launcher.proc, launcher.spawned_at, log_path, launcher)
    port = free_port()
    argv = kind.command(port, work_dir)
    with open(log_path, "wb") as log:
        spawned_at = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=kind.cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return RunningBroker(kind, port, work_dir, proc, spawned_at, log_path)


def _api_versions_v0(sock: socket.socket, timeout: float) -> None:
    """Send ApiVersions v0 and read one whole response frame."""
    client_id = b"bench"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    sock.settimeout(timeout)
    sock.sendall(struct.pack(">i", len(body)) + body)
    header = _recv_exactly(sock, 4)
    (size,) = struct.unpack(">i", header)
    frame = _recv_exactly(sock, size)
    (correlation_id, error_code) = struct.unpack(">ih", frame[:6])
    if correlation_id != 1 or error_code != 0:
        raise BrokerFailed(f"ApiVersions answered correlation {correlation_id} error {error_code}")


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks += chunk
    return bytes(chunks)


def wait_ready(broker: RunningBroker, timeout: float = START_TIMEOUT_S) -> tuple[float, float]:
    """Wait until the broker accepts TCP and answers ApiVersions; return both delays in seconds."""
    deadline = broker.spawned_at + timeout
    accept_s = None
    while time.perf_counter() < deadline:
        broker.check_alive()
        try:
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=1.0)
        except OSError:
            time.sleep(0.002)
            continue
        with sock:
            if accept_s is None:
                accept_s = time.perf_counter() - broker.spawned_at
            try:
                _api_versions_v0(sock, timeout=max(0.1, deadline - time.perf_counter()))
            except (OSError, ConnectionError, struct.error):
                time.sleep(0.005)  # listening but not serving yet: try again
                continue
            return accept_s, time.perf_counter() - broker.spawned_at
    raise BrokerFailed(f"{broker.kind.name} not ready within {timeout:.0f} s:\n{broker.log_tail()}")


def _process_tree(root_pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, pending = [], [root_pid]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, ()))
    return found


def process_tree_cpu_s(root_pid: int) -> float:
    """User + system CPU seconds used so far by a process and its descendants (threads included)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in _process_tree(root_pid):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def process_tree_rss_mb(root_pid: int) -> float:
    """Resident set size of a process and all its descendants, in MB (10^6 bytes)."""
    total_kb = 0
    for pid in _process_tree(root_pid):
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb * 1024 / 1e6
