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


_CLUSTER_MIN_ISR = (
    "Kafka 4.x in KRaft mode (eligible.leader.replicas.version=1) writes min.insync.replicas as a "
    "cluster-level dynamic default at bootstrap (DYNAMIC_DEFAULT_BROKER_CONFIG); kafkapy, like ZooKeeper "
    "mode, reports DEFAULT_CONFIG or STATIC_BROKER_CONFIG")
_REMOVED_IN_4 = ("Kafka 4.0 removed this topic config (KIP-724 message formats v0/v1, KIP-937); kafkapy keeps "
                 "Kafka 3.x's topic configs")
_ADDED_AFTER_3 = "a topic config added after Kafka 3.9; kafkapy has Kafka 3.x's topic configs"
_TIMESTAMP_AFTER = ("Kafka 4.0 changed message.timestamp.after.max.ms's default to 3600000 (1 hour); kafkapy "
                    "keeps Kafka 3.x's default, Long.MAX_VALUE")
_FSYNC_ON_ACK = ("kafkapy.log.fsync.on.ack is kafkapy's own topic config (docs/durability.md), described like "
                 "Kafka's (DEFAULT_CONFIG false); Kafka has no such config")
_ICEBERG_MODE = ("kafkapy.iceberg.mode is kafkapy's own topic config (topics as Iceberg tables, docs/tables.md), "
                 "described like Kafka's (DEFAULT_CONFIG disabled); Kafka has no such config")


def _topic_config(reference: str, name: str, reason: str) -> KnownDifference:
    return KnownDifference(reference, "admin_describe_configs", ("topic_configs", name), reason)


KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference("kafka-4.4.0-kraft", "admin_describe_configs", ("broker_min.insync.replicas", "source"),
                    _CLUSTER_MIN_ISR),
    _topic_config("kafka-4.4.0-kraft", "min.insync.replicas", _CLUSTER_MIN_ISR),
    *(_topic_config("kafka-4.4.0-kraft", name, _REMOVED_IN_4) for name in (
        "message.downconversion.enable", "message.format.version", "message.timestamp.difference.max.ms")),
    *(_topic_config("kafka-4.4.0-kraft", name, _ADDED_AFTER_3) for name in (
        "errors.deadletterqueue.group.enable", "max.decompressed.message.bytes", "remote.copy.lag.bytes",
        "remote.copy.lag.ms")),
    _topic_config("kafka-4.4.0-kraft", "message.timestamp.after.max.ms", _TIMESTAMP_AFTER),
    _topic_config("*", "kafkapy.log.fsync.on.ack", _FSYNC_ON_ACK),
    _topic_config("*", "kafkapy.iceberg.mode", _ICEBERG_MODE),
    *(KnownDifference("kafka-3.9.1-zk", scenario, (),
                      "Kafka 3.9 has no share groups (KIP-932, Kafka 4.x): setting a GROUP config answers "
                      "'Unknown resource type 32'; kafkapy serves them, as Kafka 4.x does")
      for scenario in ("share_consume", "share_consume_explicit")),
    KnownDifference(
        "kafka-3.9.1-zk", "group_consume_commit_kip848", (),
        "Kafka 3.9 in ZooKeeper mode has no KIP-848 consumer group protocol (a group.protocol=consumer "
        "consumer fails with UnsupportedVersionException); kafkapy serves it, as Kafka 4.x does"),
)


def allowed_paths(reference: str, scenario: str) -> list[KnownDifference]:
    return [d for d in KNOWN_DIFFERENCES if d.reference in ("*", reference) and d.scenario == scenario]
