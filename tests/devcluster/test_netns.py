"""The network-partition toolkit (kafkapy.devcluster.netns): nodes reach each other, a cut drops
one direction or both, heal undoes it, and close() leaves no namespace, link or process behind.
Root and nftables only: skipped loudly elsewhere."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from kafkapy.devcluster.netns import CLIENTS, NetworkLab

AVAILABLE, WHY_NOT = NetworkLab.available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"network namespaces unavailable: {WHY_NOT}")

# A TCP server in a namespace that answers every line with "ok" (a one-line program, no files).
SERVER = ("import socket\n"
          "s = socket.create_server(('{address}', 7000))\n"
          "while True:\n"
          "    c, _ = s.accept(); c.settimeout(5)\n"
          "    try:\n"
          "        c.recv(10); c.sendall(b'ok')\n"
          "    except OSError: pass\n"
          "    c.close()\n")
CLIENT = ("import socket, sys\n"
          "try:\n"
          "    c = socket.create_connection(('{address}', 7000), timeout=1.5); c.sendall(b'hi')\n"
          "    print(c.recv(10).decode())\n"
          "except OSError as e: print('fail')\n")


def reaches(lab: NetworkLab, sender: str, receiver: str) -> bool:
    """Whether a connection from `sender`'s namespace to `receiver`'s server gets its answer."""
    code = CLIENT.format(address=lab.address(receiver))
    done = subprocess.run(lab.command(sender, [sys.executable, "-c", code]), capture_output=True, text=True,
                          timeout=20)
    return done.stdout.strip() == "ok"


def client_reaches(lab: NetworkLab, receiver: str) -> bool:
    try:
        with socket.create_connection((lab.address(receiver), 7000), timeout=1.5) as c:
            c.sendall(b"hi")
            return c.recv(10) == b"ok"
    except OSError:
        return False


@pytest.fixture
def lab():
    with NetworkLab() as lab:
        for name in ("a", "b", "c"):
            lab.add(name)
            subprocess.Popen(lab.command(name, [sys.executable, "-c", SERVER.format(address=lab.address(name))]),
                             start_new_session=True)
        for name in ("a", "b", "c"):  # the servers are up
            for _ in range(50):
                if client_reaches(lab, name):
                    break
                subprocess.run(["sleep", "0.1"])
        yield lab


def test_cuts_and_heals(lab):
    assert reaches(lab, "a", "b") and reaches(lab, "b", "a") and client_reaches(lab, "c")
    lab.cut("a", "b")
    assert not reaches(lab, "a", "b") and not reaches(lab, "b", "a")
    assert reaches(lab, "a", "c") and reaches(lab, "c", "b")
    assert lab.cuts() == [("a", "b"), ("b", "a")]
    lab.heal("a", "b")
    assert reaches(lab, "a", "b") and lab.cuts() == []
    # one way: a's packets to b vanish, so neither side can open a connection (the SYN-ACK or the
    # SYN is lost), but b's packets still reach a
    lab.cut("a", "b", both_ways=False)
    assert lab.cuts() == [("a", "b")]
    assert not reaches(lab, "a", "b")
    lab.heal()
    assert reaches(lab, "a", "b")


def test_clients_cut_without_rules_in_our_namespace(lab):
    before = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout
    lab.cut(CLIENTS, "a")
    assert not client_reaches(lab, "a") and client_reaches(lab, "b")
    lab.heal(CLIENTS)
    lab.cut("b", CLIENTS, both_ways=False)
    assert not client_reaches(lab, "b")  # the answers vanish on their way back
    lab.isolate("c")
    assert not client_reaches(lab, "c") and not reaches(lab, "a", "c")
    assert subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout == before
    lab.heal()
    assert client_reaches(lab, "b") and client_reaches(lab, "c")


def test_close_leaves_nothing_behind():
    lab = NetworkLab().open()
    try:
        node = lab.add("x")
        sleeper = subprocess.Popen(lab.command("x", ["sleep", "300"]), start_new_session=True)
        deadline = time.monotonic() + 10
        while sleeper.pid not in lab.pids("x") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleeper.pid in lab.pids("x")
        prefix = lab.prefix
    finally:
        lab.close()
    assert sleeper.wait(5) == -9
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert prefix not in namespaces and f"{prefix}h" not in links
    assert node.address not in subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout
    lab.close()  # twice is fine


def test_run_in_netns_reaches_the_namespaces_own_loopback(lab):
    """A server on 127.0.0.1 inside node "a" (as a broker's control endpoint is) answers a call made
    through run_in_netns, and is not reachable from our own namespace's loopback."""
    from kafkapy.devcluster.netns import run_in_netns

    netns = lab.node("a").netns
    server = subprocess.Popen(lab.command("a", [sys.executable, "-c", SERVER.format(address="127.0.0.1")]),
                              start_new_session=True)
    try:
        def ask() -> bytes:
            with socket.create_connection(("127.0.0.1", 7000), timeout=1.5) as c:
                c.sendall(b"hi")
                return c.recv(10)

        deadline = time.monotonic() + 10
        while True:
            try:
                assert run_in_netns(netns, ask) == b"ok"
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with pytest.raises(OSError):
            ask()  # our own 127.0.0.1:7000 has no such server
    finally:
        server.kill()
        server.wait(5)
