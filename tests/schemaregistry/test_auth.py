"""Basic auth of the registry against the broker's users: SCRAM credentials as the broker stores
them, and PLAIN users of a SASL listener's JAAS config."""
from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest

from kafkapy.schemaregistry.auth import BasicAuth
from kafkapy.schemaregistry.errors import RegistryError
from kafkapy.security.sasl.scram import SCRAM_MECHANISMS, ScramCredential


def header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def broker(scram: dict[str, dict[str, str]]):
    config = SimpleNamespace(listeners=[], get=lambda name: None)
    metadata = SimpleNamespace(scram_credentials=lambda user: scram.get(user, {}))
    return SimpleNamespace(config=config, metadata=metadata, authorizer=None)


def test_scram_users_log_in_with_their_password_only():
    credential = ScramCredential.from_password(SCRAM_MECHANISMS["SCRAM-SHA-256"], "s3cret", iterations=4096)
    auth = BasicAuth(broker({"carol": {"SCRAM-SHA-256": credential.to_config()}}), "_schemas")
    assert str(auth.principal(header("carol", "s3cret"))) == "User:carol"
    assert str(auth.principal(header("carol", "s3cret"))) == "User:carol"  # from the cache
    for bad in (header("carol", "nope"), header("dave", "s3cret"), "Basic !!!", "Bearer x", None,
                "Basic " + base64.b64encode(b"no-colon").decode()):
        with pytest.raises(RegistryError) as info:
            auth.principal(bad)
        assert (info.value.status, info.value.error_code) == (401, 40101)
