"""Kafka's replica assignment for new topics and partitions (ZooKeeper mode's AdminUtils).

Without racks: partition p's first replica is broker (p + start) of the sorted broker list, and the
others follow at a shift that grows by one every full round of brokers, so leaders and followers
both spread evenly. With `broker.rack` on every broker, the broker list is first arranged to
alternate racks, and each further replica skips brokers whose rack (or itself) already holds one
until every rack (or broker) does. `start` and `shift` are random unless fixed (as CreatePartitions
fixes the start to continue the existing layout).
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from .errors import InvalidReplicationFactorError

__all__ = ["assign_replicas", "rack_alternated"]


def _replica_index(first: int, shift: int, replica: int, brokers: int) -> int:
    return (first + 1 + (shift + replica) % (brokers - 1)) % brokers


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered so that consecutive ones are on different racks (racks in name order, brokers
    of a rack in id order)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    iterators = {rack: iter(brokers) for rack, brokers in by_rack.items()}
    names = sorted(by_rack)
    arranged: list[int] = []
    index = 0
    while len(arranged) < len(racks):
        broker = next(iterators[names[index]], None)
        if broker is not None:
            arranged.append(broker)
        index = (index + 1) % len(names)
    return arranged


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int, *,
                    racks: Mapping[int, str | None] | None = None, start_partition: int = 0,
                    fixed_start: int = -1, rng: random.Random | None = None) -> dict[int, list[int]]:
    """Replica lists for partitions start_partition .. start_partition + partitions - 1."""
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    rack_of = {b: r for b, r in (racks or {}).items() if r is not None}
    if brokers and all(b in rack_of for b in brokers):
        arranged = rack_alternated({b: rack_of[b] for b in brokers})
        rack_count = len(set(rack_of[b] for b in brokers))

        def followers(first: int, shift: int) -> list[int]:
            return _rack_aware_followers(arranged, first, shift * rack_count, replication_factor, rack_of,
                                         rack_count)
    else:
        arranged = sorted(brokers)

        def followers(first: int, shift: int) -> list[int]:
            return [arranged[_replica_index(first, shift, j, len(arranged))] for j in range(replication_factor - 1)]
    count = len(arranged)
    start = fixed_start if fixed_start >= 0 else rng.randrange(count)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(count)
    result: dict[int, list[int]] = {}
    partition = max(0, start_partition)
    for _ in range(partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        result[partition] = [arranged[first], *followers(first, shift)]
        partition += 1
    return result


def _rack_aware_followers(arranged: Sequence[int], first: int, shift: int, replication_factor: int,
                          racks: Mapping[int, str], rack_count: int) -> list[int]:
    """Each next replica skips brokers whose rack (or itself) already holds one, until every rack
    (or broker) does."""
    count = len(arranged)
    leader = arranged[first]
    used_racks = {racks[leader]}
    used_brokers = {leader}
    chosen = []
    k = 0
    for _ in range(replication_factor - 1):
        while True:
            broker = arranged[_replica_index(first, shift, k, count)]
            k += 1
            rack = racks[broker]
            if (rack not in used_racks or len(used_racks) == rack_count) and \
                    (broker not in used_brokers or len(used_brokers) == count):
                chosen.append(broker)
                used_racks.add(rack)
                used_brokers.add(broker)
                break
    return chosen
