"""The broker configs of quotas, metrics and tokens, security, and kafkapy's
extensions: part of the broker table (config_defs.BROKER_CONFIGS)."""
from __future__ import annotations

from .config_defs_flags import K
from .config_values import (
    B,
    C,
    H,
    I,
    L,
    LG,
    LONG_MAX,
    LS,
    M,
    P,
    S,
    ConfigDef,
    OneOf,
    Range,
    _http_listener,
    _iceberg_catalog_uri,
    _registry_authentication,
    _registry_listener,
)

SECURITY_CONFIGS: tuple[ConfigDef, ...] = (
    # -- quotas, metrics, tokens ---------------------------------------------------------------------------
    K("quota.window.num", I, 11, L, "Samples kept for client quotas.", Range(1)),
    K("quota.window.size.seconds", I, 1, L, "Time span of a client quota sample.", Range(1)),
    K("replication.quota.window.num", I, 11, L, "Samples kept for replication quotas.", Range(1)),
    K("replication.quota.window.size.seconds", I, 1, L, "Time span of a replication quota sample.", Range(1)),
    K("leader.replication.throttled.rate", LG, LONG_MAX, M, "Upper bound (bytes/sec) on the replication "
      "traffic this broker sends as leader of the replicas listed in leader.replication.throttled.replicas "
      "(per topic). It is suggested that the limit be kept above 1MB/s for accurate behaviour.", Range(0)),
    K("follower.replication.throttled.rate", LG, LONG_MAX, M, "Upper bound (bytes/sec) on the replication "
      "traffic this broker fetches as follower of the replicas listed in "
      "follower.replication.throttled.replicas (per topic). It is suggested that the limit be kept above "
      "1MB/s for accurate behaviour.", Range(0)),
    K("client.quota.callback.class", C, None, L, "Class of the client quota callback."),
    K("metric.reporters", LS, [], L, "Classes used as metrics reporters."),
    K("metrics.num.samples", I, 2, L, "Samples kept to compute metrics.", Range(1)),
    K("metrics.sample.window.ms", LG, 30000, L, "Window of a metrics sample.", Range(1)),
    K("metrics.recording.level", S, "INFO", L, "Highest recording level of metrics."),
    K("auto.include.jmx.reporter", B, True, L, "[DEPRECATED] Always include the JMX reporter."),
    K("kafka.metrics.reporters", LS, [], L, "Yammer metrics reporter classes."),
    K("kafka.metrics.polling.interval.secs", I, 10, L, "Metrics polling interval.", Range(1)),
    K("telemetry.max.bytes", I, 1048576, L, "Largest client telemetry payload.", Range(1)),
    K("delegation.token.secret.key", P, None, M, "Secret used to sign delegation tokens."),
    K("delegation.token.max.lifetime.ms", LG, 604800000, M, "Maximum lifetime of a delegation token.", Range(1)),
    K("delegation.token.expiry.time.ms", LG, 86400000, M, "Renewal interval of delegation tokens.", Range(1)),
    K("delegation.token.expiry.check.interval.ms", LG, 3600000, L, "How often expired tokens are removed.",
      Range(1)),
    # -- security (docs/security.md) ------------------------------------------------------------------
    K("sasl.enabled.mechanisms", LS, ["GSSAPI"], M, "SASL mechanisms enabled in the server."),
    K("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", M, "SASL mechanism used between brokers."),
    K("sasl.jaas.config", P, None, M, "JAAS login context for SASL connections (one login module; PLAIN's "
      "users are its user_<name>=\"<password>\" options). listener.name.<l>.<mechanism>.sasl.jaas.config "
      "overrides it per listener and mechanism."),
    K("sasl.server.max.receive.size", I, 524288, L, "Largest SASL frame accepted before authentication.",
      Range(1)),
    K("sasl.oauthbearer.sub.claim.name", S, "sub", L, "OAUTHBEARER: claim naming the principal (the JAAS "
      "option unsecuredValidatorPrincipalClaimName wins)."),
    K("sasl.oauthbearer.scope.claim.name", S, "scope", L, "OAUTHBEARER: claim holding the scopes (the JAAS "
      "option unsecuredValidatorScopeClaimName wins)."),
    K("sasl.oauthbearer.clock.skew.seconds", I, 30, L, "OAUTHBEARER: allowable clock skew for exp and iat (the "
      "JAAS option unsecuredValidatorAllowableClockSkewMs wins).", Range(0)),
    K("kafkapy.oauthbearer.validator", S, None, M, "kafkapy: OAUTHBEARER token validator as module:function, "
      "called with the token and returning a kafkapy.security.sasl.oauthbearer.OAuthBearerToken (or the "
      "principal name); unset: Kafka's unsecured JWS validator."),
    K("ssl.protocol", S, "TLSv1.3", M, "TLS protocol used to create the SSLContext."),
    K("ssl.enabled.protocols", LS, ["TLSv1.2", "TLSv1.3"], M, "TLS protocols enabled for connections."),
    K("ssl.keystore.type", S, "JKS", M, "Format of the key store file."),
    K("ssl.keystore.location", S, None, M, "Location of the key store file."),
    K("ssl.keystore.password", P, None, M, "Password of the key store file."),
    K("ssl.key.password", P, None, M, "Password of the private key."),
    K("ssl.truststore.type", S, "JKS", M, "Format of the trust store file."),
    K("ssl.truststore.location", S, None, M, "Location of the trust store file."),
    K("ssl.truststore.password", P, None, M, "Password of the trust store file."),
    K("ssl.client.auth", S, "none", M, "Whether the server asks for client certificates.",
      OneOf(("required", "requested", "none"))),
    K("ssl.endpoint.identification.algorithm", S, "https", L, "Host name verification algorithm."),
    K("ssl.cipher.suites", LS, [], M, "Enabled cipher suites (Java or OpenSSL names; TLS 1.2 and older)."),
    K("ssl.keystore.certificate.chain", P, None, H, "Certificate chain in PEM, for ssl.keystore.type=PEM."),
    K("ssl.keystore.key", P, None, H, "Private key in PEM (PKCS#8, encrypted with ssl.key.password if set), for "
      "ssl.keystore.type=PEM."),
    K("ssl.truststore.certificates", P, None, H, "Trusted certificates in PEM, for ssl.truststore.type=PEM."),
    K("ssl.principal.mapping.rules", S, "DEFAULT", L, "Rules mapping a client certificate's subject DN to a "
      "principal name: RULE:pattern/replacement/[LU], DEFAULT."),
    K("ssl.keymanager.algorithm", S, "SunX509", L, "Key manager algorithm (Java only; accepted)."),
    K("ssl.trustmanager.algorithm", S, "PKIX", L, "Trust manager algorithm (Java only; accepted)."),
    K("connections.max.reauth.ms", LG, 0, M, "Maximum session lifetime before SASL re-authentication."),
    K("principal.builder.class", C, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
      M, "Class building the principal of a connection."),
    # -- kafkapy extensions ----------------------------------------------------------------------------------
    K("kafkapy.cluster.id", S, None, M, "kafkapy: cluster id to format new storage with; must match the "
      "stored one afterwards. Generated when unset."),
    K("kafkapy.log.fsync.on.ack", B, False, M, "kafkapy: fsync the log before acknowledging a produce "
      "request (acks != 0); topics can override it."),
    K("kafkapy.log.dir.space.check.interval.ms", LG, 5000, L, "kafkapy: how often a log dir that filled up "
      "(ENOSPC) is probed for free space; it takes writes again once a probe write and fsync succeed "
      "(docs/operations.md, log directory failures)."),
    K("kafkapy.control.listener", S, None, L, "kafkapy: loopback host:port (port 0: a free one) of the fault "
      "injection control endpoint, HTTP+JSON for tests (docs/testing.md); off when unset."),
    K("kafkapy.metrics.listener", S, None, L, "kafkapy: http://host:port of the Prometheus endpoint (GET "
      "/metrics, docs/operations.md); off when unset.", _http_listener),
    K("kafkapy.console.listener", S, None, L, "kafkapy: http://host:port of the built-in web console "
      "(docs/console.md); off when unset.", _http_listener),
    K("kafkapy.console.writes.enable", B, False, L, "kafkapy: allow the web console's write actions "
      "(offset reset); read-only when false."),
    K("kafkapy.schema.registry.listener", S, None, L, "kafkapy: http://host:port (or https://, with the broker's "
      "ssl.* key store) of the built-in schema registry (Confluent's REST API; docs/schema-registry.md); off "
      "when unset.", _registry_listener),
    K("kafkapy.schema.registry.topic", S, "_schemas", L, "kafkapy: the compacted topic the schema registry keeps "
      "its schemas in (Confluent's kafkastore.topic)."),
    K("kafkapy.schema.registry.topic.replication.factor", I, 3, L, "kafkapy: replicas of the schema registry's "
      "topic in a cluster (Confluent's kafkastore.topic.replication.factor; capped by the brokers there are; "
      "a single node has 1)."),
    K("kafkapy.schema.registry.authentication", S, "none", L, "kafkapy: 'basic' asks HTTP basic auth of the "
      "schema registry's clients, with the broker's PLAIN and SCRAM users; its ACLs on the registry's topic "
      "decide what they may do (docs/schema-registry.md).", _registry_authentication),
    K("kafkapy.schema.registry.group.id", S, "schema-registry", L, "kafkapy: the Kafka group through which the "
      "brokers' schema registries elect the one that writes (Confluent's schema.registry.group.id)."),
    K("kafkapy.iceberg.catalog.uri", S, None, M, "kafkapy: the Iceberg catalog of the topics' tables "
      "(kafkapy.iceberg.mode, docs/tables.md): sqlite:/// or postgresql:// (pyiceberg's SQL catalog) or "
      "http(s):// (a REST catalog); unset: sqlite:///<first log dir>/iceberg/catalog.db.", _iceberg_catalog_uri),
    K("kafkapy.iceberg.warehouse", S, None, M, "kafkapy: where the tables' data and metadata files go: a path, "
      "file:// or s3:// URI; unset: <first log dir>/iceberg/warehouse."),
    K("kafkapy.iceberg.commit.interval.ms", LG, 60000, M, "kafkapy: how often a table-enabled topic's new "
      "records are committed to its table at least (the table's target lag).", Range(1)),
    K("kafkapy.iceberg.translation.max.bytes", LG, 64 * 1024 * 1024, L, "kafkapy: bytes of translated, "
      "uncommitted records a broker buffers for its tables; reaching it commits early.", Range(1024)),
)
