"""UpdateFeatures (57): finalize feature levels (KIP-584) in the metadata store; ApiVersions
(handlers/api_versions.py) reports them, which is what DescribeFeatures reads."""
from __future__ import annotations

import logging

from ...metadata.acls import AclOperation
from ...protocol.errors import ErrorCode
from ...protocol.messages import UpdateFeaturesRequest, UpdateFeaturesResponse
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)


@handles(UpdateFeaturesRequest)
async def handle_update_features(ctx: RequestContext, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    from ...metadata.features import (
        FEATURES, SAFE_DOWNGRADE, UPGRADE, FeatureUpdateError, finalized_levels, validate_update,
    )

    Response = UpdateFeaturesResponse
    names = [u.feature for u in request.feature_updates]

    def answer(code: int, message: str | None) -> UpdateFeaturesResponse:
        # as Kafka 3.9's controller: all or nothing, the error repeated for every feature
        return Response(throttle_time_ms=0, error_code=code, error_message=message, results=[
            Response.UpdatableFeatureResult(feature=name, error_code=code, error_message=message) for name in names])

    if not ctx.authorized_cluster(AclOperation.ALTER):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if len(set(names)) != len(names):
        return answer(ErrorCode.INVALID_REQUEST, "Duplicate feature in the update request")
    if not names:
        return answer(ErrorCode.INVALID_REQUEST, "No feature updates")
    services = ctx.services
    _, stored = services.metadata.stored_features()
    current = finalized_levels(stored)
    changes: dict[str, int] = {}
    try:
        for update in request.feature_updates:
            if ctx.api_version == 0:
                upgrade_type = SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
            else:
                upgrade_type = update.upgrade_type
            validate_update(update.feature, update.max_version_level, upgrade_type,
                            current.get(update.feature, 0))
            changes[update.feature] = update.max_version_level
    except FeatureUpdateError as exc:
        return answer(exc.code, str(exc))
    if not request.validate_only:
        # a level equal to the default is stored too: an operator's choice outlives a new default
        stored_changes = {name: level for name, level in changes.items() if name in FEATURES}
        if stored_changes:
            services.metadata.store_features(stored_changes)
        log.info("client %s (%s) finalized features %s", ctx.client_id, ctx.principal, changes)
    return answer(ErrorCode.NONE, None)
