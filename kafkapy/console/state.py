"""What the console shows, read from the broker's own state: metadata store, partition logs, the
group coordinator and the DescribeConfigs logic. No network, no record decoding (see messages.py).

Each function returns plain dicts and lists for the templates and the JSON API, and is cheap
enough to run on the event loop: O(partitions) or O(committed offsets), never O(records).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..broker.config import ConfigSource, describe_topic_configs
from ..groupcoord.consumer.describe import describe_consumer_group, preferred_assignor
from ..groupcoord.consumer.group import ConsumerGroup
from ..protocol.consumer_protocol import decode_assignment
from ..groupcoord.coordinator import default_assignor_name
from ..groupcoord.group import GroupState
from ..groupcoord.streams.group import StreamsGroup

if TYPE_CHECKING:
    from .source import ConsoleSource

__all__ = [
    "ConsoleError", "PartitionOffsets", "cluster_overview", "topic_summaries", "topic_detail",
    "partition_offsets", "group_summaries", "group_detail", "group_lag_sum", "share_group_summaries",
]

OFFSETS_TOPIC = "__consumer_offsets"


class ConsoleError(Exception):
    """A request the console answers with an HTTP error and a one-line message (no traceback)."""

    def __init__(self, status: int, message: str, link: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.link = link  # where to go instead (another broker's console), shown with the message


@dataclass(slots=True)
class PartitionOffsets:
    """Offsets and size of one partition's local log (None fields: no log here)."""

    log_start: int | None
    log_end: int | None  # the high watermark: what consumers can read, Kafka's LOG-END-OFFSET
    size: int | None
    leader_here: bool


def partition_offsets(broker: ConsoleSource, topic: str, partition: int, leader: int) -> PartitionOffsets:
    log = broker.partitions.get_log(topic, partition)
    if log is None or log.is_offline:
        return PartitionOffsets(None, None, None, False)
    return PartitionOffsets(log.log_start_offset, log.high_watermark, log.size_bytes, leader == broker.node_id)


def cluster_overview(broker: ConsoleSource) -> dict:
    """Cluster id, controller, brokers and topic/partition counts (under-replicated, offline)."""
    brokers = broker.brokers_for(None)
    live = {b.node_id for b in brokers}
    partitions = under_replicated = offline = internal = 0
    topics = broker.partitions.topics()
    for meta in topics:
        internal += meta.internal
        for p in meta.partitions:
            partitions += 1
            if p.leader < 0 or p.leader not in live:
                offline += 1
            elif len(p.isr) < len(p.replicas):
                under_replicated += 1
    try:
        controller = broker.metadata.controller_id()
    except Exception:  # a ZooKeeper store between sessions
        controller = -1
    return {
        "cluster_id": broker.cluster_id,
        "node_id": broker.node_id,
        "mode": broker.cluster.mode,
        "controller": controller,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack or "",
                     "controller": b.node_id == controller, "this": b.node_id == broker.node_id}
                    for b in sorted(brokers, key=lambda b: b.node_id)],
        "topics": len(topics),
        "internal_topics": internal,
        "partitions": partitions,
        "under_replicated": under_replicated,
        "offline": offline,
        "groups": sum(not g.is_in(GroupState.DEAD) for g in known_groups(broker).values()),
    }


def known_groups(broker: ConsoleSource) -> dict:
    """The groups by id; none before the broker's group coordinator is built (no group seen yet):
    the console does not build it by looking."""
    coordinator = broker.loaded_group_coordinator
    return {} if coordinator is None else coordinator.manager.groups


def topic_summaries(broker: ConsoleSource, query: str = "", include_internal: bool = True) -> list[dict]:
    """One row per topic matching `query` (substring, case-insensitive), sorted by name."""
    query = query.strip().lower()
    rows = []
    for meta in broker.partitions.topics():
        if query and query not in meta.name.lower():
            continue
        if meta.internal and not include_internal:
            continue
        size = messages = under = 0
        for p in meta.partitions:
            log = broker.partitions.get_log(meta.name, p.partition)
            if log is not None and not log.is_offline:
                size += log.size_bytes
                messages += max(log.high_watermark - log.log_start_offset, 0)
            if len(p.isr) < len(p.replicas):
                under += 1
        rows.append({"name": meta.name, "internal": meta.internal, "partitions": meta.partition_count,
                     "replication_factor": len(meta.partitions[0].replicas) if meta.partitions else 0,
                     "under_replicated": under, "size": size, "messages": messages})
    rows.sort(key=lambda r: r["name"])
    return rows


def _topic(broker: ConsoleSource, name: str):
    meta = broker.partitions.topic(name)
    if meta is None:
        raise ConsoleError(404, f"unknown topic {name!r} (UNKNOWN_TOPIC_OR_PARTITION)")
    return meta


def topic_detail(broker: ConsoleSource, name: str) -> dict:
    """Partitions (leader, replicas, ISR, offsets, size), configs with their source, and the groups
    that consume the topic (subscribed, or holding committed offsets on it)."""
    meta = _topic(broker, name)
    partitions = []
    for p in meta.partitions:
        offsets = partition_offsets(broker, name, p.partition, p.leader)
        partitions.append({
            "partition": p.partition, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr),
            "leader_epoch": p.leader_epoch, "log_start": offsets.log_start, "log_end": offsets.log_end,
            "size": offsets.size, "under_replicated": len(p.isr) < len(p.replicas)})
    configs = [{"name": e.name, "value": e.value, "source": ConfigSource(e.source).name,
                "default": e.source == ConfigSource.DEFAULT_CONFIG,
                "override": e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG}
               for e in describe_topic_configs(meta.configs, broker.config, None, include_synonyms=False)]
    return {"name": name, "topic_id": str(meta.topic_id), "internal": meta.internal,
            "partitions": partitions, "configs": configs, "groups": consuming_groups(broker, name),
            "fetchers": fetch_positions(broker, meta), "table": table_detail(broker, name, configs)}


def table_detail(broker: ConsoleSource, name: str, configs: list[dict]) -> dict | None:
    """The topic's Iceberg table (kafkapy/tables, docs/tables.md) as this broker translates it; None
    when kafkapy.iceberg.mode is disabled. Only partitions led here are listed: each broker translates
    its own."""
    mode = next((c["value"] for c in configs if c["name"] == "kafkapy.iceberg.mode"), None) or "disabled"
    if mode == "disabled":
        return None
    service = broker.tables
    detail = service.describe_topic(name) if service is not None else None
    if detail is None:
        return {"mode": mode, "table": f"kafka.{name}", "dead_letters": f"kafka.{name}~dlq", "snapshot": None,
                "state": "not translated here", "error": None, "partitions": []}
    snapshot = detail["snapshot"]
    if snapshot is not None:
        snapshot = dict(snapshot, time=time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                     time.gmtime(snapshot["timestamp_ms"] / 1000)))
    return dict(detail, snapshot=snapshot)


def fetch_positions(broker: ConsoleSource, meta) -> list[dict] | None:
    """The last fetch position of each consumer (client id, host) reading the topic, committing or
    not (Spark's source does not commit), with its lag behind the high watermark. None when the
    broker does not track them (kafkapy.metrics.listener unset)."""
    metrics = broker.metrics
    fetches = getattr(metrics, "fetches", None)
    if fetches is None or not getattr(metrics, "detailed", False):
        return None
    keys = (meta.name, meta.topic_id)
    rows = []
    for (client_id, host), seen in list(fetches.items()):
        for (topic, partition), position in list(seen.positions.items()):
            if topic not in keys:
                continue
            log = broker.partitions.get_log(meta.name, partition)
            end = log.high_watermark if log is not None and not log.is_offline else None
            rows.append({"client_id": client_id, "host": host, "partition": partition, "position": position,
                         "lag": max(end - position, 0) if end is not None else None,
                         "seconds_ago": max(time.monotonic() - seen.seen, 0.0)})
    rows.sort(key=lambda r: (r["client_id"], r["host"], r["partition"]))
    return rows


def consuming_groups(broker: ConsoleSource, topic: str) -> list[dict]:
    rows = []
    for group in known_groups(broker).values():
        committed = [tp for tp in group.offsets if tp[0] == topic]
        if isinstance(group, ConsumerGroup):
            subscribed = group.is_subscribed_to(topic)
        else:
            subscribed = group.subscribed_topics is not None and topic in group.subscribed_topics
        if committed or subscribed:
            lag = 0
            for tp in committed:
                log = broker.partitions.get_log(*tp)
                if log is not None and not log.is_offline:
                    lag += max(log.high_watermark - group.offsets[tp].offset, 0)
            rows.append({"group": group.group_id, "state": group.state.value, "members": len(group.members),
                         "lag": lag})
    rows.sort(key=lambda r: r["group"])
    return rows


def group_lag_sum(broker: ConsoleSource, group) -> int:
    lag = 0
    for tp, committed in group.offsets.items():
        log = broker.partitions.get_log(*tp)
        if log is not None and not log.is_offline:
            lag += max(log.high_watermark - committed.offset, 0)
    return lag


def group_summaries(broker: ConsoleSource, query: str = "") -> list[dict]:
    query = query.strip().lower()
    rows = []
    for group in known_groups(broker).values():
        if group.is_in(GroupState.DEAD) or (query and query not in group.group_id.lower()):
            continue
        if isinstance(group, ConsumerGroup):
            protocol = preferred_assignor(group, _default_assignor(broker))
            topics = {tp[0] for tp in group.offsets} | group.subscribed_topic_names()
        elif isinstance(group, StreamsGroup):
            protocol = "sticky"
            topics = {tp[0] for tp in group.offsets} | (
                set(group.topology.required_topics()) if group.topology is not None else set())
        else:
            protocol = group.protocol_name or ""
            topics = {tp[0] for tp in group.offsets}
        rows.append({"group": group.group_id, "state": group.state.value,
                     "type": getattr(group, "group_type", "classic"),
                     "protocol_type": group.protocol_type or "", "protocol": protocol,
                     "members": len(group.members), "topics": sorted(topics),
                     "lag": group_lag_sum(broker, group)})
    rows.sort(key=lambda r: r["group"])
    return rows


def share_group_summaries(broker: ConsoleSource, query: str = "") -> list[dict]:
    """Share groups (KIP-932) coordinated here with their members, and the share-partitions led
    here: start offset, lag (records from the start offset to the high watermark not yet
    acknowledged or archived, as DescribeShareGroupOffsets) and records by state. Empty until
    the broker has seen a share request (the share coordinator is built then)."""
    share = broker.loaded_share_groups
    if share is None:
        return []
    query = query.strip().lower()
    is_local = broker.group_coordinator.manager.is_local
    partitions: dict[str, list[dict]] = {}
    for (group_id, topic, index), sp in sorted(list(share.partitions.items()), key=lambda e: e[0]):
        log = broker.partitions.get_log(topic, index)
        if log is None or log.is_offline:
            continue
        counts = sp.counts()
        done = counts.get("ACKNOWLEDGED", 0) + counts.get("ARCHIVED", 0)
        partitions.setdefault(group_id, []).append({
            "topic": topic, "partition": index, "start_offset": sp.start_offset,
            "lag": max(log.high_watermark - sp.start_offset - done, 0),
            "in_flight": counts.get("ACQUIRED", 0), "available": counts.get("AVAILABLE", 0),
            "archived": counts.get("ARCHIVED", 0)})
    rows = []
    for group in sorted(list(share.groups.values()), key=lambda g: g.group_id):
        if (query and query not in group.group_id.lower()) or not is_local(group.group_id):
            continue
        parts = partitions.get(group.group_id, [])
        rows.append({"group": group.group_id, "state": group.state, "members": len(group.members),
                     "topics": sorted({t for m in group.members.values() for t in m.subscribed}),
                     "partitions": parts, "lag": sum(p["lag"] for p in parts),
                     "in_flight": sum(p["in_flight"] for p in parts),
                     "archived": sum(p["archived"] for p in parts)})
    return rows


def get_group(broker: ConsoleSource, group_id: str):
    group = known_groups(broker).get(group_id)
    if group is None or group.is_in(GroupState.DEAD):
        raise ConsoleError(404, f"unknown group {group_id!r} (GROUP_ID_NOT_FOUND; groups coordinated "
                                f"by broker {broker.node_id} are listed on /groups)")
    return group


def group_detail(broker: ConsoleSource, group_id: str) -> dict:
    """State, members with their assignment, and per partition: committed offset, log end, lag and
    the member it is assigned to (Kafka's kafka-consumer-groups --describe columns)."""
    group = get_group(broker, group_id)
    if isinstance(group, ConsumerGroup):
        return _consumer_group_detail(broker, group)
    if isinstance(group, StreamsGroup):
        return _streams_group_detail(broker, group)
    owner: dict[tuple[str, int], dict] = {}
    members = []
    for member in group.members.values():
        try:
            assignment = decode_assignment(member.assignment) if group.protocol_type == "consumer" else {}
        except ValueError:
            assignment = {}
        row = {"member_id": member.member_id, "instance_id": member.group_instance_id or "",
               "client_id": member.client_id, "host": member.client_host,
               "assignment": ", ".join(f"{t}: {_ranges(ps)}" for t, ps in sorted(assignment.items())),
               "partitions": sum(len(ps) for ps in assignment.values()),
               "leader": member.member_id == group.leader_id}
        members.append(row)
        for topic, parts in assignment.items():
            for p in parts:
                owner[(topic, p)] = row
    members.sort(key=lambda m: (m["client_id"], m["member_id"]))
    partitions = _partition_rows(broker, group, owner)
    return {"group": group.group_id, "type": "classic", "state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol": group.protocol_name or "", "generation": group.generation_id,
            "leader": group.leader_id or "", "members": members, "partitions": partitions,
            "lag": sum(p["lag"] or 0 for p in partitions),
            "topics": sorted({tp[0] for tp in group.offsets} | set(group.subscribed_topics or ()))}


def _default_assignor(broker: ConsoleSource) -> str:
    return default_assignor_name(broker.group_coordinator.config.group_consumer_assignors)


def _consumer_group_detail(broker: ConsoleSource, group: ConsumerGroup) -> dict:
    """A KIP-848 group: epochs, the server assignor, each member's epoch, current and target assignment."""
    def topic_name(topic_id):
        meta = broker.partitions.topic_by_id(topic_id)
        return None if meta is None else meta.name

    described = describe_consumer_group(group, _default_assignor(broker), topic_name)
    owner: dict[tuple[str, int], dict] = {}
    members = []
    for m in described.members:
        current, target = m.partitions(), m.partitions(target=True)
        row = {"member_id": m.member_id, "instance_id": m.instance_id or "", "client_id": m.client_id,
               "host": m.client_host, "rack": m.rack_id or "", "member_epoch": m.member_epoch,
               "member_type": "classic" if m.member_type == 0 else "consumer",
               "subscription": ", ".join(m.subscribed_topic_names + (
                   [f"/{m.subscribed_topic_regex}/"] if m.subscribed_topic_regex else [])),
               "assignment": ", ".join(f"{t}: {_ranges(ps)}" for t, ps in sorted(current.items())),
               "target": ", ".join(f"{t}: {_ranges(ps)}" for t, ps in sorted(target.items())),
               "partitions": sum(len(ps) for ps in current.values()), "leader": False}
        members.append(row)
        for topic, parts in current.items():
            for p in parts:
                owner[(topic, p)] = row
    members.sort(key=lambda m: (m["client_id"], m["member_id"]))
    partitions = _partition_rows(broker, group, owner)
    return {"group": group.group_id, "type": "consumer", "state": described.state, "protocol_type": "consumer",
            "protocol": described.assignor_name, "generation": described.group_epoch,
            "group_epoch": described.group_epoch, "assignment_epoch": described.assignment_epoch,
            "leader": "", "members": members, "partitions": partitions,
            "lag": sum(p["lag"] or 0 for p in partitions),
            "topics": sorted({tp[0] for tp in group.offsets} | group.subscribed_topic_names())}


def _tasks_text(tasks) -> str:
    """'active 0_0-3; standby 1_2' (Kafka Streams' task ids: subtopology_partition)."""
    parts = []
    for role in ("active", "standby", "warmup"):
        held = getattr(tasks, role)
        if held:
            parts.append(role + " " + ", ".join(f"{s}_{_ranges(p)}" for s, p in sorted(held.items())))
    return "; ".join(parts)


def _streams_group_detail(broker: ConsoleSource, group: StreamsGroup) -> dict:
    """A streams group (KIP-1071): epochs, each member's process, epoch, tasks and target tasks; a
    partition's owner is the member with the active task reading it."""
    topology = group.topology
    owner: dict[tuple[str, int], dict] = {}
    members = []
    for m in sorted(group.members.values(), key=lambda x: (x.client_id, x.member_id)):
        target = group.target.get(m.member_id)
        row = {"member_id": m.member_id, "instance_id": m.instance_id or "", "client_id": m.client_id,
               "host": m.client_host, "rack": m.rack_id or "", "member_epoch": m.member_epoch,
               "member_type": "streams", "subscription": f"process {m.process_id}",
               "assignment": _tasks_text(m.assigned), "target": _tasks_text(target) if target else "",
               "partitions": sum(len(p) for p in m.assigned.active.values()), "leader": False}
        members.append(row)
        if topology is not None:
            for s, parts in m.assigned.active.items():
                for topic in topology.source_topics_of(s):
                    for p in parts:
                        owner[(topic, p)] = row
    partitions = _partition_rows(broker, group, owner)
    return {"group": group.group_id, "type": "streams", "state": group.state.value, "protocol_type": "streams",
            "protocol": "sticky", "generation": group.group_epoch, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "leader": "", "members": members, "partitions": partitions,
            "lag": sum(p["lag"] or 0 for p in partitions),
            "topics": sorted({tp[0] for tp in group.offsets})}


def _partition_rows(broker: ConsoleSource, group, owner: dict[tuple[str, int], dict]) -> list[dict]:
    partitions = []
    for tp in sorted(set(group.offsets) | set(owner)):
        committed = group.offsets.get(tp)
        log = broker.partitions.get_log(*tp)
        end = log.high_watermark if log is not None and not log.is_offline else None
        current = committed.offset if committed is not None else None
        lag = max(end - current, 0) if end is not None and current is not None else None
        member = owner.get(tp)
        partitions.append({"topic": tp[0], "partition": tp[1], "current": current, "log_end": end, "lag": lag,
                           "member_id": member["member_id"] if member else "",
                           "host": member["host"] if member else "",
                           "client_id": member["client_id"] if member else ""})
    return partitions


def _ranges(parts: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    out: list[str] = []
    for p in sorted(parts):
        if out and isinstance(out[-1], list) and out[-1][1] == p - 1:
            out[-1][1] = p
        else:
            out.append([p, p])  # type: ignore[arg-type]
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)  # type: ignore[misc]
