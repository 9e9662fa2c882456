"""A streams group's topology (KIP-1071) and its configured form against the cluster's topics.

The topology is what the members declare in StreamsGroupHeartbeat when they join: subtopologies
with their source topics, the repartition topics they write and read, their state changelog
topics and copartition groups. `configure` checks it against the topics the broker has, as
Kafka's InternalTopicManager.configureTopics does: missing source topics stop it (status
MISSING_SOURCE_TOPICS); otherwise the partition counts of the internal topics are decided
(repartition topics from their upstream subtopology's sources, copartition groups made equal,
changelogs from their subtopology's widest source), existing internal topics must have that many
partitions (INCORRECTLY_PARTITIONED_TOPICS) and those that do not exist yet are listed for the
coordinator to create (MISSING_INTERNAL_TOPICS until they exist). The number of tasks of a
subtopology is its widest source topic's partition count.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode, KafkaError

__all__ = [
    "ConfiguredTopology", "CopartitionGroup", "InternalTopic", "Status", "Subtopology", "TopicInfo", "Topology",
    "configure",
]


class Status:
    """StreamsGroupHeartbeatResponse's status codes (Kafka's StreamsGroupHeartbeatResponse.Status)."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic as the topology declares it (0 partitions / replication: decided by the broker)."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    topic_configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the subtopology's source topics, regexes and repartition source topics."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    def copartitioned_topic_sets(self) -> list[set[str]]:
        groups = []
        for group in self.copartition_groups:
            topics = {self.source_topics[i] for i in group.source_topics if 0 <= i < len(self.source_topics)}
            topics |= {self.repartition_source_topics[i].name for i in group.repartition_source_topics
                       if 0 <= i < len(self.repartition_source_topics)}
            groups.append(topics)
        return groups


@dataclass(frozen=True, slots=True)
class Topology:
    """The topology a streams group was initialized with; equality is Kafka's (epoch and content)."""

    epoch: int
    subtopologies: tuple[Subtopology, ...] = ()

    def subtopology(self, subtopology_id: str) -> Subtopology | None:
        for s in self.subtopologies:
            if s.subtopology_id == subtopology_id:
                return s
        return None

    def required_topics(self) -> set[str]:
        """Every topic the topology reads or writes (Kafka's StreamsTopology.requiredTopics)."""
        names: set[str] = set()
        for s in self.subtopologies:
            names.update(s.source_topics)
            names.update(s.repartition_sink_topics)
            names.update(t.name for t in s.repartition_source_topics)
            names.update(t.name for t in s.state_changelog_topics)
        return names

    def source_topics_of(self, subtopology_id: str) -> tuple[str, ...]:
        """The topics whose partition p is task p's input: sources and repartition sources."""
        s = self.subtopology(subtopology_id)
        if s is None:
            return ()
        return s.source_topics + tuple(t.name for t in s.repartition_source_topics)

    @classmethod
    def from_request(cls, topology) -> Topology:
        """From StreamsGroupHeartbeatRequest.Topology (or the stored StreamsGroupTopologyValue)."""
        def info(t) -> TopicInfo:
            configs = tuple((c.key, c.value) for c in (t.topic_configs or ()))
            return TopicInfo(t.name, t.partitions, t.replication_factor, configs)

        subs = []
        for s in topology.subtopologies or ():
            subs.append(Subtopology(
                subtopology_id=s.subtopology_id,
                source_topics=tuple(s.source_topics or ()),
                source_topic_regex=tuple(s.source_topic_regex or ()),
                state_changelog_topics=tuple(info(t) for t in s.state_changelog_topics or ()),
                repartition_sink_topics=tuple(s.repartition_sink_topics or ()),
                repartition_source_topics=tuple(info(t) for t in s.repartition_source_topics or ()),
                copartition_groups=tuple(CopartitionGroup(tuple(g.source_topics or ()),
                                                          tuple(g.source_topic_regex or ()),
                                                          tuple(g.repartition_source_topics or ()))
                                         for g in s.copartition_groups or ())))
        return cls(topology.epoch, tuple(subs))


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """An internal topic the coordinator creates: name, partitions, replication factor (-1: broker
    default) and topic configs."""

    name: str
    partitions: int
    replication_factor: int = -1
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class ConfiguredTopology:
    """The topology checked against the cluster (Kafka's ConfiguredTopology).

    `tasks` (subtopology id -> number of tasks) is None when the source topics are missing or
    incorrectly partitioned; `status` is the (code, detail) the heartbeat reports, or None;
    `ready` means members can be given tasks (no status)."""

    epoch: int
    tasks: dict[str, int] | None
    to_create: dict[str, InternalTopic] = field(default_factory=dict)
    status: tuple[int, str] | None = None
    # internal topic -> its decided partition count (repartition and changelog topics)
    internal_partitions: dict[str, int] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return self.tasks is not None and self.status is None


class _TopicConfigurationError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status


def _summarize(topics: Iterable[str]) -> str:
    topics = sorted(topics)
    if not topics:
        return "<none>"
    shown = ", ".join(topics[:3])
    return shown + (f" and {len(topics) - 3} additional topics" if len(topics) > 3 else "")


def _invalid(message: str) -> KafkaError:
    return KafkaError(message, ErrorCode.STREAMS_INVALID_TOPOLOGY)


def _repartition_counts(topology: Topology, count: Callable[[str], int | None]) -> dict[str, int]:
    decided = {t.name: t.partitions for s in topology.subtopologies for t in s.repartition_source_topics
               if t.partitions != 0}
    while True:
        needed = progress = False
        for s in topology.subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in decided:
                    continue
                candidates = [decided[t.name] for t in s.repartition_source_topics if t.name in decided]
                candidates += [n for n in (count(t) for t in s.source_topics) if n is not None]
                if candidates:
                    decided[sink] = max(candidates)
                    progress = True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise _invalid("Failed to compute number of partitions for all repartition topics. There may be loops"
                           " in the topology that cannot be resolved.")
    for s in topology.subtopologies:
        if any(t.name not in decided for t in s.repartition_source_topics):
            raise _invalid("Failed to compute number of partitions for all repartition topics, because a"
                           " repartition source topic is never used as a sink topic.")
    return decided


def _enforce_copartitioning(topology: Topology, count: Callable[[str], int | None], decided: dict[str, int]) -> None:
    fixed = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if t.partitions != 0}
    flexible = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if t.partitions == 0}
    for s in topology.subtopologies:
        for group in s.copartitioned_topic_sets():
            if not group:
                continue
            repartition = {t: count(t) for t in group if t in fixed or t in flexible}
            others = {t: count(t) for t in group if t not in repartition}
            if set(repartition) == group:
                fixed_here = {t: n for t, n in repartition.items() if t in fixed}
                if fixed_here:
                    if len(set(fixed_here.values())) > 1:
                        raise _TopicConfigurationError(
                            Status.INCORRECTLY_PARTITIONED_TOPICS,
                            f"Following topics do not have the same number of partitions: "
                            f"[{', '.join(f'{t}={n}' for t, n in sorted(fixed_here.items()))}]")
                    target = next(iter(fixed_here.values()))
                else:
                    target = max(n or 0 for n in repartition.values())
            else:
                if len(set(others.values())) > 1:
                    raise _TopicConfigurationError(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Following topics do not have the same number of partitions: "
                        f"[{', '.join(f'{t}={n}' for t, n in sorted(others.items()))}]")
                target = next(iter(others.values()))
            for topic, n in repartition.items():
                if topic in fixed and n != target:
                    raise _TopicConfigurationError(
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Number of partitions [{n}] of repartition topic [{topic}] doesn't match number of"
                        f" partitions [{target}] of the source topic.")
                decided[topic] = target


def configure(topology: Topology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    """Check `topology` against the cluster (`partitions_of(topic)`: its partition count, None if
    it does not exist). Raises KafkaError(STREAMS_INVALID_TOPOLOGY) for a topology that cannot be
    configured at all (repartition loops, a subtopology without sources)."""
    decided: dict[str, int] = {}

    def count(topic: str) -> int | None:
        existing = partitions_of(topic)
        return existing if existing is not None else decided.get(topic)

    try:
        missing = {t for s in topology.subtopologies for t in s.source_topics if partitions_of(t) is None}
        if missing:
            raise _TopicConfigurationError(Status.MISSING_SOURCE_TOPICS,
                                           f"Source topics {_summarize(missing)} are missing.")
        decided.update(_repartition_counts(topology, count))
        _enforce_copartitioning(topology, count, decided)
        tasks: dict[str, int] = {}
        for s in topology.subtopologies:
            inputs = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
            counts = [count(t) for t in inputs]
            if not counts:
                raise _invalid(f"No source topics found for subtopology {s.subtopology_id}")
            tasks[s.subtopology_id] = max(n or 0 for n in counts)
            for changelog in s.state_changelog_topics:
                decided[changelog.name] = tasks[s.subtopology_id]
        expected: dict[str, InternalTopic] = {}
        for s in topology.subtopologies:
            for t in s.repartition_source_topics + s.state_changelog_topics:
                n = t.partitions if t.partitions != 0 else decided[t.name]
                expected[t.name] = InternalTopic(t.name, n, t.replication_factor or -1, t.topic_configs)
        to_create = {}
        for name, topic in expected.items():
            existing = partitions_of(name)
            if existing is None:
                to_create[name] = topic
            elif existing != topic.partitions:
                raise _TopicConfigurationError(
                    Status.INCORRECTLY_PARTITIONED_TOPICS,
                    f"Existing topic {name} has different number of partitions: expected {topic.partitions},"
                    f" found {existing}")
    except _TopicConfigurationError as exc:
        return ConfiguredTopology(topology.epoch, None, {}, (exc.status, str(exc)))
    status = None
    if to_create:
        status = (Status.MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {_summarize(to_create)}")
    return ConfiguredTopology(topology.epoch, tasks, to_create, status,
                              {name: t.partitions for name, t in expected.items()})
