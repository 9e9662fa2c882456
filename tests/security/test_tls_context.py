"""Kafka's ssl.* settings -> the listener's SSLContext: key and trust stores in their forms, client
auth, protocols and cipher suites, per-listener overrides, one ConfigError naming the key for bad input,
and a real handshake (with and without a client certificate) through the contexts built."""
from __future__ import annotations

import socket
import ssl
import threading

import pytest

pytest.importorskip("cryptography")

from conformance.tls_certs import make_certs  # noqa: E402
from kafkapy.broker.config import BrokerConfig, ConfigError, describe_broker_configs  # noqa: E402
from kafkapy.security.principal import ANONYMOUS, KafkaPrincipal  # noqa: E402
from kafkapy.security.tls import (  # noqa: E402
    client_ssl_context,
    inter_broker_ssl_context,
    java_cipher_to_openssl,
    peer_principal,
    server_ssl_context,
)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def config(**props) -> BrokerConfig:
    base = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "log.dirs": "/tmp/kafkapy-unused"}
    return BrokerConfig({**base, **{k.replace("_", "."): v for k, v in props.items()}})


def pem_store(certs, **extra) -> BrokerConfig:
    return BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "log.dirs": "/tmp/kafkapy-unused",
                         "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
                         "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem), **extra})


def ssl_listener(cfg):
    return next(lst for lst in cfg.listeners if lst.name == "SSL")


def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext):
    """A TLS handshake over a socket pair; returns (server SSLObject-like socket info, client error)."""
    left, right = socket.socketpair()
    result = {}

    def serve():
        try:
            with server_ctx.wrap_socket(left, server_side=True) as s:
                result["principal"] = peer_principal(s)
                result["version"] = s.version()
                s.recv(1)
        except (ssl.SSLError, OSError) as exc:
            result["server_error"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(right, server_hostname="localhost") as c:
            c.sendall(b"x")
            c.recv(1)
    except (ssl.SSLError, OSError) as exc:
        result["client_error"] = exc
    thread.join(5)
    return result


def test_plaintext_listener_has_no_context(certs):
    cfg = pem_store(certs)
    assert server_ssl_context(cfg, cfg.listeners[0]) is None


def test_pem_location_files_handshake_without_client_auth(certs):
    cfg = pem_store(certs)
    server = server_ssl_context(cfg, ssl_listener(cfg))
    assert server.verify_mode == ssl.CERT_NONE
    got = handshake(server, client_ssl_context(cfg))
    assert got["principal"] == ANONYMOUS and "client_error" not in got


def test_inline_pem_strings_and_required_client_auth_principal(certs):
    alice = certs.client("alice")
    one_line = " ".join(certs.ca_pem.read_text().split("\n"))  # PEM on one properties line
    cfg = config(**{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": certs.broker.cert_text,
                    "ssl.keystore.key": certs.broker.key_text, "ssl.truststore.type": "PEM",
                    "ssl.truststore.certificates": one_line, "ssl.client.auth": "required",
                    "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=eng.*$/$1/L,DEFAULT"})
    server = server_ssl_context(cfg, ssl_listener(cfg))
    assert server.verify_mode == ssl.CERT_REQUIRED
    client = config(**{"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem),
                       "ssl.keystore.type": "PEM", "ssl.keystore.location": str(alice.keystore)})
    got = handshake(server, client_ssl_context(client))
    assert got["principal"] == KafkaPrincipal.user("alice")
    # without a client certificate the handshake fails
    anonymous = config(**{"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem)})
    got = handshake(server, client_ssl_context(anonymous))
    assert "server_error" in got


def test_requested_client_auth_accepts_both(certs):
    bob = certs.client("bob", org_unit="ops")
    cfg = pem_store(certs, **{"ssl.client.auth": "requested"})
    server = server_ssl_context(cfg, ssl_listener(cfg))
    assert server.verify_mode == ssl.CERT_OPTIONAL
    with_cert = config(**{"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem),
                          "ssl.keystore.type": "PEM", "ssl.keystore.location": str(bob.keystore)})
    assert handshake(server, client_ssl_context(with_cert))["principal"] == \
        KafkaPrincipal.user("CN=bob,OU=ops,O=acme,C=US")
    without = config(**{"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem)})
    assert handshake(server, client_ssl_context(without))["principal"] == ANONYMOUS


def test_encrypted_key_with_ssl_key_password(certs):
    enc = certs.client("carol", key_password="s3cret")
    cfg = config(**{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(enc.keystore),
                    "ssl.key.password": "s3cret"})
    assert server_ssl_context(cfg, ssl_listener(cfg)) is not None
    cfg = config(**{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": enc.cert_text,
                    "ssl.keystore.key": enc.key_text, "ssl.key.password": "s3cret"})
    assert server_ssl_context(cfg, ssl_listener(cfg)) is not None
    bad = config(**{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": enc.cert_text,
                    "ssl.keystore.key": enc.key_text, "ssl.key.password": "wrong"})
    with pytest.raises(ConfigError) as info:
        server_ssl_context(bad, ssl_listener(bad))
    assert info.value.name == "ssl.key.password" and "wrong" not in str(info.value)


def test_pkcs12_keystore(certs, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    key = serialization.load_pem_private_key(certs.broker.key_pem.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(certs.broker.cert_pem.read_bytes())
    path = tmp_path / "broker.p12"
    path.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, None, serialization.BestAvailableEncryption(b"storepass")))
    cfg = config(**{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(path),
                    "ssl.keystore.password": "storepass"})
    server = server_ssl_context(cfg, ssl_listener(cfg))
    assert handshake(server, client_ssl_context(pem_store(certs))).get("principal") == ANONYMOUS
    bad = config(**{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(path),
                    "ssl.keystore.password": "nope"})
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        server_ssl_context(bad, ssl_listener(bad))


@pytest.mark.parametrize("props, key", [
    ({}, "ssl.keystore.location"),  # an SSL listener needs a key store
    ({"ssl.keystore.location": "/nonexistent/broker.pem"}, "ssl.keystore.type"),  # default JKS
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"}, "ssl.keystore.type"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/broker.pem"}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "GARBAGE"}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "not pem", "ssl.keystore.key": "x"},
     "ssl.keystore.certificate.chain"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "BROKER", "ssl.client.auth": "required",
      "ssl.truststore.type": "PEM", "ssl.truststore.location": "GARBAGE"}, "ssl.truststore.location"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "BROKER", "ssl.enabled.protocols": "TLSv1.4"},
     "ssl.enabled.protocols"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "BROKER", "ssl.cipher.suites": "TLS_FOO_WITH_BAR"},
     "ssl.cipher.suites"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "BROKER", "ssl.principal.mapping.rules": "RULE:x/y"},
     "ssl.principal.mapping.rules"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "BROKER",
      "listener.name.ssl.ssl.keystore.location": "/nonexistent"}, "listener.name.ssl.ssl.keystore.location"),
])
def test_bad_settings_name_the_key(certs, tmp_path, props, key):
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"\x00garbage\n")
    props = {k: {"GARBAGE": str(garbage), "BROKER": str(certs.broker_keystore)}.get(v, v) for k, v in props.items()}
    cfg = config(**props)
    with pytest.raises(ConfigError) as info:
        server_ssl_context(cfg, ssl_listener(cfg))
    assert info.value.name == key, str(info.value)
    assert "\n" not in str(info.value)


def test_listener_overrides_win_key_by_key(certs):
    cfg = config(**{"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent",
                    "listener.name.ssl.ssl.keystore.location": str(certs.broker_keystore),
                    "ssl.client.auth": "none", "listener.name.ssl.ssl.client.auth": "requested",
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem)})
    server = server_ssl_context(cfg, ssl_listener(cfg))
    assert server.verify_mode == ssl.CERT_OPTIONAL


def test_protocols(certs):
    cfg = pem_store(certs, **{"ssl.enabled.protocols": "TLSv1.2"})
    server = server_ssl_context(cfg, ssl_listener(cfg))
    assert server.maximum_version == ssl.TLSVersion.TLSv1_2
    assert handshake(server, client_ssl_context(pem_store(certs)))["version"] == "TLSv1.2"
    cfg = pem_store(certs)
    assert handshake(server_ssl_context(cfg, ssl_listener(cfg)), client_ssl_context(cfg))["version"] == "TLSv1.3"


@pytest.mark.parametrize("java, openssl", [
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", "DHE-RSA-AES128-SHA256"),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"),
    ("TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
    ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
])
def test_cipher_names(java, openssl):
    assert java_cipher_to_openssl(java) == openssl
    if "_WITH_" in java:
        assert openssl in {c["name"] for c in ssl.create_default_context().get_ciphers()} | {
            "DHE-RSA-AES128-SHA256", "AES128-SHA", "AES256-GCM-SHA384"}


def test_cipher_suites_restrict_tls12(certs):
    cfg = pem_store(certs, **{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                              "ssl.enabled.protocols": "TLSv1.2"})
    server = server_ssl_context(cfg, ssl_listener(cfg))
    assert {c["name"] for c in server.get_ciphers() if c["protocol"] == "TLSv1.2"} == \
        {"ECDHE-ECDSA-AES256-GCM-SHA384"}


def test_inter_broker_context(certs):
    cfg = pem_store(certs, **{"security.inter.broker.protocol": "SSL"})
    context = inter_broker_ssl_context(cfg)
    assert context is not None and context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert inter_broker_ssl_context(cfg) is context
    assert inter_broker_ssl_context(pem_store(certs)) is None  # PLAINTEXT between brokers
    off = pem_store(certs, **{"security.inter.broker.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""})
    assert not inter_broker_ssl_context(off).check_hostname


def test_secrets_are_sensitive_in_describe_configs(certs):
    cfg = pem_store(certs, **{"ssl.key.password": "pw", "ssl.keystore.password": "pw",
                              "ssl.truststore.password": "pw", "ssl.keystore.key": "KEY",
                              "listener.name.ssl.ssl.keystore.key": "KEY"})
    entries = {e.name: e for e in describe_broker_configs(cfg)}
    for name in ("ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key",
                 "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
                 "listener.name.ssl.ssl.keystore.key"):
        assert entries[name].is_sensitive and entries[name].value is None, name
    assert entries["ssl.keystore.location"].value == str(certs.broker_keystore)
    assert not entries["ssl.principal.mapping.rules"].is_sensitive


def test_sasl_ssl_takes_client_auth_only_with_the_listener_prefix(certs):
    """KIP-684: the broker-wide ssl.client.auth does not apply to SASL_SSL listeners."""
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "log.dirs": "/tmp/kafkapy-unused",
             "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
             "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem), "ssl.client.auth": "required"}
    cfg = BrokerConfig(props)
    listener = next(lst for lst in cfg.listeners if lst.name == "SASL_SSL")
    assert server_ssl_context(cfg, listener).verify_mode == ssl.CERT_NONE
    cfg = BrokerConfig({**props, "listener.name.sasl_ssl.ssl.client.auth": "required"})
    assert server_ssl_context(cfg, listener).verify_mode == ssl.CERT_REQUIRED


def test_encrypted_key_without_password_fails_without_prompting(certs):
    enc = certs.client("dave", key_password="s3cret")
    cfg = config(**{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(enc.keystore)})
    with pytest.raises(ConfigError) as info:
        server_ssl_context(cfg, ssl_listener(cfg))
    assert info.value.name == "ssl.keystore.location" and "ssl.key.password" in str(info.value)
