"""Produce: authorize, find each partition led here, hand its batches to the replica manager, answer
per `acks`.

The hot path, and the handler knows no partition log: `replication/produce_checks.py`
`analyze_batches` checks the batches' headers and CRCs (records stay opaque bytes, but on the
topics where Kafka's LogValidator must read them: keys on compacted topics, timestamps where
message.timestamp.{before,after}.max.ms are set), a transactional batch is verified
(broker/txn_verification.py), the replica manager's `append_records` appends (the log patches
offsets in place and writes once), wakes waiting fetches and counts the bytes, and `PendingAcks`
(replication/append.py) holds the answer for fsync-on-ack and acks=all. v13 (Kafka 4.1, KIP-516)
names topics by id: an id this broker does not know fails its partitions with UNKNOWN_TOPIC_ID
before any other check, as KafkaApis does; v12 is v11 (a transactional v12+ produce would add its
partition to the transaction, KIP-890's transactions v2, which kafkapy does not finalize, so clients
send transactional batches at v11 and below).
"""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import ProduceRequest, ProduceResponse
from ...replication.append import PendingAcks
from ...replication.produce_checks import RecordValidationError, analyze_batches
from ..connection import peer_log
from ..dispatch import ConnectionClosed, RequestContext, handles
from ..log_throttle import peer_ip
from ..txn_verification import verify_transactional_produce, verify_with_remote_coordinator

log = logging.getLogger(__name__)

PartitionResponse = ProduceResponse.PartitionProduceResponse


def _error(index: int, code: int, message: str | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, error_message=message)


_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

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
            if hosted is None or not hosted.can_append:
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
            if name in _INTERNAL_TOPICS:
                results.append(_error(index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                      f"cannot produce to internal topic {name}"))
                failed = True
                continue
            try:
                buf, headers, validate = analyze_batches(hosted, pdata.records, version)
                if request.transactional_id is not None or headers[0].is_transactional:
                    remote = verify_transactional_produce(broker, request.transactional_id, name, index, hosted,
                                                          headers, version)
                    if remote is not None:  # cluster mode: the coordinator is another broker
                        await verify_with_remote_coordinator(broker, *remote, name, index, version)
                result = replicas.append_records(hosted, buf, headers, acks, validate)
            except KafkaError as exc:
                if exc.code != ErrorCode.CORRUPT_MESSAGE:
                    log.debug("produce to %s-%d failed: %s", name, index, exc)
                else:
                    # rate limited per client IP (log_throttle.py): corrupt batches are hostile input too
                    peer_log.warning(peer_ip(ctx.peer), "rejected corrupt batch for %s-%d from %s: %s", name, index,
                                     ctx.peer, exc, logger=log)
                response = _error(index, exc.code, str(exc) if version >= 8 else None)
                if isinstance(exc, RecordValidationError):
                    response.log_start_offset = exc.log_start_offset
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
