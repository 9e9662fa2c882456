"""The controller's answers to requests from brokers: AlterPartition, AllocateProducerIds,
ControlledShutdown and leader elections (ElectLeaders), with Kafka 3.7's checks and error codes.

Each public coroutine queues an event for the controller's single event task and waits for its
answer (`call`), so they see and change the controller's state only between other events; the
`_`-prefixed ones run inside that task. A controller that is not active, or resigns while a request
waits, answers NOT_CONTROLLER (STALE_CONTROLLER_EPOCH for ControlledShutdown), as Kafka does.
"""
from __future__ import annotations

import logging
from typing import Any

from ..protocol.errors import ErrorCode
from ..protocol.messages import AllocateProducerIdsResponse, AlterPartitionResponse
from .leader_election import (
    RECOVERED,
    RECOVERING,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    remove_replicas_from_isr,
)
from ..metadata.zk.paths import LeaderIsr

__all__ = ["BrokerRequests", "NotController"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class BrokerRequests:
    """KafkaController's request handling (a mixin: state and helpers are the controller's)."""

    async def alter_partition(self, request, version: int) -> AlterPartitionResponse:
        try:
            return await self.call("alter_partition", (request, version))
        except NotController:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER, topics=[])

    async def _alter_partition(self, request, version: int) -> AlterPartitionResponse:
        if not self.active:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER, topics=[])
        registered = self.live.get(request.broker_id)
        if registered is None or (request.broker_epoch != -1 and request.broker_epoch != registered[1]):
            return AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH, topics=[])
        by_id = {a.topic_id: name for name, a in self.topics.items() if a.topic_id is not None}
        topics_out = []
        accepted: dict[TopicPartition, LeaderIsr] = {}
        results: dict[TopicPartition, Any] = {}
        eligible = self._live_ids()
        for topic in request.topics:
            name = by_id.get(topic.topic_id) if version >= 2 else topic.topic_name
            out = AlterPartitionResponse.TopicData(topic_name=topic.topic_name, topic_id=topic.topic_id,
                                                   partitions=[])
            topics_out.append(out)
            for part in topic.partitions:
                result = AlterPartitionResponse.PartitionData(partition_index=part.partition_index, leader_id=-1,
                                                              leader_epoch=-1, isr=[], partition_epoch=-1)
                out.partitions.append(result)
                if name is None:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_ID if version >= 2 \
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                key = (name, part.partition_index)
                current = self.states.get(key)
                if current is None or name in self.deleting:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                state, zk_version = current
                new_isr = [b.broker_id for b in part.new_isr_with_epochs] if version >= 3 else list(part.new_isr)
                if part.partition_epoch > zk_version or part.leader_epoch > state.leader_epoch:
                    result.error_code = ErrorCode.NOT_CONTROLLER
                    continue
                if part.leader_epoch < state.leader_epoch:
                    result.error_code = ErrorCode.FENCED_LEADER_EPOCH
                    continue
                if sorted(new_isr) == sorted(state.isr) and part.leader_recovery_state == state.leader_recovery_state:
                    _fill(result, state, zk_version)
                    continue
                if part.partition_epoch < zk_version:
                    result.error_code = ErrorCode.INVALID_UPDATE_VERSION
                    continue
                if (part.leader_recovery_state == RECOVERING and len(new_isr) > 1) or \
                        (state.leader_recovery_state == RECOVERED and part.leader_recovery_state == RECOVERING):
                    result.error_code = ErrorCode.INVALID_REQUEST
                    continue
                if any(b not in eligible for b in new_isr):
                    result.error_code = ErrorCode.INELIGIBLE_REPLICA if version >= 2 \
                        else ErrorCode.OPERATION_NOT_ATTEMPTED
                    continue
                accepted[key] = LeaderIsr(state.leader, state.leader_epoch, new_isr, self.epoch,
                                          part.leader_recovery_state)
                results[key] = result
        written = []
        for key, state in accepted.items():
            if await self._write_state(key, state):
                new_state, version_now = self.states[key]
                _fill(results[key], new_state, version_now)
                written.append(key)
                log.info("partition %s-%d: ISR now %s (requested by leader %d)", key[0], key[1], new_state.isr,
                         request.broker_id)
            else:
                results[key].error_code = ErrorCode.INVALID_UPDATE_VERSION
        if written:
            batch = self._batch()
            batch.add_update_metadata(self.live, self._metadata_entries(written))
            self._send(batch)
            await self._maybe_complete_reassignments(written)
        return AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=topics_out)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> AllocateProducerIdsResponse:
        try:
            return await self.call("allocate_producer_ids", (broker_id, broker_epoch))
        except NotController:
            return AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER, producer_id_start=-1,
                                               producer_id_len=0)

    async def _allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> AllocateProducerIdsResponse:
        if not self.active:
            return AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER, producer_id_start=-1)
        registered = self.live.get(broker_id)
        if registered is None:
            return AllocateProducerIdsResponse(error_code=ErrorCode.BROKER_ID_NOT_REGISTERED, producer_id_start=-1)
        if broker_epoch != -1 and broker_epoch != registered[1]:
            return AllocateProducerIdsResponse(error_code=ErrorCode.STALE_BROKER_EPOCH, producer_id_start=-1)
        start, length = await self._zk(self.zk.allocate_producer_id_block, broker_id, self.epoch_zk_version)
        log.info("controller %d: producer ids %d-%d for broker %d", self.node_id, start, start + length - 1,
                 broker_id)
        return AllocateProducerIdsResponse(error_code=0, producer_id_start=start, producer_id_len=length)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TopicPartition]]:
        try:
            return await self.call("controlled_shutdown", (broker_id, broker_epoch))
        except NotController:
            return ErrorCode.STALE_CONTROLLER_EPOCH, []

    async def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[TopicPartition]]:
        if not self.active:
            return ErrorCode.STALE_CONTROLLER_EPOCH, []
        registered = self.live.get(broker_id)
        if registered is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < registered[1]:
            return ErrorCode.STALE_BROKER_EPOCH, []
        self.shutting_down.add(broker_id)
        log.info("controller %d: broker %d is shutting down", self.node_id, broker_id)
        live = self._live_ids()
        changes: dict[TopicPartition, LeaderIsr] = {}
        stopped: list[TopicPartition] = []
        batch = self._batch()
        for key, (state, _) in list(self.states.items()):
            if key[0] in self.deleting or key[0] not in self.topics:
                continue
            info = self._info(*key)
            if broker_id not in info.replicas:
                continue
            if state.leader == broker_id:
                if len(info.replicas) > 1:
                    elected = controlled_shutdown_election(state, info.replicas, live, self.shutting_down,
                                                           self.epoch)
                    if elected is not None:
                        changes[key] = elected
            else:
                if broker_id in state.isr:
                    shrunk = remove_replicas_from_isr(state, {broker_id}, self.epoch)
                    if shrunk is not None:
                        changes[key] = shrunk
                stopped.append(key)
        await self._apply(changes)
        # StopReplica (keep the log) with the epoch the ISR change just wrote, which the broker has
        # already accepted through LeaderAndIsr
        for key in stopped:
            batch.add_stop_replica(broker_id, key[0], key[1], False, self.states[key][0].leader_epoch)
        self._send(batch)
        remaining = [key for key, (state, _) in self.states.items()
                     if state.leader == broker_id and len(self._info(*key).replicas) > 1]
        return ErrorCode.NONE, sorted(remaining)

    async def elect_leaders(self, partitions: list[TopicPartition], unclean: bool) -> dict[TopicPartition, tuple]:
        """ElectLeaders: per partition (error code, message)."""
        try:
            return await self.call("elect_leaders", (partitions, unclean))
        except NotController:
            return {key: (ErrorCode.NOT_CONTROLLER, None) for key in partitions}

    async def _elect_leaders(self, partitions: list[TopicPartition], unclean: bool) -> dict[TopicPartition, tuple]:
        if not self.active:
            return {key: (ErrorCode.NOT_CONTROLLER, None) for key in partitions}
        live = self._live_ids()
        results: dict[TopicPartition, tuple] = {}
        changes: dict[TopicPartition, LeaderIsr] = {}
        for key in partitions:
            current = self.states.get(key)
            if current is None or key[0] in self.deleting:
                results[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this "
                                                                      "topic-partition.")
                continue
            state = current[0]
            info = self._info(*key)
            if unclean:
                if state.leader in live:
                    results[key] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic "
                                                                   "partition.")
                    continue
                elected = offline_election(state, info.replicas, live, True, self.epoch)
                error = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not "
                                                                   "available.")
            else:
                if info.replicas and state.leader == info.replicas[0]:
                    results[key] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic "
                                                                   "partition.")
                    continue
                elected = preferred_election(state, info.replicas, live, self.epoch)
                error = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available.")
            if elected is None:
                results[key] = error
                continue
            changes[key] = elected
        written = await self._apply(changes)
        for key in changes:
            results[key] = (ErrorCode.NONE, None) if key in written else \
                (ErrorCode.NOT_CONTROLLER, "the partition changed during the election")
        return results


class NotController(Exception):
    """The controller resigned while the request waited."""


def _fill(result, state: LeaderIsr, zk_version: int) -> None:
    result.error_code = 0
    result.leader_id = state.leader
    result.leader_epoch = state.leader_epoch
    result.isr = list(state.isr)
    result.leader_recovery_state = state.leader_recovery_state
    result.partition_epoch = zk_version


