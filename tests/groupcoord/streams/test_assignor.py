"""The streams task assignor: scenarios after Kafka's StickyTaskAssignorTest, in our own cases."""

from __future__ import annotations

import logging
import time

import pytest

from kafkapy.groupcoord.streams.assignor import (
    AssignmentConfigs,
    GroupSpec,
    MemberAssignment,
    MemberSpec,
    TaskAssignorError,
    TopologyDescription,
    assign,
    refine,
)

SUB = "sub"


def member(member_id: str, process_id: str | None = None, *, active=None, standby=None,
           offsets=None) -> MemberSpec:
    return MemberSpec(
        member_id=member_id,
        process_id=process_id or f"process-{member_id}",
        active={s: frozenset(p) for s, p in (active or {}).items()},
        standby={s: frozenset(p) for s, p in (standby or {}).items()},
        task_offsets={s: dict(o) for s, o in (offsets or {}).items()},
    )


def run(members: list[MemberSpec], subtopologies: dict[str, int], *, stateful=(), standbys: int = 0,
        configs: dict[str, str] | None = None) -> dict[str, MemberAssignment]:
    group = GroupSpec({m.member_id: m for m in members},
                      configs if configs is not None else {"num.standby.replicas": str(standbys)})
    return assign(group, TopologyDescription(subtopologies, frozenset(stateful)))


def active(result, member_id, sub=SUB) -> set[int]:
    return set(result[member_id].active.get(sub, ()))


def standby(result, member_id, sub=SUB) -> set[int]:
    return set(result[member_id].standby.get(sub, ()))


def count(tasks: dict[str, frozenset[int]]) -> int:
    return sum(len(p) for p in tasks.values())


def all_active(result) -> list[tuple[str, int]]:
    return sorted((s, p) for a in result.values() for s, ps in a.active.items() for p in ps)


def test_one_active_task_per_process_when_counts_match():
    result = run([member("m1"), member("m2"), member("m3")], {SUB: 3})
    assert [count(result[m].active) for m in ("m1", "m2", "m3")] == [1, 1, 1]
    assert all_active(result) == [(SUB, 0), (SUB, 1), (SUB, 2)]


def test_spreads_over_processes_then_members():
    # Three processes with two members each, six tasks: one per member.
    members = [member(f"m{p}_{i}", f"p{p}") for p in range(3) for i in range(2)]
    result = run(members, {SUB: 6})
    assert sorted(count(a.active) for a in result.values()) == [1] * 6


def test_partitions_of_one_subtopology_spread_out():
    # A fresh group: each member gets one partition of each subtopology (Kafka's range-like layout).
    result = run([member("m1"), member("m2")], {"a": 2, "b": 2}, stateful={"a", "b"}, standbys=1)
    for m in ("m1", "m2"):
        assert len(result[m].active["a"]) == 1 and len(result[m].active["b"]) == 1
        assert len(result[m].standby["a"]) == 1 and len(result[m].standby["b"]) == 1
        assert not result[m].active["a"] & result[m].standby["a"]


def test_active_tasks_stay_with_their_process():
    result = run([member("m1", active={SUB: {0}}), member("m2", active={SUB: {1}})], {SUB: 3})
    assert 0 in active(result, "m1") and 1 in active(result, "m2")
    assert len(active(result, "m1")) + len(active(result, "m2")) == 3


def test_a_new_process_takes_only_what_balance_needs():
    result = run([member("m1", active={SUB: {0, 2}}), member("m2", active={SUB: {1}}), member("m3")],
                 {SUB: 3})
    assert active(result, "m2") == {1}
    assert len(active(result, "m1")) == 1 and active(result, "m1") <= {0, 2}
    assert active(result, "m3") == {0, 2} - active(result, "m1")


def test_capacity_counts_members_of_a_process():
    result = run([member("m1", "p1"), member("m2_1", "p2"), member("m2_2", "p2")], {SUB: 3})
    assert [count(result[m].active) for m in ("m1", "m2_1", "m2_2")] == [1, 1, 1]


def test_unequal_subtopology_sizes_balance_on_task_count():
    tasks = {"s1": {0, 1, 2, 3, 4, 5}, "s2": {0}}
    result = run([member("m1", active=tasks), member("m2")], {"s1": 6, "s2": 1})
    assert count(result["m1"].active) == 4 and count(result["m2"].active) == 3
    assert all_active(result) == sorted((s, p) for s, ps in tasks.items() for p in ps)


def test_stickiness_when_there_are_more_members_than_tasks():
    first = run([member("m1", active={SUB: {0}}), member("m2", active={SUB: {2}}),
                 member("m3", active={SUB: {1}}), member("m4"), member("m5")], {SUB: 3})
    assert (active(first, "m1"), active(first, "m2"), active(first, "m3")) == ({0}, {2}, {1})
    assert first["m4"].active == {} and first["m5"].active == {}
    second = run([member("m1"), member("m2", active={SUB: {0}}), member("m3"),
                  member("m4", active={SUB: {2}}), member("m5", active={SUB: {1}})], {SUB: 3})
    assert (active(second, "m2"), active(second, "m4"), active(second, "m5")) == ({0}, {2}, {1})
    assert second["m1"].active == {} and second["m3"].active == {}


def test_a_moved_active_task_goes_to_its_previous_standby():
    result = run([member("m1", standby={SUB: {2}}), member("m2", standby={SUB: {1}}),
                  member("m3", standby={SUB: {0}})], {SUB: 3})
    assert (active(result, "m1"), active(result, "m2"), active(result, "m3")) == ({2}, {1}, {0})


def test_a_standby_never_lands_on_the_process_running_the_task():
    result = run([member("m1", standby={SUB: {0}}), member("m2", standby={SUB: {1}})], {SUB: 2},
                 stateful={SUB}, standbys=1)
    assert (active(result, "m1"), standby(result, "m1")) == ({0}, {1})
    assert (active(result, "m2"), standby(result, "m2")) == ({1}, {0})


def test_previous_standby_does_not_take_the_active_over_its_quota():
    # m1 keeps task 0 and was standby of 1; m2_1 keeps 2 and was standby of 1; m2_2 gets 1.
    result = run([member("m1", "p1", active={SUB: {0}}, standby={SUB: {1}}),
                  member("m2_1", "p2", active={SUB: {2}}, standby={SUB: {1}}),
                  member("m2_2", "p2")], {SUB: 3})
    assert (active(result, "m1"), active(result, "m2_1"), active(result, "m2_2")) == ({0}, {2}, {1})


def test_standbys_go_to_other_processes_than_the_active():
    members = [member(f"m{i}", active={SUB: {i}}) for i in range(4)]
    result = run(members, {SUB: 4}, stateful={SUB}, standbys=1)
    for i in range(4):
        assert active(result, f"m{i}") == {i}
        assert len(standby(result, f"m{i}")) == 1 and i not in standby(result, f"m{i}")


def test_several_replicas_of_one_standby():
    result = run([member("m1"), member("m2"), member("m3")], {SUB: 1}, stateful={SUB}, standbys=2)
    holders = [m for m in result if standby(result, m)]
    owner = [m for m in result if active(result, m)]
    assert len(owner) == 1 and sorted(holders + owner) == ["m1", "m2", "m3"]


def test_replicas_beyond_the_processes_are_dropped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="kafkapy.groupcoord.streams.assignor"):
        result = run([member("m1"), member("m2")], {SUB: 1}, stateful={SUB}, standbys=3)
    assert count(result["m1"].standby) + count(result["m2"].standby) == 1
    assert "Unable to assign 2 of 3 standby tasks for task [sub_0]" in caplog.text


def test_one_process_gets_no_standby_at_all():
    # Two members of one process: a standby would sit on the process holding the active.
    result = run([member("a", "p"), member("b", "p")], {SUB: 4}, stateful={SUB}, standbys=1)
    assert all(a.standby == {} for a in result.values())
    assert sorted(count(a.active) for a in result.values()) == [2, 2]


def test_stateless_subtopologies_get_no_standbys():
    result = run([member("m1"), member("m2")], {"stateless": 2, "stateful": 2},
                 stateful={"stateful"}, standbys=1)
    assert all("stateless" not in a.standby for a in result.values())
    assert sum(len(a.standby.get("stateful", ())) for a in result.values()) == 2


def test_more_members_than_tasks_each_task_once():
    result = run([member(f"m{i}") for i in range(5)], {SUB: 3})
    assert all_active(result) == [(SUB, 0), (SUB, 1), (SUB, 2)]
    assert sorted(count(a.active) for a in result.values()) == [0, 0, 1, 1, 1]


def test_balances_active_and_standby_over_processes():
    result = run([member("m1"), member("m2"), member("m3")], {SUB: 3}, stateful={SUB}, standbys=1)
    for a in result.values():
        assert count(a.active) == 1 and count(a.standby) == 1


def test_rebalances_tasks_to_a_new_member_moving_the_minimum():
    before = {SUB: {0, 1, 2, 3, 4, 5}}
    result = run([member("m1", active=before), member("m2")], {SUB: 6})
    assert len(active(result, "m1")) == 3 and active(result, "m1") <= before[SUB]
    assert len(active(result, "m2")) == 3


def test_new_tasks_do_not_move_existing_ones():
    result = run([member("m1", active={SUB: {0, 1}}), member("m2", active={SUB: {2, 3}})], {SUB: 6})
    assert {0, 1} <= active(result, "m1") and {2, 3} <= active(result, "m2")
    assert len(active(result, "m1")) == 3 and len(active(result, "m2")) == 3


def test_new_member_does_not_flip_existing_assignment():
    result = run([member("m1", active={SUB: {0, 2, 4}}), member("m2", active={SUB: {1, 3, 5}}),
                  member("m3")], {SUB: 6})
    assert len(active(result, "m1")) == 2 and active(result, "m1") <= {0, 2, 4}
    assert len(active(result, "m2")) == 2 and active(result, "m2") <= {1, 3, 5}
    assert len(active(result, "m3")) == 2


def test_standby_stays_with_its_previous_owner_below_quota():
    # Kafka's "below quota" rule: p1 keeps its standby of task 1 next to its active task 0.
    result = run([member("m1", active={SUB: {0}}, standby={SUB: {1}}), member("m2", active={SUB: {1}}),
                  member("m3")], {SUB: 2}, stateful={SUB}, standbys=1)
    assert active(result, "m1") == {0} and standby(result, "m1") == {1}
    assert active(result, "m2") == {1}


def test_previous_active_owner_keeps_the_task_as_standby_when_it_moves():
    # m1 held 0..3 active; m2 joins and takes two; m1 keeps standbys of the tasks it gave up.
    result = run([member("m1", active={SUB: {0, 1, 2, 3}}), member("m2")], {SUB: 4},
                 stateful={SUB}, standbys=1)
    moved = {0, 1, 2, 3} - active(result, "m1")
    assert len(moved) == 2 and active(result, "m2") == moved
    assert standby(result, "m1") == moved


def test_reported_offsets_choose_who_takes_a_moved_task():
    # Kafka 4.4: a member that reported state for a task (no standby) is a candidate too, the
    # highest offset first. Task 2 had no owner left; m3 has more of its state than m2.
    result = run([member("m1", active={SUB: {0}}), member("m2", active={SUB: {1}}, offsets={SUB: {2: 10}}),
                  member("m3", offsets={SUB: {2: 500}})], {SUB: 3}, stateful={SUB})
    assert active(result, "m3") == {2}


def test_previous_standby_beats_a_higher_reported_offset():
    result = run([member("m1", standby={SUB: {0}}, offsets={SUB: {0: 5}}),
                  member("m2", offsets={SUB: {0: 900}})], {SUB: 1}, stateful={SUB})
    assert active(result, "m1") == {0}


def test_reported_offsets_place_a_standby():
    # Task 0 stays on m1; its standby goes to the member holding most of its state.
    result = run([member("m1", active={SUB: {0}}), member("m2", offsets={SUB: {0: 3}}),
                  member("m3", offsets={SUB: {0: 70}})], {SUB: 1}, stateful={SUB}, standbys=1)
    assert active(result, "m1") == {0}
    assert standby(result, "m3") == {0} and standby(result, "m2") == set()


def test_tasks_outside_the_topology_are_ignored():
    result = run([member("m1", active={SUB: {0, 7}, "gone": {0}}, standby={"gone": {1}})], {SUB: 2})
    assert result["m1"].active == {SUB: frozenset({0, 1})}
    assert result["m1"].standby == {}


def test_every_member_gets_an_assignment_and_warmups_are_empty():
    result = run([member("m1"), member("m2"), member("m3")], {SUB: 1}, stateful={SUB}, standbys=1)
    assert set(result) == {"m1", "m2", "m3"}
    assert all(a.warmup == {} for a in result.values())


def test_empty_topology_and_empty_group():
    assert run([member("m1")], {SUB: 0}) == {"m1": MemberAssignment()}
    assert run([], {}) == {}
    with pytest.raises(TaskAssignorError, match="No process available to assign active task sub_0"):
        run([], {SUB: 1})


def test_configs_parse_like_kafkas():
    assert AssignmentConfigs.from_map({}) == AssignmentConfigs(0, ())
    assert AssignmentConfigs.from_map({"num.standby.replicas": "2", "rack.aware.assignment.tags": "zone,rack"}) \
        == AssignmentConfigs(2, ("zone", "rack"))
    with pytest.raises(TaskAssignorError):
        AssignmentConfigs.from_map({"num.standby.replicas": "two"})
    with pytest.raises(TaskAssignorError):
        AssignmentConfigs.from_map({"num.standby.replicas": "-1"})


def test_rack_aware_tags_do_not_change_the_sticky_assignment():
    # Kafka 4.4's sticky assignor reads the tags but does not use them.
    members = [MemberSpec(f"m{i}", f"p{i}", client_tags={"zone": f"z{i % 2}"}) for i in range(4)]
    group = {m.member_id: m for m in members}
    topology = TopologyDescription({SUB: 4}, frozenset({SUB}))
    plain = assign(GroupSpec(group, {"num.standby.replicas": "1"}), topology)
    tagged = assign(GroupSpec(group, {"num.standby.replicas": "1", "rack.aware.assignment.tags": "zone"}),
                    topology)
    assert plain == tagged


def test_refine_returns_the_target_unchanged_like_kafka_4_4_0():
    target = run([member("m1"), member("m2")], {SUB: 4}, stateful={SUB}, standbys=1)
    refined = refine(target, {}, TopologyDescription({SUB: 4}, frozenset({SUB})), 2, 10000)
    assert refined == target


@pytest.mark.parametrize("members,tasks", [(10, 200), (100, 2000)])
def test_assign_time_for_large_groups(members, tasks):
    specs = {f"m{i:03d}": MemberSpec(f"m{i:03d}", f"p{i:03d}") for i in range(members)}
    topology = TopologyDescription({str(s): tasks // 4 for s in range(4)}, frozenset({"0", "1"}))
    configs = {"num.standby.replicas": "1"}
    started = time.perf_counter()
    first = assign(GroupSpec(specs, configs), topology)
    sticky = {m: MemberSpec(m, s.process_id, active=first[m].active, standby=first[m].standby)
              for m, s in specs.items()}
    sticky["joiner"] = MemberSpec("joiner", "p-new")
    assign(GroupSpec(sticky, configs), topology)
    elapsed = time.perf_counter() - started
    # ~10 ms for 100 x 2000 on the project's machine; a generous bound for a loaded CI box.
    assert elapsed < 2.0, f"assign took {elapsed:.3f} s for {members} members x {tasks} tasks"
