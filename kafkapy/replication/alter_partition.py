"""ISR changes proposed by this broker's leaders, sent to the controller as AlterPartition.

As Kafka's AlterPartitionManager at IBP 3.7: every queued partition goes into one request, one
request is in flight at a time, the controller is the one named by the last UpdateMetadata, and
top-level or network failures are retried after a short backoff, forever (the proposal stays
pending meanwhile, so nothing else changes the ISR). v3 carries topic ids and the new ISR with
broker epochs, -1 each, as a ZooKeeper-mode leader sends them; a batch with a partition whose topic
id is unknown goes as v1, by topic name. Each partition's answer goes back to the replica manager,
which applies it (Partition.apply_isr_change_result) and says whether to send it again.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Callable

from ..net.client import BrokerConnectionError
from ..net.peers import PeerConnections
from ..protocol.errors import ErrorCode
from ..protocol.messages import AlterPartitionRequest
from ..security.inter_broker import inter_broker_options

if TYPE_CHECKING:
    from .partition import IsrChange, Partition
    from .interfaces import LocalBroker

__all__ = ["AlterPartitionManager"]

log = logging.getLogger(__name__)

VERSION_WITH_IDS = 3
VERSION_WITH_NAMES = 1
RETRY_BACKOFF_S = 0.05
_ZERO_UUID = uuid.UUID(int=0)

# (partition, proposal, error code, the response's partition data or None) -> send it again?
ResultHandler = Callable[["Partition", "IsrChange", int, object], bool]


class AlterPartitionManager:
    """Batches leaders' ISR proposals into AlterPartition requests to the controller."""

    def __init__(self, local: LocalBroker, on_result: ResultHandler, *, retry_backoff_s: float = RETRY_BACKOFF_S):
        self._local = local
        self._on_result = on_result
        self.retry_backoff_s = retry_backoff_s
        self._unsent: dict[tuple[str, int], tuple[Partition, IsrChange]] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._channel: PeerConnections | None = None  # made on first use: a single node never sends
        self._problem: str | None = None  # the last failure logged, so that each is logged once
        self._closed = False

    @property
    def queued(self) -> int:
        return len(self._unsent)

    def submit(self, partition: Partition, change: IsrChange) -> None:
        """Queue `change` (it replaces any unsent proposal of the same partition)."""
        if self._closed:
            return
        self._unsent[(partition.topic, partition.partition)] = (partition, change)
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="alter-partition")
        self._wake.set()

    async def shutdown(self) -> None:
        self._closed = True
        if self._wake is not None:
            self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self._channel is not None:
            self._channel.close()

    # ------------------------------------------------------------------ sending
    async def _run(self) -> None:
        # `_closed` is checked too: Python 3.11's wait_for may swallow a cancel (see fetcher.py)
        while not self._closed:
            if not self._unsent:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                retry = await self._send_batch()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("AlterPartition round failed; retrying")
                retry = True
            if retry:
                await asyncio.sleep(self.retry_backoff_s)

    def _report(self, problem: str | None) -> None:
        if problem != self._problem:
            if problem is None:
                log.info("AlterPartition requests reach the controller again")
            else:
                log.warning("AlterPartition: %s; retrying every %d ms", problem, int(self.retry_backoff_s * 1000))
            self._problem = problem

    def _controller(self) -> PeerConnections:
        if self._channel is None:
            # Kafka's AlterPartitionManager has a broker-to-controller channel of its own
            local = self._local
            self._channel = PeerConnections(
                "alter-partition", lambda node_id: local.metadata.broker_endpoint(node_id),
                controller_id=lambda: local.metadata.controller_id(),
                client_id=f"broker-{local.node_id}-alter-partition",
                request_timeout_s=local.config.get("request.timeout.ms") / 1000,
                **inter_broker_options(local.config))
        return self._channel

    async def _send_batch(self) -> bool:
        """One request for everything queued; returns True when something must be sent again."""
        metadata = self._local.metadata
        controller_id = metadata.controller_id()
        endpoint = metadata.broker_endpoint(controller_id) if controller_id >= 0 else None
        if endpoint is None:
            self._report("no controller known yet" if controller_id < 0
                         else f"controller {controller_id} has no endpoint")
            return True
        # Proposals that a LeaderAndIsr or an earlier answer has replaced are not sent.
        batch = {key: item for key, item in self._unsent.items() if item[0].pending_isr is item[1]}
        self._unsent.clear()
        if not batch:
            return False
        request, version = self._request(batch)
        try:
            response = await self._controller().send_to_controller(request, version)
        except BrokerConnectionError as exc:
            self._report(f"controller {controller_id} unreachable: {exc}")
            self._requeue(batch)
            return True
        if self._closed:
            return False
        if response.error_code != ErrorCode.NONE:
            self._report(f"controller {controller_id} answered {_error_name(response.error_code)}")
            self._requeue(batch)
            return True
        self._report(None)
        names = {part.topic_id: part.topic for part, _ in batch.values() if part.topic_id is not None}
        answered = set()
        retry = False
        for topic in response.topics:
            name = topic.topic_name if version < 2 else names.get(topic.topic_id)
            for data in topic.partitions:
                key = (name, data.partition_index)
                item = batch.get(key)
                if item is None or key in answered:
                    continue
                answered.add(key)
                retry |= self._deliver(key, item, data.error_code, data)
        for key, item in batch.items():
            if key not in answered:  # the controller left it out: ask again
                retry |= self._deliver(key, item, ErrorCode.UNKNOWN_SERVER_ERROR, None)
        return retry

    def _deliver(self, key, item, error_code: int, data) -> bool:
        partition, change = item
        try:
            again = self._on_result(partition, change, error_code, data)
        except Exception:
            log.exception("applying the AlterPartition answer for %s-%d failed", *key)
            again = False
        if again:
            self._unsent.setdefault(key, item)
        return again

    def _requeue(self, batch) -> None:
        for key, item in batch.items():
            self._unsent.setdefault(key, item)  # a newer proposal queued meanwhile wins

    def _request(self, batch) -> tuple[AlterPartitionRequest, int]:
        with_ids = all(part.topic_id is not None and part.topic_id != _ZERO_UUID for part, _ in batch.values())
        version = VERSION_WITH_IDS if with_ids else VERSION_WITH_NAMES
        topics: dict[object, AlterPartitionRequest.TopicData] = {}
        for part, change in batch.values():
            key = part.topic_id if with_ids else part.topic
            topic = topics.get(key)
            if topic is None:
                topic = topics[key] = AlterPartitionRequest.TopicData(
                    topic_name=part.topic, topic_id=part.topic_id if with_ids else _ZERO_UUID, partitions=[])
            topic.partitions.append(AlterPartitionRequest.PartitionData(
                partition_index=part.partition, leader_epoch=change.leader_epoch, new_isr=list(change.new_isr),
                new_isr_with_epochs=[AlterPartitionRequest.BrokerState(broker_id=r, broker_epoch=-1)
                                     for r in change.new_isr],
                # RECOVERING is treated as RECOVERED by a leader, so it always reports RECOVERED.
                leader_recovery_state=0, partition_epoch=change.partition_epoch))
        request = AlterPartitionRequest(broker_id=self._local.node_id, broker_epoch=self._local.broker_epoch,
                                        topics=list(topics.values()))
        return request, version


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
