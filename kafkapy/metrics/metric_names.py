"""The metric names the Prometheus collector emits, each with the Kafka MBean or kafka_exporter
series it stands for (METRIC_SOURCES): the table the dashboard test and docs/operations.md read.
"""
from __future__ import annotations

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
