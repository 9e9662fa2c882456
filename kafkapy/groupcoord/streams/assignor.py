"""The streams group task assignor: Kafka 4.4's broker-side sticky task assignor (KIP-1071).

A pure module: the coordinator hands it the members (with what each holds now and the task
offsets it reported) and the topology's task counts, and gets back each member's active and
standby tasks. Written from reading Kafka 4.4.0's
org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor (and its interfaces in
kafka-group-coordinator-api), in three passes:

1. Active tasks go back to the member that held them, while that member is below its quota
   (ceil(remaining tasks / members still below quota), recomputed as members fill up).
2. Active tasks still unplaced go to a member that has the task's state: a previous standby
   first, then any member that reported an offset for the task (the highest offset first;
   Kafka 4.4 added this), again only below quota, and only when that member's process and the
   member itself are less loaded than the other candidates.
3. The rest go to the least loaded process (tasks / members of the process) and within it to
   the member with fewest tasks.

Standby replicas (``num.standby.replicas``, stateful subtopologies only) go to the previous
active owner, then to a previous standby or member with the task's state, each while below the
total quota, and otherwise to the least loaded process; never to a process that already holds
the task, so one process never has an active and a standby (or two standbys) of one task.
When there are not enough processes the missing replicas are dropped with a warning, as Kafka does.

Ties (equally loaded processes or members) are broken as Kafka's Java code breaks them: members
and processes are visited in java.util.HashMap's iteration order of their ids, and the least
loaded process or member is taken from a heap that behaves like java.util.PriorityQueue. So the
output depends only on the input (never on dict order) and equals what a Kafka 4.4 broker's
assignor computes for the same members (checked against Kafka's own class in
tests/groupcoord/streams/test_assignor_kafka.py). Kafka's coordinator fills its member map from
its own timeline hash map, which only decides the order of ids that share a hash bucket; here
those go in id order.

Warm-up tasks: in Kafka 4.4.0 the assignor returns no warm-up tasks; the coordinator passes its
target assignment through ``AssignmentRefiner.refine`` (configured by
``streams.num.warmup.replicas`` and ``streams.acceptable.recovery.lag``), and in 4.4.0 that
refiner returns the target assignment unchanged. :func:`refine` does the same, so the warm-up
field of every assignment is empty; warm-up readiness in 4.4.0 is the task offsets the members
report, which this assignor uses to rank who should take over a task's state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

# Keys of GroupSpec.assignment_configs, as Kafka's AssignmentConfigsImpl names them (the
# coordinator fills them from the group configs streams.num.standby.replicas and
# streams.rack.aware.assignment.tags, or the broker's group.streams.* defaults).
NUM_STANDBY_REPLICAS_CONFIG = "num.standby.replicas"
RACK_AWARE_ASSIGNMENT_TAGS_CONFIG = "rack.aware.assignment.tags"

# Group configs that size warm-up tasks in Kafka 4.4 (internal there), with their defaults.
STREAMS_NUM_WARMUP_REPLICAS_CONFIG = "streams.num.warmup.replicas"
STREAMS_NUM_WARMUP_REPLICAS_DEFAULT = 2
STREAMS_ACCEPTABLE_RECOVERY_LAG_CONFIG = "streams.acceptable.recovery.lag"
STREAMS_ACCEPTABLE_RECOVERY_LAG_DEFAULT = 10000

ASSIGNOR_NAME = "sticky"

Tasks = dict[str, frozenset[int]]
TaskId = tuple[str, int]  # (subtopology id, partition)


class TaskAssignorError(Exception):
    """The assignor cannot place a task (Kafka's TaskAssignorException)."""


@dataclass(frozen=True, slots=True)
class TopologyDescription:
    """What the assignor needs to know of a group's topology (Kafka's TopologyDescriber)."""

    subtopologies: dict[str, int]  # subtopology id -> number of tasks (max input partitions)
    stateful: frozenset[str] = frozenset()  # subtopologies with state: only these get standbys


@dataclass(slots=True)
class MemberSpec:
    """One member as the assignor sees it (Kafka's MemberAssignmentMetadata + MemberAssignmentState)."""

    member_id: str
    process_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    active: Tasks = field(default_factory=dict)  # current assignment, subtopology -> partitions
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    # Offsets the member last reported (StreamsGroupHeartbeat TaskOffsets / TaskEndOffsets):
    # subtopology -> partition -> offset. A member with an offset for a task has state for it.
    task_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    task_end_offsets: dict[str, dict[int, int]] = field(default_factory=dict)


@dataclass(slots=True)
class GroupSpec:
    """The group as the assignor sees it (Kafka's GroupSpec)."""

    members: dict[str, MemberSpec]
    assignment_configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class MemberAssignment:
    """Tasks given to one member; only subtopologies with tasks appear."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AssignmentConfigs:
    """The parsed assignment configs (Kafka's AssignmentConfigsImpl)."""

    num_standby_replicas: int = 0
    rack_aware_assignment_tags: tuple[str, ...] = ()

    @classmethod
    def from_map(cls, configs: Mapping[str, str]) -> AssignmentConfigs:
        raw_standbys = configs.get(NUM_STANDBY_REPLICAS_CONFIG)
        try:
            num_standby = int(raw_standbys) if raw_standbys not in (None, "") else 0
        except ValueError:
            raise TaskAssignorError(f"{NUM_STANDBY_REPLICAS_CONFIG} is not an integer: {raw_standbys!r}") from None
        if num_standby < 0:
            raise TaskAssignorError(f"{NUM_STANDBY_REPLICAS_CONFIG} must be at least 0, not {num_standby}")
        raw_tags = configs.get(RACK_AWARE_ASSIGNMENT_TAGS_CONFIG, "")
        tags = tuple(raw_tags.split(",")) if raw_tags else ()
        return cls(num_standby, tags)


class _Process:
    """The tasks given so far to the members of one process (Kafka's ProcessState)."""

    __slots__ = ("process_id", "capacity", "task_count", "load", "member_counts", "active",
                 "standby", "tasks", "_members_by_load")

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.capacity = 0
        self.task_count = 0
        self.load = 0.0
        self.member_counts: dict[str, int] = {}
        self.active: dict[str, list[TaskId]] = {}
        self.standby: dict[str, list[TaskId]] = {}
        self.tasks: set[TaskId] = set()
        self._members_by_load: _JavaPriorityQueue | None = None

    def add_member(self, member_id: str) -> None:
        self.member_counts[member_id] = 0
        self.capacity += 1
        self.load = self.task_count / self.capacity

    def add_task(self, member_id: str, task: TaskId, active: bool) -> int:
        """Give the task to this member; returns the member's new task count."""
        self._members_by_load = None
        return self._add(member_id, task, active)

    def add_task_to_least_loaded_member(self, task: TaskId, active: bool) -> int:
        """Give the task to the member with fewest tasks; returns its new task count."""
        if len(self.member_counts) == 1:
            return self._add(next(iter(self.member_counts)), task, active)
        if self._members_by_load is None:
            # Kafka keeps member counts in a HashMap and heaps (member, count) entries by count.
            self._members_by_load = _JavaPriorityQueue(lambda entry: entry[1])
            for member in java_hash_map_order(self.member_counts):
                self._members_by_load.add((member, self.member_counts[member]))
        member, _ = self._members_by_load.poll()
        count = self._add(member, task, active)
        self._members_by_load.add((member, count))
        return count

    def _add(self, member_id: str, task: TaskId, active: bool) -> int:
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, []).append(task)
        count = self.member_counts[member_id] + 1
        self.member_counts[member_id] = count
        self.load = self.task_count / self.capacity
        return count


class _State:
    """The quotas and previous owners one assign() call works with (Kafka's LocalState)."""

    __slots__ = ("num_standby", "total_active", "total_tasks", "members_below_active_quota",
                 "members_below_total_quota", "active_quota", "total_quota", "processes",
                 "prev_active", "prev_state_holders")

    def __init__(self, group: GroupSpec, topology: TopologyDescription, num_standby: int) -> None:
        self.num_standby = num_standby
        self.total_active = sum(topology.subtopologies.values())
        self.total_tasks = self.total_active + num_standby * sum(
            n for sub, n in topology.subtopologies.items() if sub in topology.stateful)
        self.members_below_active_quota = len(group.members)
        self.members_below_total_quota = len(group.members)
        self.active_quota = _per_member(self.total_active, self.members_below_active_quota)
        self.total_quota = _per_member(self.total_tasks, self.members_below_total_quota)
        self.processes: dict[str, _Process] = {}
        # task -> (process id, member id) of its previous active owner
        self.prev_active: dict[TaskId, tuple[str, str]] = {}
        # task -> members with its state, best first: previous standbys, then by reported offset
        self.prev_state_holders: dict[TaskId, list[tuple[str, str]]] = {}

        candidates: dict[TaskId, list[tuple[int, int, str, str]]] = {}
        members = java_hash_map_order(sorted(group.members))
        processes: dict[str, _Process] = {}
        for member_id in members:
            spec = group.members[member_id]
            owner = (spec.process_id, member_id)
            process = processes.get(spec.process_id)
            if process is None:
                process = processes[spec.process_id] = _Process(spec.process_id)
            process.add_member(member_id)
            for sub, partitions in spec.active.items():
                for p in partitions:
                    self.prev_active[(sub, p)] = owner
            for sub, partitions in spec.standby.items():
                offsets = spec.task_offsets.get(sub, {})
                for p in partitions:
                    candidates.setdefault((sub, p), []).append((0, -offsets.get(p, 0), member_id, spec.process_id))
            for sub, offsets in spec.task_offsets.items():
                standbys = spec.standby.get(sub, frozenset())
                for p, offset in offsets.items():
                    if p not in standbys:
                        candidates.setdefault((sub, p), []).append((1, -offset, member_id, spec.process_id))
        # Kafka sizes this HashMap for the member count; its order is the order processes enter heaps.
        order = java_hash_map_order(processes, len(members), compute_if_absent=True)
        self.processes = {pid: processes[pid] for pid in order}
        for task, ranked in candidates.items():
            # Both sorts are stable: equal ranks stay in the order the members were visited.
            ranked.sort(key=lambda c: (c[0], c[1]))
            self.prev_state_holders[task] = [(process_id, member_id) for _, _, member_id, process_id in ranked]

    def took(self, count: int, active: bool) -> None:
        """Recompute the quotas after a member reached `count` tasks."""
        if active and count == self.active_quota:
            self.members_below_active_quota -= 1
            self.total_active -= count
            self.active_quota = _per_member(self.total_active, self.members_below_active_quota)
        if count == self.total_quota:
            self.members_below_total_quota -= 1
            self.total_tasks -= count
            self.total_quota = _per_member(self.total_tasks, self.members_below_total_quota)

    def least_loaded_holder(self, holders: list[tuple[str, str]] | None,
                            skip_task: TaskId | None = None) -> tuple[str, str] | None:
        """The first holder whose process and member are both less loaded than earlier picks."""
        if not holders:
            return None
        best = None
        best_process_load = best_member_load = float("inf")
        for process_id, member_id in holders:
            process = self.processes[process_id]
            if skip_task is not None and skip_task in process.tasks:
                continue
            member_load = process.member_counts[member_id]
            if best is None or (process.load < best_process_load and member_load < best_member_load):
                best, best_process_load, best_member_load = (process_id, member_id), process.load, member_load
        return best


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


def _task_ids(topology: TopologyDescription, stateful_only: bool) -> list[TaskId]:
    return [(sub, p) for sub, n in topology.subtopologies.items()
            if not stateful_only or sub in topology.stateful for p in range(n)]


def assign(group: GroupSpec, topology: TopologyDescription) -> dict[str, MemberAssignment]:
    """Kafka 4.4's sticky task assignment: every member of the group -> its active and standby tasks."""
    configs = AssignmentConfigs.from_map(group.assignment_configs)
    state = _State(group, topology, configs.num_standby_replicas)
    _assign_active(state, _task_ids(topology, stateful_only=False))
    if state.num_standby > 0:
        _assign_standby(state, _task_ids(topology, stateful_only=True))
    return _group_assignment(state, group)


def _assign_active(state: _State, tasks: list[TaskId]) -> None:
    # Stickiness passes walk partition-major, so a member's quota is spent across subtopologies.
    tasks.sort(key=lambda t: (t[1], t[0]))
    unplaced: list[TaskId] = []
    for task in tasks:
        owner = state.prev_active.get(task)
        if owner is not None and _below_active_quota(state, owner):
            state.took(state.processes[owner[0]].add_task(owner[1], task, True), active=True)
        else:
            unplaced.append(task)
    tasks, unplaced = unplaced, []
    for task in tasks:
        owner = state.least_loaded_holder(state.prev_state_holders.get(task))
        if owner is not None and _below_active_quota(state, owner):
            state.took(state.processes[owner[0]].add_task(owner[1], task, True), active=True)
        else:
            unplaced.append(task)
    # The rest subtopology-major, so consecutive partitions of one subtopology spread out.
    unplaced.sort()
    by_load = _processes_by_load(state)
    for task in unplaced:
        if not by_load:
            raise TaskAssignorError(f"No process available to assign active task {task[0]}_{task[1]}.")
        process = by_load.poll()
        state.took(process.add_task_to_least_loaded_member(task, True), active=True)
        by_load.add(process)


def _below_active_quota(state: _State, owner: tuple[str, str]) -> bool:
    return state.processes[owner[0]].member_counts[owner[1]] < state.active_quota


def _below_total_quota(state: _State, owner: tuple[str, str]) -> bool:
    return state.processes[owner[0]].member_counts[owner[1]] < state.total_quota


def _assign_standby(state: _State, tasks: list[TaskId]) -> None:
    tasks.sort(key=lambda t: (t[1], t[0]), reverse=True)
    to_least_loaded: list[tuple[TaskId, int]] = []
    for task in tasks:
        for replica in range(state.num_standby):
            owner = state.prev_active.get(task)
            if (owner is not None and task not in state.processes[owner[0]].tasks
                    and _below_total_quota(state, owner)):
                state.took(state.processes[owner[0]].add_task(owner[1], task, False), active=False)
                continue
            owner = state.least_loaded_holder(state.prev_state_holders.get(task), skip_task=task)
            if owner is not None and _below_total_quota(state, owner):
                state.took(state.processes[owner[0]].add_task(owner[1], task, False), active=False)
                continue
            to_least_loaded.append((task, state.num_standby - replica))
            break
    to_least_loaded.sort(reverse=True)
    by_load = _processes_by_load(state)
    for task, remaining in to_least_loaded:
        for replica in range(remaining):
            if not _standby_to_least_loaded(state, by_load, task):
                log.warning(
                    "Unable to assign %d of %d standby tasks for task [%s_%d]. There is not enough "
                    "available capacity. You should increase the number of threads and/or application "
                    "instances to maintain the requested number of standby replicas.",
                    remaining - replica, state.num_standby, task[0], task[1])
                break


def _processes_by_load(state: _State) -> _JavaPriorityQueue:
    by_load = _JavaPriorityQueue(lambda process: process.load)
    for process in state.processes.values():
        by_load.add(process)
    return by_load


def _standby_to_least_loaded(state: _State, by_load: _JavaPriorityQueue, task: TaskId) -> bool:
    """Give a standby of the task to the least loaded process that does not hold it yet."""
    polled = []
    placed = False
    while by_load:
        process = by_load.poll()
        polled.append(process)
        if task not in process.tasks:
            state.took(process.add_task_to_least_loaded_member(task, False), active=False)
            placed = True
            break
    # Kafka recurses, so the processes go back innermost (last polled) first.
    for process in reversed(polled):
        by_load.add(process)
    return placed


def java_hash_map_order(keys: Iterable[str], initial_capacity: int | None = None, *,
                        compute_if_absent: bool = False) -> list[str]:
    """The order a java.util.HashMap iterates these distinct string keys, added in this order.

    A HashMap iterates its table bucket by bucket (the spread String.hashCode masked by the table
    size). put() appends to a bucket and grows the table after adding; computeIfAbsent() puts the
    new key at the head of its bucket and grows the table before adding. Growing keeps each
    bucket's order. (Buckets Java turns into trees, eight keys or more in a table of 64 or more,
    are not modelled.)
    """
    table: list[list[tuple[int, str]]] = []
    threshold = 0 if initial_capacity is None else _table_size_for(initial_capacity)
    size = 0

    def resize() -> None:
        nonlocal table, threshold
        capacity, threshold = _java_resize(len(table), threshold)
        grown: list[list[tuple[int, str]]] = [[] for _ in range(capacity)]
        for bucket in table:
            for node in bucket:
                grown[node[0] & (capacity - 1)].append(node)
        table = grown

    for key in keys:
        h = _java_spread_hash(key)
        if not table or (compute_if_absent and size > threshold):
            resize()
        bucket = table[h & (len(table) - 1)]
        long_bin = len(bucket) >= (7 if compute_if_absent else 8)
        if compute_if_absent:
            bucket.insert(0, (h, key))
        else:
            bucket.append((h, key))
        if long_bin and len(table) < 64:
            resize()  # treeifyBin() grows a small table instead of making a tree
        size += 1
        if not compute_if_absent and size > threshold:
            resize()
    return [key for bucket in table for _, key in bucket]


def _java_spread_hash(key: str) -> int:
    data = key.encode("utf-16-be")  # String.hashCode runs over UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _table_size_for(capacity: int) -> int:
    n = 1
    while n < capacity:
        n <<= 1
    return n


def _java_resize(capacity: int, threshold: int) -> tuple[int, int]:
    """HashMap.resize(): the next (table size, threshold)."""
    if capacity > 0:
        new_capacity = capacity << 1
        new_threshold = threshold << 1 if capacity >= 16 else 0
    elif threshold > 0:
        new_capacity, new_threshold = threshold, 0
    else:
        new_capacity, new_threshold = 16, 12
    if new_threshold == 0:
        new_threshold = int(new_capacity * 0.75)
    return new_capacity, new_threshold


class _JavaPriorityQueue:
    """A binary heap that orders equal keys as java.util.PriorityQueue does (add, poll)."""

    __slots__ = ("_items", "_key")

    def __init__(self, key: Callable[[object], float]) -> None:
        self._items: list = []
        self._key = key

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item) -> None:
        items, key = self._items, self._key
        items.append(item)
        k, item_key = len(items) - 1, key(item)
        while k > 0:
            parent = (k - 1) >> 1
            if item_key >= key(items[parent]):
                break
            items[k] = items[parent]
            k = parent
        items[k] = item

    def poll(self):
        items, key = self._items, self._key
        result = items[0]
        last = items.pop()
        n = len(items)
        if n:
            k, last_key, half = 0, key(last), n >> 1
            while k < half:
                child = 2 * k + 1
                right = child + 1
                if right < n and key(items[child]) > key(items[right]):
                    child = right
                if last_key <= key(items[child]):
                    break
                items[k] = items[child]
                k = child
            items[k] = last
        return result


def _group_assignment(state: _State, group: GroupSpec) -> dict[str, MemberAssignment]:
    result = {member_id: MemberAssignment() for member_id in sorted(group.members)}
    for process in state.processes.values():
        for member_id, tasks in process.active.items():
            result[member_id].active = _by_subtopology(tasks)
        for member_id, tasks in process.standby.items():
            result[member_id].standby = _by_subtopology(tasks)
    return result


def _by_subtopology(tasks: list[TaskId]) -> Tasks:
    grouped: dict[str, set[int]] = {}
    for sub, p in tasks:
        grouped.setdefault(sub, set()).add(p)
    return {sub: frozenset(grouped[sub]) for sub in sorted(grouped)}


def refine(target: Mapping[str, MemberAssignment], members: Mapping[str, MemberSpec],
           topology: TopologyDescription, num_warmup_replicas: int,
           acceptable_recovery_lag: int) -> dict[str, MemberAssignment]:
    """Kafka 4.4.0's AssignmentRefiner: where warm-up tasks would be added; 4.4.0 adds none.

    The coordinator calls this on the target assignment when ``streams.num.warmup.replicas`` > 0
    and reconciles members towards what it returns. Kafka 4.4.0's refiner returns the target
    unchanged, so no warm-up task is handed out and moved tasks move at once.
    """
    del members, topology, num_warmup_replicas, acceptable_recovery_lag
    return dict(target)
