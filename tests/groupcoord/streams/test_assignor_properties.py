"""Properties of the streams task assignor over generated groups, topologies and histories."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.groupcoord.streams.assignor import (
    GroupSpec,
    MemberAssignment,
    MemberSpec,
    TopologyDescription,
    assign,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _quiet_standby_warnings():
    # Generated groups often have fewer processes than replicas; the warning is Kafka's, not news.
    logging.getLogger("kafkapy.groupcoord.streams.assignor").setLevel(logging.ERROR)
    yield
    logging.getLogger("kafkapy.groupcoord.streams.assignor").setLevel(logging.NOTSET)


@st.composite
def topologies(draw) -> TopologyDescription:
    sizes = draw(st.lists(st.integers(0, 12), min_size=1, max_size=4))
    subs = {f"sub-{i}": n for i, n in enumerate(sizes)}
    stateful = draw(st.sets(st.sampled_from(sorted(subs))))
    return TopologyDescription(subs, frozenset(stateful))


@st.composite
def groups(draw, *, single_member_processes: bool = False, history: bool = True):
    """A group and topology; with history, members carry what an earlier assignment gave them."""
    topology = draw(topologies())
    standbys = draw(st.integers(0, 3))
    configs = {"num.standby.replicas": str(standbys)}
    n_processes = draw(st.integers(1, 6))

    def new_members(prefix: str, n: int) -> dict[str, MemberSpec]:
        specs = {}
        for i in range(n):
            member_id = f"{prefix}{i}"
            process = member_id if single_member_processes else f"p{draw(st.integers(0, n_processes - 1))}"
            specs[member_id] = MemberSpec(member_id, process)
        return specs

    members = new_members("m", draw(st.integers(1, 10)))
    if history and draw(st.booleans()):
        earlier = assign(GroupSpec(members, configs), topology)
        kept = draw(st.sets(st.sampled_from(sorted(members))))
        members = {m: carry(members[m], earlier[m]) for m in sorted(kept)}
        members.update(new_members("n", draw(st.integers(0 if members else 1, 4))))
    return GroupSpec(members, configs), topology


def carry(spec: MemberSpec, assignment: MemberAssignment) -> MemberSpec:
    return MemberSpec(spec.member_id, spec.process_id, active=dict(assignment.active),
                      standby=dict(assignment.standby))


def tasks_of(topology: TopologyDescription, stateful_only: bool = False) -> list[tuple[str, int]]:
    return sorted((s, p) for s, n in topology.subtopologies.items()
                  if not stateful_only or s in topology.stateful for p in range(n))


def flat(tasks: dict[str, frozenset[int]]) -> list[tuple[str, int]]:
    return sorted((s, p) for s, ps in tasks.items() for p in ps)


@SETTINGS
@given(groups())
def test_every_active_task_exactly_once(case):
    group, topology = case
    result = assign(group, topology)
    assert set(result) == set(group.members)
    actives = [t for a in result.values() for t in flat(a.active)]
    assert sorted(actives) == tasks_of(topology)
    assert all(ps for a in result.values() for ps in (*a.active.values(), *a.standby.values()))
    assert all(a.warmup == {} for a in result.values())


@SETTINGS
@given(groups())
def test_a_process_holds_each_task_at_most_once(case):
    group, topology = case
    result = assign(group, topology)
    held: Counter = Counter()
    for member_id, a in result.items():
        process = group.members[member_id].process_id
        for task in flat(a.active) + flat(a.standby):
            held[(process, task)] += 1
    assert max(held.values(), default=1) == 1


@SETTINGS
@given(groups())
def test_standby_replicas_as_many_as_processes_allow(case):
    group, topology = case
    result = assign(group, topology)
    replicas = int(group.assignment_configs["num.standby.replicas"])
    processes = len({m.process_id for m in group.members.values()})
    per_task = Counter(t for a in result.values() for t in flat(a.standby))
    assert set(per_task) <= set(tasks_of(topology, stateful_only=True))
    for task in tasks_of(topology, stateful_only=True):
        assert per_task[task] == min(replicas, processes - 1)


@SETTINGS
@given(groups())
def test_active_load_of_processes_within_one(case):
    # Kafka weighs a process by its members: load = tasks / members.
    group, topology = case
    result = assign(group, topology)
    per_process: dict[str, list[int]] = {}
    for member_id, a in result.items():
        per_process.setdefault(group.members[member_id].process_id, []).append(len(flat(a.active)))
    loads = [sum(c) / len(c) for c in per_process.values()]
    assert max(loads) - min(loads) <= 1 + 1e-9


@SETTINGS
@given(groups(history=False))
def test_fresh_group_active_tasks_per_member_within_one(case):
    group, topology = case
    counts = [len(flat(a.active)) for a in assign(group, topology).values()]
    assert max(counts) - min(counts) <= 1


@SETTINGS
@given(groups(single_member_processes=True))
def test_single_member_processes_active_tasks_within_one(case):
    group, topology = case
    counts = [len(flat(a.active)) for a in assign(group, topology).values()]
    assert max(counts) - min(counts) <= 1


@SETTINGS
@given(groups(single_member_processes=True))
def test_reassigning_an_assignment_moves_no_active_task(case):
    # Adding nothing changes nothing. Only for one member per process: with several, Kafka's
    # shrinking quota can move a task between members of one process (or, rarely, to another
    # process) on the next round, and standbys can shift where the standby pass hit a full quota.
    group, topology = case
    first = assign(group, topology)
    again = GroupSpec({m: carry(s, first[m]) for m, s in group.members.items()}, group.assignment_configs)
    second = assign(again, topology)
    assert {m: a.active for m, a in second.items()} == {m: a.active for m, a in first.items()}
    if group.assignment_configs["num.standby.replicas"] == "0":
        assert second == first


@SETTINGS
@given(groups())
def test_members_below_the_fair_share_keep_their_active_tasks(case):
    group, topology = case
    result = assign(group, topology)
    fair = len(tasks_of(topology)) // len(group.members)
    for member_id, spec in group.members.items():
        before = [t for t in flat(spec.active) if t in set(tasks_of(topology))]
        if len(before) <= fair:
            assert set(before) <= set(flat(result[member_id].active))


@SETTINGS
@given(groups(), st.randoms(use_true_random=False))
def test_deterministic_whatever_the_member_order(case, rnd):
    group, topology = case
    order = list(group.members)
    rnd.shuffle(order)
    shuffled = GroupSpec({m: group.members[m] for m in order}, dict(group.assignment_configs))
    first = assign(group, topology)
    assert assign(group, topology) == first
    assert assign(shuffled, topology) == first
