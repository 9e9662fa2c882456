"""The share group assignor (KIP-932's "simple" assignor, as Kafka 4.x's SimpleAssignor behaves).

A share-partition can serve several members at once, so the assignment is about spreading both
ways: with fewer members than partitions each partition goes to one member and each member gets
an equal share (sizes differ by at most one); with more members than partitions each partition
goes to ceil(members / partitions) members. Balance comes first, then stickiness: a member keeps
what it had as far as balance allows.

When every member subscribes to the same topics the partitions of all of them are balanced
together; otherwise each topic is balanced on its own among the members subscribed to it, and the
results are combined (Kafka's homogeneous and heterogeneous builders).

Pure functions over plain data (member ids, topic ids, partition counts), so that the rules can be
tested without a broker: tests/groupcoord/share/test_assignor.py.
"""
from __future__ import annotations

import math
from typing import Hashable, Mapping, Sequence

__all__ = ["assign"]

TopicPartition = tuple[Hashable, int]
Assignment = dict[Hashable, set[int]]


def assign(members: Sequence[str], subscriptions: Mapping[str, set], partitions: Mapping[Hashable, int],
           current: Mapping[str, Mapping[Hashable, Sequence[int]]]) -> dict[str, Assignment]:
    """The target assignment: member -> {topic id: partitions}.

    `members` in a stable order (the first ones get the larger shares when sizes differ),
    `subscriptions` member -> subscribed topic ids, `partitions` topic id -> partition count (topics
    that do not exist are absent), `current` member -> what it has now.
    """
    result: dict[str, Assignment] = {m: {} for m in members}
    if not members:
        return result
    topics_of = {m: {t for t in subscriptions.get(m, ()) if partitions.get(t, 0) > 0} for m in members}
    first = topics_of[members[0]]
    if all(topics_of[m] == first for m in members):
        groups = [(list(members), sorted(first, key=str))]
    else:
        every = sorted({t for m in members for t in topics_of[m]}, key=str)
        groups = [([m for m in members if t in topics_of[m]], [t]) for t in every]
    for group_members, topics in groups:
        targets = [(t, p) for t in topics for p in range(partitions[t])]
        owned = {m: {(t, p) for t in topics for p in current.get(m, {}).get(t, ()) if 0 <= p < partitions[t]}
                 for m in group_members}
        for member, tps in _balance(group_members, targets, owned).items():
            for topic, partition in tps:
                result[member].setdefault(topic, set()).add(partition)
    return result


def _balance(members: list[str], targets: list[TopicPartition],
             owned: dict[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    """Spread `targets` over `members`, keeping what each `owned` as far as balance allows."""
    n, t = len(members), len(targets)
    if n == 0 or t == 0:
        return {m: set() for m in members}
    sharing = -(-n // t)  # members per partition: ceil(n / t)
    # members' shares of the sharing * t slots, as even as integers allow (the first get the extra one)
    per_member = sharing * t / n
    desired = {m: math.ceil(per_member * (i + 1)) - math.ceil(per_member * i) for i, m in enumerate(members)}
    held = {m: set(owned.get(m, ())) for m in members}
    holders: dict[TopicPartition, set[str]] = {tp: set() for tp in targets}
    for m in members:
        for tp in held[m]:
            holders[tp].add(m)
    # 1. a member over its share gives back partitions (its highest ones first)
    for m in members:
        for tp in sorted(held[m], reverse=True)[:max(0, len(held[m]) - desired[m])]:
            held[m].discard(tp)
            holders[tp].discard(m)
    # 2. a partition shared by more members than `sharing` loses the extra ones
    for tp in targets:
        for m in sorted(holders[tp])[sharing:]:
            holders[tp].discard(m)
            held[m].discard(tp)
    # 3. partitions short of members go to members short of partitions, taking turns across partitions;
    # when a whole turn assigns nothing (every short member already has the partition), balance is as
    # good as it gets
    ring = [m for m in members if len(held[m]) < desired[m]]
    pos, assigned_in_turn = 0, False
    for tp in targets:
        need = sharing - len(holders[tp])
        while need > 0 and ring:
            if pos >= len(ring):
                if not assigned_in_turn:
                    break
                pos, assigned_in_turn = 0, False
            m = ring[pos]
            if m in holders[tp]:
                pos += 1
                continue
            held[m].add(tp)
            holders[tp].add(m)
            need -= 1
            assigned_in_turn = True
            if len(held[m]) >= desired[m]:
                ring.pop(pos)
            else:
                pos += 1
        if not ring:
            break
    return held
