"""Network partitions for tests: a network namespace per node, cut and healed with nftables.

Processes on one loopback interface all connect from 127.0.0.1 whatever address they listen on,
so rules on loopback cannot tell one broker's traffic from another's. Here each node (a broker,
ZooKeeper) gets its own network namespace with one address, joined to the others by a veth pair
to a bridge in a hub namespace; this process (the test and its clients) joins the bridge too, as
the node "clients", through a veth pair whose other end stays in our own namespace:

    with NetworkLab() as lab:
        zk = lab.add("zookeeper")          # Node(name="zookeeper", netns="kfp123-zookeeper", address="10.213.7.2")
        b1 = lab.add("broker-1")
        lab.command("broker-1", ["python", "-m", "kafkapy", "serve", ...])   # ["ip", "netns", "exec", ...]
        lab.cut("broker-1", "zookeeper")                     # both ways
        lab.cut("broker-1", "broker-2", both_ways=False)     # broker-1's packets to broker-2 vanish
        lab.heal()                                           # every cut

A cut drops the packets where they arrive (nftables, an `inet` table in the receiving node's
namespace), so the sender sees what a real partition shows it: silence, then timeouts, not an
error. Traffic to or from "clients" is dropped in the other node's namespace: no rule is ever
added to this process's own namespace, and the only thing added there is the veth end with an
address in a /24 that no route of the machine uses. close() (also at interpreter exit and on
SIGTERM) kills every process left in the lab's namespaces and deletes them and the veth end.

Needs root, iproute2 and nftables (Debian's `nftables`); `NetworkLab.available()` says why not.
"""
from __future__ import annotations

import atexit
import ctypes
import ipaddress
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from .launcher import chain_sigterm

__all__ = ["CLIENTS", "NetworkLab", "NetworkLabError", "Node", "run_in_netns"]

T = TypeVar("T")
CLONE_NEWNET = 0x40000000  # <sched.h>; os.CLONE_NEWNET only from Python 3.12

log = logging.getLogger(__name__)

CLIENTS = "clients"  # the node that is this process's own namespace
TABLE = "kafkapy_faults"
# 10.213.<k>.0/24, k from 1 to 250: one /24 per lab; a lab picks a k whose subnet no route uses.
SUBNET_PREFIX = "10.213"


class NetworkLabError(RuntimeError):
    """A namespace, link or rule could not be set up (the command and its output say why)."""


@dataclass(slots=True)
class Node:
    """One namespace of a lab and the one address it has on the lab's bridge."""

    name: str
    netns: str | None  # None for CLIENTS (this process's namespace)
    address: str
    cut_from: set[str] = field(default_factory=set)  # addresses whose packets to this node are dropped


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetworkLabError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
    return done


class NetworkLab:
    """Namespaces joined by a bridge, with per-pair packet drops; see the module docstring."""

    def __init__(self, prefix: str | None = None) -> None:
        # names of links are at most 15 characters: "kfp<pid % 100000>" leaves room for a suffix
        self.prefix = prefix or f"kfp{os.getpid() % 100000}"
        self.nodes: dict[str, Node] = {}
        self._hub = f"{self.prefix}-hub"
        self._host_link = f"{self.prefix}h"
        self._subnet: ipaddress.IPv4Network | None = None
        self._next_host = 2
        self._namespaces: list[str] = []
        self._opened = False

    # -- environment ------------------------------------------------------------------------------

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, "") when this process can build a lab, else (False, why not)."""
        if os.geteuid() != 0:
            return False, "network namespaces need root (CI runs as root)"
        for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
            if shutil.which(tool) is None:
                return False, f"{tool} is not installed (apt-get install {package})"
        probe = f"kfpprobe{os.getpid() % 100000}"
        done = _run(["ip", "netns", "add", probe], check=False)
        if done.returncode != 0:
            return False, f"cannot create a network namespace: {done.stderr.strip()}"
        try:
            nft = _run(["ip", "netns", "exec", probe, "nft", "add", "table", "inet", TABLE], check=False)
            if nft.returncode != 0:
                return False, f"nftables does not work here: {nft.stderr.strip()}"
        finally:
            _run(["ip", "netns", "del", probe], check=False)
        return True, ""

    # -- building ---------------------------------------------------------------------------------

    def open(self) -> NetworkLab:
        """Make the hub (a bridge) and join this process's namespace to it as CLIENTS."""
        if self._opened:
            return self
        _live.add(self)
        _cleanup_on_sigterm()
        self._opened = True
        try:
            self._subnet = self._free_subnet()
            self._add_namespace(self._hub)
            self._in(self._hub, "ip", "link", "add", "br0", "type", "bridge")
            self._in(self._hub, "ip", "link", "set", "br0", "up")
            address = self._take_address()
            _run(["ip", "link", "add", self._host_link, "type", "veth", "peer", "name", "p-clients",
                  "netns", self._hub])
            _run(["ip", "addr", "add", f"{address}/{self._subnet.prefixlen}", "dev", self._host_link])
            _run(["ip", "link", "set", self._host_link, "up"])
            self._in(self._hub, "ip", "link", "set", "p-clients", "master", "br0", "up")
            self.nodes[CLIENTS] = Node(CLIENTS, None, address)
        except BaseException:
            self.close()
            raise
        return self

    def add(self, name: str) -> Node:
        """A new namespace `name` on the bridge, with loopback up and an empty rule table."""
        if not self._opened:
            self.open()
        if name in self.nodes:
            raise ValueError(f"{name!r} is already a node of this lab")
        index = len(self.nodes)
        netns = f"{self.prefix}-{name}"
        address = self._take_address()
        self._add_namespace(netns)
        port = f"p{index}"
        _run(["ip", "link", "add", port, "netns", self._hub, "type", "veth", "peer", "name", "eth0",
              "netns", netns])
        self._in(self._hub, "ip", "link", "set", port, "master", "br0", "up")
        self._in(netns, "ip", "link", "set", "lo", "up")
        self._in(netns, "ip", "addr", "add", f"{address}/{self._subnet.prefixlen}", "dev", "eth0")
        self._in(netns, "ip", "link", "set", "eth0", "up")
        # one table, two chains: drops by source address on the way in, none on the way out
        self._nft(netns, f"add table inet {TABLE}")
        self._nft(netns, f"add set inet {TABLE} cut_from {{ type ipv4_addr; }}")
        self._nft(netns, f"add chain inet {TABLE} input {{ type filter hook input priority 0; policy accept; }}")
        self._nft(netns, f"add rule inet {TABLE} input ip saddr @cut_from drop")
        node = self.nodes[name] = Node(name, netns, address)
        return node

    def command(self, name: str, argv: list[str]) -> list[str]:
        """`argv` run inside node `name`'s namespace (`ip netns exec` execs it: same pid)."""
        node = self.node(name)
        return list(argv) if node.netns is None else ["ip", "netns", "exec", node.netns, *argv]

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node {name!r}; this lab has {sorted(self.nodes)}") from None

    def address(self, name: str) -> str:
        return self.node(name).address

    # -- faults -----------------------------------------------------------------------------------

    def cut(self, a: str, b: str, both_ways: bool = True) -> None:
        """Drop packets from `a` to `b` (and from `b` to `a` unless `both_ways` is False)."""
        self._drop(a, b)
        if both_ways:
            self._drop(b, a)

    def isolate(self, name: str, from_nodes: list[str] | None = None) -> None:
        """Cut `name` both ways from every other node (or those in `from_nodes`)."""
        for other in from_nodes if from_nodes is not None else [n for n in self.nodes if n != name]:
            self.cut(name, other)

    def heal(self, a: str | None = None, b: str | None = None) -> None:
        """Undo the cuts between `a` and `b` (both directions), or every cut of `a`, or every cut."""
        for sender in self.nodes:
            for receiver in self.nodes:
                if sender == receiver or (a is not None and a not in (sender, receiver)) or \
                        (b is not None and b not in (sender, receiver)):
                    continue
                self._undrop(sender, receiver)

    def cuts(self) -> list[tuple[str, str]]:
        """(sender, receiver) of every packet drop in place."""
        by_address = {n.address: n.name for n in self.nodes.values()}
        out = []
        for node in self.nodes.values():
            out += [(by_address[a], node.name) for a in sorted(node.cut_from) if not a.startswith("out:")]
            out += [(node.name, by_address[a[4:]]) for a in sorted(node.cut_from) if a.startswith("out:")]
        return sorted(out)

    def _drop(self, sender: str, receiver: str) -> None:
        src, dst = self.node(sender), self.node(receiver)
        if src is dst:
            raise ValueError(f"cannot cut {sender!r} from itself")
        if dst.netns is not None:
            if src.address not in dst.cut_from:
                self._nft(dst.netns, f"add element inet {TABLE} cut_from {{ {src.address} }}")
                dst.cut_from.add(src.address)
        else:  # to this process: dropped as it leaves the sender (no rule in our own namespace)
            self._ensure_output_chain(src)
            if f"out:{dst.address}" not in src.cut_from:
                self._nft(src.netns, f"add element inet {TABLE} cut_to {{ {dst.address} }}")
                src.cut_from.add(f"out:{dst.address}")

    def _undrop(self, sender: str, receiver: str) -> None:
        src, dst = self.node(sender), self.node(receiver)
        if dst.netns is not None and src.address in dst.cut_from:
            self._nft(dst.netns, f"delete element inet {TABLE} cut_from {{ {src.address} }}")
            dst.cut_from.discard(src.address)
        if dst.netns is None and f"out:{dst.address}" in src.cut_from:
            self._nft(src.netns, f"delete element inet {TABLE} cut_to {{ {dst.address} }}")
            src.cut_from.discard(f"out:{dst.address}")

    def _ensure_output_chain(self, node: Node) -> None:
        done = _run(["ip", "netns", "exec", node.netns, "nft", "list", "set", "inet", TABLE, "cut_to"], check=False)
        if done.returncode == 0:
            return
        self._nft(node.netns, f"add set inet {TABLE} cut_to {{ type ipv4_addr; }}")
        self._nft(node.netns, f"add chain inet {TABLE} output {{ type filter hook output priority 0; policy accept; }}")
        self._nft(node.netns, f"add rule inet {TABLE} output ip daddr @cut_to drop")

    # -- processes --------------------------------------------------------------------------------

    def pids(self, name: str | None = None) -> list[int]:
        """Processes running in node `name`'s namespace (or in any namespace of the lab)."""
        names = [self.node(name).netns] if name is not None else list(self._namespaces)
        pids: list[int] = []
        for netns in names:
            if netns is None:
                continue
            done = _run(["ip", "netns", "pids", netns], check=False)
            pids += [int(p) for p in done.stdout.split() if p.isdigit()]
        return pids

    # -- tearing down -----------------------------------------------------------------------------

    def close(self) -> None:
        """Kill what still runs in the lab's namespaces, delete them and our veth end. Idempotent."""
        if not self._opened:
            return
        self._opened = False
        for _ in range(3):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        else:
            log.error("processes %s survived SIGKILL in the namespaces of %s", self.pids(), self.prefix)
        _run(["ip", "link", "del", self._host_link], check=False)
        for netns in reversed(self._namespaces):
            done = _run(["ip", "netns", "del", netns], check=False)
            if done.returncode != 0:
                log.error("cannot delete network namespace %s: %s", netns, done.stderr.strip())
        self._namespaces.clear()
        self.nodes.clear()
        _live.discard(self)

    def __enter__(self) -> NetworkLab:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------------------------------

    def _add_namespace(self, netns: str) -> None:
        _run(["ip", "netns", "del", netns], check=False)  # a leftover of a killed run with our pid
        _run(["ip", "netns", "add", netns])
        self._namespaces.append(netns)

    def _in(self, netns: str, *argv: str) -> None:
        _run(["ip", "netns", "exec", netns, *argv])

    def _nft(self, netns: str, command: str) -> None:
        _run(["ip", "netns", "exec", netns, "nft", command])

    def _take_address(self) -> str:
        assert self._subnet is not None
        address = str(self._subnet.network_address + self._next_host)
        self._next_host += 1
        return address

    def _free_subnet(self) -> ipaddress.IPv4Network:
        """A 10.213.k.0/24 that overlaps no route of this namespace (another lab's, the machine's)."""
        routes = _run(["ip", "-4", "route", "show", "table", "all"], check=False).stdout.split("\n")
        used = []
        for line in routes:
            first = line.split(" ", 1)[0]
            try:
                used.append(ipaddress.ip_network(first, strict=False))
            except ValueError:
                continue  # "default", "local", "broadcast" ...
        start = os.getpid() % 250
        for step in range(250):
            subnet = ipaddress.ip_network(f"{SUBNET_PREFIX}.{(start + step) % 250 + 1}.0/24")
            if not any(subnet.overlaps(u) for u in used if u.prefixlen > 0):
                return subnet
        raise NetworkLabError(f"no free {SUBNET_PREFIX}.k.0/24 subnet for a lab")


def run_in_netns(netns: str | None, fn: Callable[[], T], timeout: float = 30.0) -> T:
    """`fn()` run on a new thread that has joined network namespace `netns` (None: here, at once).

    Sockets that `fn` opens belong to that namespace, so it can reach a server listening on the
    namespace's own 127.0.0.1 (a broker's control endpoint, which accepts loopback only). setns(2)
    moves only the calling thread, and this thread ends with `fn`: nothing else of this process
    changes namespace.
    """
    if netns is None:
        return fn()
    outcome: dict[str, object] = {}

    def enter_and_call() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"setns into {netns}: {os.strerror(errno)}")
            finally:
                os.close(fd)
            outcome["value"] = fn()
        except Exception as exc:  # handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=enter_and_call, name=f"in-netns-{netns}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"a call in network namespace {netns} took longer than {timeout:.0f} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


_live: set[NetworkLab] = set()
_sigterm_chained = False


@atexit.register
def _close_leftovers() -> None:
    for lab in list(_live):
        lab.close()


def _cleanup_on_sigterm() -> None:
    global _sigterm_chained
    if not _sigterm_chained:
        _sigterm_chained = chain_sigterm(_close_leftovers)
