"""The topic config table (Kafka names, types, defaults, validators, docs, broker synonyms):
CreateTopics and AlterConfigs validation, DescribeConfigs and LogConfig all read it (config_defs)."""
from __future__ import annotations

from .config_values import (
    B,
    COMPRESSION_TYPES,
    D,
    I,
    ICEBERG_MODES,
    L,
    LG,
    LONG_MAX,
    LS,
    S,
    T,
    ConfigDef,
    EachOneOf,
    GzipLevel,
    MetadataVersion,
    OneOf,
    Range,
    ThrottledReplicas,
    _table,
)

TOPIC_CONFIGS: dict[str, ConfigDef] = _table(
    T("segment.bytes", I, 1073741824, "Size of one log segment file; retention and compaction work a "
      "segment at a time.", Range(14), ("log.segment.bytes",)),
    T("segment.ms", LG, 604800000, "Time after which the active segment is rolled even if not full.",
      Range(1), ("log.roll.ms", "log.roll.hours")),
    T("segment.jitter.ms", LG, 0, "Maximum random jitter subtracted from the scheduled segment roll time.",
      Range(0), ("log.roll.jitter.ms", "log.roll.jitter.hours")),
    T("segment.index.bytes", I, 10485760, "Size of the offset index preallocated for each segment.",
      Range(4), ("log.index.size.max.bytes",)),
    T("flush.messages", LG, LONG_MAX, "Number of messages after which the log is fsynced.", Range(1),
      ("log.flush.interval.messages",)),
    T("flush.ms", LG, LONG_MAX, "Time after which unflushed data is fsynced.", Range(0),
      ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    T("retention.bytes", LG, -1, "Maximum size of a partition before old segments are deleted "
      "(delete policy); -1 means no size limit.", None, ("log.retention.bytes",)),
    T("retention.ms", LG, 604800000, "Maximum time a segment is kept before deletion (delete policy); "
      "-1 means no time limit.", Range(-1), ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    T("max.message.bytes", I, 1048588, "Largest record batch size accepted (after compression).", Range(0),
      ("message.max.bytes",)),
    T("index.interval.bytes", I, 4096, "Bytes of log between two offset index entries.", Range(0),
      ("log.index.interval.bytes",)),
    T("delete.retention.ms", LG, 86400000, "How long delete tombstones are kept in compacted topics.",
      Range(0), ("log.cleaner.delete.retention.ms",)),
    T("min.compaction.lag.ms", LG, 0, "Minimum time a message stays uncompacted.", Range(0),
      ("log.cleaner.min.compaction.lag.ms",)),
    T("max.compaction.lag.ms", LG, LONG_MAX, "Maximum time a message stays ineligible for compaction.",
      Range(1), ("log.cleaner.max.compaction.lag.ms",)),
    T("file.delete.delay.ms", LG, 60000, "Time to wait before deleting a file from the filesystem.", Range(0),
      ("log.segment.delete.delay.ms",)),
    T("min.cleanable.dirty.ratio", D, 0.5, "Dirty/total ratio above which a compacted log is cleaned.",
      Range(0, 1), ("log.cleaner.min.cleanable.ratio",)),
    T("cleanup.policy", LS, ["delete"], "Retention policy: delete, compact, or both.",
      EachOneOf(("compact", "delete")), ("log.cleanup.policy",)),
    T("unclean.leader.election.enable", B, False, "Allow out-of-sync replicas to become leader as a last "
      "resort, at the risk of data loss.", None, ("unclean.leader.election.enable",)),
    T("min.insync.replicas", I, 1, "Replicas that must acknowledge an acks=all write.", Range(1),
      ("min.insync.replicas",)),
    T("compression.type", S, "producer", "Final compression of the topic's batches; 'producer' keeps the "
      "producer's codec.", OneOf(COMPRESSION_TYPES), ("compression.type",)),
    T("compression.gzip.level", I, -1, "gzip level when compression.type is gzip.", GzipLevel(),
      ("compression.gzip.level",)),
    T("compression.lz4.level", I, 9, "lz4 level when compression.type is lz4.", Range(1, 17),
      ("compression.lz4.level",)),
    T("compression.zstd.level", I, 3, "zstd level when compression.type is zstd.", Range(-131072, 22),
      ("compression.zstd.level",)),
    T("preallocate", B, False, "Preallocate segment files on disk when they are created.", None,
      ("log.preallocate",)),
    T("message.format.version", S, "3.0-IV1", "[DEPRECATED] Message format version; ignored with "
      "inter.broker.protocol.version 3.0 or later.", MetadataVersion(), ("log.message.format.version",)),
    T("message.timestamp.type", S, "CreateTime", "Whether record timestamps are the producer's CreateTime "
      "or the broker's LogAppendTime.", OneOf(("CreateTime", "LogAppendTime")), ("log.message.timestamp.type",)),
    T("message.timestamp.difference.max.ms", LG, LONG_MAX, "[DEPRECATED] Maximum allowed difference "
      "between a CreateTime timestamp and the broker's clock.", Range(0),
      ("log.message.timestamp.difference.max.ms",)),
    T("message.timestamp.before.max.ms", LG, LONG_MAX, "How far a CreateTime timestamp may lie in the past.",
      Range(0), ("log.message.timestamp.before.max.ms",)),
    T("message.timestamp.after.max.ms", LG, LONG_MAX, "How far a CreateTime timestamp may lie in the future.",
      Range(0), ("log.message.timestamp.after.max.ms",)),
    T("leader.replication.throttled.replicas", LS, [], "Replicas whose replication is throttled on the leader "
      "side (leader.replication.throttled.rate): partitionId:brokerId pairs, or '*' for all replicas.",
      ThrottledReplicas()),
    T("follower.replication.throttled.replicas", LS, [], "Replicas whose replication is throttled on the "
      "follower side (follower.replication.throttled.rate): partitionId:brokerId pairs, or '*' for all "
      "replicas.", ThrottledReplicas()),
    T("message.downconversion.enable", B, True, "Whether fetches by old consumers may down-convert batches.",
      None, ("log.message.downconversion.enable",), L),
    T("remote.storage.enable", B, False, "Enable tiered storage for the topic."),
    T("local.retention.ms", LG, -2, "Time local segments are kept with tiered storage; -2 means "
      "retention.ms.", Range(-2), ("log.local.retention.ms",)),
    T("local.retention.bytes", LG, -2, "Size of local segments kept with tiered storage; -2 means "
      "retention.bytes.", Range(-2), ("log.local.retention.bytes",)),
    T("remote.log.copy.disable", B, False, "Stop copying segments to tiered storage (read-only tier)."),
    T("remote.log.delete.on.disable", B, False, "Delete tiered data when tiered storage is disabled."),
    T("kafkapy.log.fsync.on.ack", B, False, "kafkapy: fsync the log before acknowledging a produce "
      "request (acks != 0).", None, ("kafkapy.log.fsync.on.ack",)),
    T("kafkapy.iceberg.mode", S, "disabled", "kafkapy: write the topic's committed records, exactly once, "
      "to the Iceberg table kafka.<topic> too (docs/tables.md): disabled, key_value (raw key and value "
      "columns) or value_schema_id_prefix (values in Confluent's wire format decoded into typed columns). "
      "Needs pip install 'kafkapy[tables]'.", OneOf(ICEBERG_MODES)),
)
