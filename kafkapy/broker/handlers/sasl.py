"""SaslHandshake and SaslAuthenticate: the connection's security session does the work
(kafkapy/security/session.py); these handlers turn its answers into responses.

On a listener without SASL both answer ILLEGAL_SASL_STATE, as Kafka's KafkaApis does.
"""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from ..dispatch import RequestContext, handles


@handles(SaslHandshakeRequest)
async def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    if ctx.connection is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    code, enabled = ctx.connection.session.handshake(request.mechanism, ctx.api_version)
    listed = code in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_SASL_MECHANISM)
    return SaslHandshakeResponse(error_code=code, mechanisms=enabled if listed else [])


@handles(SaslAuthenticateRequest)
async def handle_sasl_authenticate(ctx: RequestContext,
                                   request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    if ctx.connection is None or not ctx.connection.session.sasl:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="SaslAuthenticate request received after successful "
                                        "authentication", auth_bytes=b"", session_lifetime_ms=0)
    code, message, auth_bytes, lifetime_ms = await ctx.connection.session.authenticate(
        request.auth_bytes, ctx.api_version)
    return SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=auth_bytes,
                                    session_lifetime_ms=lifetime_ms)
