"""listeners and advertised.listeners: endpoint parsing with listener.security.protocol.map, as
Kafka's EndPoint and CoreUtils.listenerListToEndPoints check them."""
from __future__ import annotations

import logging
import re
import socket
from collections.abc import Mapping
from typing import NamedTuple

from ..metadata.errors import ConfigError

# the logger of kafkapy.broker.config, which this module was part of (log settings name it)
log = logging.getLogger("kafkapy.broker.config")


_LISTENER_RE = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


class Listener(NamedTuple):
    """One listener endpoint NAME://host:port; an empty host means every interface."""

    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def bind_host(self) -> str | list[str] | None:
        """Host(s) to pass to loop.create_server: None binds every interface.

        'localhost' becomes 127.0.0.1 plus ::1 when the resolver lists it and it can be bound, so
        clients connecting to 127.0.0.1, ::1 or localhost all reach the broker, and a host whose
        resolver lists ::1 without IPv6 on loopback still starts.
        """
        if not self.host:
            return None
        if self.host.lower() != "localhost":
            return self.host
        hosts = _loopback_addresses()
        return hosts if len(hosts) > 1 else hosts[0]

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _loopback_addresses() -> list[str]:
    found = ["127.0.0.1"]
    try:
        infos = socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        log.warning("cannot resolve localhost (%s); binding 127.0.0.1 only", exc)
        return found
    for family, _, _, _, address in infos:
        if address[0] in found:
            continue
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((address[0], 0))
        except OSError as exc:
            log.info("not binding %s for localhost: %s", address[0], exc)
            continue
        found.append(address[0])
    return found


def parse_listeners(config_name: str, text: str, protocol_map: Mapping[str, str]) -> list[Listener]:
    """Parse a listeners string as Kafka does (names are upper-cased; duplicates rejected)."""
    listeners: list[Listener] = []
    for entry in (e for e in re.split(r"\s*,\s*", text.strip()) if e):
        match = _LISTENER_RE.fullmatch(entry)
        if not match:
            raise ConfigError.invalid_value(config_name, text, f"Unable to parse {entry} to a broker endpoint")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if name not in protocol_map:
            raise ConfigError.invalid_value(config_name, text, f"No security protocol defined for listener {name}")
        if not 0 <= port <= 65535:
            raise ConfigError.invalid_value(config_name, text, f"Port {port} of listener {name} is out of range")
        if any(existing.name == name for existing in listeners):
            raise ConfigError.invalid_value(config_name, text, "Each listener must have a different name")
        if port and any(existing.port == port and existing.host == host for existing in listeners):
            raise ConfigError.invalid_value(config_name, text, "Each listener must have a different port")
        listeners.append(Listener(name, protocol_map[name], host, port))
    return listeners


def _parse_protocol_map(text: str) -> dict[str, str]:
    result = {}
    for entry in (e for e in re.split(r"\s*,\s*", text.strip()) if e):
        name, sep, protocol = entry.partition(":")
        if not sep or protocol.upper() not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError.invalid_value("listener.security.protocol.map", text,
                                            f"Invalid listener to security protocol mapping {entry}")
        result[name.strip().upper()] = protocol.strip().upper()
    return result
