"""Fetch: serve whole batches as segment-file slices, long-poll for min_bytes, KIP-227 sessions.

Records are never decoded from v4 on: each partition's answer is a FileSlice the connection writes
straight from the segment file. v0-3 clients predate record batches: as Kafka does, their answers
are down-converted to message sets (magic 0 for v0-1, magic 1 for v2-3), the only per-record
work of this handler, done for those old versions alone.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.compression import UnsupportedCompressionTypeError
from ...protocol.errors import CorruptRecordError, ErrorCode
from ...protocol.legacy_records import MAGIC_V0, MAGIC_V1, v2_to_legacy
from ...protocol.messages import FetchRequest, FetchResponse
from ..dispatch import RequestContext, handles
from ..fetch_sessions import FINAL_EPOCH

PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
_NULL_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1
# The last Fetch version without record batches, and the last before zstd (KIP-110).
LAST_LEGACY_VERSION = 3
LAST_VERSION_WITHOUT_ZSTD = 9
# v0-3 answers up to this many bytes of batches are converted on the event loop (a few ms at most).
INLINE_CONVERSION_BYTES = 64 * 1024


@dataclass(slots=True)
class _Wanted:
    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # sent by followers (v12+ / v5+)
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


def _requested(services, request: FetchRequest, version: int) -> tuple[list[_Wanted], list]:
    """The partitions named in the request, with topic names resolved from ids (v13+)."""
    wanted = []
    replicas = services.replicas
    for topic in request.topics:
        if version >= 13:
            meta = services.partitions.topic_by_id(topic.topic_id)
            name = meta.name if meta is not None else None
            if name is None:
                # a new leader may be asked before the controller's UpdateMetadata arrives
                name = replicas.topic_name(topic.topic_id)
            topic_id = topic.topic_id
        else:
            name = topic.topic
            meta = services.partitions.topic(name)
            topic_id = meta.topic_id if meta is not None else _NULL_UUID
        for p in topic.partitions:
            wanted.append(_Wanted(name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                                  p.current_leader_epoch, p.last_fetched_epoch, p.log_start_offset))
    forgotten = []
    for topic in request.forgotten_topics_data:
        if version >= 13:
            meta = services.partitions.topic_by_id(topic.topic_id)
            name = meta.name if meta is not None else None
        else:
            name = topic.topic
        forgotten.extend((name, p) for p in topic.partitions)
    return wanted, forgotten


def _read_partition(services, want: _Wanted, max_bytes: int, min_one: bool, isolation_level: int,
                    version: int, replica_id: int, first_read: bool, leaders: dict) -> PartitionData:
    """One partition through the replica manager: a follower reads up to the log end (fencing,
    diverging epochs, follower progress), a consumer only from the leader, up to the high
    watermark (or the last stable offset for read_committed)."""
    if want.topic is None:
        code = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return PartitionData(partition_index=want.partition, error_code=code, high_watermark=-1,
                             records=b"")
    replicas = services.replicas
    if replica_id >= 0:
        return replicas.read_for_follower(replica_id, want.topic, want.partition, want.fetch_offset,
                                          want.log_start_offset, want.current_leader_epoch, want.last_fetched_epoch,
                                          max_bytes, min_one, first_read)
    data = replicas.read_for_consumer(want.topic, want.partition, want.fetch_offset, want.current_leader_epoch,
                                      max_bytes, min_one, isolation_level == READ_COMMITTED)
    code = data.error_code
    if version >= 12 and code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
        # KIP-951: name the leader we know of (and, v16+, its endpoint)
        leader_id, leader_epoch = replicas.leader_hint(want.topic, want.partition)
        data.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
        endpoint = replicas.node_endpoint(leader_id)
        if endpoint is not None:
            leaders[leader_id] = FetchResponse.NodeEndpoint(node_id=leader_id, host=endpoint[0], port=endpoint[1])
    return data


def _record_throttled_bytes(throttle, results) -> None:
    """A follower fetch's answer: the bytes of the partitions this leader throttles count against
    the leader quota, whether they went to an in-sync follower or not (Kafka's KafkaApis)."""
    sent = 0
    for want, data in results:
        if data.records and throttle.leader_throttled(want.topic, want.partition):
            sent += len(data.records)
    throttle.leader.record(sent)


def _topic_config(services, topic: str, name: str):
    """One topic config's value: the topic's override, else the broker's default for it."""
    overrides = services.metadata.topic_configs(topic)
    raw = overrides.get(name)
    if raw is not None:
        return raw
    return services.config.topic_default(name)


def _old_client_answer(services, want: _Wanted, data: PartitionData, version: int, follower: bool,
                       settings: dict) -> PartitionData:
    """KafkaApis.maybeConvertFetchedData's checks for versions before zstd (v0-9) and before record
    batches (v0-3): a topic with compression.type=zstd answers UNSUPPORTED_COMPRESSION_TYPE, and for
    v0-3 one with message.downconversion.enable=false answers UNSUPPORTED_VERSION to consumers."""
    if want.topic is None or services.partitions.get_log(want.topic, want.partition) is None:
        return data
    found = settings.get(want.topic)
    if found is None:
        zstd = str(_topic_config(services, want.topic, "compression.type")) == "zstd"
        enabled = version > LAST_LEGACY_VERSION or \
            str(_topic_config(services, want.topic, "message.downconversion.enable")).lower() == "true"
        found = settings[want.topic] = (zstd, enabled)
    zstd_topic, enabled = found
    if zstd_topic:
        return PartitionData(partition_index=want.partition, error_code=ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                             high_watermark=-1, records=b"")
    if not enabled and not follower:
        return PartitionData(partition_index=want.partition, error_code=ErrorCode.UNSUPPORTED_VERSION,
                             high_watermark=-1, records=b"")
    return data


def _convert(records, magic: int, fetch_offset: int) -> bytes | None:
    """Batches read from the log as a magic 0/1 message set, without control batches and headers
    (RecordsUtil.downConvert). Like Kafka's lazy down-conversion the answer is at most as large as
    the batches read, or as the first converted batch if that is larger (cut at a whole message,
    where Kafka sends a partial one old clients skip). None if a batch is zstd-compressed."""
    try:
        raw = records.tobytes() if hasattr(records, "tobytes") else bytes(records)
        return v2_to_legacy(raw, magic, fetch_offset, size_limit=len(raw))
    except UnsupportedCompressionTypeError:
        return None
    except (EOFError, CorruptRecordError):
        # the segment was truncated under the read, or holds what cannot be converted: nothing this time
        return b""


def _convert_all(jobs: list) -> list:
    return [_convert(records, magic, offset) for records, magic, offset in jobs]


async def _down_convert(results: list, version: int) -> None:
    """Turn the v0-3 answers in `results` into message sets (magic 0 for v0-1, 1 for v2-3).

    As in Kafka, the long poll counted the bytes read; conversion happens on the way out. It is
    per-record Python work (tens of thousands of records a second, bench/protocol/
    bench_down_conversion.py), so beyond a few batches it runs in a worker thread and the event
    loop keeps serving other connections meanwhile."""
    magic = MAGIC_V0 if version <= 1 else MAGIC_V1
    jobs, slots = [], []
    for i, (want, data) in enumerate(results):
        if data.records:
            jobs.append((data.records, magic, want.fetch_offset))
            slots.append(i)
    if not jobs:
        return
    if sum(len(records) for records, _, _ in jobs) > INLINE_CONVERSION_BYTES:
        converted = await asyncio.to_thread(_convert_all, jobs)
    else:
        converted = _convert_all(jobs)
    for i, records in zip(slots, converted):
        want, data = results[i]
        if records is None:
            results[i] = (want, PartitionData(partition_index=want.partition,
                                              error_code=ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                              high_watermark=-1, records=b""))
        else:
            data.records = records


def _diverged(data: PartitionData) -> bool:
    return data.diverging_epoch is not None and data.diverging_epoch.epoch >= 0


@handles(FetchRequest)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    services = ctx.services
    version = ctx.api_version
    wanted, forgotten = _requested(services, request, version)
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    leaders: dict = {}
    session_id = request.session_id if version >= 7 else 0
    epoch = request.session_epoch if version >= 7 else FINAL_EPOCH

    def resume(key, state) -> _Wanted:  # a session partition this incremental request does not name
        meta = services.partitions.topic(key[0]) if key[0] is not None else None
        return _Wanted(key[0], meta.topic_id if meta is not None else _NULL_UUID, key[1], state.fetch_offset,
                       state.max_bytes)

    context, wanted = services.fetch_sessions.new_context(session_id, epoch, wanted, forgotten, replica_id >= 0,
                                                        resume)
    if context.error:
        return FetchResponse(error_code=context.error, session_id=0, responses=[])

    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    min_bytes = request.min_bytes
    max_total = request.max_bytes if version >= 3 else 0x7FFFFFFF
    isolation = request.isolation_level if version >= 4 else 0
    keys = [(w.topic, w.partition) for w in wanted]
    # Authorization as KafkaApis.handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster,
    # a consumer READ on each topic; the partitions it may not read answer TOPIC_AUTHORIZATION_FAILED
    if replica_id >= 0:
        denied = None if ctx.authorized_cluster(AclOperation.CLUSTER_ACTION) else \
            frozenset(w.topic for w in wanted)
    else:
        denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC,
                                        (w.topic for w in wanted if w.topic is not None))
    first_read = True
    while True:
        remaining = max_total
        results = []
        total = 0
        errors = False
        for want in wanted:
            limit = min(want.max_bytes, remaining)
            if denied and want.topic in denied:
                data = PartitionData(partition_index=want.partition, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                     high_watermark=-1, records=b"")
            else:
                # KIP-74 (v3+): the first partition's first batch is returned whole beyond its limits; below
                # v3 Kafka's limit is hard (FetchParams.hardMaxBytesLimit): a larger message is not returned
                data = _read_partition(services, want, limit, total == 0 and version >= 3, isolation, version,
                                       replica_id, first_read, leaders)
                if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    # ReplicaManager answers a read error with unknown offsets (-1), not the log's
                    data.high_watermark = data.last_stable_offset = data.log_start_offset = -1
                # a diverging epoch (to a follower) answers at once, like an error
                errors = errors or (replica_id >= 0 and _diverged(data))
            if data.error_code == ErrorCode.KAFKA_STORAGE_ERROR and version <= 5:
                # clients before v6 don't know it as retriable: they refresh metadata on this one
                data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            size = len(data.records) if data.records is not None else 0
            total += size
            remaining = max(remaining - size, 0)
            errors = errors or data.error_code != 0
            results.append((want, data))
        first_read = False
        timeout = deadline - time.monotonic()
        if total >= min_bytes or errors or timeout <= 0 or not wanted:
            break
        await services.purgatory.wait_any(keys, timeout)
    if replica_id >= 0:
        _record_throttled_bytes(services.replicas.throttle, results)
    if version <= LAST_VERSION_WITHOUT_ZSTD:
        settings: dict = {}
        results = [(want, _old_client_answer(services, want, data, version, replica_id >= 0, settings))
                   for want, data in results]
        if version <= LAST_LEGACY_VERSION:
            await _down_convert(results, version)

    responses: list = []
    by_topic: dict = {}
    for want, data in context.answered(results):
        key = want.topic_id if version >= 13 else want.topic
        topic_resp = by_topic.get(key)
        if topic_resp is None:
            topic_resp = FetchResponse.FetchableTopicResponse(topic=want.topic or "", topic_id=want.topic_id,
                                                              partitions=[])
            by_topic[key] = topic_resp
            responses.append(topic_resp)
        topic_resp.partitions.append(data)
    return FetchResponse(throttle_time_ms=0, error_code=0,
                         session_id=context.session_id,
                         responses=responses, node_endpoints=list(leaders.values()))
