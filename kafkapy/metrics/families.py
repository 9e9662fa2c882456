"""The metric families of a scrape: a BrokerState (the plain values BrokerCollector.read takes on the
broker's loop) rendered as Prometheus metrics, anywhere (a worker thread during a scrape).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .broker_metrics import QUANTILES, TopicStats, error_name
from .metric_names import (ACTIVE_CONTROLLER, BROKERS, BROKER_INFO, BYTES_IN, BYTES_OUT, CG_LAG, CG_LAG_SUM,
    CG_MEMBERS, CG_OFFSET, CG_OFFSET_SUM, CLIENT_METRIC, CLIENT_PUSHES, CONNECTIONS, ERRORS, FAILED_FETCH,
    FAILED_PRODUCE, FETCH_LAG, FETCH_POSITION, GLOBAL_PARTITIONS, GLOBAL_TOPICS, GROUP_COUNT,
    GROUP_STATE_NAMES, HANDLER_IDLE, ISR_EXPANDS, ISR_SHRINKS, LEADER_COUNT, LOG_DIR_FAILURES, LOG_DIR_FULL,
    LOG_DIR_OFFLINE, LOG_DIR_RECOVERIES, LOG_END, LOG_SEGMENTS, LOG_SIZE, LOG_START, MESSAGES_IN,
    METRIC_SOURCES, NETWORK_IDLE, NUM_GROUPS, NUM_OFFSETS, OFFLINE, OFFLINE_LOG_DIRS, PARTITION_COUNT,
    QUEUE_SIZE, REQUESTS, SG_LAG, SG_MEMBERS, SG_RECORDS, SG_START, STREAMS_GROUP_COUNT, TIMERS,
    TOPIC_PARTITIONS, TOTAL_FETCH, TOTAL_PRODUCE, TP_CURRENT, TP_ISR, TP_LEADER, TP_OLDEST, TP_PREFERRED,
    TP_REPLICAS, TP_UNDER, UNDER_MIN_ISR, UNDER_MIN_ISR_COUNT, UNDER_REPLICATED, UNDER_REPLICATED_PARTITION,
    _GROUP_STATES, _STREAMS_STATES)

log = logging.getLogger(__name__)


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



def _quantile_label(q: float) -> str:
    # the JMX exporter's labels: 50thPercentile -> "0.50", 999thPercentile -> "0.999"
    return {0.5: "0.50", 0.75: "0.75", 0.95: "0.95", 0.98: "0.98", 0.99: "0.99", 0.999: "0.999"}[q]
