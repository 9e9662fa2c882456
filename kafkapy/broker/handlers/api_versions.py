"""ApiVersions: which APIs and versions this broker serves (KIP-511 fallback for unknown versions)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from ..dispatch import RequestContext, api_keys, handles


def _features(metadata, api_version: int) -> dict:
    """ApiVersions v3+'s feature fields (KIP-584): what this broker supports, what is finalized.

    Below v4 a supported feature whose minimum level is 0 is left out, as Kafka does (KAFKA-17492):
    Java clients 3.3-3.8 read each range into a SupportedVersionRange, which rejects a minimum of 0
    and kills the client's network thread on the first answer. v4 (Kafka 3.9+ clients) gets them all.
    """
    from ...metadata.features import FEATURES, finalized_levels

    epoch, stored = metadata.stored_features()
    supported = sorted(FEATURES.values(), key=lambda f: f.name)
    if api_version < 4:
        supported = [f for f in supported if f.min_version > 0]
    return dict(
        supported_features=[ApiVersionsResponse.SupportedFeatureKey(name=f.name, min_version=f.min_version,
                                                                    max_version=f.max_version)
                             for f in supported],
        finalized_features_epoch=epoch,
        finalized_features=[ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level,
                                                                    min_version_level=level)
                            for name, level in finalized_levels(stored).items()])


def _cluster_check(services, request: ApiVersionsRequest) -> int:
    """ApiVersions v5 (Kafka 4.4, KIP-1242): a client that names the cluster and node it expects to reach.

    Both or neither must be given (else INVALID_REQUEST); a cluster id or node id that is not this
    broker's answers REBOOTSTRAP_REQUIRED, so the client forgets its stale metadata (an address now
    used by another cluster or node). Kafka answers both errors without the API list.
    """
    if (request.cluster_id is None) != (request.node_id == -1):
        return ErrorCode.INVALID_REQUEST
    if request.cluster_id is not None and (request.cluster_id != services.cluster_id
                                           or request.node_id != services.node_id):
        return ErrorCode.REBOOTSTRAP_REQUIRED
    return ErrorCode.NONE


@handles(ApiVersionsRequest)
async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.header is None or ctx.api_version < 3:  # v0-2 (or an in-process call): no features
        return ApiVersionsResponse(error_code=0, api_keys=api_keys(ctx.services))
    if ctx.api_version >= 5:
        code = _cluster_check(ctx.services, request)
        if code:
            return ApiVersionsResponse(error_code=code, throttle_time_ms=0, api_keys=[])
    if ctx.connection is not None:
        # what client telemetry subscriptions match on (client_software_name/_version, KIP-714)
        ctx.connection.client_software = (request.client_software_name, request.client_software_version)
    return ApiVersionsResponse(error_code=0, api_keys=api_keys(ctx.services), **_features(ctx.metadata, ctx.api_version))
