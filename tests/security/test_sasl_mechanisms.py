"""The server-side SASL mechanisms on their own: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER, JAAS parsing."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest

from kafkapy.security.sasl import SaslAuthenticationError
from kafkapy.security.sasl.jaas import parse_jaas_config, plain_users
from kafkapy.security.sasl.oauthbearer import (
    OAuthBearerServer,
    OAuthBearerToken,
    UnsecuredJwsValidator,
    parse_client_initial_response,
)
from kafkapy.security.sasl.plain import PlainServer
from kafkapy.security.sasl.scram import SCRAM_MECHANISMS, ScramCredential, ScramServer

# -- PLAIN ---------------------------------------------------------------------------------------


def test_plain_accepts_the_right_password_and_an_equal_authzid():
    for message in (b"\x00alice\x00secret", b"alice\x00alice\x00secret"):
        server = PlainServer({"alice": "secret"})
        assert server.evaluate(message) == b""
        assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("message", [
    b"\x00alice\x00wrong", b"\x00bob\x00secret", b"bob\x00alice\x00secret", b"\x00alice", b"\x00alice\x00secret\x00",
    b"\x00\x00secret", b"\x00alice\x00", b"\xff\x00alice\x00secret", b""])
def test_plain_refuses_bad_messages_without_echoing_the_password(message):
    server = PlainServer({"alice": "secret"})
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(message)
    assert "secret" not in str(info.value) and "wrong" not in str(info.value)
    assert not server.complete


def test_plain_refuses_a_second_message():
    server = PlainServer({"alice": "secret"})
    server.evaluate(b"\x00alice\x00secret")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"\x00alice\x00secret")


# -- SCRAM ---------------------------------------------------------------------------------------

class ScramClient:
    """A minimal RFC 5802 client for the tests."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str = "clientnonce123",
                 gs2: str = "n,,"):
        self.m = SCRAM_MECHANISMS[mechanism]
        self.user, self.password, self.nonce, self.gs2 = user, password, nonce, gs2

    def first(self) -> bytes:
        self.bare = f"n={self.user},r={self.nonce}"
        return (self.gs2 + self.bare).encode()

    def final(self, server_first: bytes, *, nonce: str | None = None, password: str | None = None,
              channel: str | None = None) -> bytes:
        fields = dict(p.split("=", 1) for p in server_first.decode().split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = self.m.salted_password(password or self.password, salt, iterations)
        client_key = self.m.hmac(salted, b"Client Key")
        stored_key = self.m.digest(client_key)
        channel = channel if channel is not None else base64.b64encode(self.gs2.encode()).decode()
        without_proof = f"c={channel},r={nonce or fields['r']}"
        self.auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = self.m.hmac(stored_key, self.auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self.server_key = self.m.hmac(salted, b"Server Key")
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def scram_server(mechanism: str, password: str = "pw-alice", iterations: int = 4096) -> ScramServer:
    cred = ScramCredential.from_password(SCRAM_MECHANISMS[mechanism], password, iterations)
    return ScramServer(SCRAM_MECHANISMS[mechanism], lambda user: cred if user == "alice" else None)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_and_server_signature(mechanism):
    server = scram_server(mechanism)
    client = ScramClient(mechanism, "alice", "pw-alice")
    server_first = server.evaluate(client.first())
    assert server_first.startswith(b"r=clientnonce123") and b",i=4096" in server_first
    server_final = server.evaluate(client.final(server_first))
    expected = base64.b64encode(client.m.hmac(client.server_key, client.auth_message))
    assert server_final == b"v=" + expected
    assert server.complete and server.authorization_id == "alice"


def test_scram_matches_rfc7677_test_vector():
    """RFC 7677 section 3: user, pencil, the client's proof and the server signature."""
    m = SCRAM_MECHANISMS["SCRAM-SHA-256"]
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = ScramCredential.from_password(m, "pencil", 4096, salt)
    server = ScramServer(m, lambda user: cred, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_scram_credential_round_trips_kafkas_stored_form():
    cred = ScramCredential.from_password(SCRAM_MECHANISMS["SCRAM-SHA-512"], "x", 8192)
    text = cred.to_config()
    assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(",iterations=8192")
    assert ScramCredential.from_config(text) == cred


@pytest.mark.parametrize("case", ["wrong-password", "wrong-nonce", "channel-binding", "unknown-user",
                                  "truncated-final", "truncated-first", "y-binding", "p-binding",
                                  "other-authzid", "tokenauth", "garbage"])
def test_scram_refuses_bad_exchanges(case):
    server = scram_server("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "bob" if case == "unknown-user" else "alice", "pw-alice",
                         gs2={"y-binding": "y,,", "p-binding": "p=tls-unique,,",
                              "other-authzid": "n,a=bob,"}.get(case, "n,,"))
    with pytest.raises(SaslAuthenticationError) as info:
        first = client.first()
        if case == "truncated-first":
            first = first[:5]
        if case == "tokenauth":
            first += b",tokenauth=true"
        if case == "garbage":
            first = b"\x00\xff\x13garbage"
        server_first = server.evaluate(first)
        final = client.final(server_first, password="not-it" if case == "wrong-password" else None,
                             nonce="clientnonce123forged" if case == "wrong-nonce" else None,
                             channel=base64.b64encode(b"n,a=x,").decode() if case == "channel-binding" else None)
        if case == "truncated-final":
            final = final[: len(final) // 2]
        server.evaluate(final)
    assert "pw-alice" not in str(info.value) and "not-it" not in str(info.value)
    assert not server.complete


def test_scram_refuses_a_replayed_client_final():
    server = scram_server("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw-alice")
    final = client.final(server.evaluate(client.first()))
    server.evaluate(final)
    with pytest.raises(SaslAuthenticationError):  # the same exchange again
        server.evaluate(final)
    fresh = scram_server("SCRAM-SHA-256")  # a new exchange has a new server nonce
    fresh.evaluate(client.first())
    with pytest.raises(SaslAuthenticationError):
        fresh.evaluate(final)


def test_scram_with_an_authzid_equal_to_the_user():
    server = scram_server("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw-alice", gs2="n,a=alice,")
    server.evaluate(client.final(server.evaluate(client.first())))
    assert server.complete


# -- OAUTHBEARER ----------------------------------------------------------------------------------

def unsecured_jws(claims: dict, alg: str = "none") -> str:
    def enc(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{enc({'alg': alg})}.{enc(claims)}."


def initial_response(token: str, authzid: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_parses_the_client_initial_response():
    assert parse_client_initial_response(b"n,,\x01auth=Bearer abc.def.\x01ext=1\x01\x01") == (
        None, "abc.def.", {"ext": "1"})
    assert parse_client_initial_response(b"n,a=bob,\x01auth=bearer x\x01\x01")[0] == "bob"
    for bad in (b"y,,\x01auth=Bearer x\x01\x01", b"n,,\x01auth=Bearer x\x01", b"n,,\x01auth=Basic x\x01\x01",
                b"n,,\x01\x01", b"garbage", b"n,,\x01auth=Bearer x y\x01\x01"):
        with pytest.raises(ValueError):
            parse_client_initial_response(bad)


def test_oauthbearer_unsecured_token_is_accepted_with_its_lifetime():
    exp = time.time() + 60
    server = OAuthBearerServer(UnsecuredJwsValidator())
    token = unsecured_jws({"sub": "carol", "exp": exp, "iat": time.time(), "scope": "a b"})
    assert server.evaluate(initial_response(token)) == b""
    assert server.complete and server.authorization_id == "carol"
    assert abs(server.credential_expiry_ms - exp * 1000) < 2


@pytest.mark.parametrize("claims,alg", [
    ({"sub": "carol", "exp": time.time() - 10}, "none"),          # expired
    ({"sub": "carol"}, "none"),                                    # no exp
    ({"exp": time.time() + 60}, "none"),                           # no sub
    ({"sub": "carol", "exp": time.time() + 60}, "HS256"),          # signed: not unsecured
    ({"sub": "carol", "exp": time.time() + 60, "iat": time.time() + 600}, "none"),  # issued in the future
])
def test_oauthbearer_invalid_token_gets_the_error_challenge_then_fails(claims, alg):
    server = OAuthBearerServer(UnsecuredJwsValidator())
    token = unsecured_jws(claims, alg)
    assert server.evaluate(initial_response(token)) == b'{"status":"invalid_token"}'
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(b"\x01")
    assert token not in str(info.value)
    assert not server.complete


def test_oauthbearer_clock_skew_scope_and_claim_names():
    past = time.time() - 5
    validator = UnsecuredJwsValidator(principal_claim="user", allowable_clock_skew_ms=30_000)
    assert validator(unsecured_jws({"user": "dave", "exp": past})).principal == "dave"
    scoped = OAuthBearerServer(UnsecuredJwsValidator(required_scopes=["write"]))
    challenge = scoped.evaluate(initial_response(unsecured_jws({"sub": "x", "exp": time.time() + 60,
                                                                 "scope": ["read"]})))
    assert json.loads(challenge)["status"] == "insufficient_scope"


def test_oauthbearer_pluggable_validator_and_authzid():
    server = OAuthBearerServer(lambda token: OAuthBearerToken("svc-" + token))
    server.evaluate(initial_response("abc", authzid="svc-abc"))
    assert server.authorization_id == "svc-abc"
    other = OAuthBearerServer(lambda token: "svc")
    with pytest.raises(SaslAuthenticationError):
        other.evaluate(initial_response("abc", authzid="root"))


def test_oauthbearer_validator_exception_is_invalid_token():
    def broken(token):
        raise RuntimeError("boom " + token)
    server = OAuthBearerServer(broken)
    assert server.evaluate(initial_response("tok")) == b'{"status":"invalid_token"}'


# -- JAAS --------------------------------------------------------------------------------------------

def test_jaas_plain_users_and_client_credentials():
    module = parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule required '
                               'username="admin" password="admin-secret" user_admin="admin-secret" '
                               'user_alice="al;ice=\\"x\\"";')
    assert module.class_name.endswith("PlainLoginModule") and module.flag == "required"
    assert module.options["username"] == "admin"
    assert plain_users(module) == {"admin": "admin-secret", "alice": 'al;ice="x"'}


@pytest.mark.parametrize("text", [
    'org.Foo required user_a="secretvalue"',          # no ';'
    'org.Foo maybe user_a="secretvalue";',            # bad flag
    'org.Foo required user_a="secretvalue;',          # unterminated
    'org.Foo required user_a;',                       # no value
    'org.Foo required; org.Bar required;',            # two modules
    ''])
def test_jaas_errors_do_not_quote_values(text):
    with pytest.raises(ValueError) as info:
        parse_jaas_config(text)
    assert "secretvalue" not in str(info.value)


def test_hmac_helpers_match_hashlib():
    m = SCRAM_MECHANISMS["SCRAM-SHA-512"]
    assert m.hmac(b"k", b"d") == hmac.new(b"k", b"d", hashlib.sha512).digest()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_server(mechanism):
    from kafkapy.security.sasl.scram import ScramClient as Client

    server = scram_server(mechanism)
    client = Client(SCRAM_MECHANISMS[mechanism], "alice", "pw-alice")
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.authorization_id == "alice"
    with pytest.raises(SaslAuthenticationError):  # a server that does not know the password
        other = scram_server(mechanism, password="something-else")
        liar = Client(SCRAM_MECHANISMS[mechanism], "alice", "pw-alice")
        first = other.evaluate(liar.first())
        liar.final(first)
        liar.verify(b"v=" + base64.b64encode(b"\x00" * SCRAM_MECHANISMS[mechanism].digest_size))
