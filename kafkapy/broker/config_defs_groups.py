"""The broker configs of consumer, streams and share groups, offsets, transactions
and producer ids: part of the broker table (config_defs.BROKER_CONFIGS)."""
from __future__ import annotations

from .config_defs_flags import K
from .config_values import B, H, I, INT_MAX, L, LG, LS, M, S, SH, ConfigDef, EachOneOf, OneOf, Range

GROUP_CONFIGS: tuple[ConfigDef, ...] = (
    # -- consumer groups and offsets ---------------------------------------------------------------
    K("group.min.session.timeout.ms", I, 6000, M, "Smallest session timeout a consumer may use."),
    K("group.max.session.timeout.ms", I, 1800000, M, "Largest session timeout a consumer may use."),
    K("group.initial.rebalance.delay.ms", I, 3000, M, "Wait for more members before the first rebalance of an "
      "empty group."),
    K("group.max.size", I, INT_MAX, M, "Most members in one consumer group.", Range(1)),
    K("group.coordinator.rebalance.protocols", LS, ["classic", "consumer", "streams"], M,
      "Enabled rebalance protocols.", EachOneOf(("classic", "consumer", "share", "streams"))),
    K("group.coordinator.threads", I, 1, M, "Group coordinator threads.", Range(1)),
    K("group.coordinator.append.linger.ms", I, 10, M, "Linger of group coordinator writes.", Range(0)),
    K("group.consumer.session.timeout.ms", I, 45000, M, "Session timeout of KIP-848 consumers.", Range(1)),
    K("group.consumer.min.session.timeout.ms", I, 45000, M, "Minimum KIP-848 session timeout.", Range(1)),
    K("group.consumer.max.session.timeout.ms", I, 60000, M, "Maximum KIP-848 session timeout.", Range(1)),
    K("group.consumer.heartbeat.interval.ms", I, 5000, M, "Heartbeat interval of KIP-848 consumers.", Range(1)),
    K("group.consumer.min.heartbeat.interval.ms", I, 5000, M, "Minimum KIP-848 heartbeat interval.", Range(1)),
    K("group.consumer.max.heartbeat.interval.ms", I, 15000, M, "Maximum KIP-848 heartbeat interval.", Range(1)),
    K("group.consumer.max.size", I, INT_MAX, M, "Most members in one KIP-848 group.", Range(1)),
    K("group.consumer.assignors", LS, ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                                      "org.apache.kafka.coordinator.group.assignor.RangeAssignor"], M,
      "Server-side assignors of KIP-848 groups."),
    K("group.consumer.migration.policy", S, "bidirectional", M, "Whether a non-empty classic group may become a "
      "KIP-848 consumer group and back: bidirectional, upgrade, downgrade or disabled.",
      OneOf(("bidirectional", "upgrade", "downgrade", "disabled"), case_insensitive=True)),
    # -- streams groups (KIP-1071, kafkapy/groupcoord/streams; Kafka 4.4's defaults) ------------------
    K("group.streams.session.timeout.ms", I, 45000, M, "Session timeout of streams group members.", Range(1)),
    K("group.streams.min.session.timeout.ms", I, 45000, M, "Minimum streams group session timeout.", Range(1)),
    K("group.streams.max.session.timeout.ms", I, 60000, M, "Maximum streams group session timeout.", Range(1)),
    K("group.streams.heartbeat.interval.ms", I, 5000, M, "Heartbeat interval of streams group members.", Range(1)),
    K("group.streams.min.heartbeat.interval.ms", I, 5000, M, "Minimum streams group heartbeat interval.", Range(1)),
    K("group.streams.max.heartbeat.interval.ms", I, 15000, M, "Maximum streams group heartbeat interval.",
      Range(1)),
    K("group.streams.max.size", I, INT_MAX, M, "Most members in one streams group.", Range(1)),
    K("group.streams.num.standby.replicas", I, 0, M, "Standby replicas of each stateful task.", Range(0)),
    K("group.streams.max.standby.replicas", I, 2, M, "Most standby replicas a streams group may ask for.",
      Range(0)),
    K("group.streams.initial.rebalance.delay.ms", I, 3000, M, "How long a new streams group waits for more members"
      " before its first assignment (members get ASSIGNMENT_DELAYED meanwhile).", Range(0)),
    K("group.streams.assignment.interval.ms", I, 1000, M, "Least time between two target assignments of a"
      " streams group (members get ASSIGNMENT_DELAYED meanwhile).", Range(0)),
    K("group.streams.min.assignment.interval.ms", I, 0, M, "Minimum streams.assignment.interval.ms.", Range(0)),
    K("group.streams.max.assignment.interval.ms", I, 15000, M, "Maximum streams.assignment.interval.ms.", Range(0)),
    K("group.streams.task.offset.interval.ms", I, 60000, M, "How often streams members report their task offsets.",
      Range(1)),
    K("group.streams.acceptable.recovery.lag", LG, 10000, M, "The lag under which a member is caught up on a task.",
      Range(0)),
    # -- share groups (KIP-932, kafkapy/groupcoord/share) -------------------------------------------
    K("group.share.enable", B, True, M, "Serve share groups (Kafka 4.2 finalizes share.version=1 by default; "
      "false stands for share.version=0: the share APIs are not advertised)."),
    K("group.share.record.lock.duration.ms", I, 30000, M, "How long a share consumer holds a record it was "
      "given before it goes back to the group.", Range(1000, 3600000)),
    K("group.share.delivery.count.limit", I, 5, M, "Deliveries of a record before it is archived.", Range(2, 10)),
    K("group.share.session.timeout.ms", I, 45000, M, "Session timeout of share group members.", Range(1)),
    K("group.share.heartbeat.interval.ms", I, 5000, M, "Heartbeat interval of share group members.", Range(1)),
    K("group.share.max.size", I, 200, M, "Most members in one share group.", Range(1, 1000)),
    K("group.share.partition.max.record.locks", I, 2000, M, "Most records in flight on one share-partition.",
      Range(100, 10000)),
    K("share.coordinator.state.topic.num.partitions", I, 50, H, "Partitions of __share_group_state, where "
      "share-partition state is kept.", Range(1)),
    K("share.coordinator.state.topic.replication.factor", SH, 3, H, "Replication factor of __share_group_state; "
      "until it can be created share-partition state is kept in memory only.", Range(1)),
    K("share.coordinator.state.topic.segment.bytes", I, 104857600, H, "Segment size of __share_group_state.",
      Range(1)),
    K("share.coordinator.snapshot.update.records.per.snapshot", I, 500, M, "Share-state updates (ShareUpdate "
      "records) written for a share-partition between two full snapshots (ShareSnapshot).", Range(0)),
    K("offset.metadata.max.bytes", I, 4096, H, "Largest metadata string of a committed offset."),
    K("offsets.load.buffer.size", I, 5242880, H, "Read buffer when loading offsets.", Range(1)),
    K("offsets.topic.replication.factor", SH, 3, H, "Replication factor of __consumer_offsets; it cannot be "
      "created until this many brokers are alive.", Range(1)),
    K("offsets.topic.num.partitions", I, 50, H, "Partitions of __consumer_offsets.", Range(1)),
    K("offsets.topic.segment.bytes", I, 104857600, H, "Segment size of __consumer_offsets.", Range(1)),
    K("offsets.topic.compression.codec", I, 0, H, "Compression codec id of __consumer_offsets."),
    K("offsets.retention.minutes", I, 10080, H, "How long offsets of an empty group are kept.", Range(1)),
    K("offsets.retention.check.interval.ms", LG, 600000, H, "How often stale offsets are removed.", Range(1)),
    K("offsets.commit.timeout.ms", I, 5000, H, "Timeout of an offset commit write.", Range(1)),
    K("offsets.commit.required.acks", SH, -1, H, "Acks required for an offset commit."),
    # -- transactions and producer ids ----------------------------------------------------------------
    K("transaction.state.log.num.partitions", I, 50, H, "Partitions of __transaction_state.", Range(1)),
    K("transaction.state.log.replication.factor", SH, 3, H, "Replication factor of __transaction_state.",
      Range(1)),
    K("transaction.state.log.segment.bytes", I, 104857600, H, "Segment size of __transaction_state.", Range(1)),
    K("transaction.state.log.min.isr", I, 2, H, "min.insync.replicas of __transaction_state.", Range(1)),
    K("transaction.state.log.load.buffer.size", I, 5242880, H, "Read buffer when loading transactions.",
      Range(1)),
    K("transaction.max.timeout.ms", I, 900000, H, "Largest transaction timeout a producer may use.", Range(1)),
    K("transactional.id.expiration.ms", I, 604800000, H, "Idle time after which a transactional id expires.",
      Range(1)),
    K("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10000, L, "How often timed-out "
      "transactions are aborted.", Range(1)),
    K("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3600000, L, "How often expired "
      "transactional ids are removed.", Range(1)),
    K("transaction.partition.verification.enable", B, True, L, "Verify partitions were added to a transaction "
      "before accepting transactional writes."),
    K("producer.id.expiration.ms", I, 86400000, L, "Idle time after which a producer id's state is dropped.",
      Range(1)),
    K("producer.id.expiration.check.interval.ms", I, 600000, L, "How often expired producer ids are removed.",
      Range(1), internal=True),
)
