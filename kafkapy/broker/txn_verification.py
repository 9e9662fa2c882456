"""KIP-890 verification of transactional produce (part 1): before the first transactional batch
of a transaction is appended to a partition, the leader checks with the transactional id's
coordinator that the partition was added to the transaction, so that a late batch cannot open a
transaction nobody will end (`verify_transactional_produce`, for the produce handler). Where the
coordinator is this broker, the check is a local call; on another broker (cluster mode) it is
AddPartitionsToTxn v4 with verify_only (`TxnVerifier`, Kafka's AddPartitionsToTxnManager).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore
    from ..txncoord import TransactionCoordinator
    from .broker_config import BrokerConfig

__all__ = ["TxnVerifier", "coordinated_here", "verification_error", "verify_transactional_produce",
           "verify_with_remote_coordinator"]

log = logging.getLogger(__name__)

VERIFY_VERSION = 4


class TxnVerifier:
    """AddPartitionsToTxn verify-only requests to coordinators, one connection per broker."""

    def __init__(self, node_id: int, config: BrokerConfig, metadata: MetadataStore,
                 coordinator: TransactionCoordinator):
        """Built by TransactionCoordination (cluster mode, on first use) with the broker's node id,
        config and metadata (the coordinators' endpoints) and the transaction coordinator (which
        broker coordinates a transactional id)."""
        # the inter-broker client is loaded with the first verifier, not with the produce handler
        from ..net.peers import PeerConnections
        from ..security.inter_broker import inter_broker_options

        self._coordinator = coordinator
        # Kafka's AddPartitionsToTxnManager has a network client of its own
        self._peers = PeerConnections(
            "txn-verification", metadata.broker_endpoint,
            client_id=f"kafkapy-txn-verification-{node_id}",
            request_timeout_s=config.get("request.timeout.ms") / 1000,
            **inter_broker_options(config))

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                     partition: int) -> int:
        """The coordinator's answer for one partition; COORDINATOR_NOT_AVAILABLE when it cannot be asked."""
        from ..net.client import BrokerConnectionError
        from ..protocol.messages import AddPartitionsToTxnRequest

        error, node_id = self._coordinator.find_coordinator(transactional_id)
        if error:
            return error
        request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                name=topic, partitions=[partition])])])
        try:
            response = await self._peers.send(node_id, request, VERIFY_VERSION)
        except BrokerConnectionError as exc:
            log.info("cannot verify %s-%d with the coordinator of %s (broker %d): %s", topic, partition,
                     transactional_id, node_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if response.error_code:
            return response.error_code
        for result in response.results_by_transaction:
            for topic_result in result.topic_results:
                for part in topic_result.results_by_partition:
                    if topic_result.name == topic and part.partition_index == partition:
                        return part.partition_error_code
        return ErrorCode.UNKNOWN_SERVER_ERROR

    def close(self) -> None:
        self._peers.close()


def verification_error(error: int, supports_abortable: bool) -> int:
    """A failed KIP-890 verification as a client sees it (Kafka's AddPartitionsToTxnManager)."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and not supports_abortable:
        return ErrorCode.INVALID_TXN_STATE
    return error


# -- produce-side verification (KIP-890 part 1) -----------------------------------------------
# Verification errors a producer may not retry by itself become NOT_ENOUGH_REPLICAS (Kafka's
# ReplicaManager: retriable, and no metadata refresh).
_RETRIABLE_VERIFICATION = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                           ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


def coordinated_here(broker, transactional_id: str) -> bool:
    """Whether this broker's transaction coordinator owns `transactional_id` (always on one node)."""
    error, node_id = broker.transaction_coordinator.find_coordinator(transactional_id)
    return error == ErrorCode.NONE and node_id == broker.node_id


def verify_transactional_produce(broker, transactional_id: str | None, topic: str, partition: int, part,
                                 headers, version: int) -> tuple[str, int, int] | None:
    """Before the first transactional batch of a transaction reaches a partition, check with the
    coordinator that the partition was added to the transaction (so that a late batch cannot
    open a transaction nobody will ever end). Raises KafkaError with the client's error code.

    Returns (transactional id, producer id, epoch) when the coordinator is another broker (cluster
    mode): the caller then awaits `verify_with_remote_coordinator`."""
    txn_headers = [h for h in headers if h.is_transactional and h.producer_id >= 0]
    if not txn_headers:
        return None
    if transactional_id is None:
        # Kafka authorizes transactional records by their request's transactional id
        raise KafkaError("transactional records in a produce request without a transactional id",
                         ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coordinator = broker.transaction_coordinator
    if not coordinator.config.transaction_partition_verification_enable:
        return None
    first = txn_headers[0]
    if any(h.producer_id != first.producer_id for h in txn_headers):
        raise KafkaError("transactional records contained more than one producer id",
                         ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    entry = part.log.producer_state.last_entry(first.producer_id)  # part: the replication.Partition led here
    if entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == first.producer_epoch:
        return None  # this transaction already has data here: it was verified then
    if not coordinated_here(broker, transactional_id):
        return transactional_id, first.producer_id, first.producer_epoch
    verified = coordinator.handle_verify_partitions(transactional_id, first.producer_id, first.producer_epoch,
                                                    [(topic, partition)])
    _raise_unverified(verified[(topic, partition)], transactional_id, topic, partition, version)
    return None


async def verify_with_remote_coordinator(broker, transactional_id: str, producer_id: int, producer_epoch: int,
                                         topic: str, partition: int, version: int) -> None:
    """verify_transactional_produce's check, asked of the coordinator on another broker."""
    error = await broker.transaction_coordination.verifier().verify(transactional_id, producer_id, producer_epoch, topic, partition)
    _raise_unverified(error, transactional_id, topic, partition, version)


def _raise_unverified(error: int, transactional_id: str, topic: str, partition: int, version: int) -> None:
    if error == ErrorCode.NONE:
        return
    if error in _RETRIABLE_VERIFICATION:
        raise KafkaError(f"unable to verify that {topic}-{partition} was added to the transaction: "
                         f"{ErrorCode(error).name}", ErrorCode.NOT_ENOUGH_REPLICAS)
    error = verification_error(error, supports_abortable=version >= 11)
    raise KafkaError(f"{topic}-{partition} was not added to the transaction of {transactional_id}", error)
