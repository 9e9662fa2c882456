"""The inter-broker SASL client (net/client.py sasl_authenticate via security/sasl/inter_broker.py)
against a real broker process: PLAIN and SCRAM authenticate and a request follows; a wrong password
and a mechanism the listener does not offer fail with BrokerConnectionError, without the password."""
from __future__ import annotations

import asyncio
import os

import pytest

from conformance.broker_process import free_port, start_broker
from kafkapy.broker.config import BrokerConfig
from kafkapy.net.client import BrokerConnection, BrokerConnectionError
from kafkapy.protocol.messages import AlterUserScramCredentialsRequest as Alter, MetadataRequest
from kafkapy.security.sasl.inter_broker import inter_broker_sasl_login
from kafkapy.security.sasl.scram import SCRAM_MECHANISMS

PASSWORD = "broker-Pw-1d9e"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"
    broker = start_broker({
        "listeners": listeners, "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="{PASSWORD}";',
    }, work_dir=tmp_path_factory.mktemp("inter-broker-sasl"), port=plain)
    broker.sasl_port = sasl
    salt = os.urandom(16)
    upsert = Alter.ScramCredentialUpsertion(name="broker", mechanism=2, iterations=4096, salt=salt,
                                            salted_password=SCRAM_MECHANISMS["SCRAM-SHA-512"].salted_password(
                                                PASSWORD, salt, 4096))

    async def create_user():
        conn = BrokerConnection("127.0.0.1", plain)
        try:
            response = await conn.send(Alter(deletions=[], upsertions=[upsert]), 0)
            assert response.results[0].error_code == 0
        finally:
            conn.close()
    asyncio.run(create_user())
    try:
        yield broker
    finally:
        broker.close()


def client_config(mechanism: str, password: str = PASSWORD) -> BrokerConfig:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return BrokerConfig({
        "listeners": "INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "log.dirs": "/nonexistent",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.internal.{mechanism.lower()}.sasl.jaas.config":
            f'{module} required username="broker" password="{password}";'})


async def metadata_through(server, config: BrokerConfig):
    conn = BrokerConnection("127.0.0.1", server.sasl_port, sasl=inter_broker_sasl_login(config),
                            request_timeout_s=10)
    try:
        return await conn.send(MetadataRequest(topics=[]), 1)
    finally:
        conn.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_inter_broker_client_authenticates(server, mechanism):
    response = asyncio.run(metadata_through(server, client_config(mechanism)))
    assert [b.node_id for b in response.brokers] == [1]


@pytest.mark.parametrize("mechanism, password", [("PLAIN", "wrong-Pw"), ("SCRAM-SHA-512", "wrong-Pw"),
                                                 ("SCRAM-SHA-256", PASSWORD)])
def test_inter_broker_client_failures(server, mechanism, password):
    with pytest.raises(BrokerConnectionError) as info:
        asyncio.run(metadata_through(server, client_config(mechanism, password)))
    assert "authentication" in str(info.value) and password not in str(info.value)


def test_no_authenticator_unless_the_inter_broker_listener_is_sasl():
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/nonexistent"})
    assert inter_broker_sasl_login(config) is None
    with pytest.raises(ValueError, match="username and password"):
        inter_broker_sasl_login(BrokerConfig({
            "listeners": "INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL", "log.dirs": "/nonexistent",
            "sasl.mechanism.inter.broker.protocol": "PLAIN"}))
