"""DescribeUserScramCredentials / AlterUserScramCredentials against an in-process broker, and the
credentials surviving a restart of the embedded metadata store."""
from __future__ import annotations

import os

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterUserScramCredentialsRequest as Alter,
    DescribeUserScramCredentialsRequest as Describe,
)
from kafkapy.security.sasl.scram import SCRAM_MECHANISMS, ScramCredential
from tests.broker.inprocess import InProcessBroker

SHA256, SHA512 = 1, 2


@pytest.fixture
def broker(tmp_path):
    b = InProcessBroker(tmp_path)
    yield b
    b.close()


def upsert(name: str, mechanism: int = SHA256, iterations: int = 4096,
           password: str = "pw") -> Alter.ScramCredentialUpsertion:
    scram = SCRAM_MECHANISMS["SCRAM-SHA-512" if mechanism == SHA512 else "SCRAM-SHA-256"]
    salt = os.urandom(16)
    return Alter.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                          salted_password=scram.salted_password(password, salt, max(iterations, 1)))


def results(response) -> dict[str, int]:
    return {r.user: r.error_code for r in response.results}


def test_upsert_describe_delete(tmp_path):
    broker = InProcessBroker(tmp_path)
    response = broker.call(Alter(deletions=[], upsertions=[upsert("alice"), upsert("alice", SHA512, 8192),
                                                          upsert("bob")]), 0)
    assert results(response) == {"alice": 0, "bob": 0}
    described = broker.call(Describe(users=None), 0)
    by_user = {r.user: sorted((i.mechanism, i.iterations) for i in r.credential_infos) for r in described.results}
    assert by_user == {"alice": [(SHA256, 4096), (SHA512, 8192)], "bob": [(SHA256, 4096)]}
    # the stored form is Kafka's and checks the password
    stored = broker.broker.metadata.scram_credentials("alice")["SCRAM-SHA-256"]
    assert stored.startswith("salt=") and stored.endswith("iterations=4096")
    cred = ScramCredential.from_config(stored)
    assert cred == ScramCredential.from_password(SCRAM_MECHANISMS["SCRAM-SHA-256"], "pw", 4096, cred.salt)
    response = broker.call(Alter(deletions=[Alter.ScramCredentialDeletion(name="bob", mechanism=SHA256)],
                                 upsertions=[]), 0)
    assert results(response) == {"bob": 0}
    described = broker.call(Describe(users=[Describe.UserName(name="bob"), Describe.UserName(name="alice")]), 0)
    assert [(r.user, r.error_code) for r in described.results] == [
        ("bob", ErrorCode.RESOURCE_NOT_FOUND), ("alice", 0)]
    # persisted in the embedded metadata file
    broker.close()
    again = InProcessBroker(tmp_path)
    try:
        assert set(again.broker.metadata.scram_credentials("alice")) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert again.broker.metadata.scram_users() == ["alice"]
    finally:
        again.close()


def test_alter_errors_are_per_user_and_atomic(broker):
    response = broker.call(Alter(
        deletions=[Alter.ScramCredentialDeletion(name="ghost", mechanism=SHA256),
                   Alter.ScramCredentialDeletion(name="dup", mechanism=SHA256)],
        upsertions=[upsert("few", iterations=4095), upsert("many", iterations=16385), upsert("unknown", mechanism=0),
                    upsert("dup"), upsert("carol"), upsert("carol", SHA512, iterations=100)]), 0)
    assert results(response) == {
        "ghost": ErrorCode.RESOURCE_NOT_FOUND, "dup": ErrorCode.DUPLICATE_RESOURCE,
        "few": ErrorCode.UNACCEPTABLE_CREDENTIAL, "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "unknown": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "carol": ErrorCode.UNACCEPTABLE_CREDENTIAL}
    assert broker.broker.metadata.scram_users() == []  # carol's valid SHA-256 upsertion was not applied either


def test_describe_unknown_and_duplicate_users(broker):
    broker.call(Alter(deletions=[], upsertions=[upsert("alice")]), 0)
    described = broker.call(Describe(users=[Describe.UserName(name="nobody"), Describe.UserName(name="alice"),
                                            Describe.UserName(name="alice")]), 0)
    assert [(r.user, r.error_code) for r in described.results] == [
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND), ("alice", ErrorCode.DUPLICATE_RESOURCE)]
