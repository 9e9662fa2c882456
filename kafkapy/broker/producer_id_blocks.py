"""Producer ids in cluster mode: blocks of 1000 handed out by the controller (AllocateProducerIds).

As Kafka's RPCProducerIdManager: the broker holds one block, fetches the next one in the background
once 90% of the current block is used, and while it has no id to give answers InitProducerId with
COORDINATOR_LOAD_IN_PROGRESS (retriable), so no two brokers ever hand out the same id. The
controller allocates blocks with compare-and-set on `/latest_producer_id_block`.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable

from ..net.client import BrokerConnectionError
from ..net.peers import PeerConnections
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages import AllocateProducerIdsRequest
from ..security.inter_broker import inter_broker_options

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore
    from .config import BrokerConfig

__all__ = ["ProducerIdBlocks"]

log = logging.getLogger(__name__)

_PREFETCH_AT = 0.9
_RETRY_BACKOFF_S = 0.05


class ProducerIdBlocks:
    """`allocate()` like ProducerIdAllocator's, fed by AllocateProducerIds requests to the controller."""

    def __init__(self, config: BrokerConfig, node_id: int, metadata: MetadataStore, controller: Any,
                 broker_epoch: Callable[[], int]):
        """`controller`: this broker's controller object (KafkaController), which answers when it
        is the active one; `broker_epoch()`: the epoch of the broker's registration."""
        self._node_id = node_id
        self._metadata = metadata
        self._local_controller = controller
        self._broker_epoch = broker_epoch
        self._next = 0
        self._end = 0  # exclusive
        self._block_size = 0
        self._pending: tuple[int, int] | None = None
        self._fetching: asyncio.Task | None = None
        # Kafka's RPCProducerIdManager asks through the broker-to-controller channel; a block is
        # needed every thousand ids, so the connection is closed after each block is fetched
        self._controller = PeerConnections(
            "producer-ids", lambda node_id: metadata.broker_endpoint(node_id),
            controller_id=lambda: metadata.controller_id(), client_id=f"kafkapy-broker-{node_id}",
            **inter_broker_options(config))

    def allocate(self) -> int:
        if self._next >= self._end and self._pending is not None:
            self._next, self._end = self._pending
            self._block_size = self._end - self._next
            self._pending = None
        if self._next >= self._end:
            self._fetch()
            raise KafkaError("Producer ID block is not yet available; retry", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        producer_id = self._next
        self._next += 1
        if self._pending is None and self._block_size and \
                self._end - self._next < self._block_size * (1 - _PREFETCH_AT):
            self._fetch()
        return producer_id

    def prefetch(self) -> None:
        """Get the first block as soon as a controller is known, so the first InitProducerId is served."""
        if self._next >= self._end and self._pending is None:
            self._fetch()

    def _fetch(self) -> None:
        if self._fetching is not None and not self._fetching.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._fetching = loop.create_task(self._fetch_block())

    async def _fetch_block(self) -> None:
        try:
            await self._fetch_block_from_controller()
        finally:
            self._controller.close()

    async def _fetch_block_from_controller(self) -> None:
        node_id = self._node_id
        for _ in range(200):  # about 10 s of retries, then the next allocate() starts again
            controller_id = self._metadata.controller_id()
            try:
                # blocks serve cluster members only (ClusterMember.producer_ids), each with its controller
                if controller_id == node_id:
                    response = await self._local_controller.allocate_producer_ids(node_id, self._broker_epoch())
                elif controller_id >= 0:
                    response = await self._controller.send_to_controller(AllocateProducerIdsRequest(
                        broker_id=node_id, broker_epoch=self._broker_epoch()), 0)
                else:
                    response = None
            except BrokerConnectionError as exc:
                log.debug("AllocateProducerIds to controller %d failed: %s", controller_id, exc)
                response = None
            if response is not None and response.error_code == 0 and response.producer_id_len > 0:
                block = (response.producer_id_start, response.producer_id_start + response.producer_id_len)
                if self._next >= self._end:
                    self._next, self._end = block
                    self._block_size = block[1] - block[0]
                else:
                    self._pending = block
                log.info("broker %d got producer ids %d-%d from the controller", node_id, block[0],
                         block[1] - 1)
                return
            await asyncio.sleep(_RETRY_BACKOFF_S)
        log.warning("broker %d could not get a producer id block from the controller", node_id)
