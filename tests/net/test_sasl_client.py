"""The sans-I/O SASL client exchange (net/sasl_client.py); against a real broker it runs in
tests/security/test_sasl_inter_broker.py (asyncio) and conformance/test_cli.py (blocking admin)."""
from __future__ import annotations

import pytest

from kafkapy.net.sasl_client import (
    SaslClientError,
    authenticate_blocking,
    sasl_exchange,
)
from kafkapy.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)


def plain_broker(password: str, mechanisms=("PLAIN",)):
    """A blocking `send` that answers as a broker with one PLAIN user "broker"."""
    sent = []

    def send(request, version):
        sent.append((type(request).__name__, version))
        if isinstance(request, SaslHandshakeRequest):
            ok = request.mechanism in mechanisms
            return SaslHandshakeResponse(error_code=0 if ok else 33, mechanisms=list(mechanisms))
        assert isinstance(request, SaslAuthenticateRequest)
        ok = request.auth_bytes == f"\x00broker\x00{password}".encode()
        return SaslAuthenticateResponse(error_code=0 if ok else 58, error_message=None if ok else "bad",
                                        auth_bytes=b"")
    return send, sent


def test_plain_is_a_handshake_and_one_round():
    send, sent = plain_broker("pw")
    authenticate_blocking(send, mechanism="PLAIN", username="broker", password="pw")
    assert sent == [("SaslHandshakeRequest", 1), ("SaslAuthenticateRequest", 2)]


def test_refused_mechanism_names_what_the_broker_offers():
    send, _ = plain_broker("pw", mechanisms=("SCRAM-SHA-512",))
    with pytest.raises(SaslClientError) as caught:
        authenticate_blocking(send, mechanism="PLAIN", username="broker", password="pw")
    assert (caught.value.stage, caught.value.error_code, caught.value.mechanisms) == \
        ("handshake", 33, ("SCRAM-SHA-512",))


def test_wrong_password_fails_without_showing_it():
    send, _ = plain_broker("right-pw")
    with pytest.raises(SaslClientError) as caught:
        authenticate_blocking(send, mechanism="PLAIN", username="broker", password="wrong-pw")
    assert caught.value.stage == "authenticate" and caught.value.error_code == 58
    assert "wrong-pw" not in str(caught.value) and "broker" in str(caught.value)


def test_unknown_mechanism_is_refused_before_sending():
    with pytest.raises(ValueError):
        next(sasl_exchange("GSSAPI", "u", "p"))
