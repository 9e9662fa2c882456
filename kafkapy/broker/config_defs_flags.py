"""How broker configs are defined: which of them can change at runtime (dynamic, per broker) and
which kafkapy acts on; K and KT build the broker table's definitions with that (config_defs_*)."""
from __future__ import annotations

from typing import Any

from .config_defs_topic import TOPIC_CONFIGS
from .config_values import ConfigDef, ConfigType, Importance, Validator

# Broker configs whose value Kafka can change at runtime (DynamicBrokerConfig.AllDynamicConfigs),
# restricted to the ones kafkapy defines; listener and security configs are left out on purpose because
# kafkapy cannot rebind or re-key its listeners at runtime.
_DYNAMIC_LOG = {syn[0].name for d in TOPIC_CONFIGS.values() if (syn := d.synonyms)} - {
    "log.message.format.version", "kafkapy.log.fsync.on.ack"}
_DYNAMIC = _DYNAMIC_LOG | {
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
    "num.network.threads", "metric.reporters", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "max.connections", "max.connection.creation.rate", "producer.id.expiration.ms",
    "transaction.partition.verification.enable", "kafkapy.log.fsync.on.ack",
    "advertised.listeners",
    # Kafka's DynamicConfig.Broker (KIP-73), not in AllDynamicConfigs but changed the same way
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
}
# Configs kafkapy honours; everything else is accepted for compatibility and warned about when set.
_USED = {
    "node.id", "broker.id", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "log.dir", "log.dirs", "metadata.log.dir", "num.partitions", "default.replication.factor",
    "auto.create.topics.enable", "delete.topic.enable", "socket.request.max.bytes", "message.max.bytes",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "socket.listen.backlog.size",
    "connections.max.idle.ms", "broker.rack", "fetch.max.bytes",
    # connection limits and the request memory budget (broker/connection_quotas.py, broker/memory_pool.py)
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections", "max.connection.creation.rate",
    "queued.max.request.bytes", "max.incremental.fetch.session.cache.slots",
    "telemetry.max.bytes",  # KIP-714 client telemetry (kafkapy/metrics/client_telemetry.py)
    "offsets.topic.num.partitions", "offsets.topic.replication.factor", "offsets.topic.segment.bytes",
    "offsets.retention.minutes", "offsets.retention.check.interval.ms", "offset.metadata.max.bytes",
    "offsets.commit.timeout.ms", "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
    "group.max.session.timeout.ms", "group.max.size", "group.consumer.migration.policy",
    "group.coordinator.rebalance.protocols", "group.consumer.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms", "group.consumer.max.size", "group.consumer.assignors",
    # streams groups (kafkapy/groupcoord/streams)
    "group.streams.session.timeout.ms", "group.streams.heartbeat.interval.ms", "group.streams.max.size",
    "group.streams.num.standby.replicas", "group.streams.initial.rebalance.delay.ms",
    "group.streams.task.offset.interval.ms", "group.streams.acceptable.recovery.lag",
    "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms",
    "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms",
    "group.streams.max.standby.replicas", "group.streams.assignment.interval.ms",
    "group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms",
    # share groups (kafkapy/groupcoord/share)
    "group.share.enable", "group.share.record.lock.duration.ms", "group.share.delivery.count.limit",
    "group.share.session.timeout.ms", "group.share.heartbeat.interval.ms", "group.share.max.size",
    "group.share.partition.max.record.locks", "share.coordinator.state.topic.num.partitions",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.segment.bytes",
    "share.coordinator.snapshot.update.records.per.snapshot",
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor", "transaction.state.log.segment.bytes",
    "transaction.state.log.min.isr", "transaction.max.timeout.ms", "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms", "producer.id.expiration.ms",
    "producer.id.expiration.check.interval.ms", "log.retention.check.interval.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "log.roll.hours", "log.retention.minutes", "log.retention.hours", "kafkapy.cluster.id",
    "request.timeout.ms", "queued.max.requests", "authorizer.class.name", "super.users",
    "allow.everyone.if.no.acl.found",
    # server defaults of the topic configs the partition logs implement
    "log.segment.bytes", "log.roll.ms", "log.index.size.max.bytes", "log.index.interval.bytes",
    "log.retention.ms", "log.retention.bytes", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms", "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.message.timestamp.difference.max.ms", "log.cleanup.policy",
    "log.segment.delete.delay.ms", "min.insync.replicas", "compression.type",
    # the log cleaner (kafkapy/log/cleaner.py)
    "log.cleaner.enable", "log.cleaner.backoff.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second",
    # cluster mode (kafkapy/controller, kafkapy/replication; docs/cluster.md)
    "zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
    "inter.broker.listener.name", "security.inter.broker.protocol", "unclean.leader.election.enable",
    "replica.lag.time.max.ms", "replica.socket.timeout.ms", "replica.fetch.max.bytes", "replica.fetch.wait.max.ms",
    "replica.fetch.min.bytes", "replica.fetch.backoff.ms", "replica.fetch.response.max.bytes",
    "replica.high.watermark.checkpoint.interval.ms", "controlled.shutdown.enable", "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms", "controller.socket.timeout.ms", "auto.leader.rebalance.enable",
    "leader.imbalance.per.broker.percentage", "leader.imbalance.check.interval.seconds",
    "num.replica.fetchers",
    # replication throttles (kafkapy/replication/throttle.py)
    "leader.replication.throttled.rate", "follower.replication.throttled.rate", "replication.quota.window.num",
    "replication.quota.window.size.seconds",
    # TLS listeners and inter-broker TLS (kafkapy/security/tls.py)
    "ssl.protocol", "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth",
    "ssl.endpoint.identification.algorithm", "ssl.cipher.suites", "ssl.principal.mapping.rules",
    # SASL listeners (kafkapy/security/sasl, security/session.py)
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "connections.max.reauth.ms", "sasl.server.max.receive.size",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.clock.skew.seconds",
    "connection.failed.authentication.delay.ms",
}
# Kafka's per-broker-only dynamic configs are listener/security ones; kafkapy can re-advertise
# itself, but not rebind its sockets, so only advertised.listeners is among them.
_PER_BROKER: set[str] = {"advertised.listeners"}


def K(name: str, ctype: ConfigType, default: Any, importance: Importance, doc: str,
      validator: Validator | None = None, internal: bool = False) -> ConfigDef:
    return ConfigDef(name, ctype, default, importance, doc, validator, (), name in _DYNAMIC,
                     name in _PER_BROKER, name in _USED or name.startswith("kafkapy."), internal)


_TOPIC_DOC = {s.name: d.doc for d in TOPIC_CONFIGS.values() for s in d.synonyms}


def KT(name: str, ctype: ConfigType, default: Any, importance: Importance, validator: Validator | None = None,
       doc: str | None = None) -> ConfigDef:
    """A broker config that is the server default of a topic config (doc taken from the topic config)."""
    return K(name, ctype, default, importance, doc or _TOPIC_DOC[name], validator)
