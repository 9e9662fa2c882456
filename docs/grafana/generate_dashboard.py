"""Writes kafkapy-dashboard.json (run: python docs/grafana/generate_dashboard.py); every query uses only
names kafkapy exports (checked by conformance/test_metrics.py)."""
from pathlib import Path
import json
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
panels = []
y = 0
def panel(title, exprs, kind="timeseries", unit="short", w=12, h=8, legend=None, desc=""):
    global y
    pid = len(panels) + 1
    x = 0 if not panels or panels[-1]["gridPos"]["x"] + panels[-1]["gridPos"]["w"] + w > 24 else panels[-1]["gridPos"]["x"] + panels[-1]["gridPos"]["w"]
    if panels and x == 0:
        y = panels[-1]["gridPos"]["y"] + panels[-1]["gridPos"]["h"]
    targets = []
    for i, e in enumerate(exprs):
        expr, fmt = e if isinstance(e, tuple) else (e, legend or "")
        targets.append({"datasource": DS, "expr": expr, "legendFormat": fmt, "refId": chr(65 + i)})
    panels.append({"id": pid, "type": kind, "title": title, "description": desc, "datasource": DS,
                   "gridPos": {"x": x, "y": y, "w": w, "h": h}, "targets": targets,
                   "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                   "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind == "timeseries"
                   else {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value"}})
S = '{instance=~"$instance"}'
def sel(extra=""):
    return '{instance=~"$instance"' + (", " + extra if extra else "") + "}"
panel("Active controllers", ["sum(kafka_controller_kafkacontroller_activecontrollercount" + S + ")"], "stat", w=4, h=4,
      desc="1 in a healthy cluster")
panel("Brokers", ["max(kafka_brokers" + S + ")"], "stat", w=4, h=4)
panel("Under-replicated partitions", ["sum(kafka_server_replicamanager_underreplicatedpartitions" + S + ")"], "stat", w=4, h=4)
panel("Offline partitions", ["sum(kafka_controller_kafkacontroller_offlinepartitionscount" + S + ")"], "stat", w=4, h=4)
panel("Under min ISR", ["sum(kafka_server_replicamanager_underminisrpartitioncount" + S + ")"], "stat", w=4, h=4)
panel("Consumer groups", ["sum(kafka_coordinator_group_groupmetadatamanager_numgroups" + S + ")"], "stat", w=4, h=4)
panel("Messages in per topic", [("sum by (topic) (rate(kafka_server_brokertopicmetrics_messagesin_total" + sel('topic!=\"\"') + "[1m]))", "{{topic}}")], unit="ops")
panel("Bytes in / out", [("sum(rate(kafka_server_brokertopicmetrics_bytesin_total" + sel('topic=\"\"') + "[1m]))", "in"),
                         ("sum(rate(kafka_server_brokertopicmetrics_bytesout_total" + sel('topic=\"\"') + "[1m]))", "out")], unit="Bps")
panel("Request rate per API", [("sum by (request) (rate(kafka_network_requestmetrics_requests_total" + S + "[1m]))", "{{request}}")], unit="reqps")
panel("Request total time p99 per API", [("max by (request) (kafka_network_requestmetrics_totaltimems" + sel('quantile=\"0.99\"') + ")", "{{request}}")], unit="ms")
panel("Produce / fetch time p99 (queue, local, remote, send)", [
    ("max by (request) (kafka_network_requestmetrics_requestqueuetimems" + sel('quantile=\"0.99\", request=~\"Produce|FetchConsumer\"') + ")", "queue {{request}}"),
    ("max by (request) (kafka_network_requestmetrics_localtimems" + sel('quantile=\"0.99\", request=~\"Produce|FetchConsumer\"') + ")", "local {{request}}"),
    ("max by (request) (kafka_network_requestmetrics_remotetimems" + sel('quantile=\"0.99\", request=~\"Produce|FetchConsumer\"') + ")", "remote {{request}}"),
    ("max by (request) (kafka_network_requestmetrics_responsesendtimems" + sel('quantile=\"0.99\", request=~\"Produce|FetchConsumer\"') + ")", "send {{request}}")], unit="ms")
panel("Errors per API", [("sum by (request, error) (rate(kafka_network_requestmetrics_errors_total" + sel('error!=\"NONE\"') + "[1m]))", "{{request}} {{error}}")], unit="reqps")
panel("Failed produce / fetch", [
    ("sum(rate(kafka_server_brokertopicmetrics_failedproducerequests_total" + sel('topic=\"\"') + "[1m]))", "produce"),
    ("sum(rate(kafka_server_brokertopicmetrics_failedfetchrequests_total" + sel('topic=\"\"') + "[1m]))", "fetch")], unit="reqps")
panel("ISR shrinks / expands", [("sum(rate(kafka_server_replicamanager_isrshrinks_total" + S + "[5m]))", "shrinks"),
                                ("sum(rate(kafka_server_replicamanager_isrexpands_total" + S + "[5m]))", "expands")], unit="ops")
panel("Log size per topic", [("sum by (topic) (kafka_log_log_size" + S + ")", "{{topic}}")], unit="bytes")
panel("Partitions and leaders per broker", [("kafka_server_replicamanager_partitioncount" + S, "partitions {{instance}}"),
                                            ("kafka_server_replicamanager_leadercount" + S, "leaders {{instance}}")])
panel("Consumer lag per group and topic", [("sum by (consumergroup, topic) (kafka_consumergroup_lag_sum" + S + ")", "{{consumergroup}} {{topic}}")],
      desc="high watermark - committed offset (kafka_exporter's names)")
panel("Fetch lag of consumers that do not commit", [("max by (client_id, topic) (kafkapy_consumer_fetch_lag" + S + ")", "{{client_id}} {{topic}}")],
      desc="high watermark - last fetch offset per client id (e.g. Spark)")
panel("Client connections", [("sum by (listener) (kafka_server_socket_server_metrics_connection_count" + S + ")", "{{listener}}")])
panel("Event loop idle", [("kafka_network_socketserver_networkprocessoravgidle_percent" + S, "{{instance}}")], unit="percentunit",
      desc="1 - loop thread CPU time / wall time")
panel("Request queue size", [("sum(kafka_network_requestchannel_requestqueuesize" + S + ")", "queued")])
panel("Process memory and file descriptors", [("process_resident_memory_bytes" + S, "rss {{instance}}"),
                                             ("process_open_fds" + S, "fds {{instance}}")])
dash = {
    "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus"}],
    "title": "kafkapy", "uid": "kafkapy-broker", "schemaVersion": 39, "version": 1, "editable": True,
    "tags": ["kafka", "kafkapy"], "time": {"from": "now-1h", "to": "now"}, "refresh": "30s",
    "templating": {"list": [{"name": "instance", "label": "Broker", "type": "query", "datasource": DS,
                             "query": "label_values(kafka_brokers, instance)", "refresh": 2, "includeAll": True,
                             "multi": True, "current": {"text": "All", "value": "$__all"}}]},
    "panels": panels,
}
open(Path(__file__).with_name("kafkapy-dashboard.json"), "w").write(json.dumps(dash, indent=2) + "\n")
print(len(panels))
