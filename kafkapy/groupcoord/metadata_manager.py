"""Group and offset storage: the cache of groups this broker coordinates, backed by __consumer_offsets.

Kafka's GroupMetadataManager: owns which __consumer_offsets partitions are loaded here,
writes group metadata and offset commits as records, loads them back when a partition is
taken over (start-up or leadership change), and expires offsets past retention.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from collections.abc import Callable, Generator, Iterable
from typing import Any

from ..protocol.control_records import ControlRecordType, parse_control_record
from ..protocol.errors import ErrorCode, KafkaError
from .consumer.offsets import expired_offsets as consumer_expired_offsets
from .consumer.persistence import ConsumerGroupReplay, group_tombstones, restore_group
from .streams.records import StreamsGroupReplay, restore_streams_group
from .streams.records import group_tombstones as streams_group_tombstones
from .group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from .offsets_topic import OFFSETS_TOPIC, OffsetsTopicStore, partition_for
from .records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from .txn_offsets import PendingTxnOffsets

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# How an append failure shows to the committer / to the group (Kafka's storeOffsets/storeGroup).
_COMMIT_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}
_GROUP_ERRORS = dict(_COMMIT_ERRORS)
for _code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
    _GROUP_ERRORS[_code] = ErrorCode.UNKNOWN_SERVER_ERROR

# How long a loading partition decodes before it yields to the event loop (checked after each
# batch): a request arriving meanwhile waits about two slices (bench/groups/offsets_load.py).
LOAD_SLICE_S = 0.004
# For bench/groups/offsets_load.py --modes only (KAFKAPY_COORDINATOR_LOAD_MODE): "chunks" (the default: the loop decodes, yielding
# between chunks), "thread" (a worker thread decodes) or "blocking" (all at once, as before).
LOAD_MODE = os.environ.get("KAFKAPY_COORDINATOR_LOAD_MODE", "chunks")
_CHUNK = "chunk"
_READ_DONE = "read done"


class CollectorPause:
    """The cyclic garbage collector is off while partitions load, and what they loaded is frozen.

    A load creates millions of long-lived objects; with the collector on, each time they grow
    by a quarter a full collection walks all of them (~0.1-1 s on the loop, about half the load
    time: bench/groups/offsets_load.py). gc.freeze() at the end moves them to the permanent
    generation, so later collections never walk them. The cost: cyclic garbage made by other
    work during the load is frozen too (bounded by what a few seconds of requests leave).
    """

    loads = 0
    was_enabled = False

    @classmethod
    def begin(cls) -> None:
        if cls.loads == 0:
            cls.was_enabled = gc.isenabled()
            gc.disable()
        cls.loads += 1

    @classmethod
    def end(cls) -> None:
        cls.loads -= 1
        if cls.loads == 0:
            gc.freeze()
            if cls.was_enabled:
                gc.enable()


def _step(steps: Generator[object, None, Any]) -> tuple[bool, Any]:
    """One step of a load: (False, None) after a yield, (True, result) once it has ended."""
    try:
        next(steps)
    except StopIteration as done:
        return True, done.value
    return False, None


def _run_until_read_done(steps: Generator[object, None, Any]) -> tuple[bool, Any]:
    """Steps until the log end was reached (`_READ_DONE`) or the load ended."""
    while True:
        try:
            if next(steps) is _READ_DONE:
                return False, None
        except StopIteration as done:
            return True, done.value


def _load_batch(header, batch, offsets: dict, metadata: dict, pending: PendingTxnOffsets,
                consumer: ConsumerGroupReplay | None = None, streams: StreamsGroupReplay | None = None) -> None:
    """Fold one data batch of __consumer_offsets into the state being loaded (consumer group
    records into `consumer`, checked last so offset commits pay nothing for them)."""
    transactional = header.is_transactional and header.producer_id >= 0
    for record in batch:
        key, value = record.key, record.value
        if key is None:
            continue
        parsed = decode_key(key)
        if type(parsed) is OffsetCommitKey:
            tp = (parsed.topic, parsed.partition)
            if transactional:
                if value is not None:
                    pending.add(parsed.group, header.producer_id,
                                {tp: decode_offset_commit_value(value)}, header.base_offset)
                continue
            group_offsets = offsets.get(parsed.group)
            if group_offsets is None:
                group_offsets = offsets[parsed.group] = {}
            if value is None:
                group_offsets.pop(tp, None)
            else:
                group_offsets[tp] = decode_offset_commit_value(value)
                if pending:
                    pending.supersede(parsed.group, (tp,))
        elif type(parsed) is GroupMetadataKey:
            metadata[parsed.group] = None if value is None else decode_group_metadata_value(value)
            if value is not None and consumer is not None and consumer.groups:
                consumer.drop(parsed.group)
        elif parsed is None and streams is not None and streams.add(key, value):
            if value is not None:
                metadata.pop(streams_group_id(key, streams), None)
        elif consumer is not None:
            consumer.add(parsed, key, value)
            if parsed is not None and value is not None and parsed.group in consumer.groups:
                metadata.pop(parsed.group, None)  # a consumer group replaced the classic one


def streams_group_id(key: bytes, streams: StreamsGroupReplay) -> str:
    from .streams.records import decode_streams_key

    parsed = decode_streams_key(key)
    return parsed[1] if parsed is not None else ""


class GroupMetadataManager:
    """Groups by id for the __consumer_offsets partitions loaded on this broker."""

    def __init__(self, store: OffsetsTopicStore, num_partitions: int, clock_ms: Callable[[], int],
                 metadata_max_bytes: int = 4096):
        self.store = store
        self.num_partitions = num_partitions
        self.clock_ms = clock_ms
        self.metadata_max_bytes = metadata_max_bytes
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self._load_tasks: dict[int, asyncio.Task] = {}
        # TxnOffsetCommit offsets waiting for their transaction's commit or abort marker
        self.pending_txn = PendingTxnOffsets()

    # -- ownership ------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def is_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    # -- cache ----------------------------------------------------------------------------
    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self.clock_ms())
        return group

    def groups_in(self, partition: int) -> list[GroupMetadata]:
        return [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]

    # -- writes ---------------------------------------------------------------------------
    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        """Persist the group's metadata with `assignment`; returns Kafka's error code for the group."""
        record = (group_metadata_key(group.group_id), group_metadata_value(group, assignment))
        try:
            self.store.append(self.partition_for(group.group_id), [record], self.clock_ms())
        except KafkaError as exc:
            log.warning("writing metadata of group %s failed: %s", group.group_id, exc)
            return _GROUP_ERRORS.get(exc.code, exc.code)
        return ErrorCode.NONE

    def write_records(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> int:
        """Append a consumer group's records (consumer/persistence.py) as one batch to its
        partition, as store_group does; returns Kafka's error code for the group."""
        if not records:
            return ErrorCode.NONE
        try:
            self.store.append(self.partition_for(group_id), records, self.clock_ms())
        except KafkaError as exc:
            log.warning("writing %d records of consumer group %s failed: %s", len(records), group_id, exc)
            return _GROUP_ERRORS.get(exc.code, exc.code)
        return ErrorCode.NONE

    def valid_metadata(self, metadata: str | None) -> bool:
        return metadata is None or len(metadata.encode("utf-8")) <= self.metadata_max_bytes

    def store_offsets(self, group: GroupMetadata,
                      offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """Persist offset commits (one batch); returns an error code per partition."""
        errors: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, committed in offsets.items():
            if self.valid_metadata(committed.metadata):
                accepted[tp] = committed
            else:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        if accepted:
            records = [(offset_commit_key(group.group_id, tp[0], tp[1]), offset_commit_value(c))
                       for tp, c in accepted.items()]
            try:
                self.store.append(self.partition_for(group.group_id), records, self.clock_ms())
            except KafkaError as exc:
                log.warning("writing %d offsets of group %s failed: %s", len(records), group.group_id, exc)
                code = _COMMIT_ERRORS.get(exc.code, exc.code)
                errors.update((tp, code) for tp in accepted)
                return errors
            if group.is_in(GroupState.DEAD):
                # the group was deleted while we wrote; Kafka drops such commits from the cache too
                log.info("group %s died while committing offsets", group.group_id)
            else:
                group.offsets.update(accepted)
            if self.pending_txn:
                self.pending_txn.supersede(group.group_id, accepted)
            errors.update((tp, ErrorCode.NONE) for tp in accepted)
        return errors

    def store_txn_offsets(self, group: GroupMetadata, producer_id: int, producer_epoch: int,
                          offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """Persist a TxnOffsetCommit as a transactional batch of the producer; the offsets stay
        pending until the transaction's marker (`complete_txn`). Error code per partition."""
        errors: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, committed in offsets.items():
            if self.valid_metadata(committed.metadata):
                accepted[tp] = committed
            else:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        if not accepted:
            return errors
        records = [(offset_commit_key(group.group_id, tp[0], tp[1]), offset_commit_value(c))
                   for tp, c in accepted.items()]
        try:
            result = self.store.append(self.partition_for(group.group_id), records, self.clock_ms(),
                                       producer_id=producer_id, producer_epoch=producer_epoch)
        except KafkaError as exc:
            log.info("writing %d transactional offsets of group %s for producer %d failed: %s",
                     len(records), group.group_id, producer_id, exc)
            code = _COMMIT_ERRORS.get(exc.code, exc.code)
            errors.update((tp, code) for tp in accepted)
            return errors
        self.pending_txn.add(group.group_id, producer_id, accepted, result.base_offset)
        errors.update((tp, ErrorCode.NONE) for tp in accepted)
        return errors

    def complete_txn(self, producer_id: int, partitions: Iterable[int], commit: bool) -> int:
        """The producer's transaction marker was written to these __consumer_offsets partitions:
        its pending offsets there become committed (or are dropped); returns how many applied."""
        # a loading partition reads the marker from its log and applies it when the load ends
        wanted = set(partitions) - self.loading_partitions
        applied = self.pending_txn.complete(producer_id, commit,
                                            lambda group_id: self.partition_for(group_id) in wanted)
        count = 0
        for group_id, offsets in applied.items():
            group = self.get_or_create_group(group_id, create=True)
            if group.is_in(GroupState.DEAD):
                continue
            group.offsets.update(offsets)
            count += len(offsets)
        return count

    def cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                               selector: Callable[[GroupMetadata], list[TopicPartition]],
                               drop_empty: bool = True) -> int:
        """Remove offsets chosen by `selector` (tombstones); drop groups that are Dead (and, with
        `drop_empty`, Empty groups left without offsets); count removed."""
        removed_total = 0
        for group in groups:
            removed = selector(group)
            for tp in removed:
                group.offsets.pop(tp, None)
            tombstones: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group.group_id, tp[0], tp[1]), None) for tp in removed]
            if drop_empty and group.is_in(GroupState.EMPTY) and not group.has_offsets() \
                    and group.group_id in self.groups \
                    and not self.pending_txn.has_group(group.group_id):
                group.transition_to(GroupState.DEAD, self.clock_ms())
            if group.is_in(GroupState.DEAD):
                if self.groups.get(group.group_id) is group:
                    del self.groups[group.group_id]
                if getattr(group, "group_type", "classic") == "consumer":
                    tombstones.extend(group_tombstones(group))
                elif getattr(group, "group_type", "classic") == "streams":
                    tombstones.extend(streams_group_tombstones(group))
                else:
                    tombstones.append((group_metadata_key(group.group_id), None))
            if tombstones:
                try:
                    self.store.append(self.partition_for(group.group_id), tombstones, self.clock_ms())
                except KafkaError as exc:
                    log.warning("writing %d tombstones of group %s failed: %s", len(tombstones),
                                group.group_id, exc)
            removed_total += len(removed)
        return removed_total

    # -- reads ----------------------------------------------------------------------------
    def get_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                    require_stable: bool = False) -> dict[TopicPartition, tuple[OffsetAndMetadata | None, int]]:
        """Committed offsets (None where nothing is committed) with a per-partition error code."""
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return {tp: (None, ErrorCode.NONE) for tp in partitions or ()}
        wanted = list(group.offsets) if partitions is None else partitions
        if require_stable and self.pending_txn.has_group(group_id):
            unstable = self.pending_txn.has_pending
            return {tp: (None, ErrorCode.UNSTABLE_OFFSET_COMMIT) if unstable(group_id, tp)
                    else (group.offsets.get(tp), ErrorCode.NONE) for tp in wanted}
        return {tp: (group.offsets.get(tp), ErrorCode.NONE) for tp in wanted}

    # -- loading --------------------------------------------------------------------------
    def load_partition(self, partition: int) -> list[GroupMetadata]:
        """Rebuild the groups of one __consumer_offsets partition from its log, at once; returns them."""
        steps = self._load_steps(partition)
        while True:
            finished, loaded = _step(steps)
            if finished:
                return loaded

    def start_loading(self, partition: int, scheduler: Any,
                      on_loaded: Callable[[list[GroupMetadata]], None]) -> None:
        """Load a partition this broker now leads, then call `on_loaded(groups)`.

        On an asyncio loop the read and decode run as a task that yields to the loop every
        `LOAD_SLICE_S` seconds of work (or in a worker thread, see `LOAD_MODE`): requests to other
        partitions and APIs are served meanwhile, and the partition's groups answer
        COORDINATOR_LOAD_IN_PROGRESS until the loaded state is applied, in one step. The first
        slice runs at once, so a partition that loads within it (a new or small one) is served
        without that answer. Without a loop (a manual scheduler in tests) it all loads at once.
        """
        if not isinstance(scheduler, asyncio.AbstractEventLoop) or LOAD_MODE == "blocking":
            on_loaded(self.load_partition(partition))
            return
        self._cancel_load(partition)
        steps = self._load_steps(partition)
        while True:
            try:
                if next(steps) is _CHUNK:
                    break  # the first slice is used up: go on in a task
            except StopIteration as done:
                on_loaded(done.value)
                return
        task = scheduler.create_task(self._load_async(partition, on_loaded, steps))
        self._load_tasks[partition] = task

    def _cancel_load(self, partition: int) -> None:
        task = self._load_tasks.pop(partition, None)
        if task is not None:
            task.cancel()

    async def _load_async(self, partition: int, on_loaded: Callable[[list[GroupMetadata]], None],
                          steps: Generator[object, None, list[GroupMetadata]]) -> None:
        started = time.monotonic()
        CollectorPause.begin()
        try:
            while True:
                if LOAD_MODE == "thread":
                    # read and decode off the loop up to the log end; the rest runs on the loop
                    finished, loaded = await asyncio.to_thread(_run_until_read_done, steps)
                    if not finished:
                        finished, loaded = _step(steps)
                else:
                    finished, loaded = _step(steps)
                if finished:
                    break
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            try:
                steps.close()
            except ValueError:
                pass  # thread mode: the worker still runs it; its result is never applied
            raise
        except Exception:
            log.exception("%s-%d: loading failed; its groups start empty", OFFSETS_TOPIC, partition)
            self.loading_partitions.discard(partition)
            return
        finally:
            CollectorPause.end()
            if self._load_tasks.get(partition) is asyncio.current_task():
                del self._load_tasks[partition]
        log.info("%s-%d: loaded in %.3f s", OFFSETS_TOPIC, partition, time.monotonic() - started)
        on_loaded(loaded)

    def _load_steps(self, partition: int) -> Generator[object, None, list[GroupMetadata]]:
        """The load of one partition as steps: yields `_CHUNK` after each LOAD_SLICE_S of work
        and `_READ_DONE` when the log end is reached; the final step (reading what was appended
        meanwhile, then replacing the partition's groups) runs without yielding, so the cache
        changes atomically and nothing appended in between is missed."""
        self.loading_partitions.add(partition)
        self.owned_partitions.add(partition)
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        metadata: dict[str, object] = {}  # group id -> GroupMetadataValue, or None when deleted
        # transactional commits found while loading; merged into self.pending_txn when applied
        pending = PendingTxnOffsets()
        consumer = ConsumerGroupReplay()  # consumer group (KIP-848) records, replayed per group
        streams = StreamsGroupReplay()  # streams group (KIP-1071) records
        in_partition = self.partition_for
        records = 0
        clock = time.monotonic
        slice_end = clock() + LOAD_SLICE_S
        position: int | None = None
        try:
            while True:
                for header, batch in self.store.read_batches(partition, position):
                    position = header.next_offset
                    records += len(batch)
                    if header.is_control:
                        # a transaction marker decides that producer's transactional commits here
                        if batch and header.producer_id >= 0:
                            kind, _ = parse_control_record(batch[0])
                            if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                                applied = pending.complete(header.producer_id, kind == ControlRecordType.COMMIT,
                                                           lambda g: True)
                                for group_id, group_offsets in applied.items():
                                    offsets.setdefault(group_id, {}).update(group_offsets)
                    else:
                        _load_batch(header, batch, offsets, metadata, pending, consumer, streams)
                    if clock() >= slice_end:
                        yield _CHUNK
                        slice_end = clock() + LOAD_SLICE_S
                yield _READ_DONE
                # back on the loop: read what was appended meanwhile, or apply without yielding
                end = self.store.log_end_offset(partition)
                if end is None or position is None or position >= end:
                    break
        except KafkaError as exc:
            log.error("%s-%d: stopped loading after %d records: %s", OFFSETS_TOPIC, partition, records, exc)
        # -- apply: no yield from here on
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        self.pending_txn.drop_groups([g for g in self.pending_txn.groups() if in_partition(g) == partition])
        self.pending_txn.merge(pending)
        waiting = pending.groups()
        if waiting:
            log.info("%s-%d: %d groups have transactional offset commits awaiting their transaction",
                     OFFSETS_TOPIC, partition, len(waiting))
        loaded = []
        consumer.report(f"{OFFSETS_TOPIC}-{partition}")
        for group_id in set(offsets) | set(metadata) | set(waiting) | set(consumer.groups) | set(streams.groups):
            group_offsets = offsets.get(group_id, {})
            stored_streams = streams.groups.get(group_id)
            if stored_streams is not None and stored_streams.has_metadata:
                group = restore_streams_group(stored_streams, group_offsets, self.clock_ms())
                self.groups[group_id] = group
                loaded.append(group)
                continue
            stored_consumer = consumer.groups.get(group_id)
            if stored_consumer is not None:
                group = restore_group(stored_consumer, group_offsets, self.clock_ms())
                self.groups[group_id] = group
                loaded.append(group)
                continue
            stored = metadata.get(group_id)
            if stored is None and not group_offsets and group_id not in waiting:
                continue  # deleted group (tombstone) with no later commits
            group = self._build_group(group_id, stored, group_offsets)
            self.groups[group_id] = group
            loaded.append(group)
        if records:
            log.info("loaded %d groups from %s-%d (%d records)", len(loaded), OFFSETS_TOPIC, partition, records)
        return loaded

    def _build_group(self, group_id: str, stored, group_offsets) -> GroupMetadata:
        now = self.clock_ms()
        if stored is None:
            group = GroupMetadata(group_id, GroupState.EMPTY, now)
            group.offsets = dict(group_offsets)
            return group
        group = GroupMetadata(group_id, GroupState.STABLE if stored.members else GroupState.EMPTY, now)
        group.protocol_type = stored.protocol_type or None
        group.generation_id = stored.generation
        group.protocol_name = stored.protocol
        group.leader_id = stored.leader
        group.current_state_timestamp = stored.current_state_timestamp if stored.current_state_timestamp >= 0 else None
        for m in stored.members:
            member = MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms, protocol_type=group.protocol_type or "",
                supported_protocols=[(stored.protocol or "", m.subscription)], assignment=m.assignment)
            group.add(member)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        group.offsets = dict(group_offsets)
        return group

    def unload_partition(self, partition: int) -> list[GroupMetadata]:
        """Forget the groups of a partition this broker no longer leads (stopping its load if
        one runs); returns them."""
        self._cancel_load(partition)
        self.loading_partitions.discard(partition)
        self.owned_partitions.discard(partition)
        removed = self.groups_in(partition)
        for group in removed:
            del self.groups[group.group_id]
        self.pending_txn.drop_groups([g for g in self.pending_txn.groups() if self.partition_for(g) == partition])
        return removed

    # -- expiry ---------------------------------------------------------------------------
    def expire_offsets(self, retention_ms: int) -> int:
        """Remove offsets past retention and groups left Empty without offsets; count removed."""
        now = self.clock_ms()

        def expired(group) -> list[TopicPartition]:
            if getattr(group, "group_type", "classic") == "consumer":
                # Kafka keeps a consumer group's offset while a transaction holds a commit for it
                return consumer_expired_offsets(group, now, retention_ms, self.pending_txn.has_pending)
            return group.expired_offsets(now, retention_ms)

        removed = self.cleanup_group_metadata(list(self.groups.values()), expired)
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed
