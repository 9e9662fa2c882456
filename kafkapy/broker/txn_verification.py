"""KIP-890 verification with a transaction coordinator on another broker (cluster mode).

Before the first transactional batch of a transaction is appended to a partition, its leader asks
the transactional id's coordinator whether the partition was added to the transaction, with
AddPartitionsToTxn v4 and verify_only (Kafka's AddPartitionsToTxnManager), so that a late batch
cannot open a transaction nobody will end. Where the coordinator is this broker, the check is a
local call instead (handlers/transactions.py).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..net.client import BrokerConnectionError
from ..net.peers import PeerConnections
from ..protocol.errors import ErrorCode
from ..protocol.messages import AddPartitionsToTxnRequest
from ..security.inter_broker import inter_broker_options

if TYPE_CHECKING:
    from .broker import Broker

__all__ = ["TxnVerifier"]

log = logging.getLogger(__name__)

VERIFY_VERSION = 4


class TxnVerifier:
    """AddPartitionsToTxn verify-only requests to coordinators, one connection per broker."""

    def __init__(self, broker: Broker):
        self.broker = broker
        # Kafka's AddPartitionsToTxnManager has a network client of its own
        self._peers = PeerConnections(
            "txn-verification", lambda node_id: broker.metadata.broker_endpoint(node_id),
            client_id=f"kafkapy-txn-verification-{broker.node_id}",
            request_timeout_s=broker.config.get("request.timeout.ms") / 1000,
            **inter_broker_options(broker.config))

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                     partition: int) -> int:
        """The coordinator's answer for one partition; COORDINATOR_NOT_AVAILABLE when it cannot be asked."""
        error, node_id = self.broker.transaction_coordinator.find_coordinator(transactional_id)
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
