"""ACL host patterns in CIDR notation (KIP-1276): parsing as Kafka 4.4's CidrUtils, matching in the authorizer."""
from __future__ import annotations

import pytest

from kafkapy.metadata.acls import AclBinding, AclOperation, ResourceType
from kafkapy.metadata.errors import InvalidRequestError
from kafkapy.security.authorizer import AclAuthorizer
from kafkapy.security.host_patterns import host_network, in_network, validate_host_pattern

LITERAL, DENY, ALLOW = 3, 2, 3


@pytest.mark.parametrize("pattern, address, inside", [
    ("10.0.0.0/8", "10.255.255.255", True),     # the broadcast address counts (inclusive host count)
    ("10.0.0.0/8", "10.0.0.0", True),
    ("10.1.2.3/8", "10.9.9.9", True),           # host bits need not be zero
    ("10.0.0.0/8", "11.0.0.1", False),
    ("192.168.1.0/32", "192.168.1.0", True),
    ("0.0.0.0/0", "203.0.113.9", True),
    ("2001:db8::/32", "2001:db8:ffff::1", True),
    ("2001:db8::/32", "2001:db9::1", False),
    ("10.0.0.0/8", "::ffff:10.0.0.1", False),   # the other family is never in range
    ("::/0", "10.0.0.1", False),
    ("10.0.0.0/8", "not-an-address", False),
])
def test_in_network(pattern: str, address: str, inside: bool) -> None:
    assert in_network(address, host_network(pattern)) is inside


@pytest.mark.parametrize("host, message", [
    ("", "Host pattern cannot be null or empty"),
    (None, "Host pattern cannot be null or empty"),
    ("10.0.0.0/33", "Invalid CIDR notation '10.0.0.0/33': Value [33] not in range [0,32]"),
    ("300.0.0.0/8", "Invalid CIDR notation '300.0.0.0/8': Value [300] not in range [0,255]"),
    ("10.0.0/8", "Invalid CIDR notation '10.0.0/8': Could not parse [10.0.0/8]"),
    ("10.0.0.1/", "Invalid CIDR notation '10.0.0.1/': Could not parse [10.0.0.1/]"),
    ("fe80::/x", "Invalid CIDR notation 'fe80::/x': Could not parse [fe80::/x]"),
])
def test_refused_patterns(host, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=None) as caught:
        validate_host_pattern(host)
    assert str(caught.value) == message


@pytest.mark.parametrize("host", ["*", "10.0.0.1", "my-host", "10.0.0.0/8", "2001:db8::/32", "10.1.2.3/8"])
def test_accepted_patterns(host: str) -> None:
    validate_host_pattern(host)  # exact hosts are not validated, as Kafka does


def test_authorizer_matches_cidr_hosts() -> None:
    acls = [AclBinding.of(int(ResourceType.TOPIC), "t", LITERAL, "User:a", "*", int(AclOperation.READ), ALLOW),
            AclBinding.of(int(ResourceType.TOPIC), "t", LITERAL, "User:a", "10.1.0.0/16", int(AclOperation.READ), DENY),
            AclBinding.of(int(ResourceType.TOPIC), "u", LITERAL, "User:a", "2001:db8::/32", int(AclOperation.WRITE),
                          ALLOW)]
    authorizer = AclAuthorizer(load_acls=lambda: acls)

    def may(host: str, operation: AclOperation, name: str) -> bool:
        return authorizer.authorize("User:a", host, operation, ResourceType.TOPIC, name, log_if_denied=False)

    assert may("10.2.0.1", AclOperation.READ, "t")
    assert not may("10.1.200.3", AclOperation.READ, "t")
    assert may("2001:db8::7", AclOperation.WRITE, "u")
    assert may("2001:db8::7", AclOperation.DESCRIBE, "u")  # WRITE implies DESCRIBE
    assert not may("2001:db9::7", AclOperation.WRITE, "u")
    assert not may("10.0.0.1", AclOperation.WRITE, "u")
    # WRITE on some topic (authorizeByResourceType) honours the network too
    assert authorizer.authorize_by_resource_type("User:a", "2001:db8::1", AclOperation.WRITE, ResourceType.TOPIC)
    assert not authorizer.authorize_by_resource_type("User:a", "10.0.0.1", AclOperation.WRITE, ResourceType.TOPIC)
