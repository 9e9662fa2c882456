"""ACL host patterns in CIDR notation (KIP-1276, Kafka 4.4) on the wire, kafkapy next to real Kafka 4.4.

CreateAcls with CIDR hosts (IPv4, IPv6, host bits set) is accepted, malformed ones are refused with
INVALID_REQUEST and Kafka's message; DescribeAcls and DeleteAcls select them by their host text; and a
DENY for the client's network (127.0.0.0/8) is enforced while one for another network (10.0.0.0/8) is
not. Both brokers run an authorizer with allow.everyone.if.no.acl.found=true (base_properties); the
client is User:ANONYMOUS over PLAINTEXT. Kafka 4.4 skips loudly without java (fails under
KAFKAPY_REQUIRE_JAVA=1). About 10 s.
"""
from __future__ import annotations

import os
import time

import pytest

from conformance.differential.runner import kafkapy_target, reference_broker
from conformance.differential.wire_versions import WireClient
from conformance.real_kafka import RealKafkaUnavailable
from kafkapy.protocol.error_codes import ErrorCode
from kafkapy.protocol.messages import (
    CreateAclsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    MetadataRequest,
)

pytestmark = pytest.mark.timeout(180)

REQUIRE_ENV = "KAFKAPY_REQUIRE_JAVA"
REFERENCE = "kafka-4.4.0-kraft"
TOPIC, PRINCIPAL = "cidr-acls", "User:ANONYMOUS"
TOPIC_TYPE, LITERAL, ANY_PATTERN, DESCRIBE, DENY, ALLOW, ANY = 2, 3, 1, 8, 2, 3, 1
HOSTS = {  # host pattern -> the error code CreateAcls answers
    "10.0.0.0/8": 0, "192.168.1.77/24": 0, "2001:db8::/32": 0, "0.0.0.0/0": 0,
    "10.0.0.0/33": ErrorCode.INVALID_REQUEST, "10.0.0/8": ErrorCode.INVALID_REQUEST,
    "300.1.1.1/8": ErrorCode.INVALID_REQUEST, "": ErrorCode.INVALID_REQUEST,
}


def _unavailable(reason: str) -> None:
    message = f"!!! Kafka 4.4 side NOT RUN: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(message)


class Side:
    def __init__(self, name: str, bootstrap: str):
        self.name = name
        self.client = WireClient(bootstrap, timeout_s=15)
        created = self.call(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=1)], timeout_ms=15000), 7)
        assert created["topics"][0]["error_code"] == 0, created

    def call(self, request, version: int) -> dict:
        answer = self.client.exchange(request, version)
        assert answer.decoded is not None, f"{self.name}: {answer.error}"
        return answer.decoded

    def create(self, host: str, resource: str = TOPIC, permission: int = DENY) -> dict:
        return self.call(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=TOPIC_TYPE, resource_name=resource, resource_pattern_type=LITERAL, principal=PRINCIPAL,
            host=host, operation=DESCRIBE, permission_type=permission)]), 3)["results"][0]

    def describe(self, host: str | None) -> list[str]:
        answer = self.call(DescribeAclsRequest(resource_type_filter=TOPIC_TYPE, resource_name_filter=None,
                                               pattern_type_filter=ANY_PATTERN, principal_filter=None,
                                               host_filter=host, operation=ANY, permission_type=ANY), 3)
        assert answer["error_code"] == 0, answer
        return sorted(acl["host"] for r in answer["resources"] for acl in r["acls"])

    def delete(self, host: str | None) -> list[str]:
        answer = self.call(DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=TOPIC_TYPE, resource_name_filter=None, pattern_type_filter=ANY_PATTERN,
            principal_filter=None, host_filter=host, operation=ANY, permission_type=ANY)]), 3)
        result = answer["filter_results"][0]
        assert result["error_code"] == 0, result
        return sorted(m["host"] for m in result["matching_acls"])

    def topic_error(self) -> int:
        answer = self.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 12)
        return answer["topics"][0]["error_code"]

    def topic_error_settled(self, expected: int, timeout_s: float = 10.0) -> int:
        """The topic's Metadata error once ACL changes have reached the authorizer (KRaft applies them late)."""
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.topic_error()
            if code == expected or time.monotonic() > deadline:
                return code
            time.sleep(0.2)


@pytest.fixture(scope="module")
def kafkapy_side(tmp_path_factory):
    with kafkapy_target(tmp_path_factory.mktemp("kafkapy"), {}) as broker:
        side = Side("kafkapy", broker.bootstrap)
        try:
            yield side
        finally:
            side.client.close()


@pytest.fixture(scope="module")
def kafka_side(tmp_path_factory):
    try:
        with reference_broker(REFERENCE, tmp_path_factory.mktemp(REFERENCE), {}) as real:
            side = Side(REFERENCE, real.bootstrap)
            try:
                yield side
            finally:
                side.client.close()
    except RealKafkaUnavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(scope="module")
def created(kafkapy_side, kafka_side) -> dict:
    """side name -> host -> (error code, message) of CreateAcls, for both brokers."""
    return {side.name: {host: (r["error_code"], r["error_message"]) for host in HOSTS
                        for r in [side.create(host, resource="cidr-other")]}
            for side in (kafkapy_side, kafka_side)}


@pytest.mark.parametrize("host", list(HOSTS))
def test_create_acls_with_cidr_hosts(created, host: str) -> None:
    kafkapy, kafka = created["kafkapy"][host], created[REFERENCE][host]
    assert kafkapy[0] == kafka[0] == HOSTS[host]
    if HOSTS[host]:
        assert kafkapy[1] == kafka[1], "the refusal's message is Kafka's"
    # (on success Kafka 4.4's controller answers the message "", kafkapy null, as Kafka 3.9 does)


def test_describe_and_delete_select_cidr_hosts_by_text(created, kafkapy_side, kafka_side) -> None:
    accepted = sorted(h for h, code in HOSTS.items() if code == 0)
    for side in (kafkapy_side, kafka_side):
        assert side.describe(None) == accepted, side.name
        assert side.describe("10.0.0.0/8") == ["10.0.0.0/8"], side.name
        assert side.describe("10.1.2.3") == [], f"{side.name}: a host filter is no address match"
        assert side.delete("2001:db8::/32") == ["2001:db8::/32"], side.name
        assert side.describe(None) == [h for h in accepted if h != "2001:db8::/32"], side.name


@pytest.mark.parametrize("network, denied", [("10.0.0.0/8", False), ("127.0.0.0/8", True), ("127.0.0.1/32", True),
                                             ("::1/128", False)])
def test_cidr_deny_applies_to_the_clients_network(kafkapy_side, kafka_side, network: str, denied: bool) -> None:
    """An ALLOW DESCRIBE for User:ANONYMOUS from anywhere and a DENY from `network` on the topic; the
    client connects from 127.0.0.1. (The ALLOW keeps the answer independent of how
    allow.everyone.if.no.acl.found treats a resource whose only ACLs name other hosts.)"""
    expected = ErrorCode.TOPIC_AUTHORIZATION_FAILED if denied else 0
    for side in (kafkapy_side, kafka_side):
        assert side.create("*", permission=ALLOW)["error_code"] == 0
        assert side.create(network)["error_code"] == 0
        try:
            # an allowed answer is checked after a pause: the DENY may not have been applied yet on KRaft
            if not denied:
                time.sleep(1.0)
            assert side.topic_error_settled(expected) == expected, side.name
        finally:
            side.call(DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=TOPIC_TYPE, resource_name_filter=TOPIC, pattern_type_filter=LITERAL,
                principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY)]), 3)
            assert side.topic_error_settled(0) == 0, side.name
