"""Kafka's replica placement (kafkapy.metadata.replica_assignment)."""
import random
from collections import Counter

import pytest

from kafkapy.metadata.errors import InvalidReplicationFactorError
from kafkapy.metadata.replica_assignment import assign_replicas, rack_alternated


def test_fixed_start_matches_kafkas_layout():
    # Kafka's AdminUtils example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0
    got = assign_replicas([0, 1, 2, 3, 4], 10, 3, fixed_start=0)
    assert got == {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                   5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_leaders_and_replicas_spread_evenly():
    got = assign_replicas([1, 2, 3], 6, 3, rng=random.Random(7))
    assert Counter(r[0] for r in got.values()) == {1: 2, 2: 2, 3: 2}
    assert all(sorted(r) == [1, 2, 3] for r in got.values())


def test_rack_alternation_and_rack_aware_placement():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    got = assign_replicas(list(racks), 12, 3, racks=racks, rng=random.Random(1))
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3  # every replica on its own rack
    assert Counter(r[0] for r in got.values()) == {b: 2 for b in racks}


def test_partial_racks_fall_back_to_rack_unaware():
    got = assign_replicas([1, 2, 3], 3, 2, racks={1: "a", 2: None, 3: "b"}, fixed_start=0)
    assert got == {0: [1, 2], 1: [2, 3], 2: [3, 1]}


def test_more_replicas_than_brokers_is_refused():
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([1, 2], 1, 3)


def test_added_partitions_continue_from_start_partition():
    got = assign_replicas([1, 2, 3], 2, 2, start_partition=3, fixed_start=0)
    assert sorted(got) == [3, 4]
