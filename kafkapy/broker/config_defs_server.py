"""The broker configs of identity, roles and quorum, listeners and sockets, general
server settings: part of the broker table (config_defs.BROKER_CONFIGS)."""
from __future__ import annotations

from .config_defs_flags import K, KT
from .config_values import (
    B,
    C,
    COMPRESSION_TYPES,
    H,
    I,
    INT_MAX,
    L,
    LG,
    LS,
    M,
    S,
    ConfigDef,
    EachOneOf,
    GzipLevel,
    NonNull,
    OneOf,
    Range,
    SuperUsers,
    _ip_count_map,
)

SERVER_CONFIGS: tuple[ConfigDef, ...] = (
    # -- identity, roles, quorum ---------------------------------------------------------------
    K("node.id", I, -1, H, "Id of this node; in KRaft mode it must equal broker.id when both are set. "
      "kafkapy uses 0 when neither is set."),
    K("broker.id", I, -1, H, "Broker id of this server (the same as node.id)."),
    K("broker.id.generation.enable", B, True, M, "Generate broker ids automatically (ZooKeeper mode)."),
    K("reserved.broker.max.id", I, 1000, M, "Largest broker id that can be configured by hand.", Range(0)),
    K("broker.rack", S, None, M, "Rack of the broker, used for rack-aware replica placement."),
    K("process.roles", LS, [], H, "KRaft roles of this process: broker, controller or both.",
      EachOneOf(("broker", "controller"))),
    K("controller.quorum.voters", LS, [], H, "KRaft controller quorum voters as id@host:port."),
    K("controller.quorum.bootstrap.servers", LS, [], H, "KRaft controller quorum bootstrap endpoints."),
    K("controller.listener.names", S, None, H, "Listener names used by KRaft controllers."),
    K("controller.quorum.election.timeout.ms", I, 1000, H, "KRaft election timeout."),
    K("controller.quorum.fetch.timeout.ms", I, 2000, H, "KRaft fetch timeout."),
    K("controller.quorum.election.backoff.max.ms", I, 1000, H, "KRaft maximum election backoff."),
    K("controller.quorum.append.linger.ms", I, 25, M, "KRaft append linger time."),
    K("controller.quorum.request.timeout.ms", I, 2000, M, "KRaft request timeout."),
    K("controller.quorum.retry.backoff.ms", I, 20, L, "KRaft retry backoff."),
    K("metadata.log.dir", S, None, H, "Directory of the cluster metadata; defaults to the first log "
      "directory. kafkapy keeps its metadata file here."),
    K("metadata.log.segment.bytes", I, 1073741824, H, "KRaft metadata log segment size.", Range(12)),
    K("metadata.log.segment.ms", LG, 604800000, H, "KRaft metadata log roll time."),
    K("metadata.max.retention.bytes", LG, 104857600, H, "KRaft metadata log retention size."),
    K("metadata.max.retention.ms", LG, 604800000, H, "KRaft metadata log retention time."),
    K("metadata.max.idle.interval.ms", I, 500, L, "KRaft no-op record interval.", Range(0)),
    K("metadata.log.max.record.bytes.between.snapshots", LG, 20971520, H, "KRaft snapshot size trigger.",
      Range(1)),
    K("metadata.log.max.snapshot.interval.ms", LG, 3600000, H, "KRaft snapshot time trigger.", Range(0)),
    K("initial.broker.registration.timeout.ms", I, 60000, M, "KRaft broker registration timeout."),
    K("broker.heartbeat.interval.ms", I, 2000, M, "KRaft broker heartbeat interval."),
    K("broker.session.timeout.ms", I, 9000, M, "KRaft broker session timeout."),
    K("sasl.mechanism.controller.protocol", S, "GSSAPI", H, "SASL mechanism used to talk to controllers."),
    K("eligible.leader.replicas.enable", B, False, H, "Enable eligible leader replicas (KIP-966)."),
    K("zookeeper.connect", S, None, H, "ZooKeeper connection string host:port[,host:port][/chroot]; "
      "kafkapy will keep its metadata in ZooKeeper when set (not implemented yet)."),
    K("zookeeper.session.timeout.ms", I, 18000, H, "ZooKeeper session timeout."),
    K("zookeeper.connection.timeout.ms", I, None, H, "Maximum time to wait for a ZooKeeper connection; "
      "zookeeper.session.timeout.ms when unset."),
    K("zookeeper.set.acl", B, False, H, "Use secure ACLs on ZooKeeper nodes."),
    K("zookeeper.max.in.flight.requests", I, 10, H, "Unacknowledged ZooKeeper requests before blocking.",
      Range(1)),
    K("zookeeper.ssl.client.enable", B, False, M, "Use TLS to connect to ZooKeeper."),
    K("zookeeper.metadata.migration.enable", B, False, H, "Enable ZooKeeper to KRaft migration."),
    # -- listeners and sockets -----------------------------------------------------------------
    K("listeners", S, "PLAINTEXT://localhost:9092", H, "Comma-separated listener URIs NAME://host:port. "
      "An empty host binds every interface; kafkapy's default binds loopback only (localhost)."),
    K("advertised.listeners", S, None, H, "Listener URIs given to clients in metadata; defaults to "
      "listeners (an empty host is replaced by this machine's name)."),
    K("listener.security.protocol.map", S, "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,"
      "SASL_PLAINTEXT:SASL_PLAINTEXT", L, "Map of listener name to security protocol."),
    K("control.plane.listener.name", S, None, H, "Listener used for controller-to-broker traffic."),
    K("inter.broker.listener.name", S, None, M, "Listener used between brokers."),
    K("security.inter.broker.protocol", S, "PLAINTEXT", M, "Security protocol used between brokers.",
      OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))),
    K("early.start.listeners", S, None, H, "Listeners started before the authorizer is ready."),
    K("socket.send.buffer.bytes", I, 102400, H, "SO_SNDBUF of server sockets; -1 uses the OS default."),
    K("socket.receive.buffer.bytes", I, 102400, H, "SO_RCVBUF of server sockets; -1 uses the OS default."),
    K("socket.request.max.bytes", I, 104857600, H, "Largest request the server accepts.", Range(1)),
    K("socket.listen.backlog.size", I, 50, M, "Listen backlog of server sockets.", Range(1)),
    K("socket.connection.setup.timeout.ms", LG, 10000, M, "Client connection setup timeout."),
    K("socket.connection.setup.timeout.max.ms", LG, 30000, M, "Maximum connection setup timeout."),
    K("max.connections.per.ip", I, INT_MAX, M, "Connections allowed from one IP address.", Range(0)),
    K("max.connections.per.ip.overrides", S, "", M, "Per-IP or per-host overrides of max.connections.per.ip.",
      _ip_count_map),
    K("max.connections", I, INT_MAX, M, "Connections allowed in the broker at any time.", Range(0)),
    K("max.connection.creation.rate", I, INT_MAX, M, "New connections per second allowed.", Range(0)),
    K("connections.max.idle.ms", LG, 600000, M, "Idle connections are closed after this long."),
    K("connection.failed.authentication.delay.ms", I, 100, L, "Delay before closing a connection that failed "
      "authentication.", Range(0)),
    K("queued.max.requests", I, 500, H, "Requests queued per connection before reading pauses.", Range(1)),
    K("queued.max.request.bytes", LG, -1, M, "Bytes of requests held in memory by all connections before "
      "reading pauses. kafkapy never runs unbounded: -1 (Kafka: no limit) means an eighth of physical memory, "
      "at most 256 MiB and at least socket.request.max.bytes."),
    K("num.network.threads", I, 3, H, "Threads handling network requests (accepted; kafkapy uses one event "
      "loop).", Range(1)),
    K("num.io.threads", I, 8, H, "Threads processing requests (accepted; kafkapy uses one event loop).",
      Range(1)),
    K("background.threads", I, 10, H, "Threads for background tasks.", Range(1)),
    K("num.replica.alter.log.dirs.threads", I, None, H, "Threads moving replicas between log directories."),
    K("request.timeout.ms", I, 30000, H, "Timeout of requests the broker sends."),
    K("max.request.partition.size.limit", I, 2000, M, "Maximum partitions served in one request.", Range(1)),
    # -- general server ------------------------------------------------------------------------
    K("message.max.bytes", I, 1048588, H, "Largest record batch size accepted (after compression); the "
      "topic-level max.message.bytes overrides it.", Range(0)),
    K("delete.topic.enable", B, True, H, "Allow topics to be deleted."),
    K("auto.create.topics.enable", B, True, H, "Create a topic when a client asks for metadata of an unknown "
      "topic."),
    K("num.partitions", I, 1, M, "Default number of partitions of a new topic.", Range(1)),
    K("default.replication.factor", I, 1, M, "Default replication factor of a new topic."),
    K("fetch.max.bytes", I, 57671680, M, "Most bytes returned by one fetch request.", Range(1024)),
    K("max.incremental.fetch.session.cache.slots", I, 1000, M, "Incremental fetch sessions kept.", Range(0)),
    K("authorizer.class.name", S, "", L, "Class of the authorizer; empty for none. kafkapy enforces ACLs "
      "(security/authorizer.py) with Kafka's AclAuthorizer semantics; any other class name is served the same "
      "way, with a warning.", NonNull()),
    K("super.users", S, "", L, "Principals allowed everything by the authorizer (User:a;User:b).", SuperUsers()),
    K("allow.everyone.if.no.acl.found", B, False, L, "With an authorizer: allow an action on a resource that "
      "no ACL matches."),
    K("controlled.shutdown.enable", B, True, M, "Enable controlled shutdown."),
    K("controlled.shutdown.max.retries", I, 3, M, "Controlled shutdown retries."),
    K("controlled.shutdown.retry.backoff.ms", LG, 5000, M, "Backoff between controlled shutdown retries."),
    K("create.topic.policy.class.name", C, None, L, "Policy class validating topic creation."),
    K("alter.config.policy.class.name", C, None, L, "Policy class validating config changes."),
    KT("compression.type", S, "producer", H, OneOf(COMPRESSION_TYPES)),
    KT("compression.gzip.level", I, -1, M, GzipLevel()),
    KT("compression.lz4.level", I, 9, M, Range(1, 17)),
    KT("compression.zstd.level", I, 3, M, Range(-131072, 22)),
    KT("min.insync.replicas", I, 1, H, Range(1)),
    KT("unclean.leader.election.enable", B, False, H),
    K("unstable.api.versions.enable", B, False, H, "Advertise unreleased API versions.", internal=True),
    K("unstable.feature.versions.enable", B, False, H, "Allow unreleased metadata versions.", internal=True),
)
