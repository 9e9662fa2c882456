"""The pure parts of partition reassignment: Kafka's ReplicaAssignment arithmetic and the checks
of a requested replica list (the controller's steps run against real processes in
conformance/test_cluster_reassignment.py)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.controller.reassignment import ReplicaAssignment, validate_target
from kafkapy.protocol.errors import ErrorCode


def test_reassign_puts_the_target_first_and_names_adding_and_removing():
    moved = ReplicaAssignment((1,)).reassign_to([2, 3])
    assert moved == ReplicaAssignment((2, 3, 1), adding=(2, 3), removing=(1,))
    assert moved.origin == (1,) and moved.target == (2, 3) and moved.being_reassigned


def test_raising_and_lowering_the_replication_factor():
    assert ReplicaAssignment((1,)).reassign_to([1, 2, 3]) == ReplicaAssignment((1, 2, 3), adding=(2, 3))
    assert ReplicaAssignment((1, 2, 3)).reassign_to([3]) == ReplicaAssignment((3, 1, 2), removing=(1, 2))


def test_reordering_only_is_not_a_reassignment_in_flight():
    reordered = ReplicaAssignment((1, 2)).reassign_to([2, 1])
    assert reordered == ReplicaAssignment((2, 1)) and not reordered.being_reassigned


def test_a_new_target_during_a_reassignment_starts_from_the_original_replicas():
    ongoing = ReplicaAssignment((1,)).reassign_to([2])
    again = ongoing.reassign_to([3])
    assert again == ReplicaAssignment((3, 1), adding=(3,), removing=(1,))
    # cancelling is reassigning to the original replicas
    assert ongoing.reassign_to(ongoing.origin) == ReplicaAssignment((1,))


def test_validation_codes():
    current = ReplicaAssignment((1, 2))
    live = {1, 2, 3}
    assert validate_target([], current, live)[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert validate_target([1, 1], current, live)[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert validate_target([1, -1], current, live)[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert validate_target([1, 7], current, live)[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert validate_target([2, 3], current, live) is None
    # only the replicas being added must be alive; a current one may be down
    assert validate_target([2, 3], current, {2, 3}) is None


ids = st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True)


@given(ids, ids, ids)
def test_any_chain_of_reassignments_keeps_the_invariants(first, second, third):
    assignment = ReplicaAssignment(tuple(first))
    for target in (second, third):
        origin = assignment.origin
        assignment = assignment.reassign_to(target)
        assert assignment.target == tuple(target)
        # the original replicas survive any number of new targets (their order may not: as in Kafka,
        # it is read off the full replica list)
        assert set(assignment.origin) == set(origin)
        assert set(assignment.replicas) == set(target) | set(origin)
        assert set(assignment.adding) == set(target) - set(origin)
        assert set(assignment.removing) == set(origin) - set(target)
        assert len(set(assignment.replicas)) == len(assignment.replicas)
