"""InitProducerId: producer ids and epochs for idempotent producers (KIP-98, KIP-360 epoch bumps)."""
from __future__ import annotations

from ...metadata.acls import AclOperation, ResourceType
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from ..dispatch import RequestContext, handles

MAX_EPOCH = 32767


@handles(InitProducerIdRequest)
async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    broker = ctx.services
    # KafkaApis: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the
    # cluster or WRITE on some topic
    if request.transactional_id is not None:
        if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return InitProducerIdResponse(throttle_time_ms=0, producer_id=-1, producer_epoch=-1,
                                          error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return await _init_transactional(ctx, request)
    if not ctx.authorized_cluster(AclOperation.IDEMPOTENT_WRITE, log_if_denied=False) and \
            not ctx.authorized_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC):
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        # An idempotent producer resetting its sequences after an error keeps its id with a new epoch.
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=request.producer_id,
                                      producer_epoch=request.producer_epoch + 1)
    try:
        producer_id = broker.producer_ids.allocate()
    except KafkaError as exc:  # cluster mode: no producer id block from the controller yet
        return InitProducerIdResponse(throttle_time_ms=0, error_code=exc.code, producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=producer_id, producer_epoch=0)


async def _init_transactional(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    """A transactional producer: its id and epoch come from the transaction coordinator."""
    from ..coordinator_writes import durable_state

    broker = ctx.services
    pid, epoch = request.producer_id, request.producer_epoch
    if (pid == -1) != (epoch == -1):
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                      producer_id=-1, producer_epoch=-1)
    try:
        result = broker.transaction_coordinator.handle_init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, pid, epoch)
    except KafkaError as exc:  # cluster mode: no producer id block from the controller yet
        return InitProducerIdResponse(throttle_time_ms=0, error_code=exc.code, producer_id=-1, producer_epoch=-1)
    error = result.error
    if error == ErrorCode.NONE:
        # a state change that did not reach the ISR is answered as Kafka answers a failed append
        error = await durable_state(broker, request.transactional_id)
        if error != ErrorCode.NONE:
            return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)
    elif error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # older clients don't know PRODUCER_FENCED
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)
