"""The Prometheus collector: BrokerMetrics' counters and broker state, rendered at scrape time.

Names are those Strimzi's JMX-exporter config (packaging/examples/metrics/kafka-metrics.yaml) gives
Kafka's MBeans, and kafka_exporter's for topics and consumer groups; the MBean each one stands for
is in METRIC_SOURCES (and docs/operations.md). Gauges are computed here, from the partition logs,
the metadata (ISR), the replica manager, the controller and the group coordinator, so nothing is
kept up to date on the request path for them.
"""
from __future__ import annotations

import logging
from copy import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .broker_metrics import QUANTILES, BrokerMetrics, TopicStats, error_name

if TYPE_CHECKING:
    from ..log.manager import LogManager
    from ..metadata.store import MetadataStore
    from ..replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class MetricsSource(Protocol):
    """What a scrape reads of the broker (Broker satisfies it): its parts, read on its loop. Kept
    here, below the broker layer, so that metrics/ never imports the broker."""

    node_id: int
    config: Any  # broker.config.BrokerConfig: `listeners`, `get`
    metrics: BrokerMetrics
    connections: set
    controller: Any  # the KafkaController in a ZooKeeper cluster, else None
    metadata: MetadataStore
    logs: LogManager
    replicas: ReplicaManager
    partitions: Any  # broker.partitions.PartitionManager: get_log, topic_by_id
    client_telemetry: Any  # metrics.client_telemetry.ClientTelemetry, when something shows it
    schema_registry: Any  # the services the composition root attached (kafkapy/node.py), or None
    tables: Any

    @property
    def loaded_group_coordinator(self) -> Any: ...

    @property
    def loaded_share_groups(self) -> Any: ...

# our name -> (Kafka MBean or exporter, labels, meaning); every name the collector emits is here
# (the Grafana dashboard test checks its queries against this table and a live scrape)
METRIC_SOURCES: dict[str, tuple[str, str, str]] = {}


def _source(name: str, mbean: str, labels: str, meaning: str) -> str:
    METRIC_SOURCES[name] = (mbean, labels, meaning)
    return name


_BTM = "kafka.server:type=BrokerTopicMetrics,name={}[,topic=]"
MESSAGES_IN = _source("kafka_server_brokertopicmetrics_messagesin_total", _BTM.format("MessagesInPerSec"),
                      "topic (absent: all topics)", "records appended by produce requests")
BYTES_IN = _source("kafka_server_brokertopicmetrics_bytesin_total", _BTM.format("BytesInPerSec"),
                   "topic", "bytes of record batches appended by produce requests")
BYTES_OUT = _source("kafka_server_brokertopicmetrics_bytesout_total", _BTM.format("BytesOutPerSec"),
                    "topic", "bytes of records sent to consumers (not followers)")
TOTAL_PRODUCE = _source("kafka_server_brokertopicmetrics_totalproducerequests_total",
                        _BTM.format("TotalProduceRequestsPerSec"), "topic", "partition produces")
FAILED_PRODUCE = _source("kafka_server_brokertopicmetrics_failedproducerequests_total",
                         _BTM.format("FailedProduceRequestsPerSec"), "topic", "partition produces refused")
TOTAL_FETCH = _source("kafka_server_brokertopicmetrics_totalfetchrequests_total",
                      _BTM.format("TotalFetchRequestsPerSec"), "topic", "partition fetches by consumers")
FAILED_FETCH = _source("kafka_server_brokertopicmetrics_failedfetchrequests_total",
                       _BTM.format("FailedFetchRequestsPerSec"), "topic", "partition fetches answered with an error")
_RM = "kafka.network:type=RequestMetrics,name={},request="
REQUESTS = _source("kafka_network_requestmetrics_requests_total", _RM.format("RequestsPerSec") + ",version=",
                   "request, version", "requests handled")
ERRORS = _source("kafka_network_requestmetrics_errors_total", _RM.format("ErrorsPerSec") + ",error=",
                 "request, error", "error codes in responses (NONE included, as Kafka)")
TIMERS = {
    "total": _source("kafka_network_requestmetrics_totaltimems", _RM.format("TotalTimeMs"), "request, quantile",
                     "time from the request being ready to its response written"),
    "queue": _source("kafka_network_requestmetrics_requestqueuetimems", _RM.format("RequestQueueTimeMs"),
                     "request, quantile", "event-loop scheduling delay (loop lag) when the request came"),
    "local": _source("kafka_network_requestmetrics_localtimems", _RM.format("LocalTimeMs"), "request, quantile",
                     "time the handler ran on the loop"),
    "remote": _source("kafka_network_requestmetrics_remotetimems", _RM.format("RemoteTimeMs"), "request, quantile",
                      "time the handler was parked (purgatory: long-poll fetch, acks=all, join)"),
    "send": _source("kafka_network_requestmetrics_responsesendtimems", _RM.format("ResponseSendTimeMs"),
                    "request, quantile", "time writing the response (until the transport took it)"),
}
QUEUE_SIZE = _source("kafka_network_requestchannel_requestqueuesize",
                     "kafka.network:type=RequestChannel,name=RequestQueueSize", "",
                     "requests read and waiting on their connections")
NETWORK_IDLE = _source("kafka_network_socketserver_networkprocessoravgidle_percent",
                       "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent", "",
                       "event-loop idle fraction (0-1; 1 - loop thread CPU / wall time)")
HANDLER_IDLE = _source("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                       "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent", "",
                       "the same event-loop idle fraction (one loop does both)")
CONNECTIONS = _source("kafka_server_socket_server_metrics_connection_count",
                      "kafka.server:type=socket-server-metrics,listener=,networkProcessor= connection-count",
                      "listener, networkProcessor", "open client connections")
_RPM = "kafka.server:type=ReplicaManager,name={}"
UNDER_REPLICATED = _source("kafka_server_replicamanager_underreplicatedpartitions",
                           _RPM.format("UnderReplicatedPartitions"), "", "led partitions with ISR < replicas")
UNDER_MIN_ISR_COUNT = _source("kafka_server_replicamanager_underminisrpartitioncount",
                              _RPM.format("UnderMinIsrPartitionCount"), "", "led partitions with ISR < min.insync.replicas")
PARTITION_COUNT = _source("kafka_server_replicamanager_partitioncount", _RPM.format("PartitionCount"), "",
                          "partitions with a replica here")
LEADER_COUNT = _source("kafka_server_replicamanager_leadercount", _RPM.format("LeaderCount"), "",
                       "partitions led here")
ISR_SHRINKS = _source("kafka_server_replicamanager_isrshrinks_total", _RPM.format("IsrShrinksPerSec"), "",
                      "ISR shrinks committed")
ISR_EXPANDS = _source("kafka_server_replicamanager_isrexpands_total", _RPM.format("IsrExpandsPerSec"), "",
                      "ISR expands committed")
UNDER_MIN_ISR = _source("kafka_cluster_partition_underminisr",
                        "kafka.cluster:type=Partition,name=UnderMinIsr,topic=,partition=", "topic, partition",
                        "1 when the partition (led here) is under min.insync.replicas")
UNDER_REPLICATED_PARTITION = _source("kafka_cluster_partition_underreplicated",
                                     "kafka.cluster:type=Partition,name=UnderReplicated,topic=,partition=",
                                     "topic, partition", "1 when the partition (led here) is under-replicated")
ACTIVE_CONTROLLER = _source("kafka_controller_kafkacontroller_activecontrollercount",
                            "kafka.controller:type=KafkaController,name=ActiveControllerCount", "",
                            "1 on the active controller (a single node is its own)")
OFFLINE = _source("kafka_controller_kafkacontroller_offlinepartitionscount",
                  "kafka.controller:type=KafkaController,name=OfflinePartitionsCount", "",
                  "partitions without a live leader (reported by the active controller)")
OFFLINE_LOG_DIRS = _source("kafka_log_logmanager_offlinelogdirectorycount",
                           "kafka.log:type=LogManager,name=OfflineLogDirectoryCount", "",
                           "log dirs not serving writes: offline after an I/O error, or full (kafkapy)")
LOG_DIR_OFFLINE = _source("kafka_log_logmanager_logdirectoryoffline",
                          "kafka.log:type=LogManager,name=LogDirectoryOffline,logDirectory=", "logdirectory",
                          "1 while the log dir is offline or full")
LOG_DIR_FULL = _source("kafkapy_log_dir_full", "(kafkapy)", "logdirectory",
                       "1 while the log dir is full (ENOSPC: writes refused, reads served, rechecked)")
LOG_DIR_FAILURES = _source("kafkapy_log_dir_failures_total", "(kafkapy)", "logdirectory",
                           "times the log dir went full or offline")
LOG_DIR_RECOVERIES = _source("kafkapy_log_dir_recoveries_total", "(kafkapy)", "logdirectory",
                             "times the log dir came back online once space was free again")
GLOBAL_PARTITIONS = _source("kafka_controller_kafkacontroller_globalpartitioncount",
                            "kafka.controller:type=KafkaController,name=GlobalPartitionCount", "",
                            "partitions in the cluster (active controller)")
GLOBAL_TOPICS = _source("kafka_controller_kafkacontroller_globaltopiccount",
                        "kafka.controller:type=KafkaController,name=GlobalTopicCount", "",
                        "topics in the cluster (active controller)")
LOG_SIZE = _source("kafka_log_log_size", "kafka.log:type=Log,name=Size,topic=,partition=", "topic, partition",
                   "bytes of the partition's log here")
LOG_END = _source("kafka_log_log_logendoffset", "kafka.log:type=Log,name=LogEndOffset,topic=,partition=",
                  "topic, partition", "log end offset")
LOG_START = _source("kafka_log_log_logstartoffset", "kafka.log:type=Log,name=LogStartOffset,topic=,partition=",
                    "topic, partition", "log start offset")
LOG_SEGMENTS = _source("kafka_log_log_numlogsegments", "kafka.log:type=Log,name=NumLogSegments,topic=,partition=",
                       "topic, partition", "segments of the partition's log")
NUM_GROUPS = _source("kafka_coordinator_group_groupmetadatamanager_numgroups",
                     "kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups", "",
                     "groups coordinated here")
NUM_OFFSETS = _source("kafka_coordinator_group_groupmetadatamanager_numoffsets",
                      "kafka.coordinator.group:type=GroupMetadataManager,name=NumOffsets", "",
                      "committed offsets held here")
_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
GROUP_STATE_NAMES = {state: _source(f"kafka_coordinator_group_groupmetadatamanager_numgroups{state.lower()}",
                                    f"kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups{state}", "",
                                    f"groups in state {state}") for state in _GROUP_STATES}
# Kafka 4's GroupCoordinatorMetrics: groups by protocol, and streams groups by state (KIP-1071)
GROUP_COUNT = _source("kafka_server_group_coordinator_metrics_group_count",
                      "kafka.server:type=group-coordinator-metrics,name=group-count,protocol=", "protocol",
                      "groups coordinated here by protocol (classic, consumer, streams)")
STREAMS_GROUP_COUNT = _source("kafka_server_group_coordinator_metrics_streams_group_count",
                              "kafka.server:type=group-coordinator-metrics,name=streams-group-count,state=", "state",
                              "streams groups coordinated here by state")
_STREAMS_STATES = ("Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead")
_KE = "kafka_exporter"
BROKERS = _source("kafka_brokers", _KE, "", "brokers in the cluster")
BROKER_INFO = _source("kafka_broker_info", _KE, "address, id", "one series per broker")
TOPIC_PARTITIONS = _source("kafka_topic_partitions", _KE, "topic", "partitions of the topic")
TP_CURRENT = _source("kafka_topic_partition_current_offset", _KE, "topic, partition",
                     "high watermark (partitions with a log here)")
TP_OLDEST = _source("kafka_topic_partition_oldest_offset", _KE, "topic, partition", "log start offset")
TP_ISR = _source("kafka_topic_partition_in_sync_replica", _KE, "topic, partition", "in-sync replicas")
TP_REPLICAS = _source("kafka_topic_partition_replicas", _KE, "topic, partition", "replicas")
TP_LEADER = _source("kafka_topic_partition_leader", _KE, "topic, partition", "leader's broker id")
TP_PREFERRED = _source("kafka_topic_partition_leader_is_preferred", _KE, "topic, partition",
                       "1 when the leader is the preferred (first) replica")
TP_UNDER = _source("kafka_topic_partition_under_replicated_partition", _KE, "topic, partition",
                   "1 when ISR < replicas")
CG_OFFSET = _source("kafka_consumergroup_current_offset", _KE, "consumergroup, topic, partition",
                    "committed offset")
CG_OFFSET_SUM = _source("kafka_consumergroup_current_offset_sum", _KE, "consumergroup, topic",
                        "sum of committed offsets")
CG_LAG = _source("kafka_consumergroup_lag", _KE, "consumergroup, topic, partition",
                 "high watermark - committed offset")
CG_LAG_SUM = _source("kafka_consumergroup_lag_sum", _KE, "consumergroup, topic", "lag summed over partitions")
CG_MEMBERS = _source("kafka_consumergroup_members", _KE, "consumergroup", "members of the group")
FETCH_POSITION = _source("kafkapy_consumer_fetch_position", "kafkapy", "client_id, host, topic, partition",
                         "last fetch offset of a consumer, committing or not (Spark's source does not commit); "
                         "forgotten 10 minutes after its last fetch")
FETCH_LAG = _source("kafkapy_consumer_fetch_lag", "kafkapy", "client_id, host, topic, partition",
                    "high watermark - last fetch offset")
SG_MEMBERS = _source("kafkapy_sharegroup_members", "kafkapy", "sharegroup",
                     "members of a share group coordinated here (KIP-932)")
SG_START = _source("kafkapy_sharegroup_partition_start_offset", "kafkapy", "sharegroup, topic, partition",
                   "share-partition start offset (share-partitions led here)")
SG_LAG = _source("kafkapy_sharegroup_partition_lag", "kafkapy", "sharegroup, topic, partition",
                 "records from the start offset to the high watermark not yet acknowledged or archived")
SG_RECORDS = _source("kafkapy_sharegroup_partition_records", "kafkapy", "sharegroup, topic, partition, state",
                     "records of the in-flight window by state: available, acquired, acknowledged, archived")
CLIENT_METRIC = _source("kafkapy_client_telemetry_metric", "KIP-714 PushTelemetry",
                        "client_instance_id, client_id, metric, attributes",
                        "latest value a client pushed (delta sums added up; histograms as .count/.sum)")
CLIENT_PUSHES = _source("kafkapy_client_telemetry_pushes_total", "KIP-714 PushTelemetry",
                        "client_instance_id, client_id", "accepted PushTelemetry requests of a client instance")


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name[:-len("_total")], doc, labels=labels)


def _gauge(name: str, value: float | None = None, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, METRIC_SOURCES[name][2], value=value, labels=labels)


@dataclass(slots=True)
class PartitionState:
    """One partition as a scrape sees it; `size` and the offsets are None without a log here."""

    topic: str
    partition: int
    replicas: int
    isr: int
    leader: int
    min_isr: int
    led_here: bool
    hosted_here: bool
    preferred_leader: bool = True
    size: int | None = None
    log_end: int | None = None
    log_start: int | None = None
    segments: int | None = None
    high_watermark: int | None = None


@dataclass(slots=True)
class BrokerState:
    """Everything a scrape shows, as plain values read on the broker's loop (BrokerCollector.read)."""

    all_topics: TopicStats
    topics: list[tuple[str, TopicStats]]
    # (request name, count, versions, error codes, {timer: (samples, count, sum)})
    apis: list[tuple[str, int, dict, dict, dict]]
    loop_idle: float
    queued: int
    connections: dict[str, int]
    partitions: list[PartitionState]
    isr_shrinks: int
    isr_expands: int
    active_controller: int
    offline: int
    brokers: list[tuple[str, int]]
    # (group id, state, members, [(topic, partition, committed offset)])
    groups: list[tuple[str, str, int, list[tuple[str, int, int]]]]
    # (client id, host, topic, partition, fetch offset, high watermark or None)
    fetches: list[tuple[str, str, str, int, int, int | None]] = field(default_factory=list)
    # (log dir, status, failures, recoveries)
    log_dirs: list[tuple[str, str, int, int]] = field(default_factory=list)
    # share groups (KIP-932): (group id, members) coordinated here, and the share-partitions led
    # here: (group id, topic, partition, start offset, {state: records})
    share_groups: list[tuple[str, int]] = field(default_factory=list)
    # (group type, state) of every group coordinated here
    group_types: list[tuple[str, str]] = field(default_factory=list)
    share_partitions: list[tuple[str, str, int, int, dict[str, int]]] = field(default_factory=list)
    # pushed client telemetry (KIP-714): (client instance id, client id, metric, attributes, value)
    client_metrics: list[tuple[str, str, str, str, float]] = field(default_factory=list)
    # (client instance id, client id, pushes)
    client_pushes: list[tuple[str, str, int]] = field(default_factory=list)


class BrokerCollector:
    """Reads broker state on the loop (`read`), renders it as metric families anywhere (`families`)."""

    def __init__(self, broker: MetricsSource, metrics: BrokerMetrics):
        self.broker = broker
        self.metrics = metrics

    def describe(self) -> list:
        return []  # unchecked collector: the names are in METRIC_SOURCES

    def collect(self) -> Iterator[Metric]:
        """prometheus-client's collector protocol (on the loop: reads and renders at once)."""
        yield from families(self.read())

    # -- reading (on the broker's event loop) -----------------------------------------------------
    def read(self) -> BrokerState:
        broker, m = self.broker, self.metrics
        queued = 0
        connections: dict[str, int] = {lst.name: 0 for lst in broker.config.listeners}
        for conn in list(broker.connections):
            queued += len(conn._frames)
            name = conn.listener.name if conn.listener is not None else ""
            connections[name] = connections.get(name, 0) + 1
        apis = [(name, s.count, dict(s.versions), dict(s.error_codes),
                 {timer: (list(getattr(s, timer).samples), getattr(s, timer).count, getattr(s, timer).sum)
                  for timer in TIMERS})
                for name, s in sorted(m.apis.items())]
        apis = _with_fetch_total(apis)
        controller = broker.controller
        active = 1 if controller is None else int(bool(getattr(controller, "active", False)))
        partitions, offline = _safe(lambda: self._read_partitions(active), (None, 0))
        if partitions is None:
            partitions = []
        else:  # a deleted topic's counters go, as Kafka removes its BrokerTopicMetrics
            existing = {p.topic for p in partitions}
            for name in [t for t in m.topics if t not in existing]:
                del m.topics[name]
        state = BrokerState(
            all_topics=copy(m.all_topics), topics=[(t, copy(s)) for t, s in sorted(m.topics.items())],
            apis=apis, loop_idle=m.loop_idle, queued=queued, connections=connections,
            partitions=partitions, isr_shrinks=m.isr_shrinks, isr_expands=m.isr_expands,
            active_controller=active, offline=offline,
            brokers=_safe(lambda: [(f"{b.host}:{b.port}", b.node_id) for b in broker.metadata.list_brokers()]),
            groups=_safe(lambda: [(g.group_id, g.state.value, len(g.members),
                                   [(topic, index, o.offset) for (topic, index), o in g.offsets.items()])
                                  for g in _groups(broker)]))
        hws = {(p.topic, p.partition): p.high_watermark for p in partitions if p.high_watermark is not None}
        state.fetches = _safe(lambda: self._read_fetches(hws))
        state.log_dirs = _safe(lambda: [(str(d), st.status, st.failures, st.recoveries)
                                        for d, st in broker.logs.dir_states.items()]) or []
        state.group_types = _safe(lambda: [(getattr(g, "group_type", "classic"), g.state.value)
                                           for g in _groups(broker)]) or []
        share = broker.loaded_share_groups  # built on the first share request only
        if share is not None:
            state.share_groups = _safe(lambda: [(g.group_id, len(g.members)) for g in list(share.groups.values())])
            state.share_partitions = _safe(lambda: [
                (gid, topic, index, sp.start_offset, sp.counts())
                for (gid, topic, index), sp in list(share.partitions.items())
                if (topic, index) in hws])
        telemetry = broker.client_telemetry
        if telemetry is not None:
            state.client_metrics = _safe(telemetry.samples) or []
            state.client_pushes = sorted((str(i.instance_id), i.client_id, i.pushes)
                                         for i in telemetry.instances.values())
        return state

    def _read_partitions(self, active: int) -> tuple[list[PartitionState], int]:
        broker = self.broker
        node = broker.node_id
        replicas = broker.replicas
        metadata = broker.metadata
        is_live = getattr(metadata, "is_live", None) if replicas is not None else None
        out: list[PartitionState] = []
        offline = 0
        for meta in metadata.list_topics():
            for p in meta.partitions:
                plog = broker.partitions.get_log(meta.name, p.partition)
                isr, reps, leader = p.isr, p.replicas, p.leader
                if active and (leader < 0 or (is_live is not None and not is_live(leader))):
                    offline += 1
                if replicas is not None:
                    hosted = replicas.partition(meta.name, p.partition)
                    if hosted is not None:
                        plog = hosted.log
                        if hosted.is_leader:  # the leader's view is fresher than the metadata cache
                            isr, reps, leader = hosted.isr, hosted.replicas or reps, node
                state = PartitionState(meta.name, p.partition, len(reps), len(isr), leader, 1, leader == node,
                                       node in reps or plog is not None, bool(reps) and reps[0] == leader)
                if plog is not None and not _offline(plog):
                    state.min_isr = min(plog.config.min_insync_replicas, len(reps) or 1)
                    state.size = plog.size_in_bytes()
                    state.log_end = plog.log_end_offset
                    state.log_start = plog.log_start_offset
                    state.segments = _segment_count(plog)
                    if state.led_here:
                        state.high_watermark = plog.high_watermark
                out.append(state)
        return out, offline

    def _read_fetches(self, hws: dict) -> list[tuple]:
        broker = self.broker
        self.metrics.expire_fetches()
        names: dict = {}
        out = []
        for (client_id, host), client in list(self.metrics.fetches.items()):
            for (tkey, index), offset in list(client.positions.items()):
                topic = tkey if isinstance(tkey, str) else names.get(tkey)
                if topic is None:
                    meta = broker.partitions.topic_by_id(tkey)
                    if meta is None:
                        continue
                    topic = names[tkey] = meta.name
                out.append((client_id, host, topic, index, offset, hws.get((topic, index))))
        out.sort()
        return out


# -- rendering (anywhere: a worker thread during a scrape) -------------------------------------------
def families(state: BrokerState) -> list[Metric]:
    """The metric families of a BrokerState."""
    out: list[Metric] = []
    for part in (_topic_families, _request_families, _network_families, _partition_families,
                 _log_dir_families, _controller_families, _group_families, _share_group_families,
                 _fetch_position_families, _client_telemetry_families):
        try:
            out.extend(part(state))
        except Exception:
            log.exception("rendering %s failed", part.__name__)
    return out


def _topic_families(state: BrokerState) -> Iterator[Metric]:
    fields = ((MESSAGES_IN, "messages_in"), (BYTES_IN, "bytes_in"), (BYTES_OUT, "bytes_out"),
              (TOTAL_PRODUCE, "produce_requests"), (FAILED_PRODUCE, "failed_produce_requests"),
              (TOTAL_FETCH, "fetch_requests"), (FAILED_FETCH, "failed_fetch_requests"))
    for name, attr in fields:
        # Kafka's all-topics MBean has no topic key: the JMX exporter renders it without the label
        family = Metric(name[:-len("_total")], METRIC_SOURCES[name][2], "counter")
        family.add_sample(name, {}, getattr(state.all_topics, attr))
        for topic, stats in state.topics:
            family.add_sample(name, {"topic": topic}, getattr(stats, attr))
        yield family


def _request_families(state: BrokerState) -> Iterator[Metric]:
    requests = _counter(REQUESTS, METRIC_SOURCES[REQUESTS][2], ["request", "version"])
    errors = _counter(ERRORS, METRIC_SOURCES[ERRORS][2], ["request", "error"])
    for name, count, versions, codes, _timers in state.apis:
        if versions:
            for version, n in sorted(versions.items()):
                requests.add_metric([name, str(version)], n)
        else:
            requests.add_metric([name, ""], count)
        for code, n in sorted(codes.items()):
            errors.add_metric([name, error_name(code)], n)
    yield requests
    yield errors
    for timer, metric_name in TIMERS.items():
        family = Metric(metric_name, METRIC_SOURCES[metric_name][2] + " (ms)", "summary")
        for name, _count, _versions, _codes, timers in state.apis:
            samples, count, total = timers[timer]
            if not count:
                continue
            values = sorted(samples)
            n = len(values)
            for q in QUANTILES:
                family.add_sample(metric_name, {"request": name, "quantile": _quantile_label(q)},
                                  values[min(n - 1, int(q * n))] if n else 0.0)
            family.add_sample(metric_name + "_count", {"request": name}, count)
            family.add_sample(metric_name + "_sum", {"request": name}, total)
        yield family


def _network_families(state: BrokerState) -> Iterator[Metric]:
    yield _gauge(NETWORK_IDLE, state.loop_idle)
    yield _gauge(HANDLER_IDLE, state.loop_idle)
    yield _gauge(QUEUE_SIZE, state.queued)
    family = _gauge(CONNECTIONS, labels=["listener", "networkProcessor"])
    for name, count in sorted(state.connections.items()):
        family.add_metric([name, "0"], count)
    yield family


def _partition_families(state: BrokerState) -> Iterator[Metric]:
    per_partition = (UNDER_MIN_ISR, UNDER_REPLICATED_PARTITION, LOG_SIZE, LOG_END, LOG_START, LOG_SEGMENTS,
                     TP_CURRENT, TP_OLDEST, TP_ISR, TP_REPLICAS, TP_LEADER, TP_PREFERRED, TP_UNDER)
    g = {name: _gauge(name, labels=["topic", "partition"]) for name in per_partition}
    topic_partitions: dict[str, int] = {}
    under_replicated = under_min = hosted = leaders = 0
    for p in state.partitions:
        labels = [p.topic, str(p.partition)]
        topic_partitions[p.topic] = topic_partitions.get(p.topic, 0) + 1
        under = p.isr < p.replicas
        g[TP_ISR].add_metric(labels, p.isr)
        g[TP_REPLICAS].add_metric(labels, p.replicas)
        g[TP_LEADER].add_metric(labels, p.leader)
        g[TP_PREFERRED].add_metric(labels, 1 if p.preferred_leader else 0)
        g[TP_UNDER].add_metric(labels, 1 if under else 0)
        hosted += p.hosted_here
        if p.led_here:
            leaders += 1
            below = p.isr < p.min_isr
            under_replicated += under
            under_min += below
            g[UNDER_MIN_ISR].add_metric(labels, 1 if below else 0)
            g[UNDER_REPLICATED_PARTITION].add_metric(labels, 1 if under else 0)
        if p.size is not None:
            g[LOG_SIZE].add_metric(labels, p.size)
            g[LOG_END].add_metric(labels, p.log_end)
            g[LOG_START].add_metric(labels, p.log_start)
            g[LOG_SEGMENTS].add_metric(labels, p.segments)
        if p.high_watermark is not None:
            g[TP_CURRENT].add_metric(labels, p.high_watermark)
            g[TP_OLDEST].add_metric(labels, p.log_start)
    yield from g.values()
    yield _gauge(UNDER_REPLICATED, under_replicated)
    yield _gauge(UNDER_MIN_ISR_COUNT, under_min)
    yield _gauge(PARTITION_COUNT, hosted)
    yield _gauge(LEADER_COUNT, leaders)
    family = _gauge(TOPIC_PARTITIONS, labels=["topic"])
    for topic, count in sorted(topic_partitions.items()):
        family.add_metric([topic], count)
    yield family
    for name, value in ((ISR_SHRINKS, state.isr_shrinks), (ISR_EXPANDS, state.isr_expands)):
        counter = _counter(name, METRIC_SOURCES[name][2], [])
        counter.add_metric([], value)
        yield counter


def _log_dir_families(state: BrokerState) -> Iterator[Metric]:
    yield _gauge(OFFLINE_LOG_DIRS, sum(1 for _, status, _, _ in state.log_dirs if status != "online"))
    offline = _gauge(LOG_DIR_OFFLINE, labels=["logdirectory"])
    full = _gauge(LOG_DIR_FULL, labels=["logdirectory"])
    failures = _counter(LOG_DIR_FAILURES, METRIC_SOURCES[LOG_DIR_FAILURES][2], ["logdirectory"])
    recoveries = _counter(LOG_DIR_RECOVERIES, METRIC_SOURCES[LOG_DIR_RECOVERIES][2], ["logdirectory"])
    for path, status, failed, recovered in state.log_dirs:
        offline.add_metric([path], int(status != "online"))
        full.add_metric([path], int(status == "full"))
        failures.add_metric([path], failed)
        recoveries.add_metric([path], recovered)
    yield from (offline, full, failures, recoveries)


def _controller_families(state: BrokerState) -> Iterator[Metric]:
    active = state.active_controller
    yield _gauge(ACTIVE_CONTROLLER, active)
    yield _gauge(OFFLINE, state.offline if active else 0)
    yield _gauge(GLOBAL_TOPICS, len({p.topic for p in state.partitions}) if active else 0)
    yield _gauge(GLOBAL_PARTITIONS, len(state.partitions) if active else 0)
    yield _gauge(BROKERS, len(state.brokers))
    info = _gauge(BROKER_INFO, labels=["address", "id"])
    for address, node_id in state.brokers:
        info.add_metric([address, str(node_id)], 1)
    yield info


def _share_group_families(state: BrokerState) -> Iterator[Metric]:
    if not state.share_groups and not state.share_partitions:
        return
    members = _gauge(SG_MEMBERS, labels=["sharegroup"])
    for gid, n in sorted(state.share_groups):
        members.add_metric([gid], n)
    yield members
    hws = {(p.topic, p.partition): p.high_watermark for p in state.partitions if p.high_watermark is not None}
    start = _gauge(SG_START, labels=["sharegroup", "topic", "partition"])
    lag = _gauge(SG_LAG, labels=["sharegroup", "topic", "partition"])
    records = _gauge(SG_RECORDS, labels=["sharegroup", "topic", "partition", "state"])
    for gid, topic, index, start_offset, counts in sorted(state.share_partitions, key=lambda e: e[:3]):
        labels = [gid, topic, str(index)]
        start.add_metric(labels, start_offset)
        hw = hws.get((topic, index))
        if hw is not None:
            done = counts.get("ACKNOWLEDGED", 0) + counts.get("ARCHIVED", 0)
            lag.add_metric(labels, max(hw - start_offset - done, 0))
        for name, value in sorted(counts.items()):
            records.add_metric(labels + [name.lower()], value)
    yield start
    yield lag
    yield records


def _group_families(state: BrokerState) -> Iterator[Metric]:
    yield _gauge(NUM_GROUPS, len(state.groups))
    by_state = dict.fromkeys(_GROUP_STATES, 0)
    for _gid, group_state, _members, _offsets in state.groups:
        by_state[group_state] = by_state.get(group_state, 0) + 1
    for group_state, name in GROUP_STATE_NAMES.items():
        yield _gauge(name, by_state.get(group_state, 0))
    yield _gauge(NUM_OFFSETS, sum(len(offsets) for *_, offsets in state.groups))
    by_type = dict.fromkeys(("classic", "consumer", "streams"), 0)
    streams_by_state = dict.fromkeys(_STREAMS_STATES, 0)
    for group_type, group_state in state.group_types:
        by_type[group_type] = by_type.get(group_type, 0) + 1
        if group_type == "streams":
            streams_by_state[group_state] = streams_by_state.get(group_state, 0) + 1
    count = _gauge(GROUP_COUNT, labels=["protocol"])
    for group_type, n in sorted(by_type.items()):
        count.add_metric([group_type], n)
    yield count
    streams_count = _gauge(STREAMS_GROUP_COUNT, labels=["state"])
    for group_state, n in streams_by_state.items():
        streams_count.add_metric([group_state.lower()], n)
    yield streams_count
    hws = {(p.topic, p.partition): p.high_watermark for p in state.partitions if p.high_watermark is not None}
    offset = _gauge(CG_OFFSET, labels=["consumergroup", "topic", "partition"])
    offset_sum = _gauge(CG_OFFSET_SUM, labels=["consumergroup", "topic"])
    lag = _gauge(CG_LAG, labels=["consumergroup", "topic", "partition"])
    lag_sum = _gauge(CG_LAG_SUM, labels=["consumergroup", "topic"])
    members = _gauge(CG_MEMBERS, labels=["consumergroup"])
    for gid, _group_state, n_members, offsets in sorted(state.groups):
        members.add_metric([gid], n_members)
        sums: dict[str, list[int]] = {}
        for topic, index, committed in sorted(offsets):
            labels = [gid, topic, str(index)]
            offset.add_metric(labels, committed)
            acc = sums.setdefault(topic, [0, 0, 0])
            acc[0] += committed
            hw = hws.get((topic, index))
            if hw is not None:
                # as kafka_exporter: high watermark - committed (a commit past the end counts 0)
                value = max(hw - committed, 0)
                lag.add_metric(labels, value)
                acc[1] += value
                acc[2] += 1
        for topic, (total, lag_total, known) in sorted(sums.items()):
            offset_sum.add_metric([gid, topic], total)
            if known:
                lag_sum.add_metric([gid, topic], lag_total)
    yield from (offset, offset_sum, lag, lag_sum, members)


def _fetch_position_families(state: BrokerState) -> Iterator[Metric]:
    labels = ["client_id", "host", "topic", "partition"]
    position = _gauge(FETCH_POSITION, labels=labels)
    lag = _gauge(FETCH_LAG, labels=labels)
    for client_id, host, topic, index, offset, hw in state.fetches:
        values = [client_id, host, topic, str(index)]
        position.add_metric(values, offset)
        if hw is not None:
            lag.add_metric(values, max(hw - offset, 0))
    yield position
    yield lag


def _client_telemetry_families(state: BrokerState) -> Iterator[Metric]:
    value = _gauge(CLIENT_METRIC, labels=["client_instance_id", "client_id", "metric", "attributes"])
    for instance_id, client_id, name, attributes, number in state.client_metrics:
        value.add_metric([instance_id, client_id, name, attributes], number)
    pushes = _counter(CLIENT_PUSHES, METRIC_SOURCES[CLIENT_PUSHES][2], ["client_instance_id", "client_id"])
    for instance_id, client_id, count in state.client_pushes:
        pushes.add_metric([instance_id, client_id], count)
    yield value
    yield pushes


def _with_fetch_total(apis: list[tuple]) -> list[tuple]:
    """Kafka also records every Fetch under request="Fetch" besides FetchConsumer/FetchFollower."""
    fetches = [a for a in apis if a[0] in ("FetchConsumer", "FetchFollower")]
    if not fetches:
        return apis
    versions: dict[int, int] = {}
    codes: dict[int, int] = {}
    timers = {}
    for _name, _count, v, c, t in fetches:
        for key, n in v.items():
            versions[key] = versions.get(key, 0) + n
        for key, n in c.items():
            codes[key] = codes.get(key, 0) + n
        for timer, (samples, count, total) in t.items():
            merged = timers.setdefault(timer, ([], 0, 0.0))
            timers[timer] = (merged[0] + samples, merged[1] + count, merged[2] + total)
    total = ("Fetch", sum(a[1] for a in fetches), versions, codes, timers)
    return sorted(apis + [total], key=lambda a: a[0])


def _safe(read, default=None):
    """`read()`, or `default` (an empty list) with one log line when that part of the state cannot be read:
    the rest of the scrape still answers."""
    try:
        return read()
    except Exception:
        log.exception("reading broker state for /metrics failed")
        return [] if default is None else default


def _quantile_label(q: float) -> str:
    # the JMX exporter's labels: 50thPercentile -> "0.50", 999thPercentile -> "0.999"
    return {0.5: "0.50", 0.75: "0.75", 0.95: "0.95", 0.98: "0.98", 0.99: "0.99", 0.999: "0.999"}[q]


def _offline(plog) -> bool:
    from ..log.manager import OfflinePartitionLog

    return isinstance(plog, OfflinePartitionLog)


def _segment_count(plog) -> int:
    segments = getattr(plog, "_segments", None)
    return len(segments) if segments is not None else 1


def _groups(broker: MetricsSource) -> list:
    """The groups of the broker's group coordinator; none before it is built (no group seen yet)."""
    coordinator = broker.loaded_group_coordinator
    return [] if coordinator is None else list(coordinator.manager.groups.values())
