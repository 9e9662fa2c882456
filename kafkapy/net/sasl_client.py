"""The client side of SASL authentication, written once for every kafkapy client.

Kafka's SaslClientAuthenticator: SaslHandshake v1 names the mechanism, then SaslAuthenticate v2
carries the mechanism's tokens (PLAIN: one round; SCRAM-SHA-256/512: client-first, client-final,
then the server signature is checked). The exchange itself is sans-I/O: `sasl_exchange` yields
each (request, version) to send and is sent each decoded response, so the asyncio
BrokerConnection (broker to broker) and the blocking admin client drive the same code with
`authenticate_async` and `authenticate_blocking`.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

__all__ = ["SASL_CLIENT_MECHANISMS", "SaslClientError", "authenticate_async", "authenticate_blocking",
           "sasl_exchange"]

HANDSHAKE_VERSION = 1       # v1: the tokens then travel in SaslAuthenticate requests (KIP-152)
AUTHENTICATE_VERSION = 2    # v2 is flexible; the broker answers session_lifetime_ms in v1+

# What this client speaks (OAUTHBEARER and GSSAPI are server-side only in kafkapy).
SASL_CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

Exchange = Generator[tuple[Any, int], Any, None]


class SaslClientError(Exception):
    """The broker refused the mechanism (stage "handshake") or the credentials ("authenticate").

    `error_code` is the broker's; `mechanisms` what it offers after a refused handshake. The text
    names the user, never the password."""

    def __init__(self, message: str, *, stage: str, error_code: int = 0, mechanisms: tuple[str, ...] = (),
                 error_message: str | None = None):
        super().__init__(message)
        self.stage = stage
        self.error_code = error_code
        self.mechanisms = mechanisms
        self.error_message = error_message


def sasl_exchange(mechanism: str, username: str, password: str) -> Exchange:
    """The requests of one authentication, as a generator driven with the broker's responses.

    Raises SaslClientError when the broker refuses, ValueError for a mechanism this client does
    not speak, and the SCRAM client's SaslAuthenticationError when the server's proof is wrong."""
    from ..protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest

    if mechanism not in SASL_CLIENT_MECHANISMS:
        raise ValueError(f"unsupported SASL mechanism {mechanism} (this client speaks "
                         f"{', '.join(SASL_CLIENT_MECHANISMS)})")
    handshake = yield SaslHandshakeRequest(mechanism=mechanism), HANDSHAKE_VERSION
    if handshake.error_code:
        offered = tuple(handshake.mechanisms)
        raise SaslClientError(f"SaslHandshake {mechanism}: error {handshake.error_code}, the broker offers "
                              f"{', '.join(offered) or 'nothing'}", stage="handshake",
                              error_code=handshake.error_code, mechanisms=offered)

    def token_of(response) -> bytes:
        if response.error_code:
            raise SaslClientError(f"SASL {mechanism} authentication as {username} failed: error "
                                  f"{response.error_code} ({response.error_message})", stage="authenticate",
                                  error_code=response.error_code, error_message=response.error_message)
        return response.auth_bytes

    def request(token: bytes):
        return SaslAuthenticateRequest(auth_bytes=token), AUTHENTICATE_VERSION

    if mechanism == "PLAIN":
        token_of((yield request(f"\x00{username}\x00{password}".encode())))
        return
    # the SCRAM arithmetic is shared with the broker's server side
    from ..security.sasl.scram import SCRAM_MECHANISMS, ScramClient

    client = ScramClient(SCRAM_MECHANISMS[mechanism], username, password)
    server_first = token_of((yield request(client.first())))
    server_final = token_of((yield request(client.final(server_first))))
    client.verify(server_final)


async def authenticate_async(send: Callable[[Any, int], Awaitable[Any]], *, mechanism: str, username: str,
                             password: str) -> None:
    """Run the exchange over an asyncio transport: `send(request, version)` returns the response."""
    exchange = sasl_exchange(mechanism, username, password)
    step = next(exchange)
    while True:
        response = await send(*step)
        try:
            step = exchange.send(response)
        except StopIteration:
            return


def authenticate_blocking(send: Callable[[Any, int], Any], *, mechanism: str, username: str,
                          password: str) -> None:
    """Run the exchange over a blocking connection: `send(request, version)` returns the response."""
    exchange = sasl_exchange(mechanism, username, password)
    step = next(exchange)
    while True:
        try:
            step = exchange.send(send(*step))
        except StopIteration:
            return
