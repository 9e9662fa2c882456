"""The `_schemas` topic as the registry's log, written and read through a Kafka client connection.

Confluent's KafkaStore: one compacted partition, every change a record with a JSON key and value;
the registry's state is what a reader applying the topic from offset 0 arrives at. A write is a
Produce with acks=all to the partition's leader (which may be another broker), and the writer then
waits until its own reader has applied the record, so the state a request sees after its write
includes it, and a registration is answered only once its record is acknowledged. The same client
path works on one node and in a cluster: requests go to the broker the metadata names as leader,
over the inter-broker listener with the broker's inter-broker TLS/SASL settings.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from ..net.client import BrokerConnectionError
from ..net.peers import PeerConnections
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import CreateTopicsRequest, FetchRequest, MetadataRequest, ProduceRequest
from ..protocol.records import HEADER_SIZE, build_batch, iter_records, read_batch_header
from ..security.inter_broker import inter_broker_options

__all__ = ["KafkaStore", "StoreError"]

log = logging.getLogger(__name__)

METADATA_VERSION = 9
CREATE_TOPICS_VERSION = 5
PRODUCE_VERSION = 9
FETCH_VERSION = 12
_RETRY_ERRORS = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                 ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_LEADER_EPOCH,
                 ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 ErrorCode.NOT_CONTROLLER}


class StoreError(Exception):
    """The `_schemas` topic cannot be written or read now (Confluent answers 50001-50003)."""


def encode_json(obj) -> bytes | None:
    """Keys and values as Confluent writes them: compact JSON (None stays a tombstone)."""
    return None if obj is None else json.dumps(obj, separators=(",", ":")).encode()


class KafkaStore:
    """Append-and-tail access to the one partition of the `_schemas` topic."""

    def __init__(self, broker, apply: Callable[[dict | None, dict | None, int], None], *,
                 topic: str = "_schemas", timeout_s: float = 30.0, replication_factor: int = 3):
        self.broker = broker
        self.topic = topic
        self.timeout_s = timeout_s
        self.replication_factor = replication_factor
        self._apply = apply
        # a broker answers one request of a connection at a time, as Kafka's do: the tail's long polls
        # get connections of their own, so that a write is never queued behind one
        self._peers, self._tail_peers = (PeerConnections(
            purpose, lambda node_id: broker.metadata.broker_endpoint(node_id),
            client_id=f"kafkapy-{purpose}-{broker.node_id}", request_timeout_s=timeout_s,
            **inter_broker_options(broker.config)) for purpose in ("schema-registry", "schema-registry-reader"))
        self.position = 0  # the next offset the reader applies
        self._advanced = asyncio.Condition()
        self._leader = -1
        self._tail: asyncio.Task | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the topic if needed, read it to its end, then keep tailing it in the background."""
        await self._ensure_topic()
        end = await self._high_watermark()
        while self.position < end:
            await self._fetch_once(max_wait_ms=0)
        self._tail = asyncio.get_running_loop().create_task(self._tail_forever())

    async def stop(self) -> None:
        if self._tail is not None:
            self._tail.cancel()
            try:
                await self._tail
            except (asyncio.CancelledError, Exception):
                pass
        self._peers.close()
        self._tail_peers.close()

    # -- writing ---------------------------------------------------------------------------
    async def append(self, key: dict, value: dict | None) -> int:
        """Write one record with acks=all and wait until the reader has applied it; its offset."""
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        batch = build_batch([(encode_json(key), encode_json(value))])
        while True:
            error = None
            try:
                leader = await self._find_leader()
                request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=int(self.timeout_s * 1000),
                                         topic_data=[ProduceRequest.TopicProduceData(name=self.topic, partition_data=[
                                             ProduceRequest.PartitionProduceData(index=0, records=batch)])])
                response = await self._peers.send(leader, request, PRODUCE_VERSION)
                part = response.responses[0].partition_responses[0]
                if not part.error_code:
                    # read it back at once rather than waiting for the tail's long poll to answer
                    while self.position <= part.base_offset and asyncio.get_running_loop().time() < deadline:
                        await self._fetch_once(max_wait_ms=0)
                    await self.wait_for(part.base_offset + 1, deadline)
                    return part.base_offset
                error = f"error code {part.error_code}"
                if part.error_code not in _RETRY_ERRORS:
                    raise StoreError(f"cannot write to {self.topic}: {error}")
                self._leader = -1
            except BrokerConnectionError as exc:
                # the write may or may not have happened: a retry may append it twice, which is
                # harmless because applying a record is idempotent (same key, same value)
                error = str(exc)
                self._leader = -1
            if asyncio.get_running_loop().time() >= deadline:
                raise StoreError(f"cannot write to {self.topic}: {error}")
            await asyncio.sleep(0.1)

    async def wait_for(self, offset: int, deadline: float | None = None) -> None:
        """Wait until the reader has applied every record before `offset`."""
        loop = asyncio.get_running_loop()
        deadline = deadline if deadline is not None else loop.time() + self.timeout_s
        async with self._advanced:
            while self.position < offset:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise StoreError(f"timed out reading {self.topic} up to offset {offset}")
                try:
                    await asyncio.wait_for(self._advanced.wait(), remaining)
                except asyncio.TimeoutError:
                    raise StoreError(f"timed out reading {self.topic} up to offset {offset}") from None

    async def sync(self) -> None:
        """Catch up with everything written so far (by any broker's registry)."""
        await self.wait_for(await self._high_watermark())

    # -- reading ---------------------------------------------------------------------------
    async def _tail_forever(self) -> None:
        while True:
            try:
                await self._fetch_once(max_wait_ms=500)
            except asyncio.CancelledError:
                raise
            except (BrokerConnectionError, StoreError) as exc:
                log.debug("schema registry: reading %s: %s", self.topic, exc)
                self._leader = -1
                await asyncio.sleep(0.2)
            except Exception:
                log.exception("schema registry: reading %s failed", self.topic)
                await asyncio.sleep(1.0)

    async def _fetch_once(self, max_wait_ms: int) -> None:
        leader = await self._find_leader()
        request = FetchRequest(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=8 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                FetchRequest.FetchTopic(topic=self.topic, partitions=[FetchRequest.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=self.position, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=8 << 20)])])
        peers = self._tail_peers if max_wait_ms else self._peers
        response = await peers.send(leader, request, FETCH_VERSION, timeout_s=self.timeout_s + max_wait_ms / 1000)
        if response.error_code:
            raise StoreError(f"fetch error code {response.error_code}")
        data = response.responses[0].partitions[0]
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise StoreError(f"offset {self.position} out of range")  # cannot happen: nothing deletes the start
        if data.error_code:
            self._leader = -1
            raise StoreError(f"fetch error code {data.error_code}")
        await self._apply_records(data.records)

    async def _apply_records(self, records) -> None:
        """Apply the records from `self.position` on. Positions move without an await in between, so
        a catch-up fetch and the tail's fetch answering with the same records apply each one once."""
        if not records:
            return
        pos, end, before = 0, len(records), self.position
        while pos + HEADER_SIZE <= end:
            header = read_batch_header(records, pos)
            if pos + header.size > end:
                break
            if not header.is_control and header.next_offset > self.position:
                for record in iter_records(records, header):
                    if record.offset < self.position:
                        continue
                    self._apply_one(record)
                    self.position = record.offset + 1
            self.position = max(self.position, header.next_offset)
            pos += header.size
        if self.position != before:
            async with self._advanced:
                self._advanced.notify_all()

    def _apply_one(self, record) -> None:
        try:
            key = json.loads(record.key) if record.key is not None else None
            value = json.loads(record.value) if record.value is not None else None
        except ValueError:
            log.warning("schema registry: record at offset %d of %s is not JSON; skipped", record.offset, self.topic)
            return
        try:
            self._apply(key, value, record.offset)
        except Exception:
            log.exception("schema registry: cannot apply the record at offset %d of %s", record.offset, self.topic)

    # -- metadata --------------------------------------------------------------------------
    async def _metadata(self):
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)],
                                  allow_auto_topic_creation=False)
        return await self._peers.send(self.broker.node_id, request, METADATA_VERSION)

    async def _find_leader(self) -> int:
        if self._leader >= 0:
            return self._leader
        response = await self._metadata()
        topic = response.topics[0]
        if topic.error_code or not topic.partitions or topic.partitions[0].leader_id < 0:
            raise StoreError(f"{self.topic} has no leader yet (error code {topic.error_code})")
        self._leader = topic.partitions[0].leader_id
        return self._leader

    async def _ensure_topic(self) -> None:
        """Create `_schemas` as Confluent does: one partition, compacted, replicated
        `replication_factor` times. In a cluster the creation waits (up to the timeout) for that many
        brokers, so the first broker up does not create it with fewer replicas; a single node has one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        single = getattr(self.broker.cluster, "mode", "") == "single node"
        while True:
            try:
                response = await self._metadata()
                topic = response.topics[0]
                wanted = 1 if single else self.replication_factor
                if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and \
                        len(response.brokers) < wanted and loop.time() < deadline - 1:
                    pass  # wait for more brokers to register
                elif topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    replication = max(1, min(wanted, len(response.brokers)))
                    request = CreateTopicsRequest(timeout_ms=int(self.timeout_s * 1000), validate_only=False, topics=[
                        CreateTopicsRequest.CreatableTopic(
                            name=self.topic, num_partitions=1, replication_factor=replication, assignments=[],
                            configs=[CreateTopicsRequest.CreatableTopicConfig(name="cleanup.policy", value="compact")])])
                    controller = response.controller_id if response.controller_id >= 0 else self.broker.node_id
                    result = (await self._peers.send(controller, request, CREATE_TOPICS_VERSION)).topics[0]
                    if result.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS) \
                            and result.error_code not in _RETRY_ERRORS:
                        raise StoreError(f"cannot create {self.topic}: error code {result.error_code} "
                                         f"{result.error_message or ''}")
                elif not topic.error_code and topic.partitions and topic.partitions[0].leader_id >= 0:
                    self._leader = topic.partitions[0].leader_id
                    return
            except BrokerConnectionError as exc:
                log.debug("schema registry: %s", exc)
            if loop.time() >= deadline:
                raise StoreError(f"{self.topic} is not available")
            await asyncio.sleep(0.2)

    async def _high_watermark(self) -> int:
        leader = await self._find_leader()
        request = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1, isolation_level=0, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                FetchRequest.FetchTopic(topic=self.topic, partitions=[FetchRequest.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=self.position, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=1)])])
        response = await self._peers.send(leader, request, FETCH_VERSION)
        data = response.responses[0].partitions[0]
        if response.error_code or data.error_code:
            self._leader = -1
            raise StoreError(f"cannot read the end of {self.topic}: error code {response.error_code or data.error_code}")
        return data.high_watermark
