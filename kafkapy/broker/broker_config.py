"""The broker config: server.properties and --override, typed access, and Kafka's dynamic layers.

Values come in four layers, highest first, as in Kafka: dynamic per-broker configs, dynamic
cluster-wide defaults (both set with AlterConfigs and kept in the metadata store), static configs
(server.properties plus --override), and the defaults of the definition table in `config_defs`.
Topic configs fall back to their broker synonyms (retention.ms <- log.retention.ms/minutes/hours ...).
"""
from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..metadata.errors import ConfigError, InvalidRequestError
from .config_defs import BROKER_CONFIGS, LONG_MAX, TOPIC_CONFIGS, ConfigType, Password
from .config_entries import ConfigSource, ConfigSynonym
from .config_listeners import Listener, _parse_protocol_map, parse_listeners
from .config_properties import _read_properties_file

if TYPE_CHECKING:
    from ..log.config import LogConfig

# the logger of kafkapy.broker.config, which this module was part of (log settings name it)
log = logging.getLogger("kafkapy.broker.config")


QUICKSTART_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
_default_strings: dict[str, str] | None = None


def _defaults_as_strings() -> dict[str, str]:
    """Every broker default as DescribeConfigs prints it (built on first use, not at import)."""
    global _default_strings
    if _default_strings is None:
        _default_strings = {name: d.format(d.default) for name, d in BROKER_CONFIGS.items() if d.default is not None}
    return _default_strings


class BrokerConfig:
    """Typed broker configuration with Kafka's layering of dynamic, static and default values.

    `get(name)` returns the typed value of any defined config; common ones are also attributes
    (`config.num_partitions` reads num.partitions: underscores stand for dots).
    """

    def __init__(self, props: Mapping[str, str] | None = None):
        self._static: dict[str, str] = {name: _as_string(name, value) for name, value in (props or {}).items()}
        self._dynamic_default: dict[str, str] = {}
        self._dynamic_broker: dict[str, str] = {}
        for name, raw in self._static.items():  # fail on the first bad value, naming the key
            definition = BROKER_CONFIGS.get(name)
            if definition is not None:
                definition.parse(raw)
        self._populate_node_id()
        self._values: dict[str, Any] = {}
        self._recompute()
        self._protocol_map = _parse_protocol_map(self._values["listener.security.protocol.map"])
        self.listeners = parse_listeners("listeners", self._values["listeners"], self._protocol_map)
        if not self.listeners:
            raise ConfigError.invalid_value("listeners", self._values["listeners"], "At least one listener is required")
        self.advertised_listeners = self._advertised()
        self.log_dirs = self._log_dirs()
        self._warn_unknown_and_unused()

    @classmethod
    def from_properties_file(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Read server.properties and apply `key=value` overrides on top.

        Without a file, kafkapy starts from QUICKSTART_PROPERTIES (single-node settings of Kafka's
        shipped config/kraft/server.properties), so internal topics can be created on one node.
        """
        props = _read_properties_file(path) if path is not None else dict(QUICKSTART_PROPERTIES)
        for override in overrides:
            key, sep, value = override.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"Invalid override '{override}': expected key=value", name=key or override)
            props[key.strip()] = value
        return cls(props)

    # -- typed access ---------------------------------------------------------------------------
    def get(self, name: str) -> Any:
        """Typed effective value of a defined config; the raw string (or None) of an undefined one."""
        if name in self._values:
            return self._values[name]
        return self._merged().get(name)

    def get_as(self, key: str, name: str) -> Any:
        """The value set under `key`, typed as the defined config `name` is: how a per-listener
        override (`listener.name.<listener>.<name>`, not in the table itself) is read. None when
        `key` is not set."""
        raw = self.get(key)
        if raw is None:
            return None
        definition = BROKER_CONFIGS.get(name)
        return definition.parse(raw) if definition is not None else raw

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        name = attr.replace("_", ".")
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or config {attr!r}")

    @property
    def node_id(self) -> int:
        return self._values["node.id"]

    broker_id = node_id

    @property
    def metadata_dir(self) -> str:
        """Where the metadata store keeps its file: metadata.log.dir, else the first log dir."""
        return self._values["metadata.log.dir"] or self.log_dirs[0]

    @property
    def cluster_id(self) -> str | None:
        return self._values["kafkapy.cluster.id"]

    @property
    def offsets_retention_ms(self) -> int:
        return self._values["offsets.retention.minutes"] * 60_000

    @property
    def log_retention_ms(self) -> int:
        return self.topic_default("retention.ms")

    @property
    def log_roll_ms(self) -> int:
        return self.topic_default("segment.ms")

    def listener_address(self) -> tuple[str | list[str] | None, int]:
        """(bind host or hosts, port) of the first listener, for loop.create_server; None means every
        interface, and the default 'localhost' listener binds the loopback addresses."""
        first = self.listeners[0]
        return first.bind_host, first.port

    def advertised_address(self) -> tuple[str, int]:
        """(host, port) given to clients for the first listener."""
        first = self.advertised_listeners[0]
        return first.host, first.port

    def default_log_config(self) -> LogConfig:
        """The LogConfig of a topic without overrides."""
        from ..log.config import LogConfig

        return LogConfig.from_properties(effective_topic_properties({}, self))

    def topic_default(self, topic_config: str) -> Any:
        """Typed value a topic config takes without a topic override (from its broker synonyms)."""
        definition = TOPIC_CONFIGS[topic_config]
        merged = self._merged()
        value: Any = None
        for synonym in definition.synonyms:
            if synonym.name in merged and self._values.get(synonym.name) is not None:
                value = self._values[synonym.name]
                break
        else:
            for synonym in definition.synonyms:
                default = BROKER_CONFIGS[synonym.name].default if synonym.name in BROKER_CONFIGS else None
                if default is not None:
                    value = default
                    break
            else:
                return definition.default
        value = value * synonym.to_ms if synonym.to_ms != 1 else value
        if topic_config == "retention.ms" and value < 0:  # Kafka: any negative retention is "unlimited"
            value = -1
        return value

    # -- layers ----------------------------------------------------------------------------------
    @property
    def static_configs(self) -> dict[str, str]:
        return dict(self._static)

    def dynamic_configs(self, per_broker: bool) -> dict[str, str]:
        return dict(self._dynamic_broker if per_broker else self._dynamic_default)

    def load_dynamic_configs(self, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]) -> None:
        """Install dynamic configs read from the metadata store at startup; invalid ones are skipped."""
        layers = []
        for label, props in (("cluster default", cluster_default), (f"broker {self.node_id}", per_broker)):
            good = {}
            for name, raw in props.items():
                definition = BROKER_CONFIGS.get(name)
                try:
                    if definition is not None:
                        if not definition.dynamic:
                            raise ConfigError(f"{name} cannot be changed dynamically")
                        definition.parse(raw)
                except ConfigError as exc:
                    log.error("ignoring stored dynamic config %s=%s (%s): %s", name, raw, label, exc)
                    continue
                good[name] = raw
            layers.append(good)
        self._dynamic_default, self._dynamic_broker = layers
        self._recompute()
        self.advertised_listeners = self._advertised()

    def set_dynamic_configs(self, per_broker: bool, props: Mapping[str, str]) -> None:
        """Replace one dynamic layer with already validated `props`."""
        if per_broker:
            self._dynamic_broker = dict(props)
        else:
            self._dynamic_default = dict(props)
        self._recompute()
        self.advertised_listeners = self._advertised()

    def validate_dynamic_configs(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Check a new dynamic layer as Kafka does; failures are INVALID_REQUEST, like Kafka's."""
        names = set(props)
        fixed = sorted(n for n in names if n in BROKER_CONFIGS and not BROKER_CONFIGS[n].dynamic)
        if fixed:
            raise InvalidRequestError(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
        for name, raw in props.items():
            if name in BROKER_CONFIGS:
                try:
                    BROKER_CONFIGS[name].parse(raw)
                except ConfigError as exc:
                    raise InvalidRequestError(str(exc)) from exc
        broker_only = sorted(n for n in names if n in BROKER_CONFIGS and BROKER_CONFIGS[n].per_broker)
        if broker_only and not per_broker:
            raise InvalidRequestError("Cannot update these configs at default cluster level, broker id must be "
                                      f"specified: Set({', '.join(broker_only)})")
        for name in ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                     "background.threads"):
            if name in props:
                new, old = BROKER_CONFIGS[name].parse(props[name]), self._values[name]
                if new == old:
                    continue
                what = f"Dynamic thread count update validation failed for {name}={props[name]}"
                if new < old / 2:
                    raise InvalidRequestError(f"{what}, value should be at least half the current value {old}")
                if new > old * 2:
                    raise InvalidRequestError(f"{what}, value should not be greater than double the current "
                                              f"value {old}")

    def config_synonyms(self, name: str, names: list[str], sensitive: bool) -> list[ConfigSynonym]:
        """Kafka's ConfigHelper.configSynonyms: set values of `names` by layer, from `name` on."""
        found = []
        for source, layer in ((ConfigSource.DYNAMIC_BROKER_CONFIG, self._dynamic_broker),
                              (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self._dynamic_default),
                              (ConfigSource.STATIC_BROKER_CONFIG, self._static),
                              (ConfigSource.DEFAULT_CONFIG, _defaults_as_strings())):
            for synonym in names:
                if layer.get(synonym) is not None:
                    found.append(ConfigSynonym(synonym, None if sensitive else layer[synonym], source))
        while found and found[0].name != name:  # e.g. log.retention.hours does not describe log.retention.ms
            found.pop(0)
        return found

    # -- internals -------------------------------------------------------------------------------
    def _merged(self) -> dict[str, str]:
        return {**self._static, **self._dynamic_default, **self._dynamic_broker}

    def _recompute(self) -> None:
        merged = self._merged()
        self._values = {name: (d.parse(merged[name]) if merged.get(name) is not None else d.default)
                        for name, d in BROKER_CONFIGS.items()}

    def _populate_node_id(self) -> None:
        """node.id and broker.id name the same thing; Kafka copies whichever is set to the other."""
        def explicit(name: str) -> int | None:
            raw = self._static.get(name)
            value = BROKER_CONFIGS[name].parse(raw) if raw is not None else None
            return value if value is not None and value >= 0 else None

        node_id, broker_id = explicit("node.id"), explicit("broker.id")
        if node_id is not None and broker_id is not None and node_id != broker_id:
            raise ConfigError(f"If both node.id and broker.id are defined, they must be the same: "
                              f"node.id={node_id}, broker.id={broker_id}", name="node.id", value=node_id)
        chosen = node_id if node_id is not None else broker_id
        if chosen is None:
            # The contract: a single-node kafkapy is node 1 unless configured.
            chosen = 1
        self._static["node.id"] = self._static["broker.id"] = str(chosen)

    def _advertised(self) -> list[Listener]:
        raw = self._values["advertised.listeners"]
        if raw and raw.strip():
            advertised = parse_listeners("advertised.listeners", raw, self._protocol_map)
            names = {listener.name for listener in self.listeners}
            unknown = [a.name for a in advertised if a.name not in names]
            if unknown:
                raise ConfigError.invalid_value("advertised.listeners", raw, "advertised.listeners listener names "
                                                "must be equal to or a subset of the ones defined in listeners")
        else:  # Kafka advertises the listeners, with this machine's name for a wildcard host
            advertised = [Listener(lst.name, lst.security_protocol, lst.host or socket.getfqdn(), lst.port)
                          for lst in self.listeners]
        for listener in advertised:
            if listener.host == "0.0.0.0":
                raise ConfigError.invalid_value("advertised.listeners", str(listener), "advertised.listeners cannot "
                                                "use the nonroutable meta-address 0.0.0.0. Use a routable IP address.")
        return advertised

    def _log_dirs(self) -> list[str]:
        raw = self._values["log.dirs"]
        name = "log.dirs" if raw is not None else "log.dir"
        text = raw if raw is not None else self._values["log.dir"]
        dirs = [d for d in re.split(r"\s*,\s*", text.strip()) if d]
        if not dirs:
            raise ConfigError.invalid_value(name, text, "At least one log directory must be defined via log.dirs "
                                            "or log.dir.")
        resolved = [str(Path(d).expanduser().resolve()) for d in dirs]
        if len(set(resolved)) != len(resolved):
            raise ConfigError.invalid_value(name, text, "Duplicate log directory found")
        return dirs

    def _warn_unknown_and_unused(self) -> None:
        for name, raw in self._static.items():
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                if name.startswith("listener.name."):
                    continue  # per-listener settings (ssl.*, sasl.*), read by the listener's TLS/SASL setup
                log.warning("unknown broker config %s is ignored", name)
            elif not definition.used and _defaults_as_strings().get(name) != raw.strip():
                log.warning("broker config %s=%s is accepted for compatibility but has no effect in kafkapy", name,
                            "[hidden]" if definition.type is ConfigType.PASSWORD else raw)


def _as_string(name: str, value: Any) -> str:
    """Config values given by code (ints, bools, lists) in the string form a properties file would have."""
    if isinstance(value, str):
        return value
    definition = BROKER_CONFIGS.get(name)
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if definition is not None and not isinstance(value, Password):
        return definition.format(definition.parse(value)) or ""
    return value.value if isinstance(value, Password) else str(value)


# -- topic configs: the value of each from its override or its broker synonyms ---------------------

def _topic_value(name: str, overrides: Mapping[str, str], broker_config: BrokerConfig) -> tuple[Any, bool]:
    """(typed value, is it a topic override) of one topic config."""
    raw = overrides.get(name)
    if raw is not None:
        try:
            return TOPIC_CONFIGS[name].parse(raw), True
        except ConfigError as exc:
            log.error("ignoring invalid stored topic config override %s=%s: %s", name, raw, exc)
    return broker_config.topic_default(name), False


def effective_topic_properties(topic_overrides: Mapping[str, str], broker_config: BrokerConfig) -> dict[str, str]:
    """Every topic config of a topic as Kafka property strings, for LogConfig.from_properties."""
    typed = {name: _topic_value(name, topic_overrides, broker_config)[0] for name in TOPIC_CONFIGS}
    # Kafka 3.6+: the deprecated difference limit still applies where before/after keep their default
    for name in ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms"):
        if typed[name] == LONG_MAX:
            typed[name] = typed["message.timestamp.difference.max.ms"]
    return {name: TOPIC_CONFIGS[name].format(value) for name, value in typed.items()}


