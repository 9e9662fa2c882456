"""The broker's metrics: cheap counters kept by every broker (broker_metrics.py) and, when
`kafkapy.metrics.listener` is set, a Prometheus endpoint that renders them and broker state under
the names Strimzi's JMX-exporter config gives Kafka's MBeans (exporter.py, collectors.py,
families.py, metric_names.py, http.py).

prometheus-client is imported only by the exporter, so a broker without the listener never loads it.
"""
from .broker_metrics import BrokerMetrics

__all__ = ["BrokerMetrics"]
