"""The replica manager: every partition this broker hosts, as leader or follower (Kafka's
ReplicaManager). Handlers hand it appends and reads; it is the same on a single node, where each
partition has one replica and an ISR of one (`lead_alone`, called by the cluster of one), and in a
cluster, where the controller's requests decide roles (ZooKeeper mode):
- Appends (`append_records`, after the produce handler's validation): acks=all needs an ISR of at
  least min.insync.replicas (NOT_ENOUGH_REPLICAS, nothing written); the append carries the leader
  epoch; acks=all then waits in `wait_for_replication` unless the high watermark already covers
  it (always for an ISR of one).
- Reads: `read_for_consumer` (up to the high watermark or the last stable offset) and
  `read_for_follower` (up to the log end; fencing, diverging epochs, follower progress).
- LeaderAndIsr and StopReplica (a cluster member only): control_requests.py, loaded with the
  first one, applies them through the `ReplicaHost` methods below (interfaces.py).
- Leaders: follower fetches move follower progress and the high watermark, an ISR-shrink task runs
  every replica.lag.time.max.ms/2, ISR changes go to the controller through the
  AlterPartitionManager (made on first use, as are the follower fetchers).
- High watermarks are restored from `<logdir>/replication-offset-checkpoint` at start (for the logs
  not led alone) and written there every replica.high.watermark.checkpoint.interval.ms once the
  first LeaderAndIsr arrived.
  (The ISR-shrink task, the controller's answers to ISR changes and the high-watermark checkpoint
  are ReplicaMaintenance's, maintenance.py, the base class of ReplicaManager.)

Waiters park in the purgatory (purgatory.py): consumer and follower fetches on (topic, partition), which
is notified on appends and high-watermark changes; acks=all produces and coordinator writes on
`replicated_key(topic, partition)`, notified on high-watermark, ISR and leadership changes only.
`leadership_listeners` are called with (topic, partition, is_leader, leader_epoch) after each
become-leader, become-follower and stop (is_leader False); the coordinators hook in there.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, NamedTuple

from ..protocol.errors import ErrorCode, KafkaError
from .maintenance import ReplicaMaintenance, _now_ms
from .throttle import ReplicationThrottle

if TYPE_CHECKING:  # the controller's requests reach a cluster member only
    import uuid

    from .interfaces import LogLookup, Wakeups
    from .partition import IsrChange, Partition

    from ..log.partition_log import PartitionLog
    from ..protocol.messages import LeaderAndIsrResponse, StopReplicaResponse

__all__ = ["AppendOrigin", "ReplicaManager", "replicated_key"]

log = logging.getLogger(__name__)

# Fetch's generated response types, imported with the first read (not before the first answer)
FetchResponse = PartitionData = None


def _load_fetch_types() -> None:
    global FetchResponse, PartitionData
    from ..protocol.messages import FetchResponse

    PartitionData = FetchResponse.PartitionData


LeadershipListener = Callable[[str, int, bool, int], None]


class _SoleReplicaState(NamedTuple):
    """The partition state a cluster of one gives its partitions (LeaderAndIsr's fields)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


class AppendOrigin:
    """Who appends (Kafka's AppendOrigin): a client's produce is counted in the produce metrics.
    (Plain constants, not an enum: nothing more to import or build before the first request.)"""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def replicated_key(topic: str, partition: int) -> tuple:
    """The purgatory key acks=all waiters watch: the high watermark, ISR or leadership changed."""
    return ("replicated", topic, partition)


class ReplicaManager(ReplicaMaintenance):
    """The partitions this broker hosts, as leader or follower, and their replication."""

    def __init__(self, node_id: int, config, metadata, logs: LogLookup, log_store, purgatory: Wakeups, metrics,
                 broker_epoch: Callable[[], int]):
        """Built by the composition root (broker/broker.py) with what it uses: `config` (the broker
        config's `get`), `metadata` (the metadata cache: topics, live brokers, endpoints, the
        controller), `logs` (LogLookup: a partition's log), `log_store` (the LogManager: every
        loaded log, the log dirs and the flusher), the purgatory, the broker metrics and the broker
        epoch (known once registered). The follower fetchers and the AlterPartition channel get
        this object as their `local` (node id, config, metadata, broker epoch)."""
        self.node_id: int = node_id
        self.config = config
        self.metadata = metadata
        self.logs = logs
        self._log_store = log_store
        self._purgatory = purgatory
        self._metrics = metrics
        self._broker_epoch = broker_epoch
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self.leadership_listeners: list[LeadershipListener] = []
        # replication throttles: consulted by read_for_follower (leader side) and the fetchers
        self.throttle = ReplicationThrottle(node_id, config, metadata)
        # The follower fetchers and the AlterPartition channel talk to other brokers: made on first
        # use (a LeaderAndIsr), so that a cluster of one never loads the inter-broker client.
        self._fetchers = None
        self._alter_partition = None
        self._lag_ms: int = config.get("replica.lag.time.max.ms")
        self._checkpoint_task: asyncio.Task | None = None
        self._shrink_task: asyncio.Task | None = None
        self._closed = False
        # whether this broker keeps replication-offset-checkpoint: once it restored it or hosts a
        # partition for the controller (a cluster of one has no use for it)
        self._checkpointing = False

    @property
    def fetchers(self):
        if self._fetchers is None:
            from .fetcher import ReplicaFetcherManager

            self._fetchers = ReplicaFetcherManager(self, self.high_watermark_changed, self.throttle)
        return self._fetchers

    @property
    def alter_partition(self):
        if self._alter_partition is None:
            from .alter_partition import AlterPartitionManager

            self._alter_partition = AlterPartitionManager(self, self._isr_change_answered)
        return self._alter_partition

    def _submit_isr_change(self, part: Partition, change: IsrChange) -> None:
        self.alter_partition.submit(part, change)

    # ------------------------------------------------------------------ lookups
    def partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of a hosted topic by id (the metadata cache may not know it yet)."""
        return self._topic_names.get(topic_id)

    def _metadata_has(self, topic: str, partition: int) -> bool:
        meta = self.metadata.get_topic(topic)
        return meta is not None and 0 <= partition < len(meta.partitions)

    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        """NONE when this broker leads the partition and the request's leader epoch (if sent)
        is ours; else the error Kafka answers: UNKNOWN_TOPIC_OR_PARTITION for a partition the
        metadata does not know, the epoch fence, or NOT_LEADER_OR_FOLLOWER."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return (ErrorCode.NOT_LEADER_OR_FOLLOWER if self._metadata_has(topic, partition)
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if part.log.is_offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        code = part.leader_epoch_error(current_leader_epoch)
        if code:
            return code
        return ErrorCode.NONE if part.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER

    def leader_hint(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader id, leader epoch) to tell a client that asked the wrong broker (KIP-951): what the
        last LeaderAndIsr told us, as Kafka's getCurrentLeader, unless the metadata cache knows a
        newer epoch (LeaderAndIsr reaches a broker before the UpdateMetadata that follows it)."""
        hint = (-1, -1)
        part = self._partitions.get((topic, partition))
        if part is not None and part.leader_id >= 0:
            hint = (part.leader_id, part.leader_epoch)
        meta = self.metadata.get_topic(topic)
        if meta is not None and 0 <= partition < len(meta.partitions):
            state = meta.partitions[partition]
            if state.leader_epoch > hint[1]:
                hint = (state.leader, state.leader_epoch)
        return hint

    def node_endpoint(self, node_id: int) -> tuple[str, int] | None:
        return self.metadata.broker_endpoint(node_id) if node_id >= 0 else None

    # ------------------------------------------------------------------ start and stop
    async def start(self) -> None:
        """Restore the high watermarks of the loaded logs that do not lead alone (a cluster of one
        hosts its partitions before this and needs no checkpoint) and start the ISR-shrink task."""
        if any(not self._leads_alone(key) for key in self._online_logs()):
            self._restore_high_watermarks()
        self._ensure_shrink_task()

    def _leads_alone(self, key: tuple[str, int]) -> bool:
        part = self._partitions.get(key)
        return part is not None and part.is_leader and part.replicas == (self.node_id,)

    async def shutdown(self) -> None:
        self._closed = True
        for task in (self._checkpoint_task, self._shrink_task):
            if task is not None:
                task.cancel()
        for task in (self._checkpoint_task, self._shrink_task):
            if task is not None:
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        self._checkpoint_task = self._shrink_task = None
        if self._fetchers is not None:
            await self._fetchers.shutdown()
        if self._alter_partition is not None:
            await self._alter_partition.shutdown()
        for part in self._partitions.values():
            self.high_watermark_changed(part.topic, part.partition)
        if self._checkpointing:
            try:
                await self.checkpoint_high_watermarks()
            except Exception:
                log.exception("writing the final high-watermark checkpoint failed")

    # ------------------------------------------------------------------ notifications
    def high_watermark_changed(self, topic: str, partition: int) -> None:
        """Wake the fetches waiting on the partition and its acks=all waiters."""
        purgatory = self._purgatory
        purgatory.notify((topic, partition))
        purgatory.notify(replicated_key(topic, partition))

    def tell_listeners(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        for listener in list(self.leadership_listeners):
            try:
                listener(topic, partition, is_leader, leader_epoch)
            except Exception:
                log.exception("leadership listener %r failed for %s-%d", listener, topic, partition)

    # ------------------------------------------------------------------ the controller's requests
    async def apply_leader_and_isr(self, request, version: int) -> LeaderAndIsrResponse:
        """Apply a (screened) LeaderAndIsr request; per-partition errors in the response."""
        from .control_requests import apply_leader_and_isr

        return await apply_leader_and_isr(self, request, version)

    async def apply_stop_replica(self, request, version: int) -> StopReplicaResponse:
        """Apply a (screened) StopReplica request."""
        from .control_requests import apply_stop_replica

        return await apply_stop_replica(self, request, version)

    # ReplicaHost (interfaces.py): what control_requests.py changes through
    def new_partition(self, topic: str, index: int, plog: PartitionLog, topic_id: uuid.UUID | None) -> Partition:
        """Host `plog` as a new Partition (replacing any hosted one); its role is the caller's to set."""
        from .partition import Partition  # loaded with the first partition, not at start-up

        part = Partition(topic, index, self.node_id, plog, topic_id=topic_id, lag_ms=self._lag_ms,
                         is_eligible=self._is_eligible, submit_isr_change=self._submit_isr_change)
        self._partitions[(topic, index)] = part
        return part

    def remember_topic_id(self, topic_id: uuid.UUID, topic: str) -> None:
        self._topic_names[topic_id] = topic

    def forget_partition(self, topic: str, index: int) -> None:
        """Stop hosting a partition (already stopped); its topic id is forgotten with its last partition."""
        part = self._partitions.pop((topic, index), None)
        if part is not None and part.topic_id is not None and self._topic_names.get(part.topic_id) == topic \
                and not any(p.topic == topic for p in self._partitions.values()):
            del self._topic_names[part.topic_id]

    def is_live(self, node_id: int) -> bool:
        return self.metadata.is_live(node_id)

    def control_request_applied(self) -> None:
        """After a LeaderAndIsr: high watermarks are checkpointed from now on, and ISRs shrunk."""
        self._ensure_checkpoint_task()
        self._ensure_shrink_task()

    @property
    def broker_epoch(self) -> int:
        return self._broker_epoch()

    # ------------------------------------------------------------------ a cluster of one
    def lead_alone(self, topic: str, index: int, plog: PartitionLog, topic_id: uuid.UUID | None,
                   leader_epoch: int, partition_epoch: int = 0) -> Partition:
        """Lead a partition whose only replica is this broker, at the epoch the embedded metadata
        store (the controller of a cluster of one) gives it: the ISR is this broker, so the high
        watermark is the log end and acks=all waits for no one."""
        key = (topic, index)
        part = self._partitions.get(key)
        if part is None or part.log is not plog:
            # the topic id is the metadata's; partition.metadata is only kept for the controller's
            part = self.new_partition(topic, index, plog, topic_id)
        elif part.is_leader and part.leader_epoch == leader_epoch and part.replicas == (self.node_id,):
            return part
        if topic_id is not None:
            part.topic_id = topic_id
            self._topic_names[topic_id] = topic
        alone = (self.node_id,)
        part.make_leader(_SoleReplicaState(alone, alone, leader_epoch, max(partition_epoch, part.partition_epoch)),
                         _now_ms(), record_epoch_start=False)
        self.high_watermark_changed(topic, index)  # waiting fetches see the new epoch
        self.tell_listeners(topic, index, True, leader_epoch)
        return part

    def stop_hosting(self, topic: str, index: int) -> None:
        """Drop a partition (its topic was deleted in a cluster of one); the log is the caller's."""
        part = self._partitions.get((topic, index))
        if part is None:
            return
        part.stop()
        self.forget_partition(topic, index)
        self.high_watermark_changed(topic, index)
        self.tell_listeners(topic, index, False, part.leader_epoch)

    # ------------------------------------------------------------------ leader reads and writes
    def append_records(self, part: Partition, buf, headers, required_acks: int, validate=None,
                       origin: AppendOrigin = AppendOrigin.CLIENT):
        """Append a produce request's batches (validated by the handler: `headers` are their
        checked batch headers) to a partition led here, as Kafka's appendRecordsToLeader: acks=all
        needs an ISR of at least min.insync.replicas (NOT_ENOUGH_REPLICAS, before anything is
        written; the minimum is capped at the partition's replica count, as Kafka's effectiveMinIsr, so a
        topic with fewer replicas than min.insync.replicas takes acks=all once its whole ISR has it);
        `validate()`, when given, runs the record-level checks after that. Then the fetches waiting
        on the partition are woken and a client's append is counted (per-topic bytes and messages
        in, from the batch headers' offsets, never per record). Returns the log's append result;
        what the answer waits for (fsync-on-ack, acks=all) is `PendingAcks.add`'s (append.py)."""
        plog = part.log
        if required_acks == -1 and len(part.isr) < part.min_isr:
            raise KafkaError(f"The size of the current ISR {list(part.isr)} is insufficient to satisfy the min.isr "
                             f"requirement of {part.min_isr} for partition {part.name}", ErrorCode.NOT_ENOUGH_REPLICAS)
        if validate is not None:
            validate()
        result = plog.append(buf, leader_epoch=part.leader_epoch, validated=headers)
        if not plog.auto_high_watermark and part.maybe_increment_hw(_now_ms()):
            self.high_watermark_changed(part.topic, part.partition)
        if not result.duplicate:
            self._purgatory.notify((part.topic, part.partition))
            if origin is AppendOrigin.CLIENT:
                self._metrics.produced(part.topic, result.last_offset - result.base_offset + 1, len(buf))
        return result

    def append_coordinator_records(self, topic: str, partition: int, buf, headers, transactional: bool = False):
        """A coordinator's batch (origin COORDINATOR: the group, transaction and share coordinators'
        records in __consumer_offsets, __transaction_state and __share_group_state; the stores'
        CoordinatorAppend, groupcoord/offsets_topic.py), as Kafka's appendRecords with
        AppendOrigin.COORDINATOR: no min.insync.replicas check before it (the coordinator's own
        acks=-1 wait, `wait_appended`, answers for the ISR), stamped with the partition's leader
        epoch (-1 when not hosted), a `transactional` batch (TxnOffsetCommit) appended as not a
        client's; then the fetches waiting on the partition are woken. Not counted in the produce
        metrics. The high watermark is left to the coordinator's wait (`wait_appended`,
        `wait_for_replication`) and to the next consumer read, which move it first: a coordinator
        checks it right after appending (TransactionCoordination.after_state_replicated) and
        completes at once only where it always does (an ISR of one with auto high watermark).
        Raises KafkaError: NOT_LEADER_OR_FOLLOWER without a log here, else what PartitionLog.append
        raises."""
        plog = self.logs.get_log(topic, partition)
        if plog is None:
            raise KafkaError(f"no local log for {topic}-{partition}", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        part = self._partitions.get((topic, partition))
        epoch = -1 if part is None else part.leader_epoch
        if transactional:
            result = plog.append(buf, leader_epoch=epoch, validated=headers, from_client=False)
        else:
            result = plog.append(buf, leader_epoch=epoch, validated=headers)
        self._purgatory.notify((topic, partition))
        return result

    def append_txn_marker(self, part: Partition, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                          commit: bool):
        """A transaction marker (origin COORDINATOR: WriteTxnMarkers, or the coordinator's own
        markers on a partition led here) appended at the partition's leader epoch; then, as for
        `append_records`, the fetches waiting on the partition are woken and the high watermark
        may move. Raises KafkaError as PartitionLog.append_txn_marker does (NOT_LEADER_OR_FOLLOWER
        without a log here). What the answer waits for is `wait_appended`'s."""
        topic, index = part.topic, part.partition
        plog = self.logs.get_log(topic, index)
        if plog is None:
            raise KafkaError(f"no local log for {topic}-{index}", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        result = plog.append_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit,
                                        leader_epoch=part.leader_epoch)
        self._purgatory.notify((topic, index))
        self.on_leader_append(part)
        return result

    async def wait_appended(self, topic: str, partition: int, timeout_s: float, *, fsync: bool = True,
                            end_offset: int | None = None) -> int:
        """A coordinator's write (acks=all) to a partition led here: wait until what its log holds
        now is on disk (fsync-on-ack, when `fsync`) and on the ISR (at once for an ISR of one).
        NONE; UNKNOWN_TOPIC_OR_PARTITION without a log here; KAFKA_STORAGE_ERROR when the fsync
        failed; else what `wait_for_replication` answers. The caller maps it as its coordinator does.

        With `end_offset` (the offset after the write, taken when it was appended: a marker, a
        transaction state record), only the ISR is waited for, up to that offset: the acks=all
        wait itself, NOT_LEADER_OR_FOLLOWER without the partition here."""
        if end_offset is not None:
            return await self.wait_for_replication(topic, partition, end_offset, timeout_s)
        plog = self.logs.get_log(topic, partition)
        if plog is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if fsync and plog.config.fsync_on_ack:
            try:
                await self.wait_synced(((topic, partition),))
            except Exception as exc:  # noqa: BLE001 - the fsync failed: its log dir is full or offline now
                log.warning("%s-%d: the write could not be made durable: %s", topic, partition, exc)
                return ErrorCode.KAFKA_STORAGE_ERROR
        return await self.wait_for_replication(topic, partition, plog.log_end_offset, timeout_s)

    async def wait_synced(self, partitions) -> None:
        """fsync-on-ack for a coordinator's writes to several partitions ((topic, partition)
        pairs) at once: wait until what their logs hold now is on disk, one group-commit round
        for all. Partitions without a log here, with an empty log or without fsync-on-ack are
        skipped. Raises the flusher's error when an fsync failed (the log dir is full or offline
        now): `wait_appended` answers KAFKA_STORAGE_ERROR for it, other callers decide."""
        syncs = []
        for topic, partition in partitions:
            plog = self.logs.get_log(topic, partition)
            if plog is not None and plog.config.fsync_on_ack and plog.log_end_offset > 0:
                syncs.append(plog.sync_until(plog.log_end_offset - 1))
        if syncs:
            from .durability import wait_durable  # with the first fsync-on-ack write, not at start-up

            await wait_durable(*syncs)

    def read_for_consumer(self, topic: str, partition: int, fetch_offset: int, current_leader_epoch: int,
                          max_bytes: int, min_one_batch: bool, read_committed: bool) -> PartitionData:
        """A consumer's fetch of one partition led here (Kafka's readFromLog for a consumer): up to
        the high watermark, or the last stable offset for read_committed, with the aborted
        transactions of what it returns."""
        if PartitionData is None:
            _load_fetch_types()
        part = self._partitions.get((topic, partition))
        if part is None or not part.is_leader or part.log.is_offline or (
                current_leader_epoch >= 0 and current_leader_epoch != part.leader_epoch):
            return PartitionData(partition_index=partition, high_watermark=-1, records=b"",
                                 error_code=self.leader_error(topic, partition, current_leader_epoch))
        plog = part.log
        if not plog.auto_high_watermark and plog.high_watermark < plog.log_end_offset:
            self.on_leader_append(part)  # appends made outside the produce path
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        data = PartitionData(partition_index=partition, error_code=0, high_watermark=hw, last_stable_offset=lso,
                             log_start_offset=plog.log_start_offset, records=b"",
                             aborted_transactions=[] if read_committed else None)
        try:
            result = plog.read(fetch_offset, max_bytes, max_offset=lso if read_committed else hw,
                               min_one_batch=min_one_batch)
        except KafkaError as exc:
            data.error_code = exc.code
            return data
        data.records = result.records
        if read_committed and result.records:
            # the consumer drops these producers' batches from first_offset to their abort marker
            data.aborted_transactions = [
                FetchResponse.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                for a in plog.aborted_transactions(fetch_offset, result.next_offset)]
        return data

    def on_leader_append(self, part: Partition) -> None:
        """After an append to a partition led here: the high watermark may move (the leader's
        end counts as soon as enough followers have it)."""
        if part.maybe_increment_hw(_now_ms()):
            self.high_watermark_changed(part.topic, part.partition)

    def refresh_high_watermark(self, topic: str, partition: int) -> None:
        """Recompute a led partition's high watermark if the log is ahead of it. Appends made
        outside the produce path (coordinators, markers) do not do it themselves."""
        part = self._partitions.get((topic, partition))
        if part is not None and part.is_leader and part.log.high_watermark < part.log.log_end_offset:
            self.on_leader_append(part)

    def read_for_follower(self, replica_id: int, topic: str, partition: int, fetch_offset: int,
                          follower_log_start: int, current_leader_epoch: int, last_fetched_epoch: int,
                          max_bytes: int, min_one_batch: bool, update_progress: bool) -> PartitionData:
        """A follower's fetch of one partition led here: fenced by the leader epoch, answered
        with a diverging epoch or records up to our log end, and counted as follower progress
        (only when `update_progress`: the first read of a fetch, not the re-reads of a long poll).
        A throttled partition's records are left out for a follower outside the ISR while the
        leader quota is exceeded (Kafka's shouldLeaderThrottle); the caller records the bytes sent."""
        if PartitionData is None:
            _load_fetch_types()
        data = PartitionData(partition_index=partition, error_code=ErrorCode.NONE, high_watermark=-1,
                             last_stable_offset=-1, log_start_offset=-1, records=b"", aborted_transactions=None)
        part = self._partitions.get((topic, partition))
        if part is None:
            data.error_code = (ErrorCode.NOT_LEADER_OR_FOLLOWER if self._metadata_has(topic, partition)
                               else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return data
        code = part.leader_epoch_error(current_leader_epoch)
        if code == ErrorCode.NONE and not part.is_leader:
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if code == ErrorCode.NONE and (replica_id == self.node_id or replica_id not in part.replicas):
            code = ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch >= 0 else ErrorCode.NOT_LEADER_OR_FOLLOWER
        if code:
            data.error_code = code
            return data
        plog = part.log
        # Measured before the read: appends racing this fetch must not count against the
        # follower's caught-up time.
        leader_end = plog.log_end_offset
        data.high_watermark = plog.high_watermark
        data.log_start_offset = plog.log_start_offset
        data.last_stable_offset = plog.last_stable_offset
        try:
            if last_fetched_epoch >= 0:
                diverging = part.diverging_epoch(last_fetched_epoch, fetch_offset)
                if diverging is not None:
                    data.diverging_epoch = FetchResponse.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
                    return data
            result = plog.read(fetch_offset, max_bytes, min_one_batch=min_one_batch)
        except KafkaError as exc:
            data.error_code = exc.code
            return data
        if not self.throttle.should_leader_throttle(topic, partition, replica_id in part.isr):
            data.records = result.records
        if update_progress and part.update_follower_fetch(replica_id, fetch_offset, follower_log_start, _now_ms(),
                                                          leader_end):
            self.high_watermark_changed(topic, partition)
        return data

    async def wait_for_replication(self, topic: str, partition: int, required_offset: int,
                                   timeout_s: float) -> int:
        """acks=all: wait until the high watermark reaches `required_offset` (the offset after the
        last one appended). NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is (or fell) below
        the minimum, REQUEST_TIMED_OUT, or NOT_LEADER_OR_FOLLOWER once leadership is lost.

        Only a lost leadership ends the wait, not a newer leader epoch with this broker still
        leader (Kafka's checkEnoughReplicasReachOffset looks at leadership only): the controller
        re-elects the same leader at a newer epoch when it takes a dead broker out of the ISR, and
        the write is still in the log. NOT_LEADER_OR_FOLLOWER tells a producer (librdkafka: "not
        persisted") that the batch was not written; after an abort it reuses those sequence
        numbers, and a broker that has the batch must then answer OUT_OF_ORDER_SEQUENCE_NUMBER."""
        key = (topic, partition)
        part = self._partitions.get(key)
        if part is None or not part.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        term = part.leader_term
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        self.on_leader_append(part)  # the write may not have been through the produce path
        watch = (replicated_key(topic, partition),)
        while True:
            if self._closed or self._partitions.get(key) is not part or not part.is_leader \
                    or part.leader_term != term:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if part.log.is_offline:
                return ErrorCode.KAFKA_STORAGE_ERROR
            if part.log.high_watermark >= required_offset:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if part.under_min_isr() else ErrorCode.NONE
            if part.under_min_isr():
                # the high watermark cannot move below the minimum ISR: waiting cannot succeed
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            await self._purgatory.wait_any(watch, remaining)
