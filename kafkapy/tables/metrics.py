"""The tables' metric families on the broker's /metrics (prometheus-client is imported only when the
metrics endpoint asks): lag, commits, dead letters, bytes translated and the per-topic state."""
from __future__ import annotations

__all__ = ["tables_families"]


def tables_families(service) -> list:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    lag = GaugeMetricFamily("kafkapy_iceberg_lag_records", "Records of a table-enabled partition led here that "
                            "its Iceberg table has not committed yet (last stable offset minus the table's next "
                            "offset)", labels=["topic", "partition"])
    committed = GaugeMetricFamily("kafkapy_iceberg_committed_offset", "The table's next offset of a partition "
                                  "led here (kafkapy.next-offsets)", labels=["topic", "partition"])
    for (topic, partition), state in sorted(service.partitions.items()):
        value = service.lag(state)
        if value is not None:
            lag.add_metric([topic, str(partition)], value)
        if state.committed is not None:
            committed.add_metric([topic, str(partition)], state.committed)
    topics = sorted({t for t, _ in service.partitions} | set(service.topics))
    state_family = GaugeMetricFamily("kafkapy_iceberg_state", "Translation of a topic to its table: 0 running, "
                                     "1 stopped with an error (retried with backoff; see the broker log or "
                                     "`kafkapy tables describe`)", labels=["topic"])
    for topic in topics:
        topic_state = service.topics.get(topic)
        state_family.add_metric([topic], 0 if topic_state is None or topic_state.error is None else 1)
    counters = service.counters
    out = [lag, committed, state_family]
    for name, value, text in (
            ("commits", counters.commits, "Table commits made by this broker"),
            ("rows", counters.rows, "Rows committed to tables by this broker"),
            ("dead_letters", counters.dead_letters, "Records committed to dead-letter tables by this broker"),
            ("translated_bytes", counters.translated_bytes, "Bytes of record batches handed to translation")):
        family = CounterMetricFamily(f"kafkapy_iceberg_{name}", text)
        family.add_metric([], value)
        out.append(family)
    return out
