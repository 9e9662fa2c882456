"""Kafka's rules for new topics and partitions: legal names, counts and replica assignments.

Shared by every MetadataStore backend so they reject the same requests with the same codes and
messages as Kafka's controller (ReplicationControlManager, StripedReplicaPlacer, Topic.validate).
"""
from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from .errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)

__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC", "SHARE_GROUP_STATE_TOPIC", "TRANSACTION_STATE_TOPIC", "MAX_TOPIC_NAME_LENGTH", "check_new_topic_name", "is_internal_topic",
           "place_replicas", "plan_assignments", "validate_manual_assignment", "validate_topic_name"]

MAX_TOPIC_NAME_LENGTH = 249
OFFSETS_TOPIC = "__consumer_offsets"  # the group coordinator's (groupcoord/offsets_topic.py)
TRANSACTION_STATE_TOPIC = "__transaction_state"  # the transaction coordinator's (txncoord/)
SHARE_GROUP_STATE_TOPIC = "__share_group_state"  # Kafka 4's share coordinator's
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
_LEGAL = r"[a-zA-Z0-9._-]+"  # compiled by re (and cached) on first use, not at start-up


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: raises InvalidTopicError with Kafka's message."""
    reason = None
    if not name:
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif not re.fullmatch(_LEGAL, name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    if reason is not None:
        raise InvalidTopicError(f"Topic name is invalid: {reason}")


def _unify(name: str) -> str:
    return name.replace(".", "_")


def check_new_topic_name(name: str, existing: Iterable[str]) -> None:
    """Name checks of CreateTopics in Kafka's order of precedence.

    TOPIC_ALREADY_EXISTS for an existing name, else INVALID_TOPIC_EXCEPTION for an illegal name or
    one that collides with an existing topic when '.' and '_' are treated alike (metric names would).
    """
    existing = existing if isinstance(existing, Collection) else list(existing)
    if name in existing:
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    validate_topic_name(name)
    if "." in name or "_" in name:
        unified = _unify(name)
        for other in existing:
            if _unify(other) == unified:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")


def place_replicas(live_brokers: Sequence[int], start_partition: int, num_partitions: int,
                   replication_factor: int) -> list[list[int]]:
    """Stripe replicas over the live brokers (leaders spread round-robin), like Kafka's placer."""
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): Invalid replication factor "
            f"{replication_factor}: the replication factor must be positive.")
    brokers = sorted(live_brokers)
    if not brokers:
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): All brokers are currently fenced.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): The target replication factor of "
            f"{replication_factor} cannot be reached because only {len(brokers)} broker(s) are registered.")
    count = len(brokers)
    return [[brokers[(p + r) % count] for r in range(replication_factor)]
            for p in range(start_partition, start_partition + num_partitions)]


def validate_manual_assignment(replicas: Sequence[int], registered: Collection[int],
                               replication_factor: int | None) -> None:
    """One partition's manual replica list: non-empty, registered brokers, no duplicates, same size as
    the other partitions (INVALID_REPLICA_ASSIGNMENT)."""
    if not replicas:
        raise InvalidReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
    previous = None
    for broker in sorted(replicas):
        if broker not in registered:
            raise InvalidReplicaAssignmentError(f"The manual partition assignment includes broker {broker}, but "
                                                "no such broker is registered.")
        if broker == previous:
            raise InvalidReplicaAssignmentError(f"The manual partition assignment includes the broker {previous} "
                                                "more than once.")
        previous = broker
    if replication_factor is not None and len(replicas) != replication_factor:
        raise InvalidReplicaAssignmentError(
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
            f"not consistent with previous partitions, which have {replication_factor} replica(s).")


def plan_assignments(num_partitions: int, replication_factor: int,
                     assignments: Mapping[int, Sequence[int]] | None, live_brokers: Sequence[int],
                     default_partitions: int, default_replication_factor: int) -> list[list[int]]:
    """Replica lists, by partition, for a new topic; raises Kafka's CreateTopics errors."""
    if assignments:
        if replication_factor != -1:
            raise InvalidRequestError("A manual partition assignment was specified, but replication factor was not "
                                      "set to -1.")
        if num_partitions != -1:
            raise InvalidRequestError("A manual partition assignment was specified, but numPartitions was not set "
                                      "to -1.")
        size = None
        for partition in sorted(assignments):
            validate_manual_assignment(assignments[partition], live_brokers, size)
            size = len(assignments[partition])
        if sorted(assignments) != list(range(len(assignments))):
            raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")
        return [list(assignments[p]) for p in range(len(assignments))]
    if replication_factor < -1 or replication_factor == 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0, or -1 to use the default "
                                            "value.")
    if num_partitions < -1 or num_partitions == 0:
        raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
    partitions = default_partitions if num_partitions == -1 else num_partitions
    factor = default_replication_factor if replication_factor == -1 else replication_factor
    return place_replicas(live_brokers, 0, partitions, factor)


def plan_new_partitions(topic: str, current: int, new_total: int, replication_factor: int,
                        assignments: Sequence[Sequence[int]] | None, live_brokers: Sequence[int]) -> list[list[int]]:
    """Replica lists for the partitions CreatePartitions adds; raises Kafka's errors."""
    if new_total == current:
        raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
    if new_total < current:
        raise InvalidPartitionsError(f"The topic {topic} currently has {current} partition(s); {new_total} would "
                                     "not be an increase.")
    additional = new_total - current
    if assignments is not None:
        if len(assignments) != additional:
            raise InvalidReplicaAssignmentError(f"Attempted to add {additional} additional partition(s), but only "
                                                f"{len(assignments)} assignment(s) were specified.")
        for replicas in assignments:
            validate_manual_assignment(replicas, live_brokers, replication_factor)
        return [list(r) for r in assignments]
    return place_replicas(live_brokers, current, additional, replication_factor)
