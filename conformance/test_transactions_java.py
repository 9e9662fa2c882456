"""Transactions with the Java client (kafka-clients 3.9.1) against a real kafkapy process:
conformance/java/TransactionCheck.java (commit/abort through read_committed, the last stable
offset, consume-transform-produce with group offsets, fencing, transaction admin views)."""
from __future__ import annotations

import uuid

from conformance.java.test_java_clients import JavaPrograms, java_programs  # noqa: F401  (fixture)


def test_java_transactions(broker, java_programs: JavaPrograms) -> None:  # noqa: F811
    java_programs.run("TransactionCheck", broker.bootstrap, f"java-txn-{uuid.uuid4().hex[:8]}", timeout=60)
