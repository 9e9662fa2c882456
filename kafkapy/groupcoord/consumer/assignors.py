"""Server-side partition assignors of KIP-848 consumer groups ("uniform" and "range").

Pure functions of (members, topics): no clock, no I/O, no coordinator state. The coordinator
(membership.py) calls ``ASSIGNORS[name].assign(members, topics)`` whenever the group epoch moves
past the target assignment epoch and stores the result as the new target assignment.

Both assignors follow Kafka 4.0's ``org.apache.kafka.coordinator.group.assignor`` classes:

* ``uniform`` (Kafka's UniformAssignor, the default): balanced and sticky. With homogeneous
  subscriptions every member gets ``P // M`` or ``P // M + 1`` partitions and keeps as many of
  its current partitions as that allows (we hand the "+1" quotas to the members that currently
  own the most, which makes the number of moved partitions the minimum any balanced assignment
  needs; Kafka hands them out in member iteration order). With heterogeneous subscriptions it
  keeps current partitions, places unowned ones on the least loaded subscriber (topics with the
  most partitions per subscriber first) and then moves partitions from a member to a less
  loaded subscriber of the same topic while their counts differ by more than one.
* ``range`` (Kafka's server-side RangeAssignor): per topic, contiguous ranges of partitions to
  the members subscribed to it, in order of instance id (static members first) then member id,
  so co-partitioned topics give each member the same partition numbers.

Rack awareness (``uniform`` only; Kafka 4.0's assignors ignore racks): when a member has a rack
and a partition's replica racks are known, partitions that must be handed out go first to
members with a replica in their rack, and a member that has to give up partitions gives up the
ones without a local replica first. Neither changes how many partitions a member gets, so
balance and the number of moved partitions are the same as without racks.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "Assignor",
    "AssignorError",
    "MemberSpec",
    "RangeAssignor",
    "TopicSpec",
    "UniformAssignor",
    "assignor_name",
]

MemberAssignment = dict[uuid.UUID, frozenset[int]]
GroupAssignment = dict[str, MemberAssignment]
_TP = tuple[uuid.UUID, int]


class AssignorError(ValueError):
    """The assignor cannot produce an assignment from this input (Kafka's PartitionAssignorException)."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows about one member: its subscription, rack and current target."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A subscribed topic: id, name, partition count and the racks of each partition's replicas."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


class Assignor(Protocol):
    """A server-side assignor: a name and a pure ``assign`` function."""

    name: str

    def assign(self, members: Mapping[str, MemberSpec],
               topics: Mapping[uuid.UUID, TopicSpec]) -> GroupAssignment: ...


def _check_topics(topics: Mapping[uuid.UUID, TopicSpec]) -> None:
    for topic_id, topic in topics.items():
        if topic.num_partitions < 0:
            raise AssignorError(f"topic {topic.name} ({topic_id}) has a negative partition count")


def _freeze(assignment: Mapping[uuid.UUID, Iterable[int]]) -> MemberAssignment:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


def _existing_subscriptions(member: MemberSpec, topics: Mapping[uuid.UUID, TopicSpec]) -> frozenset[uuid.UUID]:
    """The member's subscribed topics that exist (a deleted topic is simply not assigned)."""
    subs = member.subscribed_topic_ids
    if all(t in topics for t in subs):
        return subs
    return frozenset(t for t in subs if t in topics)


def _has_local_replica(topic: TopicSpec, partition: int, rack: str | None) -> bool:
    if rack is None or not topic.partition_racks:
        return False
    racks = topic.partition_racks.get(partition)
    return racks is not None and rack in racks


class UniformAssignor:
    """Kafka's UniformAssignor: balanced, sticky, optionally rack-aware."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec],
               topics: Mapping[uuid.UUID, TopicSpec]) -> GroupAssignment:
        if not members:
            return {}
        _check_topics(topics)
        subs = {mid: _existing_subscriptions(m, topics) for mid, m in members.items()}
        first = next(iter(subs.values()))
        if all(s == first for s in subs.values()):
            return _UniformHomogeneous(members, topics, first).build()
        return _UniformHeterogeneous(members, topics, subs).build()


class _UniformHomogeneous:
    """Every member subscribes to the same topics: quotas of P//M or P//M+1, sticky."""

    def __init__(self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec],
                 subscribed: frozenset[uuid.UUID]) -> None:
        self.members = members
        self.topics = topics
        # Topics in a stable order so the result does not depend on set iteration order.
        self.subscribed = sorted(subscribed, key=lambda t: (topics[t].name, t))
        self.racks_known = any(m.rack_id is not None for m in members.values()) and any(
            topics[t].partition_racks for t in self.subscribed)

    def build(self) -> GroupAssignment:
        member_ids = sorted(self.members)
        if not self.subscribed:
            return {mid: {} for mid in member_ids}
        # What each member may keep: its current subscribed partitions that exist and that no
        # member listed before it already claimed (a consistent target never has duplicates).
        claimed: set[_TP] = set()
        kept: dict[str, list[_TP]] = {}
        for mid in member_ids:
            mine: list[_TP] = []
            current = self.members[mid].current
            # In topic order, so which partitions a member over its quota gives up does not
            # depend on the order of its current assignment mapping.
            for topic_id in self.subscribed:
                partitions = current.get(topic_id)
                if not partitions:
                    continue
                n = self.topics[topic_id].num_partitions
                for p in sorted(partitions):
                    tp = (topic_id, p)
                    if 0 <= p < n and tp not in claimed:
                        claimed.add(tp)
                        mine.append(tp)
            kept[mid] = mine
        total = sum(self.topics[t].num_partitions for t in self.subscribed)
        min_quota, extra = divmod(total, len(member_ids))
        # The members owning the most get the "+1" quotas: fewest partitions moved.
        by_size = sorted(member_ids, key=lambda mid: -len(kept[mid]))
        quota = {mid: min_quota + (1 if i < extra else 0) for i, mid in enumerate(by_size)}

        unassigned: list[_TP] = []
        for mid in member_ids:
            mine = kept[mid]
            q = quota[mid]
            if len(mine) > q:
                if self.racks_known:
                    rack = self.members[mid].rack_id
                    # Keep the partitions with a local replica; give up the others first.
                    mine.sort(key=lambda tp: not _has_local_replica(self.topics[tp[0]], tp[1], rack))
                unassigned.extend(mine[q:])
                del mine[q:]
        for topic_id in self.subscribed:
            for p in range(self.topics[topic_id].num_partitions):
                if (topic_id, p) not in claimed:
                    unassigned.append((topic_id, p))
        unassigned.sort(key=lambda tp: (self.topics[tp[0]].name, tp[0], tp[1]))

        unfilled = [mid for mid in member_ids if len(kept[mid]) < quota[mid]]
        if self.racks_known and unassigned:
            unassigned = self._fill_rack_local(unfilled, kept, quota, unassigned)
        pos = 0
        for mid in unfilled:
            need = quota[mid] - len(kept[mid])
            if need > 0:
                kept[mid].extend(unassigned[pos:pos + need])
                pos += need
        if pos < len(unassigned):
            raise AssignorError("partitions were left unassigned")
        return {mid: _group_by_topic(kept[mid]) for mid in member_ids}

    def _fill_rack_local(self, unfilled: list[str], kept: dict[str, list[_TP]], quota: dict[str, int],
                         unassigned: list[_TP]) -> list[_TP]:
        """Give each unfilled member partitions with a replica in its rack first; return the rest."""
        by_rack: dict[str, list[int]] = {}
        n_racks: list[int] = []
        for i, (topic_id, p) in enumerate(unassigned):
            racks = self.topics[topic_id].partition_racks.get(p, ())
            n_racks.append(len(racks))
            for rack in racks:
                by_rack.setdefault(rack, []).append(i)
        # Partitions local to fewer racks first: they have fewer members that could take them.
        for candidates in by_rack.values():
            candidates.sort(key=lambda i: n_racks[i])
        taken = [False] * len(unassigned)
        cursor: dict[str, int] = {}
        for mid in unfilled:
            rack = self.members[mid].rack_id
            if rack is None or rack not in by_rack:
                continue
            candidates = by_rack[rack]
            c = cursor.get(rack, 0)
            need = quota[mid] - len(kept[mid])
            while need > 0 and c < len(candidates):
                i = candidates[c]
                c += 1
                if not taken[i]:
                    taken[i] = True
                    kept[mid].append(unassigned[i])
                    need -= 1
            cursor[rack] = c
        return [tp for i, tp in enumerate(unassigned) if not taken[i]]


class _UniformHeterogeneous:
    """Members subscribe to different topics: keep, place on the least loaded, then even out.

    Kafka's UniformHeterogeneousAssignmentBuilder: current partitions of subscribed topics are
    kept; unowned partitions go, topic by topic (most partitions per subscriber first), to the
    least loaded subscriber; then, topic by topic, partitions move from the most to the least
    loaded subscriber while their total counts differ by more than one, for at most
    ``MAX_ROUNDS`` passes over the topics (overlapping subscriptions can converge slowly).
    """

    MAX_ROUNDS = 16

    def __init__(self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec],
                 subs: dict[str, frozenset[uuid.UUID]]) -> None:
        self.members = members
        self.topics = topics
        self.subs = subs

    def build(self) -> GroupAssignment:
        member_ids = sorted(self.members)
        subscribers: dict[uuid.UUID, list[str]] = {}
        for mid in member_ids:
            for t in self.subs[mid]:
                subscribers.setdefault(t, []).append(mid)
        topics = self.topics
        # Kafka's order: partitions per subscriber descending, subscribers ascending, then id.
        topic_order = sorted(subscribers, key=lambda t: (-topics[t].num_partitions / len(subscribers[t]),
                                                        len(subscribers[t]), topics[t].name, t))
        racks_known = any(m.rack_id is not None for m in self.members.values()) and any(
            topics[t].partition_racks for t in subscribers)

        owned: dict[str, dict[uuid.UUID, set[int]]] = {mid: {} for mid in member_ids}
        count = {mid: 0 for mid in member_ids}
        owners: dict[uuid.UUID, list[str | None]] = {t: [None] * topics[t].num_partitions for t in subscribers}
        for mid in member_ids:
            sub = self.subs[mid]
            for topic_id, partitions in self.members[mid].current.items():
                if topic_id not in sub:
                    continue
                row = owners[topic_id]
                n = len(row)
                for p in partitions:
                    if 0 <= p < n and row[p] is None:
                        row[p] = mid
                        owned[mid].setdefault(topic_id, set()).add(p)
                        count[mid] += 1

        for topic_id in topic_order:
            row = owners[topic_id]
            free = [p for p, o in enumerate(row) if o is None]
            if not free:
                continue
            topic = topics[topic_id]
            least = _LoadHeap(subscribers[topic_id], count)
            by_rack: dict[str, _LoadHeap] = {}
            if racks_known and topic.partition_racks:
                members_by_rack: dict[str, list[str]] = {}
                for mid in subscribers[topic_id]:
                    rack = self.members[mid].rack_id
                    if rack is not None:
                        members_by_rack.setdefault(rack, []).append(mid)
                by_rack = {rack: _LoadHeap(mids, count) for rack, mids in members_by_rack.items()}
            for p in free:
                target = least.peek()
                racks = topic.partition_racks.get(p) if by_rack else None
                if racks and self.members[target].rack_id not in racks:
                    # An equally loaded subscriber with a replica in its rack, if there is one.
                    low = count[target]
                    best: str | None = None
                    for rack in racks:
                        heap = by_rack.get(rack)
                        if heap is not None:
                            cand = heap.peek()
                            if count[cand] == low and (best is None or cand < best):
                                best = cand
                    if best is not None:
                        target = best
                row[p] = target
                owned[target].setdefault(topic_id, set()).add(p)
                count[target] += 1
                least.update(target)
                rack = self.members[target].rack_id
                if rack in by_rack:
                    by_rack[rack].update(target)

        self._balance(topic_order, subscribers, owned, count)
        return {mid: _freeze(owned[mid]) for mid in member_ids}

    def _balance(self, topic_order: list[uuid.UUID], subscribers: dict[uuid.UUID, list[str]],
                 owned: dict[str, dict[uuid.UUID, set[int]]], count: dict[str, int]) -> None:
        """Move partitions to less loaded subscribers of the same topic until balanced."""
        movable = [t for t in topic_order if len(subscribers[t]) >= 2]
        last_changed = -1
        for _ in range(self.MAX_ROUNDS):
            for index, topic_id in enumerate(movable):
                if index == last_changed:
                    return  # a whole pass over the topics without a move
                if self._balance_topic(topic_id, subscribers[topic_id], owned, count) or last_changed == -1:
                    last_changed = index

    def _balance_topic(self, topic_id: uuid.UUID, subs: list[str],
                       owned: dict[str, dict[uuid.UUID, set[int]]], count: dict[str, int]) -> int:
        least = _LoadHeap(subs, count)
        # Most loaded holders of this topic's partitions: a max-heap with lazy invalidation.
        most = [(-count[mid], mid) for mid in subs if owned[mid].get(topic_id)]
        heapq.heapify(most)
        topic = self.topics[topic_id]
        moved = 0
        while most:
            c, src = most[0]
            if -c != count[src] or not owned[src].get(topic_id):
                heapq.heappop(most)
                continue
            dst = least.peek()
            if count[src] - count[dst] <= 1:
                break
            ps = owned[src][topic_id]
            p = max(ps)
            rack = self.members[dst].rack_id
            if rack is not None and topic.partition_racks:
                local = [q for q in ps if _has_local_replica(topic, q, rack)]
                if local:
                    p = max(local)
            ps.discard(p)
            if not ps:
                del owned[src][topic_id]
            owned[dst].setdefault(topic_id, set()).add(p)
            count[src] -= 1
            count[dst] += 1
            moved += 1
            least.update(src)
            least.update(dst)
            heapq.heapreplace(most, (-count[src], src))
            if owned[dst].get(topic_id):
                heapq.heappush(most, (-count[dst], dst))
        return moved


class _LoadHeap:
    """Members by (partition count, member id), smallest first; stale entries skipped lazily."""

    __slots__ = ("count", "heap")

    def __init__(self, member_ids: Iterable[str], count: dict[str, int]) -> None:
        self.count = count
        self.heap = [(count[mid], mid) for mid in member_ids]
        heapq.heapify(self.heap)

    def peek(self) -> str:
        heap, count = self.heap, self.count
        # update() pushed the current entry of every member whose count changed.
        while heap[0][0] != count[heap[0][1]]:
            heapq.heappop(heap)
        return heap[0][1]

    def update(self, mid: str) -> None:
        heapq.heappush(self.heap, (self.count[mid], mid))


def _group_by_topic(tps: Iterable[_TP]) -> MemberAssignment:
    out: dict[uuid.UUID, set[int]] = {}
    for topic_id, p in tps:
        out.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


class RangeAssignor:
    """Kafka's server-side RangeAssignor: contiguous, co-partitioned ranges per topic."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec],
               topics: Mapping[uuid.UUID, TopicSpec]) -> GroupAssignment:
        if not members:
            return {}
        _check_topics(topics)
        # Static members first by instance id, then dynamic members by member id: a static
        # member that rejoins under a new member id keeps its place and so its ranges.
        order = sorted(members.values(),
                       key=lambda m: (0, m.instance_id, "") if m.instance_id is not None else (1, "", m.member_id))
        subs = {m.member_id: _existing_subscriptions(m, topics) for m in order}
        n_members: dict[uuid.UUID, int] = {}
        for m in order:
            for t in subs[m.member_id]:
                n_members[t] = n_members.get(t, 0) + 1
        # Per topic: [next range start, partitions, minimum quota, members still due one extra].
        state = {t: [0, topics[t].num_partitions, *divmod(topics[t].num_partitions, n)]
                 for t, n in n_members.items()}
        result: GroupAssignment = {}
        for m in order:
            assignment: MemberAssignment = {}
            for t in subs[m.member_id]:
                st = state[t]
                start, n, quota, extra = st
                if extra > 0:
                    quota += 1
                    st[3] = extra - 1
                end = min(start + quota, n)
                st[0] = end
                if start < end:
                    assignment[t] = frozenset(range(start, end))
            result[m.member_id] = assignment
        return result


ASSIGNORS: dict[str, Assignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
DEFAULT_ASSIGNOR = "uniform"

_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def assignor_name(config_value: str) -> str:
    """Map one entry of ``group.consumer.assignors`` (Kafka class name or short name) to ours."""
    value = config_value.strip()
    if value in ASSIGNORS:
        return value
    name = _CLASS_NAMES.get(value)
    if name is None:
        raise ValueError(f"unknown consumer group assignor {config_value!r}; "
                         f"known: {', '.join(sorted(ASSIGNORS))} or {', '.join(sorted(_CLASS_NAMES))}")
    return name
