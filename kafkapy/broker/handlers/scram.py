"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): SCRAM users in the
metadata store, as `kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`
and the AdminClient write them.

The client sends the salted password; the broker keeps Kafka's stored form (salt, StoredKey,
ServerKey, iterations). All of one user's changes in a request apply together or not at all. In
cluster mode only the active controller alters credentials (others answer NOT_CONTROLLER).
"""
from __future__ import annotations

import asyncio
import logging

from ...metadata.acls import AclOperation
from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from ...security.sasl.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    mechanism_by_type,
)
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)


@handles(DescribeUserScramCredentialsRequest)
async def handle_describe_user_scram_credentials(
        ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    Info = DescribeUserScramCredentialsResponse.CredentialInfo
    store = ctx.metadata
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):  # as KafkaApis: DESCRIBE on the cluster
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.", results=[])
    wanted = [u.name for u in request.users] if request.users else None
    users = wanted if wanted is not None else await asyncio.to_thread(store.scram_users)
    results = []
    counts = {name: users.count(name) for name in users}
    for name in dict.fromkeys(users):
        if counts[name] > 1:
            results.append(Result(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=(
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}")))
            continue
        stored = await asyncio.to_thread(store.scram_credentials, name)
        infos = []
        for mechanism_name in sorted(stored):
            mechanism = SCRAM_MECHANISMS.get(mechanism_name)
            if mechanism is None:
                continue
            try:
                iterations = ScramCredential.from_config(stored[mechanism_name]).iterations
            except ValueError:
                continue
            infos.append(Info(mechanism=mechanism.type_code, iterations=iterations))
        if not infos:
            results.append(Result(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message=(
                f"Attempt to describe a user credential that does not exist: {name}")))
        else:
            results.append(Result(user=name, error_code=0, error_message=None, credential_infos=infos))
    # KafkaApis leaves the top-level message unset: the schema's default, ""
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0, error_message="",
                                                results=results)


@handles(AlterUserScramCredentialsRequest)
async def handle_alter_user_scram_credentials(
        ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    if not ctx.authorized_cluster(AclOperation.ALTER):  # as KafkaApis: ALTER on the cluster
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            Result(user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   error_message="Cluster authorization failed.") for u in users])
    if not ctx.cluster.is_active_controller():  # only the active controller alters them
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            Result(user=u, error_code=ErrorCode.NOT_CONTROLLER,
                   error_message="This is not the correct controller for this cluster.") for u in users])
    errors: dict[str, tuple[int, str]] = {}
    seen: dict[tuple[str, int], int] = {}
    for change in [*request.deletions, *request.upsertions]:
        seen[(change.name, change.mechanism)] = seen.get((change.name, change.mechanism), 0) + 1

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, (code, message))

    for change in [*request.deletions, *request.upsertions]:
        user = change.name
        if not user:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif seen[(user, change.mechanism)] > 1:
            fail(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        elif mechanism_by_type(change.mechanism) is None:
            fail(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for upsertion in request.upsertions:
        if upsertion.iterations < MIN_ITERATIONS:
            fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif upsertion.iterations > MAX_ITERATIONS:
            fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not upsertion.salt or not upsertion.salted_password:
            fail(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Empty salt or salted password")
    store = ctx.metadata
    changes: dict[str, dict[str, str | None]] = {}
    for deletion in request.deletions:
        if deletion.name in errors:
            continue
        mechanism = mechanism_by_type(deletion.mechanism).name
        current = await asyncio.to_thread(store.scram_credentials, deletion.name)
        if mechanism not in current:
            fail(deletion.name, ErrorCode.RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")
            continue
        changes.setdefault(deletion.name, {})[mechanism] = None
    for upsertion in request.upsertions:
        if upsertion.name in errors:
            continue
        mechanism = mechanism_by_type(upsertion.mechanism)
        credential = ScramCredential.from_salted_password(mechanism, upsertion.salt, upsertion.salted_password,
                                                          upsertion.iterations)
        changes.setdefault(upsertion.name, {})[mechanism.name] = credential.to_config()
    changes = {user: c for user, c in changes.items() if user not in errors}
    if changes:
        await asyncio.to_thread(store.alter_scram_credentials, changes)
        for user, by_mechanism in changes.items():
            log.info("SCRAM credentials of user %r altered by %s: %s", user, ctx.principal, ", ".join(
                f"{'deleted' if value is None else 'set'} {mechanism}" for mechanism, value in by_mechanism.items()))
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        Result(user=u, error_code=errors[u][0], error_message=errors[u][1]) if u in errors
        else Result(user=u, error_code=0, error_message=None) for u in users])
