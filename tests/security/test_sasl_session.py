"""The connection session's SASL state machine, with a stand-in connection and broker."""
from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

from kafkapy.broker.config import BrokerConfig, Listener
from kafkapy.broker.dispatch import ConnectionClosed
from kafkapy.protocol.errors import ErrorCode
from kafkapy.security.principal import ANONYMOUS, KafkaPrincipal
from kafkapy.security.sasl.scram import SCRAM_MECHANISMS, ScramCredential
from kafkapy.security.session import ConnectionSession, SaslState

from .test_sasl_mechanisms import ScramClient, initial_response, unsecured_jws

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'


class Store:
    def __init__(self):
        self.creds = {"alice": {"SCRAM-SHA-256": ScramCredential.from_password(
            SCRAM_MECHANISMS["SCRAM-SHA-256"], "alice-pw").to_config()}}

    def scram_credentials(self, user):
        return self.creds.get(user, {})


class Broker:
    def __init__(self, **props):
        settings = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": "/nonexistent",
                    "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
                    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                    "connection.failed.authentication.delay.ms": "0"}
        settings.update(props)
        self.config = BrokerConfig(settings)
        self.metadata = Store()


class Connection:
    def __init__(self, protocol="SASL_PLAINTEXT", **props):
        self.services = Broker(**props)
        self.listener = Listener(protocol, protocol, "127.0.0.1", 0)
        self.principal = ANONYMOUS
        self.peer = "127.0.0.1:5555"
        self.closed = False
        self.session = ConnectionSession(self)

    def close(self):
        self.closed = True


def run(coro):
    return asyncio.run(coro)


async def settle():
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def test_plaintext_listener_passes_everything():
    conn = Connection("PLAINTEXT")
    conn.session.check_request(0, 9)
    assert conn.session.handshake("PLAIN", 1)[0] == ErrorCode.ILLEGAL_SASL_STATE


@pytest.mark.parametrize("api_key", [0, 1, 3, 36])
def test_only_api_versions_and_handshake_before_authentication(api_key):
    conn = Connection()
    conn.session.check_request(18, 3)
    conn.session.check_request(17, 1)
    with pytest.raises(ConnectionClosed):  # SaslAuthenticate before SaslHandshake too
        conn.session.check_request(api_key, 0)
    assert conn.session.state is SaslState.FAILED


def test_plain_authenticates_and_sets_the_principal(caplog):
    conn = Connection()

    async def go():
        assert conn.session.handshake("PLAIN", 1) == (0, ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
        conn.session.check_request(36, 2)
        return await conn.session.authenticate(b"\x00alice\x00alice-pw", 2)
    assert run(go()) == (0, None, b"", 0)
    assert conn.principal == KafkaPrincipal.user("alice")
    conn.session.check_request(0, 9)


def test_wrong_password_fails_generically_closes_and_logs_no_secret(caplog):
    conn = Connection()

    async def go():
        conn.session.handshake("PLAIN", 1)
        result = await conn.session.authenticate(b"\x00alice\x00guessed-pw", 1)
        await settle()
        return result
    code, message, _, _ = run(go())
    assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert message == ("Authentication failed during authentication due to invalid credentials with SASL "
                       "mechanism PLAIN")
    assert conn.closed and conn.principal == ANONYMOUS
    assert "guessed-pw" not in caplog.text and "alice-pw" not in caplog.text
    assert len([r for r in caplog.records if "authentication failed" in r.getMessage()]) == 1


def test_unsupported_mechanism_lists_the_enabled_ones_and_closes():
    conn = Connection()

    async def go():
        result = conn.session.handshake("GSSAPI", 1)
        await settle()
        return result
    assert run(go()) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
    assert conn.closed


def test_scram_over_raw_tokens_after_handshake_v0():
    conn = Connection()
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-pw")

    async def go():
        assert conn.session.handshake("SCRAM-SHA-256", 0)[0] == 0
        assert conn.session.expects_raw_frame(10)
        [server_first] = await conn.session.handle_raw_frame(client.first())
        [server_final] = await conn.session.handle_raw_frame(client.final(server_first))
        return server_final
    assert run(go()).startswith(b"v=")
    assert conn.principal.name == "alice" and not conn.session.expects_raw_frame(10)


def test_garbage_raw_token_closes():
    conn = Connection()

    async def go():
        conn.session.handshake("SCRAM-SHA-256", 0)
        await conn.session.handle_raw_frame(b"\x00\x00\x00\x12\x00\x03garbage")
    with pytest.raises(ConnectionClosed) as info:
        run(go())
    assert "SCRAM-SHA-256" in str(info.value)


def test_oversized_frame_before_authentication_is_refused():
    conn = Connection(**{"sasl.server.max.receive.size": "1000"})
    assert conn.session.expects_raw_frame(1001) and not conn.session.expects_raw_frame(1000)
    with pytest.raises(ConnectionClosed):
        run(conn.session.handle_raw_frame(b"x" * 1001))


def test_session_lifetime_expiry_and_reauthentication():
    conn = Connection(**{"connections.max.reauth.ms": "100000"})

    async def auth(version=1):
        conn.session.handshake("PLAIN", 1)
        return await conn.session.authenticate(b"\x00alice\x00alice-pw", version)
    assert run(auth())[3] == 100000
    conn.session.expires_at = time.monotonic() - 1  # the lifetime passed
    conn.session.check_request(17, 1)  # a SaslHandshake may still start re-authentication
    assert run(auth())[0] == 0 and conn.session.expires_at > time.monotonic()
    conn.session.check_request(0, 9)
    conn.session.expires_at = time.monotonic() - 1
    with pytest.raises(ConnectionClosed):
        conn.session.check_request(0, 9)


def test_second_handshake_without_reauthentication_support_is_illegal():
    conn = Connection()

    async def go():
        conn.session.handshake("PLAIN", 1)
        await conn.session.authenticate(b"\x00alice\x00alice-pw", 0)  # a v0 client
        return conn.session.handshake("PLAIN", 1)
    assert run(go())[0] == ErrorCode.ILLEGAL_SASL_STATE


def test_reauthentication_must_keep_the_principal():
    conn = Connection(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config":
                         JAAS[:-1] + ' user_bob="bob-pw";'})

    async def go():
        conn.session.handshake("PLAIN", 1)
        await conn.session.authenticate(b"\x00alice\x00alice-pw", 1)
        conn.session.handshake("PLAIN", 1)
        result = await conn.session.authenticate(b"\x00bob\x00bob-pw", 1)
        await settle()
        return result
    assert run(go())[0] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert conn.closed and conn.principal.name == "alice"


def test_oauthbearer_expired_token_gets_invalid_token_then_fails():
    conn = Connection()
    token = unsecured_jws({"sub": "carol", "exp": time.time() - 3600})

    async def go():
        conn.session.handshake("OAUTHBEARER", 1)
        first = await conn.session.authenticate(initial_response(token), 1)
        second = await conn.session.authenticate(b"\x01", 1)
        await settle()
        return first, second
    first, second = run(go())
    assert first == (0, None, b'{"status":"invalid_token"}', 0)
    assert second[0] == ErrorCode.SASL_AUTHENTICATION_FAILED and conn.closed


def test_oauthbearer_token_lifetime_bounds_the_session():
    conn = Connection(**{"connections.max.reauth.ms": "3600000"})
    token = unsecured_jws({"sub": "carol", "exp": time.time() + 60})

    async def go():
        conn.session.handshake("OAUTHBEARER", 1)
        return await conn.session.authenticate(initial_response(token), 1)
    code, _, _, lifetime = run(go())
    assert code == 0 and 55_000 < lifetime <= 60_000 and conn.principal.name == "carol"


def test_pluggable_oauthbearer_validator():
    conn = Connection(**{"kafkapy.oauthbearer.validator": "tests.security.test_sasl_session:validate_token"})

    async def go():
        conn.session.handshake("OAUTHBEARER", 1)
        return await conn.session.authenticate(initial_response("opaque-token"), 1)
    assert run(go())[0] == 0 and conn.principal.name == "svc-opaque-token"


def validate_token(token: str) -> str:
    return "svc-" + token


def test_oauthbearer_decode_helper_is_sane():
    token = unsecured_jws({"sub": "x", "exp": 1})
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header == {"alg": "none"}
