"""Follower fetchers: copy the partitions this broker follows from their leaders.

One asyncio task per leader broker (num.replica.fetchers=1), each sending Fetch v16 as a 3.7
follower does: replica_state = (our node id, our broker epoch), topic ids, and per partition the
current leader epoch and the epoch of the last batch we hold (`last_fetched_epoch`). Sessions are
not used: every request is a full fetch (session id 0, final epoch), which any leader serves.

What a response does to a partition (as Kafka's AbstractFetcherThread.processFetchRequest, with
ReplicaFetcherThread's follower append and truncation):
- records: appended as they are (offsets and epochs kept) with `append_as_follower`; then the high
  watermark becomes min(leader HW, our log end) and the log start follows the leader's.
- `diverging_epoch`: truncate to where our log agrees with the leader's, then fetch again.
- OFFSET_OUT_OF_RANGE: ask the leader's log end (ListOffsets v8 LATEST); if it is below ours,
  truncate to it (an unclean election); else ask its log start (EARLIEST): past our end means start
  over there, otherwise resume at our end.
- fencing, not-leader, unknown partition and other errors: back off replica.fetch.backoff.ms and
  try again; the next LeaderAndIsr replaces the partition's fetch state anyway.
- network errors: back off and retry; the leader's address is looked up before every request (it
  may re-register elsewhere), and a leader not in the metadata yet is waited for.

Replication throttles (throttle.py): a partition this broker throttles as follower is left out of
a request while it has not caught up and the follower quota is exceeded (when every ready partition
is, the fetcher sleeps replica.fetch.backoff.ms, as Kafka's does on an empty fetch); the bytes
received for throttled partitions are recorded against the quota.

Every response is checked against the partition's current state before it is applied: a
LeaderAndIsr, StopReplica or truncation while the request was out replaces or moves that state,
and the stale answer is dropped. Failures are logged once per change of state, not per fetch.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..log.errors import KafkaStorageError
from ..net.client import BrokerConnection, BrokerConnectionError
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages import FetchRequest, ListOffsetsRequest
from ..protocol.records import iter_batch_headers
from ..security.inter_broker import inter_broker_options

if TYPE_CHECKING:
    from ..log.partition_log import PartitionLog
    from .throttle import ReplicationThrottle
    from .interfaces import LocalBroker

__all__ = ["FetchPosition", "ReplicaFetcher", "ReplicaFetcherManager"]

log = logging.getLogger(__name__)

FETCH_VERSION = 16
FETCH_VERSION_WITHOUT_IDS = 12  # what a 3.7 follower falls back to when a topic has no id
LIST_OFFSETS_VERSION = 8
LATEST = -1
EARLIEST = -2
FINAL_SESSION_EPOCH = -1
_ZERO_UUID = uuid.UUID(int=0)
_LENGTH = struct.Struct(">i")
_LOG_OVERHEAD = 12  # base offset + batch length


@dataclass(slots=True, eq=False)
class FetchPosition:
    """Where one followed partition is fetched from, and from which offset; replaced (not
    changed) by each LeaderAndIsr, so that answers to older requests can be told apart."""

    topic: str
    partition: int
    topic_id: uuid.UUID | None
    leader_id: int
    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log: PartitionLog
    delayed_until: float = 0.0
    error: int = ErrorCode.NONE  # the last problem logged for this partition
    # Kafka's PartitionFetchState.isReplicaInSync: the last response that brought records left us
    # at (or past) the leader's high watermark; unknown (False) until then
    caught_up: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition


class _FetchSettings:
    """The replica.* configs a fetcher reads (read-only in Kafka, so read once)."""

    __slots__ = ("max_bytes", "response_max_bytes", "wait_ms", "min_bytes", "backoff_s", "socket_timeout_s")

    def __init__(self, config):
        self.max_bytes = config.get("replica.fetch.max.bytes")
        self.response_max_bytes = config.get("replica.fetch.response.max.bytes")
        self.wait_ms = config.get("replica.fetch.wait.max.ms")
        self.min_bytes = config.get("replica.fetch.min.bytes")
        self.backoff_s = config.get("replica.fetch.backoff.ms") / 1000
        self.socket_timeout_s = config.get("replica.socket.timeout.ms") / 1000


def whole_batches_length(buf) -> int:
    """Bytes of the complete batches at the start of `buf`: a leader may cut the last one short."""
    pos = 0
    end = len(buf)
    while end - pos >= _LOG_OVERHEAD:
        (length,) = _LENGTH.unpack_from(buf, pos + 8)
        if length <= 0 or pos + _LOG_OVERHEAD + length > end:
            break
        pos += _LOG_OVERHEAD + length
    return pos


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader, one request at a time."""

    def __init__(self, local: LocalBroker, leader_id: int, settings: _FetchSettings,
                 on_high_watermark: Callable[[str, int], None], throttle: ReplicationThrottle | None = None):
        self._local = local
        self.leader_id = leader_id
        self._settings = settings
        self._on_high_watermark = on_high_watermark
        self._throttle = throttle
        self.positions: dict[tuple[str, int], FetchPosition] = {}
        self._wake = asyncio.Event()
        self._conn: BrokerConnection | None = None
        self._task: asyncio.Task | None = None
        self._problem: str | None = None
        self._stopped = False

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader_id}, partitions={len(self.positions)})"

    # ------------------------------------------------------------------ partitions
    def add(self, position: FetchPosition) -> None:
        self.positions[position.key] = position
        log.info("broker %d follows %s-%d from leader %d at epoch %d, fetching from offset %d "
                 "(last fetched epoch %d)", self._local.node_id, position.topic, position.partition,
                 self.leader_id, position.leader_epoch, position.fetch_offset, position.last_fetched_epoch)
        self._wake.set()

    def remove(self, key: tuple[str, int]) -> FetchPosition | None:
        return self.positions.pop(key, None)

    def _current(self, position: FetchPosition, offset: int) -> bool:
        """Whether an answer for `position` at `offset` still applies."""
        return self.positions.get(position.key) is position and position.fetch_offset == offset

    def _delay(self, positions, seconds: float | None = None) -> None:
        until = asyncio.get_running_loop().time() + (self._settings.backoff_s if seconds is None else seconds)
        for position in positions:
            position.delayed_until = until

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    def stop(self) -> asyncio.Task | None:
        # The flag, not only the cancel: on Python 3.11 a cancel that arrives as a request
        # completes (closing the connection completes it) is swallowed by wait_for.
        self._stopped = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        return task

    async def _run(self) -> None:
        while not self._stopped:
            try:
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for leader %d failed; retrying", self.leader_id)
                self._delay(list(self.positions.values()))
                await self._sleep(self._settings.backoff_s)

    async def _sleep(self, timeout: float | None) -> None:
        """Wait until `timeout` passes or a partition is added."""
        if timeout is not None and timeout <= 0:
            return
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def _report(self, problem: str | None) -> None:
        if problem != self._problem:
            if problem is None:
                log.info("broker %d fetches from leader %d again", self._local.node_id, self.leader_id)
            else:
                log.warning("broker %d cannot fetch from leader %d: %s; retrying", self._local.node_id,
                            self.leader_id, problem)
            self._problem = problem

    # ------------------------------------------------------------------ one round
    async def _fetch_once(self) -> None:
        # Cleared before looking, so that a partition added while we wait wakes us.
        self._wake.clear()
        loop = asyncio.get_running_loop()
        now = loop.time()
        ready = [p for p in self.positions.values() if p.delayed_until <= now]
        if not ready:
            soonest = min((p.delayed_until for p in self.positions.values()), default=None)
            await self._sleep(None if soonest is None else soonest - now)
            return
        throttle = self._throttle
        if throttle is not None:
            ready = [p for p in ready if not throttle.should_follower_throttle(p.topic, p.partition, p.caught_up)]
            if not ready:
                await self._sleep(self._settings.backoff_s)
                return
        endpoint = self._local.metadata.broker_endpoint(self.leader_id)
        if endpoint is None:
            self._report("the leader is not in the metadata (yet)")
            await self._sleep(self._settings.backoff_s)
            return
        if self._stopped:
            return
        conn = self._connection(*endpoint)
        request, version, sent = self._request(ready)
        settings = self._settings
        try:
            response = await conn.send(request, version,
                                       timeout_s=settings.socket_timeout_s + settings.wait_ms / 1000)
        except BrokerConnectionError as exc:
            if not self._stopped:  # stopping closes the connection under the request
                self._report(str(exc))
                self._delay(ready)
            return
        if self._stopped:
            return
        if response.error_code != ErrorCode.NONE:
            self._report(f"fetch answered {_error_name(response.error_code)}")
            self._delay(ready)
            return
        self._report(None)
        out_of_range = self._apply_response(response, sent, version)
        for position, offset in out_of_range:
            if self._current(position, offset):
                await self._handle_out_of_range(position, offset)

    def _connection(self, host: str, port: int) -> BrokerConnection:
        if self._conn is None:
            node = self._local.node_id
            self._conn = BrokerConnection(host, port, client_id=f"broker-{node}-fetcher-{self.leader_id}",
                                          request_timeout_s=self._settings.socket_timeout_s,
                                          **inter_broker_options(self._local.config))
        else:
            self._conn.retarget(host, port)
        return self._conn

    def _request(self, ready: list[FetchPosition]):
        settings = self._settings
        with_ids = all(p.topic_id is not None and p.topic_id != _ZERO_UUID for p in ready)
        version = FETCH_VERSION if with_ids else FETCH_VERSION_WITHOUT_IDS
        topics: dict[str, FetchRequest.FetchTopic] = {}
        sent: dict[tuple[str, int], tuple[FetchPosition, int]] = {}
        for position in ready:
            topic = topics.get(position.topic)
            if topic is None:
                topic = topics[position.topic] = FetchRequest.FetchTopic(
                    topic=position.topic, topic_id=position.topic_id if with_ids else _ZERO_UUID, partitions=[])
            topic.partitions.append(FetchRequest.FetchPartition(
                partition=position.partition, current_leader_epoch=position.leader_epoch,
                fetch_offset=position.fetch_offset, last_fetched_epoch=position.last_fetched_epoch,
                log_start_offset=position.log.log_start_offset, partition_max_bytes=settings.max_bytes))
            sent[position.key] = (position, position.fetch_offset)
        node = self._local.node_id
        request = FetchRequest(
            # v15+ names the follower in replica_state only; older versions in replica_id.
            replica_id=-1 if version >= 15 else node,
            replica_state=FetchRequest.ReplicaState(replica_id=node, replica_epoch=self._local.broker_epoch),
            max_wait_ms=settings.wait_ms, min_bytes=settings.min_bytes, max_bytes=settings.response_max_bytes,
            isolation_level=0, session_id=0, session_epoch=FINAL_SESSION_EPOCH, topics=list(topics.values()))
        return request, version, sent

    def _apply_response(self, response, sent, version: int) -> list[tuple[FetchPosition, int]]:
        names = {p.topic_id: p.topic for p, _ in sent.values() if p.topic_id is not None}
        out_of_range = []
        for topic in response.responses:
            name = names.get(topic.topic_id) if version >= 13 else topic.topic
            for data in topic.partitions:
                entry = sent.get((name, data.partition_index))
                if entry is None:
                    continue
                position, offset = entry
                if not self._current(position, offset):
                    continue
                code = data.error_code
                if code == ErrorCode.NONE:
                    try:
                        self._apply_partition(position, data)
                    except KafkaStorageError as exc:
                        # the log is offline until a restart: fetching more cannot help
                        log.error("broker %d stops fetching %s-%d: %s", self._local.node_id, position.topic,
                                  position.partition, exc)
                        self.positions.pop(position.key, None)
                    except KafkaError as exc:
                        self._partition_error(position, exc.code, str(exc))
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((position, offset))
                else:
                    self._partition_error(position, code)
        return out_of_range

    def _partition_error(self, position: FetchPosition, code: int, detail: str | None = None) -> None:
        if position.error != code:
            log.info("broker %d: fetching %s-%d from leader %d at epoch %d: %s%s; backing off", self._local.node_id,
                     position.topic, position.partition, self.leader_id, position.leader_epoch, _error_name(code),
                     f" ({detail})" if detail else "")
            position.error = code
        self._delay([position])

    # ------------------------------------------------------------------ applying data
    def _apply_partition(self, position: FetchPosition, data) -> None:
        plog = position.log
        diverging = data.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            self._truncate_to_leader(position, diverging.epoch, diverging.end_offset)
            return
        records = data.records
        if records is not None and len(records) > 0:
            throttle = self._throttle
            if throttle is not None and throttle.follower_throttled(position.topic, position.partition):
                throttle.follower.record(len(records))
            before = position.fetch_offset
            self._append(position, records)
            if position.fetch_offset != before:
                position.caught_up = data.high_watermark <= position.fetch_offset
        # The follower's high watermark: the leader's, bounded by what we hold.
        old_hw = plog.high_watermark
        plog.high_watermark = min(data.high_watermark, plog.log_end_offset)
        leader_start = data.log_start_offset
        if leader_start > plog.log_start_offset:
            target = min(leader_start, plog.high_watermark)
            if target > plog.log_start_offset:
                plog.delete_records_before(target)
        if plog.high_watermark != old_hw:
            self._on_high_watermark(position.topic, position.partition)
        if position.error != ErrorCode.NONE:
            log.info("broker %d fetches %s-%d from leader %d again at offset %d", self._local.node_id,
                     position.topic, position.partition, self.leader_id, position.fetch_offset)
            position.error = ErrorCode.NONE

    def _append(self, position: FetchPosition, records) -> None:
        plog = position.log
        view = records if isinstance(records, memoryview) else memoryview(records)
        view = view[:whole_batches_length(view)]
        if not view:
            return
        headers = list(iter_batch_headers(view, validate=True))
        end = plog.log_end_offset
        skip = 0
        while skip < len(headers) and headers[skip].next_offset <= end:
            skip += 1  # already held (a leader starts at the batch containing the fetch offset)
        if skip == len(headers):
            return
        first = headers[skip]
        if first.base_offset < end:
            raise KafkaError(f"{position.topic}-{position.partition}: batch {first.base_offset}-{first.last_offset}"
                             f" from leader {self.leader_id} straddles our log end {end}",
                             ErrorCode.CORRUPT_MESSAGE)
        if skip:
            view = view[first.position:]
            headers = list(iter_batch_headers(view, validate=False))
        plog.append_as_follower(view, headers)
        position.fetch_offset = plog.log_end_offset
        position.last_fetched_epoch = plog.leader_epochs.latest_epoch

    def _truncate_to_leader(self, position: FetchPosition, leader_epoch: int, leader_end: int) -> None:
        """The leader says our log leaves its log after epoch `leader_epoch` at `leader_end`."""
        plog = position.log
        end = plog.log_end_offset
        epoch, epoch_end = plog.end_offset_for_epoch(leader_epoch)
        if epoch < 0 or epoch_end < 0:
            # we keep no epochs up to that one: the leader's end is the best we know
            target = min(leader_end, end)
        elif epoch != leader_epoch:
            # we never had the leader's epoch: cut back to the end of our largest smaller one and
            # let the next fetch compare again
            target = min(epoch_end, end)
        else:
            target = min(epoch_end, leader_end, end)
        before = (position.fetch_offset, position.last_fetched_epoch)
        if target < plog.high_watermark:
            log.warning("%s-%d: truncating below the high watermark %d to %d", position.topic,
                        position.partition, plog.high_watermark, target)
        # also when target == end: the epoch cache may hold an entry at our end (recorded when we
        # last became leader) that the leader never had; truncate_to drops it, as Kafka's does
        plog.truncate_to(target)
        log.info("broker %d: %s-%d diverges from leader %d after epoch %d at offset %d; log truncated to %d",
                 self._local.node_id, position.topic, position.partition, self.leader_id, leader_epoch,
                 leader_end, plog.log_end_offset)
        position.fetch_offset = plog.log_end_offset
        position.last_fetched_epoch = plog.leader_epochs.latest_epoch
        if (position.fetch_offset, position.last_fetched_epoch) == before:
            # nothing changed: asking again at once would get the same answer
            self._partition_error(position, ErrorCode.OFFSET_OUT_OF_RANGE, "diverging epoch without progress")

    async def _handle_out_of_range(self, position: FetchPosition, offset: int) -> None:
        plog = position.log
        try:
            leader_end = await self._list_offset(position, LATEST)
            if not self._current(position, offset):
                return
            end = plog.log_end_offset
            if leader_end < end:
                log.warning("broker %d: leader %d of %s-%d ends at %d, below our log end %d (unclean leader "
                            "election?); truncating to it", self._local.node_id, self.leader_id, position.topic,
                            position.partition, leader_end, end)
                plog.truncate_to(leader_end)
            else:
                leader_start = await self._list_offset(position, EARLIEST)
                if not self._current(position, offset):
                    return
                end = plog.log_end_offset
                if leader_start > end:
                    log.info("broker %d: leader %d of %s-%d starts at %d, past our log end %d; starting over there",
                             self._local.node_id, self.leader_id, position.topic, position.partition,
                             leader_start, end)
                    plog.truncate_fully_and_start_at(leader_start)
        except BrokerConnectionError as exc:
            self._report(str(exc))
            self._delay([position])
            return
        except KafkaError as exc:
            self._partition_error(position, exc.code, f"resolving an out-of-range fetch offset: {exc}")
            return
        before = (position.fetch_offset, position.last_fetched_epoch)
        position.fetch_offset = plog.log_end_offset
        position.last_fetched_epoch = plog.leader_epochs.latest_epoch
        if (position.fetch_offset, position.last_fetched_epoch) == before:
            self._partition_error(position, ErrorCode.OFFSET_OUT_OF_RANGE, f"resuming at {position.fetch_offset}")

    async def _list_offset(self, position: FetchPosition, timestamp: int) -> int:
        endpoint = self._local.metadata.broker_endpoint(self.leader_id)
        if endpoint is None:
            raise BrokerConnectionError(f"leader {self.leader_id} is not in the metadata")
        request = ListOffsetsRequest(replica_id=self._local.node_id, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=position.topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=position.partition,
                                                        current_leader_epoch=position.leader_epoch,
                                                        timestamp=timestamp)])])
        response = await self._connection(*endpoint).send(request, LIST_OFFSETS_VERSION,
                                                          timeout_s=self._settings.socket_timeout_s)
        for topic in response.topics:
            for data in topic.partitions:
                if topic.name == position.topic and data.partition_index == position.partition:
                    if data.error_code != ErrorCode.NONE:
                        raise KafkaError(f"ListOffsets answered {_error_name(data.error_code)}", data.error_code)
                    return data.offset
        raise KafkaError("ListOffsets answer does not name the partition", ErrorCode.UNKNOWN_SERVER_ERROR)


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader broker with partitions to fetch."""

    def __init__(self, local: LocalBroker, on_high_watermark: Callable[[str, int], None],
                 throttle: ReplicationThrottle | None = None):
        self._local = local
        self._on_high_watermark = on_high_watermark
        self.throttle = throttle
        self._settings: _FetchSettings | None = None
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._stopping: set[asyncio.Task] = set()

    def add(self, position: FetchPosition) -> None:
        """Fetch `position` from its leader (instead of wherever it was fetched before)."""
        self.remove([position.key])
        fetcher = self.fetchers.get(position.leader_id)
        if fetcher is None:
            if self._settings is None:
                self._settings = _FetchSettings(self._local.config)
            fetcher = self.fetchers[position.leader_id] = ReplicaFetcher(
                self._local, position.leader_id, self._settings, self._on_high_watermark, self.throttle)
            fetcher.start()
        fetcher.add(position)

    def remove(self, keys) -> None:
        for key in keys:
            for fetcher in self.fetchers.values():
                fetcher.remove(key)

    def position(self, topic: str, partition: int) -> FetchPosition | None:
        for fetcher in self.fetchers.values():
            position = fetcher.positions.get((topic, partition))
            if position is not None:
                return position
        return None

    def shutdown_idle(self) -> None:
        """Stop fetchers left without partitions."""
        for leader_id, fetcher in list(self.fetchers.items()):
            if not fetcher.positions:
                del self.fetchers[leader_id]
                task = fetcher.stop()
                if task is not None:
                    self._stopping.add(task)
                    task.add_done_callback(self._stopping.discard)

    async def shutdown(self) -> None:
        tasks = [t for t in (f.stop() for f in self.fetchers.values()) if t is not None]
        self.fetchers.clear()
        tasks += list(self._stopping)
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
