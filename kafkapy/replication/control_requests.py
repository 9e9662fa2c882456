"""The controller's requests to a ZooKeeper-mode cluster member: LeaderAndIsr and StopReplica
(Kafka's ReplicaManager.becomeLeaderOrFollower and stopReplicas), applied to the replica manager
through `ReplicaHost` (interfaces.py). Loaded with the first control request: a cluster of one
never sees one (it leads its partitions through `ReplicaManager.lead_alone`).

- LeaderAndIsr: per partition, accepted only with a leader epoch newer than ours (equal or older:
  STALE_CONTROLLER_EPOCH), a topic id matching the log's `partition.metadata`
  (INCONSISTENT_TOPIC_ID), this broker among the replicas (UNKNOWN_TOPIC_OR_PARTITION) and an
  online log (KAFKA_STORAGE_ERROR). A leader stops fetching and takes the ISR; a follower (whose
  leader must be alive in the metadata) starts fetching from its log end, or from its high
  watermark after truncating to it when it keeps no leader epochs.
- StopReplica: leader epoch -2 (deletion), -1 (not sent) or at least ours is accepted, else
  FENCED_LEADER_EPOCH; fetching stops, and delete=true also drops the partition and its log.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..log.errors import KafkaStorageError
from ..metadata.ids import uuid_to_kafka_str
from ..protocol.errors import ErrorCode, KafkaError
from .partition_metadata import read_partition_topic_id, write_partition_topic_id

if TYPE_CHECKING:
    import uuid

    from ..protocol.messages import LeaderAndIsrResponse, StopReplicaResponse
    from .interfaces import ReplicaHost
    from .partition import Partition

__all__ = ["apply_leader_and_isr", "apply_stop_replica"]

log = logging.getLogger(__name__)

DELETION_EPOCH = -2  # StopReplica's leader epoch for a topic being deleted
NO_EPOCH = -1        # StopReplica before v3 carries no epoch


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _leader_and_isr_states(request, version: int):
    """(topic, topic id or None, partition state) of every partition in a LeaderAndIsr request."""
    if version < 2:
        for state in request.ungrouped_partition_states:
            yield state.topic_name, None, state
        return
    for topic in request.topic_states:
        topic_id = topic.topic_id if version >= 5 and topic.topic_id.int != 0 else None
        for state in topic.partition_states:
            yield topic.topic_name, topic_id, state


def _stop_replica_states(request, version: int):
    """(topic, partition, leader epoch, delete) of every partition in a StopReplica request."""
    if version == 0:
        for p in request.ungrouped_partitions:
            yield p.topic_name, p.partition_index, NO_EPOCH, request.delete_partitions
    elif version <= 2:
        for topic in request.topics:
            for index in topic.partition_indexes:
                yield topic.name, index, NO_EPOCH, request.delete_partitions
    else:
        for topic in request.topic_states:
            for p in topic.partition_states:
                yield topic.topic_name, p.partition_index, p.leader_epoch, p.delete_partition


async def apply_leader_and_isr(rm: ReplicaHost, request, version: int) -> LeaderAndIsrResponse:
    """Apply a (screened) LeaderAndIsr request; per-partition errors in the response."""
    now = _now_ms()
    results: list[list] = []  # [topic, topic id, partition, error code]
    leaders, followers = [], []
    for topic, topic_id, state in _leader_and_isr_states(request, version):
        code = _screen(rm, topic, topic_id, state)
        entry = [topic, topic_id, state.partition_index, code]
        results.append(entry)
        if code == ErrorCode.NONE:
            (leaders if state.leader == rm.node_id else followers).append((topic, topic_id, state, entry))
    changed: list[tuple[Partition, bool]] = []
    for topic, topic_id, state, entry in leaders:
        try:
            part = _host(rm, topic, state.partition_index, topic_id)
            rm.fetchers.remove([(topic, state.partition_index)])
            if part.make_leader(state, now):
                changed.append((part, True))
                log.info("broker %d leads %s at epoch %d (partition epoch %d, ISR %s, replicas %s, log end %d, "
                         "high watermark %d)", rm.node_id, part.name, part.leader_epoch, part.partition_epoch,
                         list(part.isr), list(part.replicas), part.log.log_end_offset, part.log.high_watermark)
        except Exception as exc:
            entry[3] = _transition_failed(topic, state, exc)
    for topic, topic_id, state, entry in followers:
        try:
            _become_follower(rm, topic, topic_id, state, changed)
        except Exception as exc:
            entry[3] = _transition_failed(topic, state, exc)
    for part, is_leader in changed:
        rm.high_watermark_changed(part.topic, part.partition)
    for part, is_leader in changed:
        rm.tell_listeners(part.topic, part.partition, is_leader, part.leader_epoch)
    rm.fetchers.shutdown_idle()
    rm.control_request_applied()
    return _leader_and_isr_response(results, version)


def _screen(rm: ReplicaHost, topic: str, topic_id: uuid.UUID | None, state) -> int:
    part = rm.partition(topic, state.partition_index)
    plog = part.log if part is not None else rm.logs.get_log(topic, state.partition_index)
    if plog is not None and (plog.is_offline or getattr(plog, "write_refused", None)):
        # offline, or in a full log dir: it can neither lead nor follow (the controller takes
        # the replica as offline and moves leadership, log/dir_health.py)
        return ErrorCode.KAFKA_STORAGE_ERROR
    if topic_id is not None:
        try:
            local = part.topic_id if part is not None else (
                read_partition_topic_id(plog.dir) if plog is not None else None)
        except KafkaStorageError as exc:
            log.error("%s-%d: %s", topic, state.partition_index, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        if local is not None and local != topic_id:
            log.error("%s-%d: LeaderAndIsr names topic id %s but the local log has %s", topic,
                      state.partition_index, uuid_to_kafka_str(topic_id), uuid_to_kafka_str(local))
            return ErrorCode.INCONSISTENT_TOPIC_ID
    local_epoch = part.leader_epoch if part is not None else -1
    if state.leader_epoch <= local_epoch:
        log.debug("%s-%d: ignoring LeaderAndIsr at leader epoch %d (ours is %d)", topic, state.partition_index,
                  state.leader_epoch, local_epoch)
        return ErrorCode.STALE_CONTROLLER_EPOCH
    if rm.node_id not in state.replicas:
        log.warning("%s-%d: LeaderAndIsr lists replicas %s without broker %d", topic, state.partition_index,
                    list(state.replicas), rm.node_id)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


def _host(rm: ReplicaHost, topic: str, index: int, topic_id: uuid.UUID | None) -> Partition:
    """The hosted Partition, created (with its log) on first use; records the topic id."""
    part = rm.partition(topic, index)
    if part is None:
        plog = rm.logs.open_log(topic, index)
        if plog.is_offline:
            raise KafkaStorageError(f"log of {topic}-{index} is offline: {plog.offline_reason}")
        plog.auto_high_watermark = False
        part = rm.new_partition(topic, index, plog, read_partition_topic_id(plog.dir))
    if topic_id is not None and part.topic_id is None:
        write_partition_topic_id(part.log.dir, topic_id)
        part.topic_id = topic_id
    if part.topic_id is not None:
        rm.remember_topic_id(part.topic_id, topic)
    return part


def _become_follower(rm: ReplicaHost, topic: str, topic_id, state, changed: list) -> None:
    index = state.partition_index
    if not rm.is_live(state.leader):
        # As Kafka: no change without a reachable leader, but the log exists so that its high
        # watermark is checkpointed; a later LeaderAndIsr (same epoch) completes the change.
        log.error("broker %d cannot follow %s-%d at epoch %d: leader %d is not alive in the metadata",
                  rm.node_id, topic, index, state.leader_epoch, state.leader)
        _host(rm, topic, index, topic_id)
        return
    part = _host(rm, topic, index, topic_id)
    if not part.make_follower(state):
        return
    rm.fetchers.remove([(topic, index)])
    plog = part.log
    if plog.leader_epochs.latest_epoch < 0 and plog.log_end_offset > plog.high_watermark:
        # without epochs the leader cannot tell us where we diverge: keep only what was committed
        log.info("%s has no leader epochs; truncating to its high watermark %d", part.name, plog.high_watermark)
        plog.truncate_to(plog.high_watermark)
    changed.append((part, False))
    from .fetcher import FetchPosition

    rm.fetchers.add(FetchPosition(topic, index, part.topic_id, state.leader, state.leader_epoch,
                                    plog.log_end_offset, plog.leader_epochs.latest_epoch, plog))


def _transition_failed(topic: str, state, exc: Exception) -> int:
    if isinstance(exc, KafkaError):
        log.error("%s-%d: LeaderAndIsr at epoch %d failed: %s", topic, state.partition_index,
                  state.leader_epoch, exc)
        return exc.code
    log.exception("%s-%d: LeaderAndIsr at epoch %d failed", topic, state.partition_index, state.leader_epoch)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _leader_and_isr_response(results, version: int) -> LeaderAndIsrResponse:
    from ..metadata.ids import ZERO_UUID
    from ..protocol.messages import LeaderAndIsrResponse

    Error = LeaderAndIsrResponse.LeaderAndIsrPartitionError
    if version < 5:
        return LeaderAndIsrResponse(error_code=0, partition_errors=[
            Error(topic_name=topic, partition_index=index, error_code=code) for topic, _, index, code in results])
    topics: dict[object, LeaderAndIsrResponse.LeaderAndIsrTopicError] = {}
    for topic, topic_id, index, code in results:
        key = topic_id if topic_id is not None else topic
        entry = topics.get(key)
        if entry is None:
            entry = topics[key] = LeaderAndIsrResponse.LeaderAndIsrTopicError(
                topic_id=topic_id or ZERO_UUID, partition_errors=[])
        entry.partition_errors.append(Error(topic_name=topic, partition_index=index, error_code=code))
    return LeaderAndIsrResponse(error_code=0, topics=list(topics.values()))


async def apply_stop_replica(rm: ReplicaHost, request, version: int) -> StopReplicaResponse:
    """Apply a (screened) StopReplica request."""
    from ..protocol.messages import StopReplicaResponse

    Error = StopReplicaResponse.StopReplicaPartitionError
    errors = []
    stopping = []
    for topic, index, epoch, delete in _stop_replica_states(request, version):
        part = rm.partition(topic, index)
        if part is not None and part.log.is_offline:
            code = ErrorCode.KAFKA_STORAGE_ERROR
        elif part is None or epoch in (DELETION_EPOCH, NO_EPOCH) or epoch >= part.leader_epoch:
            code = ErrorCode.NONE
            stopping.append((topic, index, delete, len(errors)))
        else:
            log.info("%s-%d: ignoring StopReplica at leader epoch %d (ours is %d)", topic, index, epoch,
                     part.leader_epoch)
            code = ErrorCode.FENCED_LEADER_EPOCH
        errors.append(Error(topic_name=topic, partition_index=index, error_code=code))
    rm.fetchers.remove([(topic, index) for topic, index, _, _ in stopping])
    for topic, index, delete, position in stopping:
        part = rm.partition(topic, index)
        epoch = part.leader_epoch if part is not None else -1
        try:
            if part is not None:
                part.stop()
            if delete:
                rm.forget_partition(topic, index)
                rm.logs.remove_log(topic, index, delete=True)
            log.info("broker %d stopped replica %s-%d%s", rm.node_id, topic, index,
                     " and deleted its log" if delete else "")
        except Exception as exc:
            if isinstance(exc, KafkaError):
                log.error("stopping replica %s-%d failed: %s", topic, index, exc)
                errors[position].error_code = exc.code
            else:
                log.exception("stopping replica %s-%d failed", topic, index)
                errors[position].error_code = ErrorCode.KAFKA_STORAGE_ERROR
        rm.high_watermark_changed(topic, index)
        rm.tell_listeners(topic, index, False, epoch)
    rm.fetchers.shutdown_idle()
    return StopReplicaResponse(error_code=0, partition_errors=errors)
