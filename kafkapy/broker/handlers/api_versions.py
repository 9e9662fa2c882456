"""ApiVersions: which APIs and versions this broker serves (KIP-511 fallback for unknown versions)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from ..dispatch import RequestContext, handles


def _api_keys(broker) -> list:
    return [ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(broker.advertised_versions.items())]


def unsupported_version_response(broker) -> ApiVersionsResponse:
    """The v0-layout answer to an ApiVersions version this broker does not know."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(broker))


@handles(ApiVersionsRequest)
async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.connection is not None and ctx.api_version >= 3:
        # what client telemetry subscriptions match on (client_software_name/_version, KIP-714)
        ctx.connection.client_software = (request.client_software_name, request.client_software_version)
    return ApiVersionsResponse(error_code=0, api_keys=_api_keys(ctx.broker))
