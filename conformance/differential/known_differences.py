"""Differences between kafkapy and a real Apache Kafka that the differential runs accept.

Each entry names the reference it applies to, the scenario, and the path (keys) of the `observed`
value that may differ (the rest of `observed`, and `status`, must still be the same), with a one-line
reason; docs/compatibility.md shows the same reason ("Differential runs against Apache Kafka").
Anything not listed here is a kafkapy defect.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KNOWN_DIFFERENCES", "KnownDifference", "allowed_paths"]


@dataclass(frozen=True, slots=True)
class KnownDifference:
    reference: str      # "kafka-4.4.0-kraft", ... or "*"
    scenario: str
    path: tuple[str, ...]  # keys into `observed`, e.g. ("broker_min.insync.replicas", "source");
                           # () = the whole result (status too) may differ
    reason: str         # one line, also in docs/compatibility.md


KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "kafka-4.4.0-kraft", "admin_describe_configs", ("broker_min.insync.replicas", "source"),
        "Kafka 4.x in KRaft mode (eligible.leader.replicas.version=1) writes min.insync.replicas as a "
        "cluster-level dynamic default at bootstrap (DYNAMIC_DEFAULT_BROKER_CONFIG); kafkapy, like ZooKeeper "
        "mode, reports DEFAULT_CONFIG or STATIC_BROKER_CONFIG"),
    KnownDifference(
        "kafka-3.9.1-zk", "group_consume_commit_kip848", (),
        "Kafka 3.9 in ZooKeeper mode has no KIP-848 consumer group protocol (a group.protocol=consumer "
        "consumer fails with UnsupportedVersionException); kafkapy serves it, as Kafka 4.x does"),
)


def allowed_paths(reference: str, scenario: str) -> list[KnownDifference]:
    return [d for d in KNOWN_DIFFERENCES if d.reference in ("*", reference) and d.scenario == scenario]
