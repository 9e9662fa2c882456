"""The api versions this broker serves: the single source of its ApiVersions answer.

Policy (/work/shared/kafka-protocol-3.9/VERSION-POLICY.md): serve both Kafka 2.1-era clients and
4.x clients. Minimums are Kafka 4.x's (KIP-896 raised them to what Kafka 2.1 spoke), plus the
ranges 4.x re-added because real clients broke; maximums are Kafka 3.9's. The broker advertises
the intersection of this table with the APIs it has handlers for, and must implement every
version it advertises (kafka-python 2.0.x picks request versions by guessing the broker release
from these maxima).
"""
from __future__ import annotations

__all__ = ["CLUSTER_VERSIONS", "SUPPORTED_VERSIONS"]

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    # Produce: Kafka 4.0 still advertises v0; older librdkafka disables gzip/snappy/lz4 when the
    # minimum is above 0 (it never sends v0-2 itself).
    0: (0, 11),
    # Fetch: KIP-896 dropped v0-3; v4 is the first with message format v2 (librdkafka needs ≥4).
    1: (4, 17),
    # ListOffsets: KIP-896 dropped v0 (Kafka 2.1 used v1+).
    2: (1, 9),
    # Metadata: 4.0 re-added v0-3 (kafka-python 2.0.x probes with Metadata v0).
    3: (0, 12),
    # OffsetCommit: KIP-896 dropped v0-1.
    8: (2, 9),
    # OffsetFetch: KIP-896 dropped v0.
    9: (1, 9),
    # FindCoordinator: untouched by KIP-896.
    10: (0, 6),
    # JoinGroup: KIP-896 raised it to 2; Kafka 4.1 re-added v0-1.
    11: (0, 9),
    # Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups: untouched by KIP-896.
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 5),
    16: (0, 5),
    # SaslHandshake: v0 is followed by raw SASL tokens, v1 by SaslAuthenticate (KIP-152).
    17: (0, 1),
    # ApiVersions: every version from 0, so any client can learn the ranges (KIP-511).
    18: (0, 4),
    # CreateTopics: KIP-896 dropped v0-1.
    19: (2, 7),
    # DeleteTopics: KIP-896 dropped v0.
    20: (1, 6),
    # DeleteRecords, InitProducerId: untouched by KIP-896.
    21: (0, 2),
    22: (0, 5),
    # OffsetForLeaderEpoch: KIP-896 dropped v0-1.
    23: (2, 4),
    # Transactions, Kafka 3.9's ranges (librdkafka still sends v0 of the client-facing ones).
    # AddPartitionsToTxn v4-5 (KIP-890) batch transactions and come from brokers only.
    24: (0, 5),
    25: (0, 4),
    26: (0, 4),
    27: (0, 1),
    28: (0, 4),
    # DescribeAcls, CreateAcls, DeleteAcls: KIP-896 dropped v0 of the ACL APIs.
    29: (1, 3),
    30: (1, 3),
    31: (1, 3),
    # DescribeConfigs, AlterConfigs: KIP-896 dropped v0 of the config APIs.
    32: (1, 4),
    33: (1, 2),
    # AlterReplicaLogDirs, DescribeLogDirs: KIP-896 dropped v0.
    34: (1, 2),
    35: (1, 4),
    # SaslAuthenticate: v1 carries the session lifetime (KIP-368 re-authentication).
    36: (0, 2),
    # CreatePartitions, DeleteGroups: untouched by KIP-896.
    37: (0, 3),
    42: (0, 2),
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
    45: (0, 0),
    46: (0, 0),
    47: (0, 0),
    60: (0, 1),
    # DescribeProducers, DescribeTransactions, ListTransactions (KIP-664).
    61: (0, 0),
    65: (0, 0),
    66: (0, 1),
    69: (0, 0),
    75: (0, 0),
}
# Not served (deliberately absent): delegation tokens, telemetry and share groups — no handlers.

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
}
