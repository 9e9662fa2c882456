"""A coordinator's write waited for until it may be answered, and a failed one mapped as Kafka's
coordinators map it: the group coordinator's __consumer_offsets writes (offset commits, group
metadata), the transaction coordinator's __transaction_state records with the markers an EndTxn
wrote, the share coordinator's __share_group_state writes.

Kafka's coordinators append with acks=-1 (offsets.commit.required.acks, the transaction state's
acks=all): the wait itself is the replica manager's (`ReplicaManager.wait_appended`,
`wait_synced`); what a coordinator answers when it fails is here, for the handlers, the share
coordination and the console alike. `services` is anything with the replica manager and the
broker config (the handler bundle, ShareCoordination).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable

from ..groupcoord import OFFSETS_TOPIC
from ..protocol.errors import ErrorCode
from ..txncoord import TRANSACTION_STATE_TOPIC

__all__ = ["coordinator_error", "coordinator_write_durable", "durable_state", "replicated"]

log = logging.getLogger(__name__)


async def coordinator_write_durable(services, partition: int) -> int:
    """Wait until what the group coordinator just appended to __consumer_offsets-`partition` (an
    offset commit, a transactional offset commit, group metadata) may be acknowledged: on disk in
    fsync-on-ack mode (as produce), and in cluster mode on the whole ISR (Kafka appends with
    offsets.commit.required.acks=-1). Returns the error Kafka's coordinator answers when replication
    fails, else NONE."""
    return coordinator_error(await services.replicas.wait_appended(
        OFFSETS_TOPIC, partition, services.config.get("offsets.commit.timeout.ms") / 1000))


async def replicated(services, topic: str, partition: int, timeout_ms: int) -> int:
    """Wait until the partition's high watermark covers its log end (a coordinator's write with
    acks=all; at once for an ISR of one), without fsync-on-ack's wait."""
    return coordinator_error(await services.replicas.wait_appended(topic, partition, timeout_ms / 1000, fsync=False))


def coordinator_error(error: int) -> int:
    """A failed coordinator append as Kafka's coordinators map it: NOT_COORDINATOR without a log
    here, for lost leadership or a storage error (a failed fsync: the log dir is full or offline
    now), COORDINATOR_NOT_AVAILABLE for missing replicas or a timeout."""
    if error == ErrorCode.NONE:
        return ErrorCode.NONE
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                 ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


async def durable_state(services, transactional_id: str, markers: Iterable[tuple[str, int]] = ()) -> int:
    """Answer only once the transaction's state record is on disk in fsync-on-ack mode (with the
    markers just written to `markers`: a single broker writes them at once), and in cluster mode
    on the ISR of its __transaction_state partition (the markers follow, see
    TransactionCoordination.after_state_replicated). The error to answer, as Kafka's
    TransactionStateManager.appendTransactionToLog maps a failed append: NOT_COORDINATOR for lost
    leadership or a storage error, COORDINATOR_NOT_AVAILABLE for missing replicas or a timeout.

    The client retries either (at the new coordinator after FindCoordinator for NOT_COORDINATOR).
    The coordinator's state in memory has already moved on, so a retry at the same coordinator is
    a no-op or CONCURRENT_TRANSACTIONS whose own wait covers the earlier record; a new coordinator
    has the record if it reached the ISR, else the old state, and either way the retry is right."""
    replicas = services.replicas
    state_partition = (TRANSACTION_STATE_TOPIC, services.transaction_coordinator.partition_for(transactional_id))
    try:
        await replicas.wait_synced((state_partition, *markers))
    except Exception as exc:  # noqa: BLE001 - an fsync failed: its log dir is full or offline now
        log.warning("transaction %s: its state could not be made durable: %s", transactional_id, exc)
        return ErrorCode.NOT_COORDINATOR  # Kafka maps KAFKA_STORAGE_ERROR to it
    if replicas.logs.get_log(*state_partition) is None:
        return ErrorCode.NONE
    error = await replicated(services, *state_partition, services.config.get("request.timeout.ms"))
    if error != ErrorCode.NONE:
        # worth seeing: the client is told to retry a state change that may be lost
        log.info("transaction %s: its state change did not reach the ISR of %s-%d; answering %s",
                 transactional_id, *state_partition, ErrorCode(error).name)
    return error
