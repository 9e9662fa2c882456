"""The api versions this broker serves: the single source of its ApiVersions answer.

Policy (/work/shared/kafka-protocol-3.9/VERSION-POLICY.md): serve the union of old and new
clients, i.e. every version Kafka 3.9 serves — from v0 for every API, although Kafka 4.0
(KIP-896) dropped the versions older than Kafka 2.1's. Maximums are Kafka 3.9's, raised to Kafka
4.4's for the versions whose semantics are served (issue 32; kafka-python guesses the broker release
from the maxima: ListOffsets v11 reads as Kafka 4.2, which kafka-python 3.0.12 speaks). The broker advertises the
intersection of this table with the APIs it has handlers for, and implements every version it
advertises: old versions are served with their own semantics (ListOffsets v0's offset lists,
Fetch v0-3's down-converted message sets, ...), tested on the wire by
conformance/test_old_versions.py.
"""
from __future__ import annotations

__all__ = ["CLUSTER_VERSIONS", "SUPPORTED_VERSIONS"]

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    # Produce: Kafka 4.0 still advertises v0; older librdkafka disables gzip/snappy/lz4 when the
    # minimum is above 0 (it never sends v0-2 itself).
    # v12 is v11 (KIP-890: kafkapy finalizes transaction.version 0, so transactional batches come at
    # v11 and below); v13 (Kafka 4.1, KIP-516) names topics by id.
    0: (0, 13),
    # Fetch: v0-3 answer with message sets down-converted to magic 0 (v0-1) or 1 (v2-3), as Kafka 3.9
    # does; v4 is the first with message format v2 (librdkafka needs ≥4 for it).
    # v18 (Kafka 4.1, KIP-1166) adds a follower's tagged HighWatermark, which kafkapy ignores.
    1: (0, 18),
    # ListOffsets: v0 answers with offset lists (max_num_offsets), Kafka's legacy form.
    # v10 (KIP-1075) adds TimeoutMs for remote look-ups (kafkapy has no tiered storage: answers at
    # once); v11 (KIP-1023) adds the timestamp -6 EARLIEST_PENDING_UPLOAD.
    2: (0, 11),
    # Metadata: 4.0 re-added v0-3 (kafka-python 2.0.x probes with Metadata v0).
    # v13 (KIP-1102) adds the top-level ErrorCode (REBOOTSTRAP_REQUIRED; Kafka never sets it there).
    3: (0, 13),
    # OffsetCommit: v0 (no generation) and v1 (commit_timestamp) go through the group coordinator.
    # v10 (Kafka 4.1) names topics by id (UNKNOWN_TOPIC_ID for an id no topic has).
    8: (0, 10),
    # OffsetFetch: v0 reads what the group coordinator keeps, like every other version; v10 by topic id.
    9: (0, 10),
    # FindCoordinator: untouched by KIP-896.
    10: (0, 6),
    # JoinGroup: KIP-896 raised it to 2; Kafka 4.1 re-added v0-1.
    11: (0, 9),
    # Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups: untouched by KIP-896.
    # DescribeGroups v6 (Kafka 4.0, KIP-1043): GROUP_ID_NOT_FOUND and a message for a group that isn't classic.
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 6),
    16: (0, 5),
    # SaslHandshake: v0 is followed by raw SASL tokens, v1 by SaslAuthenticate (KIP-152).
    17: (0, 1),
    # ApiVersions: every version from 0, so any client can learn the ranges (KIP-511).
    # v5 (Kafka 4.4, KIP-1242): ClusterId/NodeId checked (REBOOTSTRAP_REQUIRED).
    18: (0, 5),
    # CreateTopics, DeleteTopics: every version Kafka 3.9 serves.
    19: (0, 7),
    20: (0, 6),
    # DeleteRecords, InitProducerId: untouched by KIP-896.
    21: (0, 2),
    22: (0, 5),
    # OffsetForLeaderEpoch: v0 has no leader epoch in its answer, v0-1 no current leader epoch.
    23: (0, 4),
    # Transactions, Kafka 3.9's ranges (librdkafka still sends v0 of the client-facing ones).
    # AddPartitionsToTxn v4-5 (KIP-890) batch transactions and come from brokers only.
    24: (0, 5),
    25: (0, 4),
    26: (0, 4),
    27: (0, 1),
    28: (0, 4),
    # DescribeAcls, CreateAcls, DeleteAcls: v0 has no pattern type (LITERAL implied).
    29: (0, 3),
    30: (0, 3),
    31: (0, 3),
    # DescribeConfigs, AlterConfigs: every version Kafka 3.9 serves.
    32: (0, 4),
    33: (0, 2),
    # AlterReplicaLogDirs, DescribeLogDirs: every version Kafka 3.9 serves; DescribeLogDirs v5 (Kafka 4.4,
    # KIP-1066) adds IsCordoned, always false (kafkapy has no cordoned.log.dirs).
    34: (0, 2),
    35: (0, 5),
    # SaslAuthenticate: v1 carries the session lifetime (KIP-368 re-authentication).
    36: (0, 2),
    # CreatePartitions, DeleteGroups: untouched by KIP-896. DeleteGroups v3 (Kafka 4.0, KIP-1043) adds an
    # ErrorMessage per group (Kafka 4.4 leaves it null but for failed share-group state deletions).
    37: (0, 3),
    42: (0, 3),
    # ElectLeaders: untouched by KIP-896.
    43: (0, 2),
    # IncrementalAlterConfigs: v0 postdates Kafka 2.1 (added in 2.3), so it stays.
    44: (0, 1),
    # DescribeClientQuotas, AlterClientQuotas (KIP-546): every version Kafka 3.9 defines.
    48: (0, 1),
    49: (0, 1),
    # DescribeUserScramCredentials, AlterUserScramCredentials (KIP-554).
    50: (0, 0),
    51: (0, 0),
    # AlterPartitionReassignments, ListPartitionReassignments, OffsetDelete, DescribeCluster,
    # ConsumerGroupDescribe, DescribeTopicPartitions: newer than Kafka 2.1, every version.
    # AlterPartitionReassignments v1 (KIP-860): AllowReplicationFactorChange.
    45: (0, 1),
    46: (0, 0),
    47: (0, 0),
    # UpdateFeatures (KIP-584): finalized levels in the metadata store (metadata/features.py)
    # v2 (Kafka 4.0) answers without the per-feature results.
    57: (0, 2),
    # DescribeCluster v2 (KIP-1073): IncludeFencedBrokers / IsFenced (no broker is ever fenced here).
    60: (0, 2),
    # DescribeProducers, DescribeTransactions, ListTransactions (KIP-664).
    61: (0, 0),
    65: (0, 0),
    # ListTransactions v2 (KIP-1152): TransactionalIdPattern (RE2J syntax, as consumer group regexes).
    66: (0, 2),
    # ConsumerGroupHeartbeat (KIP-848): v1 adds SubscribedTopicRegex, member ids made by the client (Kafka 4.0).
    68: (0, 1),
    # ConsumerGroupDescribe: v1 adds MemberType (Kafka 4.0).
    69: (0, 1),
    # GetTelemetrySubscriptions, PushTelemetry, ListClientMetricsResources (KIP-714); 71-72 only
    # with somewhere to show the pushed metrics (broker.py). 74 v1 is Kafka 4.1's ListConfigResources
    # (KIP-1142, every config resource type; tools/protocol-4.0 has its schema).
    71: (0, 0),
    72: (0, 0),
    74: (0, 1),
    75: (0, 0),
    # Share groups (KIP-932), the stable versions: Kafka 4.1 removed v0 (4.0's early access).
    # ShareFetch/ShareAcknowledge v2 (Kafka 4.2): ShareAcquireMode record_limit and RENEW.
    76: (1, 1),
    77: (1, 1),
    78: (1, 2),
    79: (1, 2),
    # StreamsGroupHeartbeat, StreamsGroupDescribe (KIP-1071): Kafka 4.4's v0-1 (v1: KIP-1331's topology
    # description flags, always "not required"/"not stored" here).
    88: (0, 1),
    89: (0, 1),
    # DescribeShareGroupOffsets: v1 (Kafka 4.2) adds Lag.
    90: (0, 1),
    # AlterShareGroupOffsets, DeleteShareGroupOffsets (Kafka 4.1; still v0 in 4.2).
    91: (0, 0),
    92: (0, 0),
}
# Not served (deliberately absent): delegation tokens — no handlers.

# Advertised only by a broker in a ZooKeeper cluster (zookeeper.connect set): the inter-broker APIs of
# Kafka's ZooKeeper mode at every version Kafka 3.9 defines. A 3.7 controller sends LeaderAndIsr v7,
# UpdateMetadata v8 and StopReplica v4 without negotiating; a 3.7 leader negotiates AlterPartition
# (it needs 0-3 listed) and AllocateProducerIds (0) with the controller.
CLUSTER_VERSIONS: dict[int, tuple[int, int]] = {
    4: (0, 7),    # LeaderAndIsr
    5: (0, 4),    # StopReplica
    6: (0, 8),    # UpdateMetadata
    7: (0, 3),    # ControlledShutdown
    56: (0, 3),   # AlterPartition
    67: (0, 0),   # AllocateProducerIds
    # the share coordinator's APIs, between kafkapy brokers (share-partition leader -> coordinator)
    84: (0, 0),   # ReadShareGroupState
    85: (0, 0),   # WriteShareGroupState
}
