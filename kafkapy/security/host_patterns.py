"""ACL host patterns in CIDR notation (KIP-1276, Kafka 4.4): validation and matching.

An ACL's host is `*`, an exact address, or (Kafka 4.4) a network such as `10.0.0.0/8` or
`2001:db8::/32`. As Kafka's CidrUtils: a host containing `/` is a CIDR pattern, IPv6 when it contains
`:`; host bits need not be zero (`10.1.2.3/8` is `10.0.0.0/8`); an IPv4 network includes its network
and broadcast addresses; an address of the other family, or a client address that does not parse,
is not in range. CreateAcls refuses a CIDR pattern that does not parse with INVALID_REQUEST
("Invalid CIDR notation ...") and an empty host ("Host pattern cannot be null or empty"), as 4.4's
AclControlManager does. (Kafka refuses CIDR patterns below metadata version 4.4-IV1; kafkapy has no
metadata versions and always accepts them.) Pure: no asyncio, no sockets.
"""
from __future__ import annotations

import ipaddress
import re
from functools import lru_cache

from ..metadata.errors import InvalidRequestError

__all__ = ["host_network", "in_network", "validate_host_pattern"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


_IPV4_CIDR = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})")


def _parse(pattern: str) -> Network:
    """The network of a CIDR pattern; ValueError, with commons-net's SubnetUtils message for IPv4, for
    what Kafka's SubnetUtils/SubnetUtils6 refuse."""
    if ":" in pattern:
        address, _, bits = pattern.partition("/")
        if not bits.isdigit():
            raise ValueError(f"Could not parse [{pattern}]")
        return ipaddress.IPv6Network(f"{ipaddress.IPv6Address(address)}/{int(bits)}", strict=False)
    match = _IPV4_CIDR.fullmatch(pattern)
    if match is None:
        raise ValueError(f"Could not parse [{pattern}]")
    *octets, bits = (int(g) for g in match.groups())
    for octet in octets:
        if octet > 255:
            raise ValueError(f"Value [{octet}] not in range [0,255]")
    if bits > 32:
        raise ValueError(f"Value [{bits}] not in range [0,32]")
    return ipaddress.IPv4Network((".".join(map(str, octets)), bits), strict=False)


def host_network(host: str) -> Network | None:
    """The network an ACL's host names when it is a valid CIDR pattern, else None (an exact host or `*`)."""
    if "/" not in host:
        return None
    try:
        return _parse(host)
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def in_network(host: str, network: Network) -> bool:
    """Whether the client address `host` lies in `network` (False for the other family or no address)."""
    address = _address(host)
    return address is not None and address.version == network.version and address in network


def validate_host_pattern(host: str | None) -> None:
    """Raise InvalidRequestError for a host CreateAcls must refuse (Kafka 4.4's validateHostPattern)."""
    if not host:
        raise InvalidRequestError("Host pattern cannot be null or empty")
    if host == "*" or "/" not in host:
        return
    try:
        _parse(host)
    except ValueError as exc:
        raise InvalidRequestError(f"Invalid CIDR notation '{host}': {exc}") from None
