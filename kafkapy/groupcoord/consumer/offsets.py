"""Committed-offset rules for KIP-848 consumer groups, as Kafka 4.0's OffsetMetadataManager applies them.

The classic group keeps its own rules (coordinator.py); these are the ones that differ for a
ConsumerGroup: who may commit (member id and member epoch instead of a generation), who may
fetch, which offsets OffsetDelete may remove, when the group may be deleted, which offsets
expire. Each returns Kafka's error code (None: allowed); the coordinator does the writing.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from ...protocol.errors import ErrorCode
from .group import ConsumerGroup

__all__ = [
    "MIN_CONSUMER_OFFSET_COMMIT_VERSION",
    "commit_error",
    "delete_group_error",
    "expired_offsets",
    "fetch_error",
    "missing_group_commit_error",
    "split_offset_delete",
    "txn_commit_error",
]

TopicPartition = tuple[str, int]

# Members speaking the consumer protocol commit with OffsetCommit v9+ (member id and epoch).
MIN_CONSUMER_OFFSET_COMMIT_VERSION = 9


def missing_group_commit_error(member_epoch: int, api_version: int | None) -> int | None:
    """An OffsetCommit for a group that does not exist: epoch < 0 makes a simple (classic) group
    (None); otherwise GROUP_ID_NOT_FOUND from v9 and ILLEGAL_GENERATION before, as Kafka 4.0."""
    if member_epoch < 0:
        return None
    if api_version is not None and api_version >= MIN_CONSUMER_OFFSET_COMMIT_VERSION:
        return ErrorCode.GROUP_ID_NOT_FOUND
    return ErrorCode.ILLEGAL_GENERATION


def commit_error(group: ConsumerGroup, member_id: str, instance_id: str | None, member_epoch: int,
                 api_version: int | None) -> int | None:
    """An OffsetCommit to a consumer group (Kafka's ConsumerGroup.validateOffsetCommit).

    Epoch < 0 (admin clients, consumers without group management) commits only while the group
    has no members (else UNKNOWN_MEMBER_ID, the member "" being unknown); a consumer-protocol
    member must use v9+ (UNSUPPORTED_VERSION); any other epoch than the member's is
    STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic-protocol member). `api_version` None
    (a caller inside the broker) skips the version check."""
    return group.validate_offset_commit(member_id, instance_id, member_epoch, is_transactional=False,
                                        api_version=MIN_CONSUMER_OFFSET_COMMIT_VERSION
                                        if api_version is None else api_version)


def txn_commit_error(group: ConsumerGroup, member_id: str, instance_id: str | None,
                     generation_id: int) -> int | None:
    """A TxnOffsetCommit to a consumer group: the same member checks with any version, and a
    wrong epoch answers ILLEGAL_GENERATION (the error transactional producers know), as Kafka."""
    error = group.validate_offset_commit(member_id, instance_id, generation_id, is_transactional=True,
                                         api_version=MIN_CONSUMER_OFFSET_COMMIT_VERSION)
    if error == ErrorCode.STALE_MEMBER_EPOCH:
        return ErrorCode.ILLEGAL_GENERATION
    return error


def fetch_error(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int | None:
    """An OffsetFetch of a consumer group (Kafka's validateOffsetFetch): no member id and epoch < 0
    is an admin fetch (allowed); an unknown member UNKNOWN_MEMBER_ID; another epoch than the
    member's STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic-protocol member)."""
    return group.validate_offset_fetch(member_id, member_epoch)


def split_offset_delete(group: ConsumerGroup, partitions: Iterable[TopicPartition]
                        ) -> tuple[list[TopicPartition], dict[TopicPartition, int]]:
    """OffsetDelete on a consumer group, in any state: (partitions whose offsets go, errors).
    Topics the group subscribes to (by name or through a resolved regex) answer
    GROUP_SUBSCRIBED_TO_TOPIC and keep their offsets."""
    eligible: list[TopicPartition] = []
    errors: dict[TopicPartition, int] = {}
    for tp in partitions:
        if group.is_subscribed_to(tp[0]):
            errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        else:
            eligible.append(tp)
    return eligible, errors


def delete_group_error(group: ConsumerGroup) -> int | None:
    """DeleteGroups: a consumer group goes only when Empty (Kafka's validateDeleteGroup)."""
    if group.state.value != "Empty":
        return ErrorCode.NON_EMPTY_GROUP
    return None


def expired_offsets(group: ConsumerGroup, now_ms: int, retention_ms: int,
                    has_pending: Callable[[str, TopicPartition], bool] | None = None) -> list[TopicPartition]:
    """Offsets of a consumer group past retention (Kafka's cleanupExpiredOffsets): by commit time
    (or an explicit expire timestamp), never for a subscribed topic, and not while a transaction
    holds an undecided commit for the partition."""
    expired = group.expired_offsets(now_ms, retention_ms)
    if has_pending is None:
        return expired
    return [tp for tp in expired if not has_pending(group.group_id, tp)]
