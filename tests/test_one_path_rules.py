"""Issue 21's structural rules, checked on the source so that a new module cannot quietly break them:
handlers do not branch on the mode, inter-broker connections are made in net/ (and by the two
long-lived clients Kafka also gives their own), nothing installs attributes on the Broker, and
the metadata stores live in kafkapy/metadata, not in the controller."""
from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "kafkapy"


def _sources(under: Path):
    for path in sorted(under.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent).as_posix(), path.read_text(encoding="utf-8")


def test_the_broker_does_not_branch_on_the_mode():
    mode_checks = re.compile(r"cluster is None|replicas is None|cluster is not None|replicas is not None")
    found = [f"{name}:{n}" for name, text in _sources(PACKAGE / "broker")
             for n, line in enumerate(text.splitlines(), 1) if mode_checks.search(line)]
    assert not found


def test_broker_connections_are_made_in_net_only():
    allowed = {"kafkapy/replication/fetcher.py", "kafkapy/controller/channel.py"}  # as Kafka's own clients
    found = [name for name, text in _sources(PACKAGE) if "BrokerConnection(" in text
             and not name.startswith("kafkapy/net/") and name not in allowed]
    assert not found


def test_nothing_installs_attributes_on_the_broker():
    found = [name for name, text in _sources(PACKAGE) if re.search(r"^def install_", text, re.M)
             and re.search(r"\bbroker\.\w+ = ", text)]
    assert not found


def test_the_metadata_stores_live_in_the_metadata_package():
    assert (PACKAGE / "metadata" / "embedded.py").is_file() and (PACKAGE / "metadata" / "zk" / "store.py").is_file()
    stores = [name for name, text in _sources(PACKAGE / "controller") if re.search(r"class \w+\(MetadataStore\)", text)]
    assert not stores
