"""The __consumer_offsets topic: which partition owns a group, and reading/writing its records.

The coordinator is an ordinary user of partition logs: its writes are record batches appended
to `__consumer_offsets-<n>`, in a broker through the replica manager's coordinator append (a
`CoordinatorAppend` hook: Kafka's ReplicaManager.appendRecords with AppendOrigin.COORDINATOR), and
its state is rebuilt at start-up by reading those logs back.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from ..metadata.topic_rules import OFFSETS_TOPIC
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import BatchHeader, Record, build_batch, iter_batch_headers, iter_records

if TYPE_CHECKING:
    from ..log.partition_log import AppendResult, PartitionLog

log = logging.getLogger(__name__)


class CoordinatorAppend(Protocol):
    """Appends a coordinator's batch (built and its headers read here) to a partition of its
    internal topic: in a broker the replica manager's `append_coordinator_records`, which stamps
    the leader epoch, appends and wakes the partition's fetches (the coordinator's acks=-1 wait
    comes after, broker/coordinator_writes.py).
    `transactional` marks a batch written for a producer's open transaction (TxnOffsetCommit).
    Raises KafkaError with Kafka's code (NOT_LEADER_OR_FOLLOWER without a log here)."""

    def __call__(self, topic: str, partition: int, buf: bytearray, headers: list[BatchHeader],
                 transactional: bool) -> AppendResult: ...


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    raw = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition of a group: Utils.abs(hashCode) % partitions, as Kafka."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % num_partitions


def offsets_topic_configs(segment_bytes: int) -> dict[str, str]:
    """Topic configs Kafka gives __consumer_offsets when it creates it."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(segment_bytes),
    }


class OffsetsTopicStore:
    """Appends coordinator records to the partitions of an internal topic (__consumer_offsets,
    or `topic`, e.g. __transaction_state) and reads them back.

    `log_for(partition)` returns the local PartitionLog (None when this broker has none), which
    loading reads; `append_batch` writes (a broker's replica manager: see CoordinatorAppend).
    Without it (a coordinator on its own, in tests and benchmarks) batches go to the local log
    at leader epoch 0.
    """

    def __init__(self, log_for: Callable[[int], PartitionLog | None],
                 load_buffer_size: int = 5 * 1024 * 1024, topic: str = OFFSETS_TOPIC, *,
                 append_batch: CoordinatorAppend | None = None):
        self._log_for = log_for
        self._append_batch = self._append_local if append_batch is None else append_batch
        self._load_buffer_size = load_buffer_size
        self.topic = topic

    def _append_local(self, topic: str, partition: int, buf: bytearray, headers: list[BatchHeader],
                      transactional: bool) -> AppendResult:
        plog = self._log_for(partition)
        if plog is None:
            raise KafkaError(f"no local log for {topic}-{partition}", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if transactional:
            return plog.append(buf, leader_epoch=0, validated=headers, from_client=False)
        return plog.append(buf, leader_epoch=0, validated=headers)

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               timestamp_ms: int | None = None, *, producer_id: int = -1,
               producer_epoch: int = -1) -> AppendResult | None:
        """Append `records` as one batch; raises KafkaError with Kafka's code on failure.

        With a `producer_id` the batch is transactional, written for that producer's open
        transaction (TxnOffsetCommit); a later commit or abort marker decides it.
        """
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        if producer_id >= 0:
            buf = bytearray(build_batch(records, base_timestamp=timestamp_ms, producer_id=producer_id,
                                        producer_epoch=producer_epoch, is_transactional=True))
        else:
            buf = bytearray(build_batch(records, base_timestamp=timestamp_ms))
        headers = list(iter_batch_headers(buf, validate=False))
        return self._append_batch(self.topic, partition, buf, headers, producer_id >= 0)

    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Every (key, value) of the data batches in the partition, from its start to its end."""
        for header, records in self.read_batches(partition):
            if not header.is_control:
                for record in records:
                    yield record.key, record.value

    def log_end_offset(self, partition: int) -> int | None:
        """The partition's current log end offset (None when this broker has no log for it)."""
        plog = self._log_for(partition)
        return None if plog is None else plog.log_end_offset

    def read_batches(self, partition: int, start: int | None = None
                     ) -> Iterator[tuple[BatchHeader, list[Record]]]:
        """Every batch in the partition (control batches too) with its records, in offset order,
        from `start` (default: the log start) to the log end as it is when each read is made, so
        that a loader interleaved with appends (a transaction marker) sees them too."""
        plog = self._log_for(partition)
        if plog is None:
            return
        offset = plog.log_start_offset if start is None else max(start, plog.log_start_offset)
        while offset < (end := plog.log_end_offset):
            result = plog.read(offset, self._load_buffer_size, max_offset=end)
            data = result.records
            buf = data.tobytes() if hasattr(data, "tobytes") else bytes(data)
            if not buf:
                log.warning("%s-%d: no batch at offset %d below the end %d; loading stops there",
                            self.topic, partition, offset, end)
                return
            progressed = False
            for header in iter_batch_headers(buf, validate=True):
                if header.next_offset <= offset:
                    continue
                offset = header.next_offset
                progressed = True
                yield header, list(iter_records(buf, header))
            if not progressed:
                log.warning("%s-%d: read at offset %d made no progress; loading stops there",
                            self.topic, partition, offset)
                return
