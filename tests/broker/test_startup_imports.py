"""What `kafkapy serve` imports before it answers its first request (issue 21: start-up within 0.15 s).

A broker process is started in a child interpreter with the CLI's own entry point; a thread in it
sends one ApiVersions request, and once answered the modules then loaded are printed. Each module
named below costs start-up time and is only needed later (a partition, a configured feature, a
group), so it must not be among them: these are the lazy loads the composition root decides.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Loaded later, when first needed: the reason is next to each.
NOT_BEFORE_FIRST_ANSWER = {
    "dataclasses": "no dataclass on the start-up path (about 1 ms each to create)",
    "decimal": "double formatting without decimal",
    "argparse": "plain `kafkapy serve` lines are parsed without it (cli._plain_serve_args)",
    "uuid": "with the first topic id (it imports `platform`); the cluster id is made from os.urandom",
    "kafkapy.protocol.messages.fetch": "with the first Fetch (replica_manager._load_fetch_types)",
    "kafkapy.log.partition_log": "with the first partition",
    "kafkapy.log.recovery": "with the first partition on disk",
    "kafkapy.log.compaction": "with the first cleaning",
    "kafkapy.log.dir_move": "with the first move between log dirs",
    "kafkapy.broker.fetch_sessions": "with the first Fetch",
    "kafkapy.security.authorizer": "only with authorizer.class.name",
    "kafkapy.security.tls": "only with a TLS listener",
    "kafkapy.security.quotas": "with the first client quota configured (security/quota_tracker.py)",
    "kafkapy.metadata.partition_changes": "with the first election or reassignment",
    "kafkapy.replication.partition": "with the first partition hosted",
    "kafkapy.metadata.acls": "with the first ACL or authorized request",
    "kafkapy.metrics.exporter": "only with kafkapy.metrics.listener",
    "kafkapy.admin.commands": "only for the admin commands",
    "kafkapy.controller": "only in a cluster",
    "kafkapy.groupcoord": "with the first group request",
    "kafkapy.txncoord": "with the first transaction request",
}

_CHILD = textwrap.dedent("""
    import json, os, signal, socket, struct, sys, threading, time
    port, log_dir = int(sys.argv[1]), sys.argv[2]
    seen = {}
    def first_request():
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    os._exit(3)
                time.sleep(0.005)
        body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"  # ApiVersions v0
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", sock.recv(4))[0]
        seen["modules"] = sorted(sys.modules)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=first_request, daemon=True).start()
    from kafkapy.cli import main
    main(["serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={log_dir}"])
    print(json.dumps(seen.get("modules", [])))
""")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.timeout(60)
def test_the_first_answer_needs_none_of_the_lazy_modules(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(_free_port()), str(tmp_path / "data")], env=env,
                          capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert "kafkapy.broker.broker" in modules  # it did serve
    loaded = {name: why for name, why in NOT_BEFORE_FIRST_ANSWER.items()
              if any(m == name or m.startswith(name + ".") for m in modules)}
    assert not loaded, f"imported before the first answer: {loaded}"
