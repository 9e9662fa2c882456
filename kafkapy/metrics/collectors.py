"""The Prometheus collector: BrokerMetrics' counters and broker state, rendered at scrape time.

Names are those Strimzi's JMX-exporter config (packaging/examples/metrics/kafka-metrics.yaml) gives
Kafka's MBeans, and kafka_exporter's for topics and consumer groups; the MBean each one stands for
is in METRIC_SOURCES (and docs/operations.md). Gauges are computed here, from the partition logs,
the metadata (ISR), the replica manager, the controller and the group coordinator, so nothing is
kept up to date on the request path for them.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .broker_metrics import QUANTILES, BrokerMetrics, error_name

if TYPE_CHECKING:
    from ..broker.broker import Broker

log = logging.getLogger(__name__)

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


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name[:-len("_total")], doc, labels=labels)


class BrokerCollector:
    """Yields every kafkapy metric family; runs on the broker's event loop (at scrape time)."""

    def __init__(self, broker: Broker, metrics: BrokerMetrics):
        self.broker = broker
        self.metrics = metrics

    def describe(self) -> list:
        return []  # unchecked collector: the names are in METRIC_SOURCES

    def collect(self) -> Iterator[Metric]:
        for part in (self._topic_metrics, self._request_metrics, self._network_metrics,
                     self._partition_metrics, self._controller_metrics, self._group_metrics,
                     self._fetch_position_metrics):
            try:
                yield from part()
            except Exception:
                log.exception("collecting %s failed", part.__name__)

    # -- BrokerTopicMetrics -----------------------------------------------------------------
    def _topic_metrics(self) -> Iterator[Metric]:
        m = self.metrics
        fields = ((MESSAGES_IN, "messages_in"), (BYTES_IN, "bytes_in"), (BYTES_OUT, "bytes_out"),
                  (TOTAL_PRODUCE, "produce_requests"), (FAILED_PRODUCE, "failed_produce_requests"),
                  (TOTAL_FETCH, "fetch_requests"), (FAILED_FETCH, "failed_fetch_requests"))
        for name, attr in fields:
            # Kafka's all-topics MBean has no topic key: the JMX exporter renders it without the label
            family = Metric(name[:-len("_total")], METRIC_SOURCES[name][2], "counter")
            family.add_sample(name, {}, getattr(m.all_topics, attr))
            for topic, stats in sorted(m.topics.items()):
                family.add_sample(name, {"topic": topic}, getattr(stats, attr))
            yield family

    # -- RequestMetrics -----------------------------------------------------------------------
    def _request_metrics(self) -> Iterator[Metric]:
        apis = sorted(self.metrics.apis.items())
        requests = _counter(REQUESTS, "requests handled", ["request", "version"])
        errors = _counter(ERRORS, "error codes in responses", ["request", "error"])
        for name, stats in apis:
            if stats.versions:
                for version, count in sorted(stats.versions.items()):
                    requests.add_metric([name, str(version)], count)
            else:
                requests.add_metric([name, ""], stats.count)
            for code, count in sorted(stats.error_codes.items()):
                errors.add_metric([name, error_name(code)], count)
        yield requests
        yield errors
        for timer, metric_name in TIMERS.items():
            family = Metric(metric_name, METRIC_SOURCES[metric_name][2] + " (ms)", "summary")
            for name, stats in apis:
                reservoir = getattr(stats, timer)
                if not reservoir.count:
                    continue
                for q, value in zip(QUANTILES, reservoir.quantiles()):
                    family.add_sample(metric_name, {"request": name, "quantile": _quantile_label(q)}, value)
                family.add_sample(metric_name + "_count", {"request": name}, reservoir.count)
                family.add_sample(metric_name + "_sum", {"request": name}, reservoir.sum)
            yield family

    # -- network ------------------------------------------------------------------------------
    def _network_metrics(self) -> Iterator[Metric]:
        broker, m = self.broker, self.metrics
        yield GaugeMetricFamily(NETWORK_IDLE, METRIC_SOURCES[NETWORK_IDLE][2], value=m.loop_idle)
        yield GaugeMetricFamily(HANDLER_IDLE, METRIC_SOURCES[HANDLER_IDLE][2], value=m.loop_idle)
        queued = 0
        by_listener: dict[str, int] = {lst.name: 0 for lst in broker.config.listeners}
        for conn in list(broker.connections):
            queued += len(conn._frames)
            name = conn.listener.name if conn.listener is not None else ""
            by_listener[name] = by_listener.get(name, 0) + 1
        yield GaugeMetricFamily(QUEUE_SIZE, METRIC_SOURCES[QUEUE_SIZE][2], value=queued)
        family = GaugeMetricFamily(CONNECTIONS, "open client connections", labels=["listener", "networkProcessor"])
        for name, count in sorted(by_listener.items()):
            family.add_metric([name, "0"], count)
        yield family

    # -- partitions: ReplicaManager, Partition, Log, kafka_exporter's topic view --------------
    def _partition_states(self):
        """(topic, partition, replicas, isr, leader, min_isr, log or None) of every partition known here."""
        broker = self.broker
        node = broker.node_id
        replicas = broker.replicas
        for meta in broker.metadata.list_topics():
            for p in meta.partitions:
                plog = broker.partitions.get_log(meta.name, p.partition)
                isr, reps, leader = tuple(p.isr), tuple(p.replicas), p.leader
                if replicas is not None:
                    hosted = replicas.partition(meta.name, p.partition)
                    if hosted is not None and hosted.is_leader:  # the leader's view is fresher than the cache
                        isr, reps, leader = tuple(hosted.isr), tuple(hosted.replicas) or reps, node
                        plog = hosted.log
                    elif hosted is not None:
                        plog = hosted.log
                min_isr = 1
                if plog is not None and not _offline(plog):
                    min_isr = min(plog.config.min_insync_replicas, len(reps) or 1)
                else:
                    plog = None
                yield meta.name, p.partition, reps, isr, leader, min_isr, plog

    def _partition_metrics(self) -> Iterator[Metric]:
        node = self.broker.node_id
        gauges = {name: GaugeMetricFamily(name, METRIC_SOURCES[name][2], labels=["topic", "partition"])
                  for name in (UNDER_MIN_ISR, UNDER_REPLICATED_PARTITION, LOG_SIZE, LOG_END, LOG_START, LOG_SEGMENTS,
                               TP_CURRENT, TP_OLDEST, TP_ISR, TP_REPLICAS, TP_LEADER, TP_UNDER)}
        topic_partitions: dict[str, int] = {}
        under_replicated = under_min = partitions_here = leaders = 0
        for topic, index, reps, isr, leader, min_isr, plog in self._partition_states():
            labels = [topic, str(index)]
            topic_partitions[topic] = topic_partitions.get(topic, 0) + 1
            under = len(isr) < len(reps)
            gauges[TP_ISR].add_metric(labels, len(isr))
            gauges[TP_REPLICAS].add_metric(labels, len(reps))
            gauges[TP_LEADER].add_metric(labels, leader)
            gauges[TP_UNDER].add_metric(labels, 1 if under else 0)
            if node in reps or plog is not None:
                partitions_here += 1
            if leader == node:
                leaders += 1
                under_replicated += under
                below = len(isr) < min_isr
                under_min += below
                gauges[UNDER_MIN_ISR].add_metric(labels, 1 if below else 0)
                gauges[UNDER_REPLICATED_PARTITION].add_metric(labels, 1 if under else 0)
            if plog is not None:
                gauges[LOG_SIZE].add_metric(labels, plog.size_in_bytes())
                gauges[LOG_END].add_metric(labels, plog.log_end_offset)
                gauges[LOG_START].add_metric(labels, plog.log_start_offset)
                gauges[LOG_SEGMENTS].add_metric(labels, _segment_count(plog))
                if leader == node:
                    gauges[TP_CURRENT].add_metric(labels, plog.high_watermark)
                    gauges[TP_OLDEST].add_metric(labels, plog.log_start_offset)
        yield from gauges.values()
        yield GaugeMetricFamily(UNDER_REPLICATED, METRIC_SOURCES[UNDER_REPLICATED][2], value=under_replicated)
        yield GaugeMetricFamily(UNDER_MIN_ISR_COUNT, METRIC_SOURCES[UNDER_MIN_ISR_COUNT][2], value=under_min)
        yield GaugeMetricFamily(PARTITION_COUNT, METRIC_SOURCES[PARTITION_COUNT][2], value=partitions_here)
        yield GaugeMetricFamily(LEADER_COUNT, METRIC_SOURCES[LEADER_COUNT][2], value=leaders)
        family = GaugeMetricFamily(TOPIC_PARTITIONS, METRIC_SOURCES[TOPIC_PARTITIONS][2], labels=["topic"])
        for topic, count in sorted(topic_partitions.items()):
            family.add_metric([topic], count)
        yield family
        shrinks = _counter(ISR_SHRINKS, METRIC_SOURCES[ISR_SHRINKS][2], [])
        shrinks.add_metric([], self.metrics.isr_shrinks)
        expands = _counter(ISR_EXPANDS, METRIC_SOURCES[ISR_EXPANDS][2], [])
        expands.add_metric([], self.metrics.isr_expands)
        yield shrinks
        yield expands

    # -- controller, brokers ----------------------------------------------------------------------
    def _controller_metrics(self) -> Iterator[Metric]:
        broker = self.broker
        controller = broker.controller
        active = 1 if controller is None else int(bool(getattr(controller, "active", False)))
        yield GaugeMetricFamily(ACTIVE_CONTROLLER, METRIC_SOURCES[ACTIVE_CONTROLLER][2], value=active)
        offline = topics = partitions = 0
        if active:
            metadata = broker.metadata
            is_live = getattr(metadata, "is_live", None)
            for meta in metadata.list_topics():
                topics += 1
                for p in meta.partitions:
                    partitions += 1
                    if p.leader < 0 or (is_live is not None and not is_live(p.leader)):
                        offline += 1
        yield GaugeMetricFamily(OFFLINE, METRIC_SOURCES[OFFLINE][2], value=offline)
        yield GaugeMetricFamily(GLOBAL_TOPICS, METRIC_SOURCES[GLOBAL_TOPICS][2], value=topics)
        yield GaugeMetricFamily(GLOBAL_PARTITIONS, METRIC_SOURCES[GLOBAL_PARTITIONS][2], value=partitions)
        brokers = broker.metadata.list_brokers()
        yield GaugeMetricFamily(BROKERS, METRIC_SOURCES[BROKERS][2], value=len(brokers))
        info = GaugeMetricFamily(BROKER_INFO, METRIC_SOURCES[BROKER_INFO][2], labels=["address", "id"])
        for b in brokers:
            info.add_metric([f"{b.host}:{b.port}", str(b.node_id)], 1)
        yield info

    # -- groups: GroupMetadataManager and kafka_exporter's consumergroup family ---------------------
    def _high_watermarks(self) -> dict[tuple[str, int], int]:
        out = {}
        for topic, index, _reps, _isr, leader, _min, plog in self._partition_states():
            if plog is not None and leader == self.broker.node_id:
                out[(topic, index)] = plog.high_watermark
        return out

    def _group_metrics(self) -> Iterator[Metric]:
        manager = self.broker.group_coordinator.manager
        groups = list(manager.groups.values())
        yield GaugeMetricFamily(NUM_GROUPS, METRIC_SOURCES[NUM_GROUPS][2], value=len(groups))
        by_state = dict.fromkeys(_GROUP_STATES, 0)
        for group in groups:
            state = group.state.value
            by_state[state] = by_state.get(state, 0) + 1
        for state, name in GROUP_STATE_NAMES.items():
            yield GaugeMetricFamily(name, METRIC_SOURCES[name][2], value=by_state.get(state, 0))
        yield GaugeMetricFamily(NUM_OFFSETS, METRIC_SOURCES[NUM_OFFSETS][2],
                                value=sum(len(g.offsets) for g in groups))
        hws = self._high_watermarks()
        offset = GaugeMetricFamily(CG_OFFSET, METRIC_SOURCES[CG_OFFSET][2], labels=["consumergroup", "topic", "partition"])
        offset_sum = GaugeMetricFamily(CG_OFFSET_SUM, METRIC_SOURCES[CG_OFFSET_SUM][2], labels=["consumergroup", "topic"])
        lag = GaugeMetricFamily(CG_LAG, METRIC_SOURCES[CG_LAG][2], labels=["consumergroup", "topic", "partition"])
        lag_sum = GaugeMetricFamily(CG_LAG_SUM, METRIC_SOURCES[CG_LAG_SUM][2], labels=["consumergroup", "topic"])
        members = GaugeMetricFamily(CG_MEMBERS, METRIC_SOURCES[CG_MEMBERS][2], labels=["consumergroup"])
        for group in sorted(groups, key=lambda g: g.group_id):
            gid = group.group_id
            members.add_metric([gid], len(group.members))
            sums: dict[str, list[int]] = {}
            for (topic, index), committed in sorted(group.offsets.items()):
                labels = [gid, topic, str(index)]
                offset.add_metric(labels, committed.offset)
                acc = sums.setdefault(topic, [0, 0, 0])
                acc[0] += committed.offset
                hw = hws.get((topic, index))
                if hw is not None:
                    # as kafka_exporter: high watermark - committed (a commit past the end counts 0)
                    value = max(hw - committed.offset, 0)
                    lag.add_metric(labels, value)
                    acc[1] += value
                    acc[2] += 1
            for topic, (total, lag_total, known) in sorted(sums.items()):
                offset_sum.add_metric([gid, topic], total)
                if known:
                    lag_sum.add_metric([gid, topic], lag_total)
        yield from (offset, offset_sum, lag, lag_sum, members)

    # -- consumers' fetch positions (kafkapy) -----------------------------------------------------
    def _fetch_position_metrics(self) -> Iterator[Metric]:
        broker = self.broker
        self.metrics.expire_fetches()
        position = GaugeMetricFamily(FETCH_POSITION, METRIC_SOURCES[FETCH_POSITION][2],
                                     labels=["client_id", "host", "topic", "partition"])
        lag = GaugeMetricFamily(FETCH_LAG, METRIC_SOURCES[FETCH_LAG][2],
                                labels=["client_id", "host", "topic", "partition"])
        names: dict = {}
        for (client_id, host), client in sorted(self.metrics.fetches.items()):
            for (tkey, index), offset in sorted(client.positions.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
                topic = tkey if isinstance(tkey, str) else names.get(tkey)
                if topic is None:
                    meta = broker.partitions.topic_by_id(tkey)
                    if meta is None:
                        continue
                    topic = names[tkey] = meta.name
                labels = [client_id, host, topic, str(index)]
                position.add_metric(labels, offset)
                plog = broker.partitions.get_log(topic, index)
                if plog is not None and not _offline(plog):
                    lag.add_metric(labels, max(plog.high_watermark - offset, 0))
        yield position
        yield lag


def _quantile_label(q: float) -> str:
    # the JMX exporter's labels: 50thPercentile -> "0.50", 999thPercentile -> "0.999"
    return {0.5: "0.50", 0.75: "0.75", 0.95: "0.95", 0.98: "0.98", 0.99: "0.99", 0.999: "0.999"}[q]


def _offline(plog) -> bool:
    from ..log.manager import OfflinePartitionLog

    return isinstance(plog, OfflinePartitionLog)


def _segment_count(plog) -> int:
    segments = getattr(plog, "_segments", None)
    return len(segments) if segments is not None else 1
