"""Broker processes of a local ZooKeeper-mode cluster, for `kafkapy cluster` and the cluster tests.

    with LocalCluster(Path("/tmp/demo"), brokers=3) as cluster:
        print(cluster.bootstrap)            # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        cluster.broker(2).kill9()           # no graceful shutdown
        cluster.broker(2).start()           # same id, port and log directory as before

Every process listens on 127.0.0.1 only and runs in its own session, so a Ctrl-C in the
terminal reaches this process alone and the cluster is stopped in order (brokers first, then
ZooKeeper). Whatever is still running when the interpreter exits, or when it gets SIGTERM, is
killed, so neither an aborted test run nor a crashed `kafkapy cluster` leaves servers behind.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, TextIO

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from .launcher import (
    HOST,
    BrokerLauncher,
    answers_api_versions,
    chain_sigterm,
    free_ports,
    port_accepts,
    recv_exactly,
    suspend_sigterm_cleanup,
)
from .clock import ClockShift
from .netns import NetworkLab, run_in_netns
from .zookeeper import JavaZooKeeper, ZooKeeperStartError

__all__ = [
    "BrokerNode",
    "LocalCluster",
    "LocalClusterStartError",
    "REGISTERED_LOG_LINE",
    "cluster_defaults",
    "run_cluster",
]

log = logging.getLogger(__name__)
# Our short-lived ZooKeeper sessions (see _zookeeper_session) need not announce themselves at INFO.
_zookeeper_log = logging.getLogger(f"{__name__}.kazoo")
_zookeeper_log.setLevel(logging.WARNING)

# `python -m kafkapy` from here imports the checkout's kafkapy even without `pip install`.
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 40
# What a broker logs once its ephemeral /brokers/ids/<id> znode exists, lower-cased for a match in
# either case: Kafka's KafkaZkClient says "Registered broker 1 at path /brokers/ids/1 with addresses: ...".
REGISTERED_LOG_LINE = "registered broker {broker_id} at path /brokers/ids/{broker_id} "


class LocalClusterStartError(RuntimeError):
    """A broker exited, or was not ready in time, or its port was taken by another program."""


def answers_requests(port: int, timeout: float = 0.5, host: str = HOST) -> bool:
    """True if a broker on host:port answers an ApiVersions request (launcher.answers_api_versions)."""
    return answers_api_versions(port, host=host, timeout=timeout)


def known_controller(port: int, timeout: float = 0.5, host: str = HOST) -> int:
    """The controller id a broker on host:port reports in Metadata (-1: none yet or no answer).

    A broker learns the controller from the controller's first UpdateMetadata, shortly after it
    registers; a client that asks before then is told -1 (and librdkafka's admin client then waits
    for its next metadata refresh before it sends CreateTopics anywhere)."""
    from ..net.client import encode_request
    from ..protocol.headers import decode_response_header
    from ..protocol.messages import MetadataRequest, MetadataResponse

    version = 1
    frame = b"".join(encode_request(MetadataRequest(topics=[]), version, 1, "kafkapy-devcluster"))
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(frame)
            size = struct.unpack(">i", recv_exactly(sock, 4))[0]
            body = recv_exactly(sock, size)
        _, pos = decode_response_header(body, MetadataRequest.API_KEY, version)
        return MetadataResponse.decode(body, version, pos).controller_id
    except (OSError, ValueError, struct.error):
        return -1


def cluster_defaults(brokers: int) -> dict[str, str]:
    """Internal-topic settings that a cluster of `brokers` nodes can satisfy (Kafka's defaults, capped)."""
    return {
        "offsets.topic.replication.factor": str(min(3, brokers)),
        "share.coordinator.state.topic.replication.factor": str(min(3, brokers)),
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
    }


@dataclass(eq=False)
class BrokerNode:
    """One `python -m kafkapy serve` child process with a fixed id, port and log directory (a
    BrokerLauncher, launcher.py, plus what a ZooKeeper-mode cluster adds: the broker id, the
    ZooKeeper connect string and waiting for the registration).

    Because none of these change, `restart()` (or `start()` after `kill9()`) brings back the
    same broker over the same data. `overrides` may be edited between runs; a value of None
    removes a setting the node would otherwise pass.
    """

    broker_id: int
    port: int
    log_dir: Path  # the broker's log.dirs (their parent with `dirs` > 1)
    log_path: Path  # the process's stdout+stderr, appended across restarts
    zookeeper_connect: str | None = None
    overrides: dict[str, str | None] = field(default_factory=dict)
    # With zookeeper.connect set, start() also waits until the broker logs REGISTERED_LOG_LINE, so
    # that a started cluster has all its brokers in /brokers/ids (e.g. for replication factor N).
    await_registration: bool = True
    python: str = sys.executable
    # Run inside this network namespace (devcluster/netns.py), listening on `host`, its address.
    netns: str | None = None
    host: str = HOST
    # `control`: fault injection and its HTTP control endpoint (`kafkapy serve --control`, on a free
    # port of the 127.0.0.1 the broker sees: inside its namespace if it has one), see control().
    control: bool = False
    # `dirs` > 1: that many log.dirs, log_dir/dir-1 ... (JBOD), so that one can fail alone.
    dirs: int = 1
    # `clock`: the process runs with its wall clock movable (devcluster/clock.py): clock.set(3600)
    clock: ClockShift | None = None
    # The last run ended without closing its ZooKeeper session (killed or crashed), so its
    # registration may still be there.
    _left_session_open: bool = field(default=False, repr=False)
    _launcher: BrokerLauncher | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def proc(self) -> subprocess.Popen | None:
        return self._launcher.proc if self._launcher is not None else None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def is_running(self) -> bool:
        return self._launcher is not None and self._launcher.running

    @property
    def log_dirs(self) -> list[Path]:
        """The broker's log.dirs: log_dir itself, or its dir-1 ... dir-N with `dirs` > 1."""
        if self.dirs <= 1:
            return [self.log_dir]
        return [self.log_dir / f"dir-{n}" for n in range(1, self.dirs + 1)]

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """Which of the log dirs holds this broker's replica of topic-partition (None: none)."""
        return next((d for d in self.log_dirs if (d / f"{topic}-{partition}").is_dir()), None)

    @property
    def control_url(self) -> str | None:
        """The control endpoint of the current run (http://127.0.0.1:port in the broker's own
        network namespace), or None (no `control`, or not started)."""
        launcher = self._launcher
        if launcher is None or not self.control:
            return None
        if launcher.control_url is None and launcher.running:
            launcher._read_control_url()  # printed before the broker serves; read on first use
        return launcher.control_url

    def control_request(self, method: str, path: str, body: object = None, timeout: float = 10.0) -> object:
        """One call to the running broker's control endpoint (broker/fault_control.py, documented
        in docs/testing.md), e.g. control_request("POST", "/storage-faults", {"log_dir": d,
        "error": "EIO"}); returns the decoded JSON answer. In a network namespace the call is
        made from inside it, where the endpoint's loopback address is."""
        url = self.control_url
        # the endpoint is announced just after the broker starts serving: a call right after
        # start() may have to wait a moment for it
        deadline = time.monotonic() + timeout
        while url is None and self.control and self.is_running() and time.monotonic() < deadline:
            time.sleep(0.05)
            url = self.control_url
        if url is None:
            raise RuntimeError(f"broker {self.broker_id} has no control endpoint (control=False or not running)")
        request = urllib.request.Request(f"{url}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})

        def call() -> object:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())

        return run_in_netns(self.netns, call, timeout + 5)

    def _config(self) -> dict[str, str | None]:
        config: dict[str, str | None] = {"broker.id": str(self.broker_id), "zookeeper.connect": self.zookeeper_connect}
        if self.dirs > 1:
            config["log.dirs"] = ",".join(str(d) for d in self.log_dirs)
        return {**config, **self.overrides}

    def _new_launcher(self) -> BrokerLauncher:
        # made anew for each run: the port, overrides and connect string may have changed since
        return BrokerLauncher(self._config(), mode="process", port=self.port, log_dir=self.log_dir,
                              log_path=self.log_path, python=self.python, name=f"broker-{self.broker_id}",
                              host=self.host, netns=self.netns, control=self.control,
                              env={**os.environ, **self.clock.env()} if self.clock is not None else None)

    def settings(self) -> dict[str, str]:
        """The broker properties this node is started with."""
        return self._new_launcher().settings()

    def command(self) -> list[str]:
        return self._new_launcher().command()

    def start(self, timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Start the process and return once it serves (see `wait_ready`).

        After a kill or crash this first waits (within `timeout`) for ZooKeeper to expire the
        old session: until then /brokers/ids/<id> still exists and a new broker with this id
        refuses to start, as Kafka's does.
        """
        deadline = time.monotonic() + timeout
        self.wait_registration_expired(timeout)
        self.launch()
        self.wait_ready(max(1.0, deadline - time.monotonic()))

    def wait_registration_expired(self, timeout: float) -> None:
        """Wait until this broker's znode from an unclean stop is gone; give up silently at `timeout`."""
        connect = self.settings().get("zookeeper.connect")
        if not (self._left_session_open and self.await_registration and connect):
            return
        deadline = time.monotonic() + timeout
        path = f"/brokers/ids/{self.broker_id}"
        with _zookeeper_session(connect, min(5.0, timeout)) as client:
            while client is not None and client.exists(path) and time.monotonic() < deadline:
                time.sleep(0.2)
        self._left_session_open = False

    def launch(self) -> None:
        """Start the process without waiting for it; `LocalCluster` starts all brokers at once."""
        if self.is_running():
            raise RuntimeError(f"broker {self.broker_id} is already running (pid {self.pid})")
        self.check_port_free()
        self._launcher = self._new_launcher()
        self._launcher.launch()
        _stop_clusters_on_sigterm()

    def check_port_free(self) -> None:
        """Raise LocalClusterStartError if another program listens on this broker's port."""
        if not self.is_running() and port_accepts(self.port, host=self.host):
            raise LocalClusterStartError(f"port {self.port} on {self.host} (broker {self.broker_id}) is already in use")

    def wait_ready(self, timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Wait until the broker answers ApiVersions (and, with `await_registration`, has logged that it
        registered in ZooKeeper). Raises LocalClusterStartError, killing the process on timeout."""
        assert self.proc is not None, "wait_ready() before launch()"
        deadline = time.monotonic() + timeout
        registers = self.await_registration and "zookeeper.connect" in self.settings()
        while True:
            code = self.proc.poll()
            if code is not None:
                self.wait_stopped(0)
                raise LocalClusterStartError(self._failure(f"exited with code {code}"))
            serving = answers_requests(self.port, host=self.host)
            if serving and (not registers or self._registered()):
                return
            if time.monotonic() > deadline:
                self.kill9()
                waited_for = "registered in ZooKeeper" if serving else "answered requests"
                raise LocalClusterStartError(self._failure(f"had not {waited_for} after {timeout:.0f} s"))
            time.sleep(0.1)

    def _registered(self) -> bool:
        assert self._launcher is not None
        return REGISTERED_LOG_LINE.format(broker_id=self.broker_id) in self._launcher.output().lower()

    def _failure(self, what: str) -> str:
        return (f"broker {self.broker_id} ({self.bootstrap}) {what}; log {self.log_path}, last lines:\n"
                f"{self.log_tail()}")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the process output, for error messages."""
        return (self._launcher or self._new_launcher()).log_tail(lines)

    def send_signal(self, sig: int = signal.SIGTERM) -> None:
        """Signal the broker if it runs; `wait_stopped` then waits for it."""
        if self._launcher is not None:
            self._launcher.send_signal(sig)

    def wait_stopped(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> int | None:
        """Wait up to `timeout` s for the process to exit, then SIGKILL it. Returns its exit code."""
        if self._launcher is None or self._launcher.proc is None:
            return None
        code = self._launcher.wait_stopped(timeout)
        self._left_session_open = code != 0
        return code

    def stop(self, sig: int = signal.SIGTERM, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> int | None:
        """Send `sig`, wait up to `timeout` s, then SIGKILL. Returns the exit code (None if never started)."""
        self.send_signal(sig)
        return self.wait_stopped(timeout)

    def kill9(self) -> int | None:
        """SIGKILL the broker: no controlled shutdown, no flush."""
        return self.stop(signal.SIGKILL, timeout=5.0)

    def pause(self) -> None:
        """SIGSTOP the broker: it keeps its sockets and its ZooKeeper session until that times out."""
        if self._launcher is not None:
            self._launcher.pause()

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self._launcher is not None:
            self._launcher.resume()

    def restart(self, sig: int = signal.SIGTERM, timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Stop with `sig` (if running) and start again with the same id, port and data."""
        self.stop(sig)
        self.start(timeout)


class LocalCluster:
    """ZooKeeper (unless `zookeeper_connect` names one) and brokers 1..N on 127.0.0.1.

    Layout under `work_dir`: `zookeeper/` (ZooKeeper's data), `broker-N/` (broker N's log.dirs)
    and `broker-N.log` (its output). Ports are `base_port`, `base_port + 1`, ... or free ones.
    `overrides` apply to every broker, over `cluster_defaults`; a value of None removes a setting.
    `control`: every broker gets a fault-injection control endpoint (BrokerNode.control_request);
    `log_dirs`: how many log.dirs each broker has (BrokerNode.dirs); `clocks`: every broker's wall
    clock can jump (BrokerNode.clock, devcluster/clock.py; offset 0 until set).
    """

    def __init__(self, work_dir: Path, brokers: int = 3, overrides: Mapping[str, object] | None = None,
                 zookeeper_connect: str | None = None, base_port: int | None = None, *,
                 python: str | None = None, await_registration: bool = True,
                 network: NetworkLab | None = None, control: bool = False, log_dirs: int = 1,
                 clocks: bool = False) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        self.work_dir = Path(work_dir).resolve()  # processes run with other working dirs
        self._given_connect = zookeeper_connect
        # With a network lab each process gets a namespace of its own (node "zookeeper", "broker-N")
        # and listens on its address there, on Kafka's and ZooKeeper's usual ports.
        self.network = network
        self.zookeeper: JavaZooKeeper | None = None
        if not zookeeper_connect:
            self.zookeeper = JavaZooKeeper(self.work_dir / "zookeeper") if network is None else JavaZooKeeper(
                self.work_dir / "zookeeper", port=2181, **self._namespace("zookeeper"))
        self._auto_ports = base_port is None and network is None
        ports = [9092] * brokers if network is not None else \
            free_ports(brokers) if base_port is None else list(range(base_port, base_port + brokers))
        # what every broker is started with, brokers added later included
        self._settings = {**cluster_defaults(brokers),
                          **{key: None if value is None else str(value) for key, value in (overrides or {}).items()}}
        self._await_registration = await_registration
        self._python = python or sys.executable
        self._control, self._log_dirs, self._clocks = control, log_dirs, clocks
        self.brokers: dict[int, BrokerNode] = {
            broker_id: self._node(broker_id, port) for broker_id, port in enumerate(ports, start=1)}

    def _namespace(self, name: str) -> dict[str, str]:
        """host and netns of a new node `name` of our network lab."""
        assert self.network is not None
        node = self.network.add(name)
        return {"host": node.address, "netns": node.netns}

    def _node(self, broker_id: int, port: int) -> BrokerNode:
        placed = self._namespace(f"broker-{broker_id}") if self.network is not None else {}
        return BrokerNode(**placed,
            broker_id=broker_id,
            port=port,
            log_dir=self.work_dir / f"broker-{broker_id}",
            log_path=self.work_dir / f"broker-{broker_id}.log",
            overrides=dict(self._settings),
            await_registration=self._await_registration,
            python=self._python,
            control=self._control,
            dirs=self._log_dirs,
            clock=ClockShift(self.work_dir / f"broker-{broker_id}.clock") if self._clocks else None,
        )

    @property
    def zookeeper_connect(self) -> str:
        """The brokers' zookeeper.connect: the given string, or our ZooKeeper's address once started."""
        if self._given_connect:
            return self._given_connect
        assert self.zookeeper is not None
        return self.zookeeper.connect

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.brokers.values())

    def broker(self, broker_id: int) -> BrokerNode:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise KeyError(f"no broker {broker_id}; this cluster has brokers {sorted(self.brokers)}") from None

    def add_broker(self, broker_id: int | None = None, overrides: Mapping[str, object] | None = None,
                   start: bool = True, timeout: float = DEFAULT_START_TIMEOUT_S) -> BrokerNode:
        """A new broker for the running cluster (next free id unless given), started unless `start`
        is False; it gets the cluster's settings, `overrides` on top, and a free port.

        Like a broker added to a Kafka cluster it holds no replicas until topics are created, grown or
        reassigned onto it; the internal-topic settings stay those of the cluster's original size.
        """
        if broker_id is None:
            broker_id = max(self.brokers, default=0) + 1
        if broker_id in self.brokers:
            raise ValueError(f"broker {broker_id} is already in this cluster")
        node = self._node(broker_id, 9092 if self.network is not None else free_ports(1)[0])
        node.overrides.update({key: None if value is None else str(value) for key, value in (overrides or {}).items()})
        node.zookeeper_connect = self.zookeeper_connect
        self.brokers[broker_id] = node
        if start:  # a node that fails to start stays listed, so its log_path can be read
            deadline = time.monotonic() + timeout
            node.start(timeout)
            if node.await_registration:  # as start(): ready once it knows the controller (bounded)
                while time.monotonic() < deadline and known_controller(node.port, host=node.host) < 0:
                    time.sleep(0.05)
        return node

    def start(self, timeout: float = 60.0) -> None:
        """Start ZooKeeper, then all brokers at once; return when every broker is ready.

        On any failure everything started so far is stopped again before the error propagates.
        """
        deadline = time.monotonic() + timeout
        _live_clusters.add(self)
        try:
            for node in self.brokers.values():  # fail before starting anything if a port is taken
                if self._auto_ports and node.proc is None and port_accepts(node.port):
                    # a port picked as free was taken since by another program: pick again (a
                    # broker that ran already keeps its port, clients know it)
                    node.port = free_ports(1)[0]
                node.check_port_free()
            if self.zookeeper is not None and not self.zookeeper.running:
                self.zookeeper.start(timeout)
            waiting = [node for node in self.brokers.values() if not node.is_running()]
            for node in waiting:
                node.zookeeper_connect = self.zookeeper_connect
                node.wait_registration_expired(max(0.0, deadline - time.monotonic()))
                node.launch()
            for node in waiting:
                node.wait_ready(max(1.0, deadline - time.monotonic()))
            if waiting and all(node.await_registration for node in waiting):
                # ready for clients once every broker knows the controller (bounded: a cluster
                # whose controller cannot be elected still starts, and its tests say why)
                while time.monotonic() < deadline and any(known_controller(n.port, host=n.host) < 0 for n in waiting):
                    time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """Stop the brokers, the controller last, then ZooKeeper (if ours).

        The other brokers get SIGTERM together and the controller after them: each broker's
        controlled shutdown asks the controller to move its leaderships, which is quick while
        the controller is up and waits for retries while a new one is being elected. Brokers
        still running `timeout` s after their SIGTERM are killed.
        """
        running = [node for node in self.brokers.values() if node.is_running()]
        controller = self.controller_id() if len(running) > 1 else None
        for group in ([n for n in running if n.broker_id != controller],
                      [n for n in running if n.broker_id == controller]):
            for node in group:
                node.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for node in group:
                node.wait_stopped(max(0.0, deadline - time.monotonic()))
        if self.zookeeper is not None:
            self.zookeeper.stop()
        _live_clusters.discard(self)

    def controller_id(self) -> int | None:
        """The broker id in ZooKeeper's /controller, or None (no controller, or no ZooKeeper to ask)."""
        data = None
        with _zookeeper_session(self.zookeeper_connect, 2.0) as client:
            if client is not None and client.exists("/controller"):
                data, _ = client.get("/controller")
        if data is None:
            return None
        try:
            return int(json.loads(data)["brokerid"])
        except (ValueError, KeyError, TypeError):
            log.warning("cannot read the controller id from /controller: %r", data)
            return None

    def _kill(self) -> None:
        """Last resort (interpreter exit, SIGTERM): SIGKILL, brokers first."""
        for node in self.brokers.values():
            if node.is_running():
                node.send_signal(signal.SIGKILL)
        if self.zookeeper is not None:
            self.zookeeper.kill9()

    def __enter__(self) -> LocalCluster:
        if not any(node.is_running() for node in self.brokers.values()):
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def run_cluster(work_dir: Path, brokers: int = 3, base_port: int = 9092, overrides: Mapping[str, str] | None = None,
                zookeeper_connect: str | None = None, out: TextIO = sys.stdout) -> int:
    """`kafkapy cluster`: start a LocalCluster, say where it is, run until SIGINT/SIGTERM, stop it.

    Returns the process exit code: 0 after a clean stop, 1 if the cluster could not start.
    """
    if zookeeper_connect is None:
        available, reason = JavaZooKeeper.available()
        if not available:
            print(f"kafkapy cluster: cannot start ZooKeeper: {reason}", file=sys.stderr)
            return 1
    cluster = LocalCluster(work_dir, brokers=brokers, overrides=overrides, zookeeper_connect=zookeeper_connect,
                           base_port=base_port)
    restore = _interrupt_on_sigterm()
    try:
        try:
            cluster.start()
        except (LocalClusterStartError, ZooKeeperStartError) as exc:
            print(f"kafkapy cluster: {exc}", file=sys.stderr)
            return 1
        _print_cluster(cluster, out)
        _watch_until_interrupted(cluster)
    except KeyboardInterrupt:
        then = ", then ZooKeeper" if cluster.zookeeper is not None else ""
        print(f"stopping the brokers{then}", file=out, flush=True)
    finally:
        cluster.stop()
        restore()
    return 0


def _print_cluster(cluster: LocalCluster, out: TextIO) -> None:
    for node in cluster.brokers.values():
        print(f"broker {node.broker_id}  {node.bootstrap}  log {node.log_path}", file=out)
    print(f"bootstrap servers: {cluster.bootstrap}", file=out)
    zookeeper_log = f"  log {cluster.zookeeper.log_path}" if cluster.zookeeper is not None else ""
    print(f"zookeeper.connect: {cluster.zookeeper_connect}{zookeeper_log}", file=out)
    print("Ctrl-C stops the cluster.", file=out, flush=True)


def _watch_until_interrupted(cluster: LocalCluster) -> None:
    """Sleep until KeyboardInterrupt, saying once when a broker dies on its own."""
    reported: set[int] = set()
    while True:
        time.sleep(1.0)
        for node in cluster.brokers.values():
            if node.proc is not None and node.proc.poll() is not None and node.broker_id not in reported:
                reported.add(node.broker_id)
                log.error("broker %d exited with code %s; see %s", node.broker_id, node.proc.returncode,
                          node.log_path)


def _interrupt_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM stop `run_cluster` as Ctrl-C does, instead of the kill-everything fallback."""
    global _sigterm_handled

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    was_handled, _sigterm_handled = _sigterm_handled, True
    restore_launcher = suspend_sigterm_cleanup()  # nor the launcher's: we stop the brokers in order

    def restore() -> None:
        global _sigterm_handled
        signal.signal(signal.SIGTERM, previous)
        _sigterm_handled = was_handled
        restore_launcher()

    return restore


@contextlib.contextmanager
def _zookeeper_session(connect: str, timeout: float) -> Iterator[KazooClient | None]:
    """A short ZooKeeper session on `connect` (chroot included), or None if it cannot be had in time."""
    client = KazooClient(hosts=connect, logger=_zookeeper_log)
    try:
        try:
            client.start(timeout=timeout)
        except KazooTimeoutError:
            log.warning("cannot reach ZooKeeper at %s within %.0f s", connect, timeout)
            yield None
            return
        try:
            yield client
        except KazooException as exc:
            log.warning("ZooKeeper at %s: %s", connect, exc)
    finally:
        client.stop()
        client.close()


# ------------------------------------------------------------------ leftovers

# Started and not yet stopped; whatever is in here when the interpreter ends is killed. (Broker
# processes on their own are the launcher's to kill; a cluster also has its ZooKeeper.)
_live_clusters: set[LocalCluster] = set()
_sigterm_handled = False


@atexit.register
def _kill_leftovers() -> None:
    """SIGKILL the brokers, then the ZooKeeper, of every cluster this process started and did not stop."""
    for cluster in list(_live_clusters):
        cluster._kill()
    _live_clusters.clear()


def _stop_clusters_on_sigterm() -> None:
    """Kill the leftover clusters on SIGTERM too (once; launcher.chain_sigterm)."""
    global _sigterm_handled
    if not _sigterm_handled:
        _sigterm_handled = chain_sigterm(_kill_leftovers)
