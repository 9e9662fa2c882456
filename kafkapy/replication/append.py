"""What follows an append to a partition led here until it may be acknowledged (the second half
of Kafka's ReplicaManager.appendRecords): fsync-on-ack (kafkapy.log.fsync.on.ack, durability.py)
and the acks=all wait for the ISR (Kafka's delayed produce, `ReplicaManager.wait_for_replication`).

`PendingAcks` collects them for one produce request, a flat per-partition call that adds nothing
for acks=1 without fsync-on-ack; `ReplicaManager.wait_appended` is the same wait for a
coordinator's write (the group, transaction and share coordinators, transaction markers, the
console) with the origin's error mapping left to the caller.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..protocol.errors import ErrorCode
from .durability import wait_durable

if TYPE_CHECKING:
    from .partition import Partition
    from .replica_manager import ReplicaManager

__all__ = ["PendingAcks"]


class PendingAcks:
    """The fsyncs and acks=all waits one produce request's answer waits for."""

    __slots__ = ("_replicas", "_timeout_s", "_syncs", "_waits")

    def __init__(self, replicas: ReplicaManager, timeout_s: float) -> None:
        self._replicas = replicas
        self._timeout_s = timeout_s
        self._syncs: list = []
        self._waits: list = []

    def add(self, part: Partition, last_offset: int, required_acks: int, response) -> None:
        """After an append ending at `last_offset`: what its answer (`response`, whose error_code,
        base_offset and log_append_time_ms a failure overwrites) waits for."""
        plog = part.log
        if plog.config.fsync_on_ack and required_acks != 0:
            self._syncs.append((plog.sync_until(last_offset), response))
        if required_acks == -1 and plog.high_watermark < last_offset + 1:
            self._waits.append(_replicated(self._replicas, response, part.topic, part.partition, last_offset + 1,
                                           self._timeout_s))

    async def wait(self) -> None:
        waits = self._waits
        syncs = self._syncs
        if waits:
            if syncs:
                waits.append(_durable(syncs))
            await asyncio.gather(*waits)
        elif syncs:
            await _durable(syncs)


async def _replicated(replicas: ReplicaManager, response, name: str, index: int, required: int,
                      timeout_s: float) -> None:
    """acks=all: the answer waits for the ISR (Kafka's delayed produce)."""
    code = await replicas.wait_for_replication(name, index, required, timeout_s)
    if code:
        response.error_code = code


async def _durable(syncs: list) -> None:
    """kafkapy.log.fsync.on.ack: the answer waits for the fsyncs; a partition whose fsync failed
    (its log dir is full or offline now) answers KAFKA_STORAGE_ERROR, the others their offsets."""
    try:
        await wait_durable(*(sync for sync, _ in syncs))
        return
    except Exception:  # noqa: BLE001 - which one failed is found below, one at a time
        pass
    for sync, response in syncs:
        try:
            await wait_durable(sync)
        except Exception as exc:  # noqa: BLE001 - the flusher's failure, logged where it happened
            response.error_code = getattr(exc, "code", ErrorCode.KAFKA_STORAGE_ERROR)
            response.base_offset = -1
            response.log_append_time_ms = -1
