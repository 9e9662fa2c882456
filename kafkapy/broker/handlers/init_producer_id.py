"""InitProducerId: producer ids and epochs for idempotent producers (KIP-98, KIP-360 epoch bumps)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from ..dispatch import RequestContext, handles

MAX_EPOCH = 32767


@handles(InitProducerIdRequest)
async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    broker = ctx.broker
    if request.transactional_id is not None:
        # Transactions need a transaction coordinator, which kafkapy does not run yet.
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        # An idempotent producer resetting its sequences after an error keeps its id with a new epoch.
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=request.producer_id,
                                      producer_epoch=request.producer_epoch + 1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                  producer_id=broker.producer_ids.allocate(), producer_epoch=0)
