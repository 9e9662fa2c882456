"""The per-version wire differential's accepted differences, and the kafkapy defects it found.

A difference (conformance/differential/wire_versions.py) is (reference, api, version, request label,
field path, kafkapy value, Kafka value). ACCEPTED lists what may differ, each with a one-line reason;
DEFECTS lists kafkapy defects (the test xfails each, strictly, so a fix shows up); anything else
fails the test. Patterns are fnmatch patterns; versions a (low, high) range.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

__all__ = ["ACCEPTED", "DEFECTS", "WireDifference", "classify"]


@dataclass(frozen=True, slots=True)
class WireDifference:
    reference: str                 # a REFERENCES name or "*"
    api: str
    versions: tuple[int, int]
    label: str                     # fnmatch pattern of the request label
    path: str                      # fnmatch pattern of the field path, list indexes written "[]"
    reason: str                    # one line; a defect's starts with "defect: "

    def matches(self, diff) -> bool:
        path = re.sub(r"\[\d+\]", "[]", diff.path)
        return (self.reference in ("*", diff.reference) and self.api == diff.api
                and self.versions[0] <= diff.version <= self.versions[1]
                and fnmatchcase(diff.label, self.label) and fnmatchcase(path, self.path.replace("[]", "[[][]]")))

    @property
    def name(self) -> str:
        versions = f"v{self.versions[0]}+" if self.versions[1] == ALL[1] else f"v{self.versions[0]}-{self.versions[1]}"
        return f"{self.api}-{versions}-{self.label}-{self.path}".replace("*", "any").replace("[", "").replace("]", "")


ALL = (0, 32767)

ZK39, KRAFT44 = "kafka-3.9.1-zk", "kafka-4.4.0-kraft"

# Which feature names ApiVersions carries may differ; min versions of 0 only at v4+ (KAFKA-17492;
# v5 is Kafka 4.4's KIP-1242 version, the same answer).
_FEATURE_SHAPE = (((3, 5), "supported_feature_names"), ((3, 5), "finalized_feature_names"),
                  ((4, 5), "supported_feature_min_version_0"))

ACCEPTED: tuple[WireDifference, ...] = (
    *(WireDifference(ZK39, "ApiVersions", versions, "*", path,
                     "Kafka 3.9 in ZooKeeper mode reports no features; kafkapy reports the ones it implements "
                     "(KIP-584) as Kafka 4.x does")
      for versions, path in _FEATURE_SHAPE),
    *(WireDifference(KRAFT44, "ApiVersions", versions, "*", path,
                     "kafkapy implements a subset of Kafka 4.4's features (no eligible.leader.replicas.version, "
                     "streams.version; kraft.version and transaction.version not finalized): it is no KRaft node")
      for versions, path in _FEATURE_SHAPE),
    WireDifference(KRAFT44, "CreateTopics", (7, ALL[1]), "validate-only", "topics[].topic_id",
                   "Kafka 4.x's KRaft controller assigns a topic id even to a validate-only creation; Kafka 3.9 "
                   "(ZooKeeper) and kafkapy answer the zero id"),
    WireDifference(ZK39, "CreateTopics", ALL, "validate-rf-too-big", "topics[].error_message",
                   "kafkapy words a too-large replication factor as Kafka 3.x's KRaft controller does; ZooKeeper-mode "
                   "Kafka says 'Replication factor: 3 larger than available brokers: 1.'"),
    WireDifference(KRAFT44, "CreateTopics", ALL, "validate-rf-too-big", "topics[].error_message",
                   "Kafka 4.x's message adds 'or some brokers have all their log directories cordoned' (KIP-1066 "
                   "cordoned log dirs, which kafkapy does not have)"),
    WireDifference(KRAFT44, "DescribeConfigs", ALL, "topic", "results[].fixed_configs.min.insync.replicas.*",
                   "Kafka 4.x in KRaft mode writes min.insync.replicas as a cluster-level dynamic default at "
                   "bootstrap (DYNAMIC_DEFAULT_BROKER_CONFIG); kafkapy, like ZooKeeper mode, reports DEFAULT_CONFIG"),
    WireDifference(ZK39, "DescribeConfigs", (0, 0), "*", "results[].fixed_configs.*.is_default",
                   "Kafka 3.x never sets DescribeConfigs v0's IsDefault (ConfigHelper builds entries without it: "
                   "always false); kafkapy sets it from the config source, as Kafka 1.0 did"),
    WireDifference(ZK39, "ConsumerGroupDescribe", ALL, "*", "*",
                   "Kafka 3.9 in ZooKeeper mode has no KIP-848 group coordinator (UNSUPPORTED_VERSION for every "
                   "group); kafkapy serves it, as Kafka 4.x does"),
    WireDifference(ZK39, "OffsetFetch", (0, 0), "*", "topics*",
                   "OffsetFetch v0 reads offsets stored in ZooKeeper on Kafka 3.x (none here: "
                   "UNKNOWN_TOPIC_OR_PARTITION); kafkapy has no ZooKeeper-stored offsets and answers from its own"),
    WireDifference(ZK39, "OffsetFetch", (1, 1), "secret-group", "topics",
                   "Kafka 3.9 answers an unauthorized OffsetFetch v1 with no topics; Kafka 4.x, like kafkapy, with "
                   "each requested partition's GROUP_AUTHORIZATION_FAILED"),
    WireDifference(KRAFT44, "DescribeClientQuotas", ALL, "bad-entity", "error_message",
                   "an unknown entity type (UNSUPPORTED_VERSION, as both): kafkapy keeps Kafka 3.9's words 'Custom "
                   "entity type 'x' not supported'; Kafka 4.x says 'Unsupported entity type x'"),
    WireDifference(ZK39, "DescribeGroups", (3, ALL[1]), "*", "groups[].authorized_operations",
                   "a group's authorized_operations are Kafka 4.x's set (3400: DESCRIBE_CONFIGS and ALTER_CONFIGS "
                   "too, for the group configs kafkapy serves); Kafka 3.9 has no group configs (328)"),
    WireDifference(KRAFT44, "CreateTopics", (5, ALL[1]), "validate-only",
                   "topics[].fixed_configs.min.insync.replicas.config_source",
                   "Kafka 4.x in KRaft mode writes min.insync.replicas as a cluster-level dynamic default at "
                   "bootstrap (DYNAMIC_DEFAULT_BROKER_CONFIG); kafkapy, like ZooKeeper mode, reports DEFAULT_CONFIG"),
)

DEFECTS: tuple[WireDifference, ...] = (
)


def classify(diff) -> tuple[str, str]:
    """("accepted" | "defect" | "unexplained", reason)."""
    for entry in DEFECTS:
        if entry.matches(diff):
            return "defect", entry.reason
    for entry in ACCEPTED:
        if entry.matches(diff):
            return "accepted", entry.reason
    return "unexplained", ""
