"""One module per API family; each registers its handlers with dispatch (`@handles`) when imported.

HANDLER_MODULES says which module serves which api key. dispatch.HANDLERS starts with a stand-in
for each key that imports the module on the key's first request: a broker answers its first
request (ApiVersions) without importing the handlers of the APIs it has not been asked for yet.
tests/broker/test_dispatch.py checks the table against the modules' registrations.
"""
from __future__ import annotations

__all__ = ["HANDLER_MODULES"]

# api key -> the module (in this package) whose @handles registers its handler
HANDLER_MODULES: dict[int, str] = {
    0: "produce",                     # Produce
    1: "fetch",                       # Fetch
    2: "list_offsets",                # ListOffsets
    3: "metadata",                    # Metadata
    4: "control",                     # LeaderAndIsr
    5: "control",                     # StopReplica
    6: "control",                     # UpdateMetadata
    7: "control",                     # ControlledShutdown
    8: "offsets",                     # OffsetCommit
    9: "offsets",                     # OffsetFetch
    10: "groups",                     # FindCoordinator
    11: "groups",                     # JoinGroup
    12: "groups",                     # Heartbeat
    13: "groups",                     # LeaveGroup
    14: "groups",                     # SyncGroup
    15: "groups",                     # DescribeGroups
    16: "groups",                     # ListGroups
    17: "sasl",                       # SaslHandshake
    18: "api_versions",               # ApiVersions
    19: "topics",                     # CreateTopics
    20: "topics",                     # DeleteTopics
    21: "delete_records",             # DeleteRecords
    22: "init_producer_id",           # InitProducerId
    23: "offset_for_leader_epoch",    # OffsetForLeaderEpoch
    24: "transactions",               # AddPartitionsToTxn
    25: "transactions",               # AddOffsetsToTxn
    26: "transactions",               # EndTxn
    27: "transactions",               # WriteTxnMarkers
    28: "transactions",               # TxnOffsetCommit
    29: "acls",                       # DescribeAcls
    30: "acls",                       # CreateAcls
    31: "acls",                       # DeleteAcls
    32: "configs",                    # DescribeConfigs
    33: "configs",                    # AlterConfigs
    34: "log_dirs",                   # AlterReplicaLogDirs
    35: "log_dirs",                   # DescribeLogDirs
    36: "sasl",                       # SaslAuthenticate
    37: "topics",                     # CreatePartitions
    42: "groups",                     # DeleteGroups
    43: "replicas",                   # ElectLeaders
    44: "configs",                    # IncrementalAlterConfigs
    45: "replicas",                   # AlterPartitionReassignments
    46: "replicas",                   # ListPartitionReassignments
    47: "offsets",                    # OffsetDelete
    48: "quotas",                     # DescribeClientQuotas
    49: "quotas",                     # AlterClientQuotas
    50: "scram",                      # DescribeUserScramCredentials
    51: "scram",                      # AlterUserScramCredentials
    56: "control",                    # AlterPartition
    57: "features",                   # UpdateFeatures
    60: "cluster",                    # DescribeCluster
    61: "transactions",               # DescribeProducers
    65: "transactions",               # DescribeTransactions
    66: "transactions",               # ListTransactions
    67: "control",                    # AllocateProducerIds
    68: "consumer_groups",            # ConsumerGroupHeartbeat
    69: "groups",                     # ConsumerGroupDescribe
    71: "telemetry",                  # GetTelemetrySubscriptions
    72: "telemetry",                  # PushTelemetry
    74: "telemetry",                  # ListClientMetricsResources (ListConfigResources in 4.1)
    75: "describe_topic_partitions",  # DescribeTopicPartitions
    76: "share_groups",               # ShareGroupHeartbeat
    77: "share_groups",               # ShareGroupDescribe
    78: "share_groups",               # ShareFetch
    79: "share_groups",               # ShareAcknowledge
    84: "share_state",                # ReadShareGroupState
    85: "share_state",                # WriteShareGroupState
    88: "streams_groups",             # StreamsGroupHeartbeat
    89: "streams_groups",             # StreamsGroupDescribe
    90: "share_state",                # DescribeShareGroupOffsets
    91: "share_state",                # AlterShareGroupOffsets
    92: "share_state",                # DeleteShareGroupOffsets
}
