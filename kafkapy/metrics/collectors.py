"""The Prometheus collector: BrokerMetrics' counters and broker state, read on the broker's loop.

Names are those Strimzi's JMX-exporter config (packaging/examples/metrics/kafka-metrics.yaml) gives
Kafka's MBeans, and kafka_exporter's for topics and consumer groups; the MBean each one stands for
is in METRIC_SOURCES (metric_names.py, and docs/operations.md). Gauges are computed here, from the
partition logs, the metadata (ISR), the replica manager, the controller and the group coordinator,
so nothing is kept up to date on the request path for them; families.py renders what is read.
"""
from __future__ import annotations

import logging
from copy import copy
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from prometheus_client.core import Metric

from .broker_metrics import BrokerMetrics
from .families import BrokerState, PartitionState, families
from .metric_names import METRIC_SOURCES, TIMERS

if TYPE_CHECKING:
    from ..log.manager import LogManager
    from ..metadata.store import MetadataStore

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
    replicas: Any  # replication.replica_manager.ReplicaManager (a sibling layer: not imported, even for types)
    partitions: Any  # broker.partitions.PartitionManager: get_log, topic_by_id
    client_telemetry: Any  # metrics.client_telemetry.ClientTelemetry, when something shows it
    schema_registry: Any  # the services the composition root attached (kafkapy/node.py), or None
    tables: Any

    @property
    def loaded_group_coordinator(self) -> Any: ...

    @property
    def loaded_share_groups(self) -> Any: ...
__all__ = ["METRIC_SOURCES", "BrokerCollector", "BrokerState", "MetricsSource", "PartitionState", "families"]


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
