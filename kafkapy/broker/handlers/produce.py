"""Produce: validate batches (header + CRC only), append them, acknowledge per `acks`.

The hot path: batches stay opaque bytes; the replica manager's `append_records` appends them (the
log patches offsets in place and writes them with one write), wakes waiting fetches and counts
them; `PendingAcks` (replication/append.py) holds the answer for fsync-on-ack and acks=all.
Records are read only where Kafka's LogValidator must look at them: the keys on compacted
topics, each record's timestamp on topics with message.timestamp.{before,after}.max.ms set; an
invalid record fails its whole batch, with per-record errors (Produce v8+). v13 (Kafka 4.1, KIP-516)
names topics by id: an id this broker does not know fails its partitions with UNKNOWN_TOPIC_ID
before any other check, as KafkaApis does; v12 is v11 (a transactional v12+ produce would add its
partition to the transaction, KIP-890's transactions v2, which kafkapy does not finalize, so clients
send transactional batches at v11 and below).
"""
from __future__ import annotations

import logging
import time

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from ...protocol.messages import ProduceRequest, ProduceResponse
from ...protocol.legacy_records import legacy_to_v2
from ...log.config import LONG_MAX
from ...protocol.records import MAGIC_POS, NO_TIMESTAMP, iter_batch_headers, iter_records, keyless_record_indexes
from ...replication.append import PendingAcks
from ..connection import peer_log
from ..dispatch import ConnectionClosed, RequestContext, handles
from ..log_throttle import peer_ip
from ..txn_verification import verify_transactional_produce, verify_with_remote_coordinator

log = logging.getLogger(__name__)

PartitionResponse = ProduceResponse.PartitionProduceResponse


def _error(index: int, code: int, message: str | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, error_message=message)


_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# Decompression bound for the key check of compacted topics (Kafka streams the records
# instead, unbounded); a batch that inflates beyond it is refused as corrupt.
_KEY_CHECK_MAX_DECOMPRESSED = 256 * 1024 * 1024


class RecordValidationError(KafkaError):
    """Some records of a batch are invalid (Kafka's RecordValidationException): the whole batch
    fails and the response lists each record's error (Produce v8+)."""

    def __init__(self, record_errors: list[tuple[int, str]], code: int = ErrorCode.INVALID_RECORD):
        if code == ErrorCode.INVALID_TIMESTAMP:
            message = "One or more records have been rejected due to invalid timestamp"
        else:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
            message = (f"One or more records have been rejected due to {len(record_errors)} record errors in"
                       f" total, and only showing the first three errors at most: [{shown}]")
        super().__init__(message, code)
        self.record_errors = record_errors


def _java_long(value: int) -> int:
    """Kafka prints the bounds as Java longs, which wrap (now + Long.MAX_VALUE is negative)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _timestamp_errors(buf, header, config) -> dict[int, str]:
    """CreateTime with message.timestamp.{before,after}.max.ms set: every record's timestamp
    (but NO_TIMESTAMP) must lie within them (LogValidator.validateTimestamp)."""
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    now = int(time.time() * 1000)
    errors = {}
    for i, record in enumerate(iter_records(buf, header, _KEY_CHECK_MAX_DECOMPRESSED)):
        ts = record.timestamp
        if ts != NO_TIMESTAMP and (now - ts > before or ts - now > after):
            errors[i] = (f"Timestamp {ts} of message with offset {record.offset} is out of range. The timestamp "
                         f"should be within [{_java_long(now - before)}, {_java_long(now + after)}]")
    return errors


def _validate_records(buf, headers, config, name: str, index: int) -> None:
    """The record-level checks of Kafka's LogValidator, on the topics that need them: keys on
    compacted topics, timestamps where limits are set. Other topics' batches stay opaque."""
    compacted = "compact" in config.cleanup_policy and config.compact_enabled
    timestamps = (config.message_timestamp_before_max_ms != LONG_MAX
                  or config.message_timestamp_after_max_ms != LONG_MAX) \
        and config.message_timestamp_type == "CreateTime"
    if not (compacted or timestamps):
        return
    for header in headers:
        if header.is_control:
            continue
        errors = _timestamp_errors(buf, header, config) if timestamps else {}
        code = ErrorCode.INVALID_TIMESTAMP if errors else ErrorCode.INVALID_RECORD
        if compacted:
            message = f"Compacted topic cannot accept message without key in topic partition {name}-{index}."
            for i in keyless_record_indexes(buf, header, _KEY_CHECK_MAX_DECOMPRESSED):
                errors[i] = message  # a record's key error comes before its timestamp error
            if code == ErrorCode.INVALID_TIMESTAMP and not any(m.startswith("Timestamp") for m in errors.values()):
                code = ErrorCode.INVALID_RECORD
        if errors:
            raise RecordValidationError(sorted(errors.items()), code)


def _not_led_here(replicas, name: str, index: int, code: int, version: int,
                  leaders: dict[int, object]) -> PartitionResponse:
    """The partition is not led here. v10+ also names the leader we know of and collects its
    endpoint for the response (KIP-951), so the client need not refresh metadata."""
    response = _error(index, code)
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and version >= 10:
        leader_id, leader_epoch = replicas.leader_hint(name, index)
        response.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
        endpoint = replicas.node_endpoint(leader_id)
        if endpoint is not None:
            leaders[leader_id] = ProduceResponse.NodeEndpoint(node_id=leader_id, host=endpoint[0], port=endpoint[1])
    return response


def _to_v2(records, version: int, max_size: int) -> bytearray:
    """Produce v0-2 carry magic 0/1 message sets; the log only stores magic 2."""
    if version <= 2 and len(records) > MAGIC_POS and records[MAGIC_POS] < 2:
        return bytearray(legacy_to_v2(bytes(records), max_size=max_size))
    return bytearray(records)


def _topic_names_by_id(ctx: RequestContext, topics) -> None:
    """Produce v13: give each topic its name from its id ("" when unknown: UNKNOWN_TOPIC_ID)."""
    broker = ctx.services
    for topic in topics:
        meta = broker.partitions.topic_by_id(topic.topic_id)
        name = meta.name if meta is not None else broker.replicas.topic_name(topic.topic_id)
        topic.name = name or ""


def _auto_created(ctx: RequestContext, partitions, name: str) -> bool:
    """Create an unknown topic on produce when allowed (auto.create.topics.enable and CREATE on
    the cluster or the topic); whether it was created."""
    if partitions.topic(name) is not None:
        return False
    if not (ctx.authorized_cluster(AclOperation.CREATE, log_if_denied=False)
            or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name)):
        return False
    return partitions.auto_create(name) is not None


@handles(ProduceRequest)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.services
    version = ctx.api_version
    acks = request.acks
    partitions = broker.partitions
    replicas = broker.replicas
    responses = []
    pending = PendingAcks(replicas, request.timeout_ms / 1000)
    leaders: dict[int, object] = {}
    failed = False
    if version >= 13:
        _topic_names_by_id(ctx, request.topic_data)
    if acks not in (-1, 0, 1):
        for topic in request.topic_data:
            responses.append(ProduceResponse.TopicProduceResponse(
                name=topic.name, topic_id=topic.topic_id,
                partition_responses=[_error(p.index, ErrorCode.INVALID_REQUIRED_ACKS)
                                     for p in topic.partition_data]))
        return ProduceResponse(responses=responses)
    # Authorization as KafkaApis.handleProduceRequest: WRITE on the transactional id for a transactional
    # producer (the whole request fails), WRITE on each topic (its partitions fail)
    if request.transactional_id is not None and not ctx.authorized(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
            name=topic.name, topic_id=topic.topic_id, partition_responses=[_error(p.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                                                  for p in topic.partition_data]) for topic in request.topic_data])
    denied = ctx.unauthorized_names(AclOperation.WRITE, ResourceType.TOPIC,
                                    (t.name for t in request.topic_data if t.name))
    for topic in request.topic_data:
        name = topic.name
        if not name and version >= 13:
            responses.append(ProduceResponse.TopicProduceResponse(topic_id=topic.topic_id, partition_responses=[
                _error(p.index, ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.partition_data]))
            failed = True
            continue
        if denied and name in denied:
            responses.append(ProduceResponse.TopicProduceResponse(name=name, topic_id=topic.topic_id,
                                                                  partition_responses=[
                _error(p.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partition_data]))
            failed = True
            continue
        results = []
        may_create = True
        for pdata in topic.partition_data:
            index = pdata.index
            # the hosted partition is the truth; the metadata (a cluster's cache) may lag behind
            hosted = replicas.partition(name, index)
            if hosted is None or not hosted.is_leader or hosted.log.is_offline:
                code = replicas.leader_error(name, index)
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and may_create \
                        and _auto_created(ctx, partitions, name):
                    # (Kafka does not create topics on produce; kafkapy does, with Metadata's CREATE check)
                    hosted = replicas.partition(name, index)
                    code = ErrorCode.NONE if hosted is not None and hosted.is_leader else \
                        replicas.leader_error(name, index)
                may_create = False
                if code:
                    results.append(_not_led_here(replicas, name, index, code, version, leaders))
                    failed = True
                    continue
            plog = hosted.log
            if name in _INTERNAL_TOPICS:
                results.append(_error(index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                      f"cannot produce to internal topic {name}"))
                failed = True
                continue
            records = pdata.records
            try:
                if records is None or len(records) == 0:
                    raise CorruptRecordError("produce request carries no record batch")
                buf = _to_v2(records, version, plog.config.max_message_bytes * 4)
                headers = list(iter_batch_headers(buf, validate=True))
                if version >= 3 and len(headers) != 1:
                    raise KafkaError("produce requests of v3 and later must carry exactly one record batch"
                                     " per partition", ErrorCode.INVALID_RECORD)
                max_bytes = plog.config.max_message_bytes
                for header in headers:
                    if header.size > max_bytes:
                        raise KafkaError(f"batch of {header.size} bytes exceeds max.message.bytes {max_bytes}",
                                         ErrorCode.MESSAGE_TOO_LARGE)
                    if header.is_control:
                        raise KafkaError(f"clients are not allowed to write control records to {name}-{index}",
                                         ErrorCode.INVALID_RECORD)
                config = plog.config
                # (inline: most topics pay these three tests and nothing else)
                read_records = ("compact" in config.cleanup_policy
                                or config.message_timestamp_before_max_ms != LONG_MAX
                                or config.message_timestamp_after_max_ms != LONG_MAX)
                if request.transactional_id is not None or headers[0].is_transactional:
                    remote = verify_transactional_produce(broker, request.transactional_id, name, index, plog,
                                                          headers, version)
                    if remote is not None:  # cluster mode: the coordinator is another broker
                        await verify_with_remote_coordinator(broker, *remote, name, index, version)
                result = replicas.append_records(
                    hosted, buf, headers, acks,
                    (lambda: _validate_records(buf, headers, config, name, index)) if read_records else None)
            except KafkaError as exc:
                if exc.code != ErrorCode.CORRUPT_MESSAGE:
                    log.debug("produce to %s-%d failed: %s", name, index, exc)
                else:
                    # rate limited per client IP (log_throttle.py): corrupt batches are hostile input too
                    peer_log.warning(peer_ip(ctx.peer), "rejected corrupt batch for %s-%d from %s: %s", name, index,
                                     ctx.peer, exc, logger=log)
                response = _error(index, exc.code, str(exc) if version >= 8 else None)
                if isinstance(exc, RecordValidationError):
                    response.log_start_offset = plog.log_start_offset
                    response.record_errors = [
                        ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                        for i, m in exc.record_errors]
                results.append(response)
                failed = True
                broker.metrics.produce_failed(name)
                continue
            response = PartitionResponse(
                index=index, error_code=0, base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset)
            results.append(response)
            pending.add(hosted, result.last_offset, acks, response)  # fsync-on-ack, acks=all
        responses.append(ProduceResponse.TopicProduceResponse(name=name, topic_id=topic.topic_id,
                                                              partition_responses=results))
    if acks == 0:
        if failed:
            # Kafka closes the connection so that an acks=0 producer notices and refreshes metadata.
            raise ConnectionClosed("acks=0 produce failed; closing so the client refreshes metadata")
        return None
    await pending.wait()
    return ProduceResponse(responses=responses, throttle_time_ms=0, node_endpoints=list(leaders.values()))
