"""Share group coordination (KIP-932) wired to this broker, beside group_coordination.py and
transaction_coordination.py: the share group coordinator with its connections to the other
brokers' share coordinators, share sessions, acknowledgements applied to share-partitions led
here, and their state kept durable in __share_group_state, here or through the share
coordinator of another broker (Read/WriteShareGroupState).

The broker builds its ShareCoordination on the first share request (Broker.share_coordination),
so a broker without share groups never imports it; the share group handlers
(handlers/share_groups.py) decode requests, call it and build responses.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..groupcoord.offsets_topic import OffsetsTopicStore, offsets_topic_configs
from ..groupcoord.share import AckBatch, ShareGroupConfig, ShareGroupCoordinator, validate_ack_batches
from ..groupcoord.share.partition import ACK_NOT_IN_WINDOW
from ..groupcoord.share.state_records import ShareState
from ..groupcoord.share.state_store import SHARE_STATE_TOPIC, UPDATES_PER_SNAPSHOT, ShareStateStore
from ..net.peers import PeerConnections
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages import ReadShareGroupStateRequest, WriteShareGroupStateRequest
from ..security.inter_broker import inter_broker_options
from .coordinator_writes import replicated
from .log_throttle import PeerLogThrottle

if TYPE_CHECKING:
    from ..groupcoord import GroupCoordinator
    from ..metadata.store import MetadataStore
    from ..replication.interfaces import Wakeups
    from ..replication.replica_manager import ReplicaManager
    from .config import BrokerConfig
    from .partitions import PartitionManager

log = logging.getLogger(__name__)
_state_log = PeerLogThrottle(log, first=1, interval_s=10.0)

# most acknowledgement offsets one request may carry (more is INVALID_REQUEST, nothing applied)
MAX_ACK_OFFSETS = 1 << 20
_INT32_MAX = 2**31 - 1

# Kafka 4.4's persister (PersisterStateManager): a share coordinator that cannot be reached, or
# answers a retriable error, is asked again after 1 s, doubling (20 % jitter), 5 attempts in all;
# the ShareFetch / ShareAcknowledge waits meanwhile instead of answering an error the client
# would retry at once (a storm of requests while the coordinator is down)
STATE_WRITE_ATTEMPTS = 5
STATE_WRITE_BACKOFF_S = 1.0
_RETRIABLE_STATE_ERRORS = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


def coordinator_error(manager, group_id: str) -> int:
    """The group coordinator checks of the classic and consumer groups, for a share group (`manager`:
    the group coordinator's GroupManager)."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    if manager.is_loading(group_id):
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if not manager.is_local(group_id):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.NONE


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= _INT32_MAX else epoch + 1


class _CoalescedWrites:
    """Share state writes to state partitions led here, from requests handled in the same turn of
    the event loop, stored together: one append per state partition and one wait for all of them
    (Kafka's coordinator runtime batches appends the same way, share.coordinator.append.linger.ms).
    The writes are stored in the order they were asked for, so deltas of one share-partition from
    two requests are laid over each other in order."""

    def __init__(self, write_local) -> None:
        self._write_local = write_local   # ShareCoordination._write_local
        self._pending: list = []   # (store, writes, future)

    async def write(self, store, writes) -> list[int]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((store, writes, future))
        if len(self._pending) == 1:
            loop.call_soon(lambda: loop.create_task(self._flush()))
        return await future

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        store = batch[0][0]
        writes = [write for _, ws, _ in batch for write in ws]
        try:
            errors = await self._write_local(store, writes)
        except Exception as exc:  # noqa: BLE001  every waiter gets an answer
            log.warning("writing share state failed: %s", exc)
            errors = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(writes)
        at = 0
        for _, ws, future in batch:
            if not future.done():
                future.set_result(errors[at:at + len(ws)])
            at += len(ws)


class ShareCoordination:
    """The broker's share group coordinator (`groups`, kafkapy/groupcoord/share) and what it needs
    of the broker: partition logs and replicas, wake-ups, the metadata store, the group coordinator
    (a share group is coordinated where its __consumer_offsets partition is led)."""

    def __init__(self, config: BrokerConfig, metadata: MetadataStore, partitions: PartitionManager,
                 replicas: ReplicaManager, purgatory: Wakeups, group_coordinator: Callable[[], GroupCoordinator],
                 node_id: int) -> None:
        self.config = config
        self.metadata = metadata
        self.partitions = partitions
        self.replicas = replicas
        self.purgatory = purgatory
        self._group_coordinator = group_coordinator
        # share state requests go to the leader of the __share_group_state partition
        peers = PeerConnections(
            "share-state", metadata.broker_endpoint, client_id=f"broker-{node_id}-share",
            request_timeout_s=10, **inter_broker_options(config))
        self.groups = ShareGroupCoordinator(
            ShareGroupConfig.from_getter(config.get), metadata.get_topic,
            metadata.get_group_configs, metadata.set_group_configs, peers=peers)

    def close(self) -> None:
        self.groups.close()  # its connections to other brokers' share coordinators

    def coordinator_error(self, group_id: str) -> int:
        return coordinator_error(self._group_coordinator().manager, group_id)

    def topic_name(self, topic_id) -> str | None:
        meta = self.partitions.topic_by_id(topic_id)
        return meta.name if meta is not None else None

    def notify(self, group_id: str, topic: str, partition: int) -> None:
        """Wake the fetches waiting on a share-partition."""
        self.purgatory.notify(("share", group_id, topic, partition))

    # -- share sessions ------------------------------------------------------------------------
    def wake_released(self) -> None:
        """Fetches waiting on share-partitions whose records a closed session gave back."""
        for session in self.groups.take_released():
            for topic, partition, _ in session.partitions:
                self.purgatory.notify(("share", session.group_id, topic, partition))

    def session_for(self, group_id: str, member_id: str, epoch: int, has_acks: bool, is_fetch: bool,
                    connection=None):
        """(error, session) for a request's share session epoch: 0 opens one (ShareFetch only, and
        without acknowledgements), -1 closes it after its acknowledgements, others must be the next.
        A session ends with the connection that opened it (Kafka's ShareSessionCache disconnect
        listener): what the member held goes back to the group then, not when its locks expire."""
        share = self.groups
        if epoch == 0:
            if not is_fetch:
                return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
            if has_acks:
                return ErrorCode.INVALID_REQUEST, None
            session = share.open_session(group_id, member_id, time.monotonic())
            if connection is not None:
                self._end_with(connection, session)
            self.wake_released()
            return ErrorCode.NONE, session
        error, session = share.session_error(group_id, member_id, epoch)
        if error:
            return error, None
        share.touch(session, time.monotonic())
        if epoch != -1:
            session.epoch = _next_epoch(epoch)
        return ErrorCode.NONE, session

    def _end_with(self, connection, session) -> None:
        def closed() -> None:
            if self.groups.connection_closed(session):
                self.wake_released()

        if connection.on_close is None:
            connection.on_close = {}
        # one entry per member: a session opened again on this connection replaces the last one
        connection.on_close[("share-session", session.group_id, session.member_id)] = closed

    def close_session(self, group_id: str, session) -> None:
        """End a session (epoch -1) and wake the fetches waiting on what it gave back."""
        if self.groups.close_session(session):
            for name, partition, _ in session.partitions:
                self.purgatory.notify(("share", group_id, name, partition))

    # -- share-partitions led here -------------------------------------------------------------
    def leader_error(self, topic: str, partition: int) -> int:
        hosted = self.replicas.partition(topic, partition)
        if hosted is None or not hosted.is_leader:
            meta = self.partitions.topic(topic)
            if meta is None or partition >= meta.partition_count:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if hosted.log.is_offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def acknowledge(self, group_id: str, member_id: str, topic: str, topic_id, partition: int,
                    wire_batches, allow_renew: bool, now: float, dirty: set) -> tuple[int, str | None]:
        """(error, message) of one partition's acknowledgements, applied when NONE."""
        share = self.groups
        batches = [AckBatch(b.first_offset, b.last_offset, b.acknowledge_types) for b in wire_batches]
        error = validate_ack_batches(batches, allow_renew, MAX_ACK_OFFSETS)
        if error:
            return error, None
        error = self.leader_error(topic, partition)
        if error:
            return error, None
        if not self.current_share_partition(group_id, topic, partition):
            return ErrorCode.INVALID_RECORD_STATE, ACK_NOT_IN_WINDOW
        sp = share.partitions[(group_id, topic, partition)]
        sp.expire_locks(now)
        error = sp.acknowledge(member_id, batches, share.lock_duration_s(group_id), now)
        if error:
            return error, sp.refusal
        dirty.add((topic, topic_id, partition))
        self.purgatory.notify(("share", group_id, topic, partition))
        return ErrorCode.NONE, None

    def current_share_partition(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether the share-partition in memory is this leadership's: one from an earlier time this
        broker led the partition is dropped (another leader has changed the state since). A new leader
        epoch under the same leader keeps it (Kafka's ZooKeeper controller bumps the epoch when it takes
        a dead follower out of the ISR; the records members hold stay theirs): the replica's leadership
        term, not its epoch, tells (replication/partition.py)."""
        share = self.groups
        key = (group_id, topic, partition)
        sp = share.partitions.get(key)
        if sp is None or share.drop_if_recreated(key):
            return False
        hosted = self.replicas.partition(topic, partition)
        term = hosted.leader_term if hosted is not None and hosted.is_leader else -1
        if sp.leader_term is None:
            sp.leader_term = term
        elif sp.leader_term != term:
            del share.partitions[key]
            return False
        return True

    # -- durable state: __share_group_state -------------------------------------------------------
    def state_store(self) -> ShareStateStore | None:
        """The store of share-partition state, creating __share_group_state on first use as Kafka's
        share coordinator does; None while it cannot be created (state then stays in memory)."""
        share = self.groups
        if share.state_store is not None:
            return share.state_store
        now = time.monotonic()
        if now < share.state_store_retry_at:
            return None
        get = self.config.get
        meta = self.partitions.topic(SHARE_STATE_TOPIC)
        if meta is None:
            try:
                meta = self.partitions.create_topic(
                    SHARE_STATE_TOPIC, get("share.coordinator.state.topic.num.partitions"),
                    get("share.coordinator.state.topic.replication.factor"),
                    configs=offsets_topic_configs(get("share.coordinator.state.topic.segment.bytes")), internal=True)
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    share.state_store_retry_at = now + 10
                    log.warning("cannot create %s, share group state is kept in memory for now: %s",
                                SHARE_STATE_TOPIC, exc)
                    return None
                meta = self.partitions.topic(SHARE_STATE_TOPIC)
        store = OffsetsTopicStore(
            log_for=lambda p: self.partitions.get_log(SHARE_STATE_TOPIC, p), topic=SHARE_STATE_TOPIC,
            append_batch=self.replicas.append_coordinator_records)

        def local_epoch(state_partition: int) -> int | None:
            hosted = self.replicas.partition(SHARE_STATE_TOPIC, state_partition)
            if hosted is None or not hosted.is_leader or self.partitions.get_log(SHARE_STATE_TOPIC, state_partition) is None:
                return None
            return hosted.leader_epoch

        try:  # Kafka's share.coordinator.snapshot.update.records.per.snapshot, where the config table has it
            per_snapshot = int(get("share.coordinator.snapshot.update.records.per.snapshot"))
        except (KeyError, ValueError, TypeError):
            per_snapshot = UPDATES_PER_SNAPSHOT
        share.state_store = ShareStateStore(store, len(meta.partitions), local_epoch, per_snapshot)
        return share.state_store


    async def drop_replaced_states(self, group_id: str, targets) -> None:
        """When a member opens a share session: drop the share-partitions in memory whose stored state
        has a newer state epoch (the group's offsets were reset or deleted by its coordinator while
        the group was empty, so nothing of them is in flight), so that the fetch loads the new state.
        Only share-partitions with nothing acquired are checked: one with records in flight belongs
        to a group that had members, which AlterShareGroupOffsets refuses (NON_EMPTY_GROUP)."""
        share = self.groups
        for name, partition, topic_id in targets:
            sp = share.partitions.get((group_id, name, partition))
            if sp is None or sp.counts()["ACQUIRED"]:
                continue
            ok, stored = await self.stored_state(group_id, topic_id, partition)
            if ok and stored is not None and stored.state_epoch > sp.state_epoch:
                log.info("share state of %s/%s-%d was replaced (state epoch %d): loading it again",
                         group_id, name, partition, stored.state_epoch)
                share.partitions.pop((group_id, name, partition), None)


    async def stored_state(self, group_id: str, topic_id, partition: int):
        """(ok, state): the stored state of a share-partition, read here or from the share
        coordinator (ReadShareGroupState); ok is False when it could not be read (try again later)."""
        store = self.state_store()
        if store is None:
            return True, None
        state_partition = store.partition_of(group_id, topic_id, partition)
        if store.is_local(state_partition):
            # a start offset of -1: the state was deleted (DeleteShareGroupOffsets, DeleteGroups); it is
            # returned all the same, for its state epoch
            return True, store.read(group_id, topic_id, partition)
        R = ReadShareGroupStateRequest
        response = await self._call_coordinator(state_partition, R(group_id=group_id, topics=[R.ReadStateData(
            topic_id=topic_id, partitions=[R.PartitionData(partition=partition, leader_epoch=-1)])]))
        if response is None:
            return False, None
        result = response.results[0].partitions[0]
        if result.error_code:
            log.info("reading the state of %s/%s-%d from the share coordinator: %s", group_id, topic_id, partition,
                     ErrorCode(result.error_code).name)
            return False, None
        if result.start_offset < 0 and result.state_epoch <= 0:
            return True, None  # nothing stored
        return True, ShareState(result.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                                      for b in result.state_batches], state_epoch=result.state_epoch)


    async def _call_coordinator(self, state_partition: int, request):
        """Send a share state request to the leader of the __share_group_state partition; None
        when it cannot be reached."""
        meta = self.partitions.topic(SHARE_STATE_TOPIC)
        if meta is None or state_partition >= len(meta.partitions):
            return None
        leader = meta.partitions[state_partition].leader
        if leader < 0:
            return None
        try:  # net/peers.py: the connection to that broker, made or retargeted as needed
            return await self.groups.peers.send(leader, request, 0)
        except Exception as exc:  # no endpoint, a connection failure, a timeout: the caller retries later
            # one line per broker and 10 s, then a count: clients retry at once, so an unreachable share
            # coordinator would otherwise write a line per fetch (tens of thousands in a few seconds)
            _state_log.log(logging.INFO, f"broker {leader}", "share state request to broker %d failed: %s", leader, exc)
            return None


    async def write_state(self, store, group_id: str, topic_id, partition: int, state: ShareState) -> int:
        """Write a share-partition's state where it is kept and wait until it is durable: `state`
        holds the batches that changed, laid over the stored state (a state epoch newer than the
        stored one replaces it). A share coordinator on another broker that cannot be reached is
        tried again with Kafka's persister backoff before the error is answered."""
        state_partition = store.partition_of(group_id, topic_id, partition)
        error = ErrorCode.NONE
        for attempt in range(STATE_WRITE_ATTEMPTS):
            if attempt:
                delay = STATE_WRITE_BACKOFF_S * (2 ** (attempt - 1))
                await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            if store.is_local(state_partition):   # the coordinator may have moved here meanwhile
                return (await self._write_local(store, [(group_id, topic_id, partition, state)]))[0]
            W = WriteShareGroupStateRequest
            response = await self._call_coordinator(state_partition, W(group_id=group_id, topics=[W.WriteStateData(
                topic_id=topic_id, partitions=[W.PartitionData(
                    partition=partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
                    start_offset=state.start_offset, state_batches=[
                        W.StateBatch(first_offset=f, last_offset=l, delivery_state=st, delivery_count=c)
                        for f, l, st, c in state.batches])])]))
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE if response is None else \
                response.results[0].partitions[0].error_code
            if error not in _RETRIABLE_STATE_ERRORS:
                return error
        return error


    @staticmethod
    def _fenced(store, group_id: str, topic_id, partition: int, state: ShareState) -> bool:
        """The state was replaced (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups) since
        the writer loaded it: its copy is stale (Kafka's share coordinator: FENCED_STATE_EPOCH)."""
        stored = store.read(group_id, topic_id, partition)
        return stored is not None and state.state_epoch < stored.state_epoch


    async def _write_local(self, store, writes) -> list[int]:
        """Writes (group id, topic id, partition, state) to state partitions led here: one append per
        state partition for all of them, then one wait until each is durable; an error per write."""
        errors = [ErrorCode.NONE] * len(writes)
        accepted = []
        for i, (group_id, topic_id, partition, state) in enumerate(writes):
            if self._fenced(store, group_id, topic_id, partition, state):
                errors[i] = ErrorCode.FENCED_STATE_EPOCH
            else:
                accepted.append(i)
        if not accepted:
            return errors
        try:
            written = store.write_many([(*writes[i], False) for i in accepted])
        except KafkaError as exc:
            log.warning("writing the share state of %s failed: %s",
                        ", ".join(f"{g}/{t}-{p}" for g, t, p, _ in (writes[i] for i in accepted)), exc)
            for i in accepted:
                errors[i] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return errors
        outcome: dict[int, int] = {}
        for state_partition in written:
            # a failed fsync raises here rather than answering an error code
            await self.replicas.wait_synced(((SHARE_STATE_TOPIC, state_partition),))
            outcome[state_partition] = await replicated(self, SHARE_STATE_TOPIC, state_partition,
                                                      self.config.get("offsets.commit.timeout.ms"))
        for i in accepted:
            group_id, topic_id, partition, _ = writes[i]
            state_partition = store.partition_of(group_id, topic_id, partition)
            errors[i] = outcome.get(state_partition, ErrorCode.NOT_COORDINATOR)
        return errors


    def _coalesced_writes(self) -> _CoalescedWrites:
        share = self.groups
        writer = share.state_writes
        if writer is None:
            writer = share.state_writes = _CoalescedWrites(self._write_local)
        return writer

    async def persist(self, group_id: str, dirty) -> int:
        """Write what changed in the share-partitions in `dirty` ((topic, topic id, partition)) as
        deltas (SharePartition.take_delta) and wait until they are as durable as a coordinator's
        write: those kept here in one append per state partition (with those of the other requests
        of this turn of the event loop, _CoalescedWrites), the others with a
        WriteShareGroupState to their share coordinator. The error for the response, else NONE."""
        share = self.groups
        store = self.state_store() if dirty else None
        if store is None:
            return ErrorCode.NONE
        local, remote = [], []
        for topic, topic_id, partition in dirty:
            sp = share.partitions.get((group_id, topic, partition))
            if sp is None:
                continue
            delta = sp.take_delta()
            if delta is None:
                continue   # nothing durable changed (a renewal, a release below the delivery limit)
            start, batches = delta
            state = ShareState(start, batches, state_epoch=sp.state_epoch,
                               leader_epoch=self.partitions.leader_epoch(topic, partition))
            local_write = store.is_local(store.partition_of(group_id, topic_id, partition))
            (local if local_write else remote).append(((topic, partition, sp), (group_id, topic_id, partition, state)))
        results = []
        if local:
            errors = await self._coalesced_writes().write(store, [write for _, write in local])
            results += [(who, error) for (who, _), error in zip(local, errors)]
        for who, (_, topic_id, partition, state) in remote:
            results.append((who, await self.write_state(store, group_id, topic_id, partition, state)))
        first_error = ErrorCode.NONE
        for (topic, partition, sp), error in results:
            if error == ErrorCode.FENCED_STATE_EPOCH:
                # the group's offsets were reset or deleted meanwhile: the next fetch loads the new state
                log.info("share state of %s/%s-%d replaced by its group coordinator: loading it again",
                         group_id, topic, partition)
                if share.partitions.get((group_id, topic, partition)) is sp:
                    share.partitions.pop((group_id, topic, partition), None)
            elif error:
                sp.write_failed()   # the delta is lost: the next write is the whole window
            first_error = first_error or error
        return first_error

    # -- AlterShareGroupOffsets / DeleteShareGroupOffsets / DeleteGroups -------------------------
    async def replace_state(self, group_id: str, topic: str, topic_id, partition: int, start: int) -> int:
        """Give a share-partition a fresh state starting at `start` (-1: no state, as if never
        fetched), with the next state epoch, as Kafka's InitializeShareGroupState: a share-partition
        leader still holding the old state is refused its next write (FENCED_STATE_EPOCH) and loads
        the new one. The copy in memory here is dropped, so the next fetch starts from what is stored."""
        sp = self.groups.partitions.pop((group_id, topic, partition), None)
        store = self.state_store()
        if store is None:
            return ErrorCode.NONE
        ok, stored = await self.stored_state(group_id, topic_id, partition)
        if not ok:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        epoch = max(stored.state_epoch if stored is not None else 0, sp.state_epoch if sp is not None else 0) + 1
        return await self.write_state(store, group_id, topic_id, partition, ShareState(
            start, [], state_epoch=epoch, leader_epoch=self.partitions.leader_epoch(topic, partition)))

    def has_share_state(self, group_id: str, name: str, topic_id) -> bool:
        share = self.groups
        if topic_id in share.initialized_partitions(group_id):
            return True
        if any(g == group_id and topic == name for g, topic, _ in share.partitions):
            return True
        store = self.state_store() if share.state_store is not None else None
        return store is not None and any(g == group_id and t == topic_id for g, t, _ in store.local_keys())

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """DeleteGroups for share groups coordinated here: an empty one goes with its share state
        (the share-partitions this broker knows of: in memory or in the __share_group_state
        partitions it leads); one with members is NON_EMPTY_GROUP. Groups that are not share
        groups are left out of the answer."""
        share = self.groups
        results: dict[str, int] = {}
        for group_id in group_ids:
            if share.describe(group_id) is None or self.coordinator_error(group_id):
                continue
            error, _ = share.empty_group_for_offsets(group_id, False)
            if error:
                results[group_id] = error
                continue
            known = {(topic, partition) for g, topic, partition in share.partitions if g == group_id}
            store = self.state_store()
            if store is not None:
                known |= {(self.topic_name(topic_id), partition)
                          for g, topic_id, partition in store.local_keys() if g == group_id}
            for topic, partition in sorted(k for k in known if k[0] is not None):
                meta = self.partitions.topic(topic)
                if meta is not None:
                    error = await self.replace_state(group_id, topic, meta.topic_id, partition, -1) or error
            if error == ErrorCode.NONE:
                share.delete_group(group_id)
            results[group_id] = error
        return results
