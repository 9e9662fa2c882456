"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
WriteTxnMarkers, DescribeTransactions, ListTransactions, DescribeProducers.

The handlers translate between request versions and the transaction coordinator
(kafkapy.txncoord), which holds every rule. The coordinator's wiring to the broker (its
__transaction_state store, producer ids, the marker writer) is broker/transaction_coordination.py.
"""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation, ResourceType
from ...groupcoord import OFFSETS_TOPIC, OffsetAndMetadata
from ...groupcoord.consumer.topic_regex import InvalidTopicRegex, matching_topics, parse_topic_regex
from ...protocol.error_messages import default_message
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from ..coordinator_writes import coordinator_write_durable, durable_state
from ..dispatch import RequestContext, handles
from ..transaction_coordination import partition_exists, write_txn_markers
from ..txn_verification import coordinated_here, verification_error

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

APIResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


def _fail_accepted(result: APIResult, error: int) -> None:
    """Answer `error` for every partition the coordinator accepted (its state change was not replicated)."""
    if error == ErrorCode.NONE:
        return
    for topic in result.topic_results:
        for p in topic.results_by_partition:
            if p.partition_error_code == ErrorCode.NONE:
                p.partition_error_code = error


def transaction_partitions(broker, transactional_id: str) -> list[TopicPartition]:
    """The partitions of the id's current transaction (those an EndTxn writes markers to)."""
    _, _, metadata = broker.transaction_coordinator.state.get(transactional_id)
    return sorted(metadata.partitions) if metadata is not None else []


def _old_fenced(error: int, version: int, first_version_with_fenced: int) -> int:
    """Clients before the version that knows PRODUCER_FENCED get INVALID_PRODUCER_EPOCH (Kafka)."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_version_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


# -- AddPartitionsToTxn ------------------------------------------------------------------------
def _add_partitions(broker, transactional_id: str, producer_id: int, producer_epoch: int, verify_only: bool,
                    topics, version: int, denied: frozenset[str] = frozenset()) -> APIResult:
    partitions: list[TopicPartition] = [(t.name, p) for t in topics for p in t.partitions]
    failed: dict[TopicPartition, int] = {}
    for tp in partitions:
        meta = broker.partitions.topic(tp[0])
        if denied and tp[0] in denied:
            failed[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif version < 4 and meta is not None and meta.internal:
            # clients may not write internal topics (Kafka's WRITE authorization skips them)
            failed[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not partition_exists(broker, *tp):
            failed[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    coordinator = broker.transaction_coordinator
    if failed:
        # any refused partition fails the whole request; the others were not attempted
        errors = {tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    elif verify_only:
        errors = coordinator.handle_verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    else:
        error = coordinator.handle_add_partitions(transactional_id, producer_id, producer_epoch, partitions)
        error = _old_fenced(error, version, 2)
        errors = {tp: error for tp in partitions}
    by_topic: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, partition_error_code=error))
    return APIResult(transactional_id=transactional_id, topic_results=[
        TopicResult(name=topic, results_by_partition=results) for topic, results in by_topic.items()])


@handles(AddPartitionsToTxnRequest)
async def handle_add_partitions_to_txn(ctx: RequestContext,
                                       request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    broker = ctx.services
    version = ctx.api_version
    if version < 4:
        # KafkaApis: WRITE on the transactional id (every partition fails), WRITE on each topic
        if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
            return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=[
                TopicResult(name=t.name, results_by_partition=[
                    PartitionResult(partition_index=p,
                                    partition_error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    for p in t.partitions]) for t in request.v3_and_below_topics])
        denied = ctx.unauthorized_names(AclOperation.WRITE, ResourceType.TOPIC,
                                        (t.name for t in request.v3_and_below_topics))
        result = _add_partitions(broker, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                 request.v3_and_below_producer_epoch, False, request.v3_and_below_topics, version,
                                 denied)
        if result.topic_results and any(p.partition_error_code == ErrorCode.NONE
                                        for t in result.topic_results for p in t.results_by_partition):
            _fail_accepted(result, await durable_state(broker, request.v3_and_below_transactional_id))
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=result.topic_results)
    # v4+: batches of transactions, sent by brokers (KIP-890): CLUSTER_ACTION on the cluster
    if not ctx.authorized_cluster(AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                          results_by_transaction=[])
    results = [_add_partitions(broker, t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only,
                               t.topics, version) for t in request.transactions]
    for t, result in zip(request.transactions, results):
        if not t.verify_only:
            _fail_accepted(result, await durable_state(broker, t.transactional_id))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      results_by_transaction=results)


@handles(AddOffsetsToTxnRequest)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    broker = ctx.services
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    partition = broker.group_coordinator.partition_for(request.group_id)
    error = broker.transaction_coordinator.handle_add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [(OFFSETS_TOPIC, partition)])
    if error == ErrorCode.NONE:
        error = await durable_state(broker, request.transactional_id)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_old_fenced(error, ctx.api_version, 2))


@handles(EndTxnRequest)
async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    broker = ctx.services
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    markers = transaction_partitions(broker, request.transactional_id)
    error = broker.transaction_coordinator.handle_end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed)
    if error == ErrorCode.NONE:
        error = await durable_state(broker, request.transactional_id, markers)
    return EndTxnResponse(throttle_time_ms=0, error_code=_old_fenced(error, ctx.api_version, 2))


# -- TxnOffsetCommit -------------------------------------------------------------------------
@handles(TxnOffsetCommitRequest)
async def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    broker = ctx.services
    version = ctx.api_version
    errors: dict[TopicPartition, int] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    now = broker.transaction_coordinator.clock_ms()
    # KafkaApis: WRITE on the transactional id, READ on the group (each fails every partition), READ on topics
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        everything = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        everything = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        everything = ErrorCode.NONE
    denied = frozenset() if everything else \
        ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if everything:
                errors[tp] = everything
                continue
            if denied and topic.name in denied:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not partition_exists(broker, *tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset, leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                metadata=p.committed_metadata if p.committed_metadata is not None else "", commit_timestamp=now)
    if offsets:
        group_coordinator = broker.group_coordinator
        offsets_partition = group_coordinator.partition_for(request.group_id)
        error = ErrorCode.NONE
        if broker.transaction_coordinator.config.transaction_partition_verification_enable \
                and group_coordinator.group_status(request.group_id) is None:
            # KIP-890: the group's offsets partition must be in the transaction (AddOffsetsToTxn)
            if coordinated_here(broker, request.transactional_id):
                verified = broker.transaction_coordinator.handle_verify_partitions(
                    request.transactional_id, request.producer_id, request.producer_epoch,
                    [(OFFSETS_TOPIC, offsets_partition)])
                error = verified[(OFFSETS_TOPIC, offsets_partition)]
            else:  # cluster mode: the transaction coordinator is another broker
                error = await broker.transaction_coordination.verifier().verify(request.transactional_id, request.producer_id,
                                                         request.producer_epoch, OFFSETS_TOPIC, offsets_partition)
            error = verification_error(error, version >= 4)
        if error != ErrorCode.NONE:
            errors.update((tp, error) for tp in offsets)
        else:
            results = group_coordinator.commit_txn_offsets(
                request.group_id, request.producer_id, request.producer_epoch,
                request.member_id if version >= 3 else "", request.group_instance_id if version >= 3 else None,
                request.generation_id if version >= 3 else -1, offsets)
            errors.update(results)
            if any(code == ErrorCode.NONE for code in results.values()):
                # acknowledged only once durable and, in cluster mode, on the ISR: a commit lost
                # with its coordinator would let the transaction commit without moving the offsets
                error = await coordinator_write_durable(broker, offsets_partition)
                if error:
                    errors.update((tp, error) for tp, code in results.items() if code == ErrorCode.NONE)
    if version < 2:
        # clients before 2.0 could crash on COORDINATOR_LOAD_IN_PROGRESS (KAFKA-7296)
        errors = {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE if e == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e
                  for tp, e in errors.items()}
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=topic.name, partitions=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])


# -- WriteTxnMarkers (inter-broker; a coordinator elsewhere may send it) ---------------------
@handles(WriteTxnMarkersRequest)
async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    broker = ctx.services
    results = []
    cluster_action = ctx.authorized_cluster(AclOperation.CLUSTER_ACTION)
    for marker in request.markers:
        partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        if not cluster_action:  # inter-broker: CLUSTER_ACTION on the cluster, as KafkaApis
            results.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
                WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                    WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                        partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    for p in t.partition_indexes]) for t in marker.topics]))
            continue
        errors = write_txn_markers(broker, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                   marker.transaction_result, partitions, local_only=True)
        # answer once the ISR has the markers (acks=all; at once for an ISR of one)
        timeout_s = broker.config.get("request.timeout.ms") / 1000
        for tp, error in list(errors.items()):
            if error == ErrorCode.NONE and broker.partitions.get_log(*tp) is not None:
                errors[tp] = await broker.replicas.wait_appended(tp[0], tp[1], timeout_s, fsync=False)
        by_topic: dict[str, list] = {}
        for (topic, partition), error in errors.items():
            by_topic.setdefault(topic, []).append(
                WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(partition_index=partition, error_code=error))
        results.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
            WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=topic, partitions=rows)
            for topic, rows in by_topic.items()]))
    return WriteTxnMarkersResponse(markers=results)


# -- admin -----------------------------------------------------------------------------------
@handles(DescribeTransactionsRequest)
async def handle_describe_transactions(ctx: RequestContext,
                                       request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    coordinator = ctx.transaction_coordinator
    states = []
    for transactional_id in request.transactional_ids:
        # KafkaApis: DESCRIBE on the transactional id; the topics it may not DESCRIBE are left out
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            states.append(DescribeTransactionsResponse.TransactionState(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=transactional_id))
            continue
        error, desc = coordinator.describe_transaction(transactional_id)
        state = DescribeTransactionsResponse.TransactionState(error_code=error, transactional_id=transactional_id)
        if desc is not None:
            by_topic: dict[str, list[int]] = {}
            hidden = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            (t for t, _ in desc.partitions))
            for topic, partition in desc.partitions:
                if hidden and topic in hidden:
                    continue
                by_topic.setdefault(topic, []).append(partition)
            state.transaction_state = desc.state
            state.transaction_timeout_ms = desc.timeout_ms
            state.transaction_start_time_ms = desc.start_timestamp_ms
            state.producer_id = desc.producer_id
            state.producer_epoch = desc.producer_epoch
            state.topics = [DescribeTransactionsResponse.TopicData(topic=t, partitions=ps)
                            for t, ps in by_topic.items()]
        states.append(state)
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


@handles(ListTransactionsRequest)
async def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    error, unknown, found = ctx.transaction_coordinator.list_transactions(
        request.state_filters, request.producer_id_filters,
        request.duration_filter if ctx.api_version >= 1 else -1)
    pattern = request.transactional_id_pattern if ctx.api_version >= 2 else None
    if error == ErrorCode.NONE and pattern:  # v2 (KIP-1152): RE2J's syntax, whole-id matches; "" lists all
        try:
            parse_topic_regex(pattern)
        except InvalidTopicRegex as exc:
            # Kafka 4.4 throws InvalidRegularExpression: the error answer has no states (and no message field)
            log.debug("ListTransactions from %s: transactional id pattern %r is not a valid regular expression: %s",
                      ctx.client_id, pattern, exc)
            return ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                            unknown_state_filters=[], transaction_states=[])
        matching = matching_topics(pattern, [d.transactional_id for d in found])
        found = [d for d in found if d.transactional_id in matching]
    # KafkaApis: only the transactional ids the principal may DESCRIBE
    found = [d for d in found if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                d.transactional_id, log_if_denied=False)]
    return ListTransactionsResponse(throttle_time_ms=0, error_code=error, unknown_state_filters=unknown,
                                    transaction_states=[
                                        ListTransactionsResponse.TransactionState(
                                            transactional_id=d.transactional_id, producer_id=d.producer_id,
                                            transaction_state=d.state) for d in found])


@handles(DescribeProducersRequest)
async def handle_describe_producers(ctx: RequestContext,
                                    request: DescribeProducersRequest) -> DescribeProducersResponse:
    """The active producers of partitions, from their logs' producer state (Kafka's activeProducers)."""
    broker = ctx.services
    topics = []
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        meta = broker.partitions.topic(topic.name)
        # KafkaApis: a topic-level error carries Errors.message(); a partition's (ReplicaManager) none
        if denied and topic.name in denied:  # READ on the topic
            topic_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif meta is None:
            topic_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            topic_error = ErrorCode.NONE
        partitions = []
        for index in topic.partition_indexes:
            response = DescribeProducersResponse.PartitionResponse(partition_index=index)
            plog = broker.partitions.get_log(topic.name, index) if not topic_error else None
            if topic_error:
                response.error_code = topic_error
                response.error_message = default_message(topic_error)
            elif plog is None and not 0 <= index < len(meta.partitions):
                response.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif plog is not None and getattr(plog, "is_offline", False):
                response.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            elif plog is None:
                response.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                response.active_producers = [
                    DescribeProducersResponse.ProducerState(
                        producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
                        last_sequence=entry.last_seq, last_timestamp=entry.last_timestamp,
                        coordinator_epoch=entry.coordinator_epoch,
                        current_txn_start_offset=entry.current_txn_first_offset)
                    for entry in plog.producer_state.active_producers().values()]
            partitions.append(response)
        topics.append(DescribeProducersResponse.TopicResponse(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
