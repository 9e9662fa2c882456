"""Produce: validate batches (header + CRC only), append them, acknowledge per `acks`.

The hot path: batches stay opaque bytes; the log patches offsets in place and writes them
with one write. In fsync-on-ack mode the acknowledgement waits for a group-commit fsync.
"""
from __future__ import annotations

import logging

from ...protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from ...protocol.messages import ProduceRequest, ProduceResponse
from ...protocol.legacy_records import legacy_to_v2
from ...protocol.records import MAGIC_POS, iter_batch_headers
from ..durability import wait_durable
from ..dispatch import ConnectionClosed, RequestContext, handles
from .transactions import verify_transactional_produce

log = logging.getLogger(__name__)

PartitionResponse = ProduceResponse.PartitionProduceResponse


def _error(index: int, code: int, message: str | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, error_message=message)


def _to_v2(records, version: int, max_size: int) -> bytearray:
    """Produce v0-2 carry magic 0/1 message sets; the log only stores magic 2."""
    if version <= 2 and len(records) > MAGIC_POS and records[MAGIC_POS] < 2:
        return bytearray(legacy_to_v2(bytes(records), max_size=max_size))
    return bytearray(records)


@handles(ProduceRequest)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    version = ctx.api_version
    acks = request.acks
    partitions = broker.partitions
    responses = []
    syncs = []
    failed = False
    if acks not in (-1, 0, 1):
        for topic in request.topic_data:
            responses.append(ProduceResponse.TopicProduceResponse(
                name=topic.name,
                partition_responses=[_error(p.index, ErrorCode.INVALID_REQUIRED_ACKS)
                                     for p in topic.partition_data]))
        return ProduceResponse(responses=responses)
    for topic in request.topic_data:
        name = topic.name
        meta = partitions.topic(name)
        if meta is None:
            meta = partitions.auto_create(name)
        results = []
        for pdata in topic.partition_data:
            index = pdata.index
            plog = partitions.get_log(name, index) if meta is not None else None
            if plog is None:
                results.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                failed = True
                continue
            if meta.internal:
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
                if request.transactional_id is not None or headers[0].is_transactional:
                    verify_transactional_produce(broker, request.transactional_id, name, index, plog, headers,
                                                 version)
                if acks == -1 and plog.config.min_insync_replicas > len(meta.partitions[index].isr):
                    raise KafkaError("fewer in-sync replicas than min.insync.replicas",
                                     ErrorCode.NOT_ENOUGH_REPLICAS)
                result = plog.append(buf, leader_epoch=meta.partitions[index].leader_epoch,
                                     validated=headers)
            except KafkaError as exc:
                if exc.code != ErrorCode.CORRUPT_MESSAGE:
                    log.debug("produce to %s-%d failed: %s", name, index, exc)
                else:
                    log.warning("rejected corrupt batch for %s-%d from %s: %s", name, index, ctx.peer, exc)
                results.append(_error(index, exc.code, str(exc) if version >= 8 else None))
                failed = True
                continue
            if not result.duplicate:
                broker.purgatory.notify((name, index))
            if plog.config.fsync_on_ack and acks != 0:
                syncs.append(plog.sync_until(result.last_offset))
            results.append(PartitionResponse(
                index=index, error_code=0, base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset))
        responses.append(ProduceResponse.TopicProduceResponse(name=name, partition_responses=results))
    if acks == 0:
        if failed:
            # Kafka closes the connection so that an acks=0 producer notices and refreshes metadata.
            raise ConnectionClosed("acks=0 produce failed; closing so the client refreshes metadata")
        return None
    if syncs:
        await wait_durable(*syncs)
    return ProduceResponse(responses=responses, throttle_time_ms=0)
