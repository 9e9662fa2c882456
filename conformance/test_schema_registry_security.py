"""The schema registry with `kafkapy.schema.registry.authentication=basic` on a broker with SASL PLAIN
users and the ACL authorizer: the broker's users log in, its ACLs on the `_schemas` topic decide who
reads and who registers, and confluent-kafka's client passes basic.auth.user.info."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

pytest.importorskip("avro")
pytest.importorskip("confluent_kafka.schema_registry")

from confluent_kafka.admin import (  # noqa: E402
    AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from conformance.broker_process import free_port, start_broker  # noqa: E402

pytestmark = pytest.mark.timeout(90)

PASSWORDS = {"admin": "admin-Pw-1", "alice": "alice-Pw-2", "bob": "bob-Pw-3"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
        "password=\"admin-Pw-1\" " + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


def test_basic_auth_with_the_brokers_users_and_acls(tmp_path):
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    url = f"http://127.0.0.1:{free_port()}"
    settings = {
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        # the brokers' own principal (the registry's Kafka client on the PLAINTEXT listener) is a super user
        "super.users": "User:admin;User:ANONYMOUS", "broker.id": "0",
        "kafkapy.schema.registry.listener": url, "kafkapy.schema.registry.authentication": "basic"}
    with start_broker(settings, work_dir=tmp_path, port=ports["PLAINTEXT"]):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
        acls = [AclBinding(ResourceType.TOPIC, "_schemas", ResourcePatternType.LITERAL, f"User:{user}", "*",
                           operation, AclPermissionType.ALLOW)
                for user, operation in (("alice", AclOperation.WRITE), ("alice", AclOperation.DESCRIBE),
                                        ("bob", AclOperation.DESCRIBE))]
        for future in admin.create_acls(acls).values():
            future.result(20)

        def client(user, password=None):
            conf = {"url": url}
            if user:
                conf["basic.auth.user.info"] = f"{user}:{password or PASSWORDS[user]}"
            return SchemaRegistryClient(conf)

        def code(call):
            with pytest.raises(SchemaRegistryError) as info:
                call()
            return info.value.http_status_code, info.value.error_code

        assert client("alice").register_schema("s-value", Schema(SCHEMA, "AVRO")) == 1
        assert client("bob").get_latest_version("s-value").schema_id == 1
        assert code(lambda: client("bob").register_schema("t-value", Schema(SCHEMA, "AVRO"))) == (403, 40301)
        assert code(lambda: client("alice").set_compatibility("s-value", "NONE")) == (403, 40301)
        assert client("admin").set_compatibility("s-value", "NONE")["compatibility"] == "NONE"
        assert code(lambda: client("alice", "wrong").get_subjects()) == (401, 40101)
        assert code(lambda: client(None).get_subjects()) == (401, 40101)
        request = urllib.request.Request(f"{url}/subjects")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=10)
        assert info.value.code == 401 and info.value.headers["WWW-Authenticate"].startswith("Basic")


def test_https_with_client_certificates(tmp_path):
    from conformance.tls_certs import make_certs

    certs = make_certs(tmp_path / "certs")
    alice = certs.client("alice")
    url = f"https://127.0.0.1:{free_port()}"
    settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem),
                "listener.name.schema_registry.ssl.client.auth": "required",
                "kafkapy.schema.registry.listener": url}
    with start_broker(settings, work_dir=tmp_path / "broker"):
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca_pem),
                                       "ssl.certificate.location": str(alice.cert_pem),
                                       "ssl.key.location": str(alice.key_pem)})
        assert client.register_schema("s-value", Schema(SCHEMA, "AVRO")) == 1
        assert client.get_subjects() == ["s-value"]
        # no client certificate: the TLS handshake fails
        with pytest.raises(Exception):
            SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca_pem)}).get_subjects()
