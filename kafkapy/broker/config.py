"""Broker configuration: server.properties parsing, typed access, dynamic layers, DescribeConfigs.

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
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..metadata.errors import ConfigError, InvalidRequestError, UnknownTopicOrPartitionError
from .config_defs import (
    BROKER_CONFIGS,
    LONG_MAX,
    TOPIC_CONFIGS,
    ConfigType,
    Password,
    broker_synonym_group,
    format_value,
)

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore
    from ..log.config import LogConfig

__all__ = [
    "AlterConfigOp", "BrokerConfig", "ConfigEntry", "ConfigError", "ConfigSource", "ConfigSynonym", "Listener",
    "alter_broker_configs", "alter_topic_configs", "apply_config_ops", "describe_broker_configs",
    "describe_topic_configs", "effective_topic_properties", "open_metadata_store", "parse_listeners",
    "parse_properties", "validate_topic_configs",
]

log = logging.getLogger(__name__)


# -- Java .properties syntax ------------------------------------------------------------------------

_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    """Java Properties.loadConvert: \\t \\n \\r \\f, \\uXXXX, and \\c -> c."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        i += 1
        if ch != "\\" or i >= n:
            out.append(ch)
            continue
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i:i + 4]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    return "".join(out)


def _logical_lines(text: str) -> Iterable[str]:
    """Java's LineReader: skip blanks and #/! comments, join lines ending in an odd run of backslashes."""
    pending: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(_WS)
        if pending is None:
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending:
        yield pending


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text into an ordered dict (later keys win, like Properties.load)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key_end, value_start, has_sep, backslash = 0, len(line), False, False
        while key_end < len(line):
            ch = line[key_end]
            if ch in "=:" and not backslash:
                value_start, has_sep = key_end + 1, True
                break
            if ch in _WS and not backslash:
                value_start = key_end + 1
                break
            backslash = (not backslash) if ch == "\\" else False
            key_end += 1
        while value_start < len(line):
            ch = line[value_start]
            if ch not in _WS:
                if not has_sep and ch in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        props[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return props


def _read_properties_file(path: str | Path) -> dict[str, str]:
    data = Path(path).read_bytes()
    try:  # Kafka reads ISO-8859-1; UTF-8 files (the common case today) are read as such
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text)


# -- listeners ----------------------------------------------------------------------------------

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


# -- DescribeConfigs data ---------------------------------------------------------------------------

class ConfigSource(IntEnum):
    """DescribeConfigs ConfigSource ids as they go on the wire (DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7


class ConfigSynonym(NamedTuple):
    name: str
    value: str | None
    source: ConfigSource


class ConfigEntry(NamedTuple):
    """One DescribeConfigs (and CreateTopics v5+) config entry."""

    name: str
    value: str | None
    read_only: bool
    source: ConfigSource
    is_sensitive: bool
    synonyms: list[ConfigSynonym] | tuple[()] = ()
    config_type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0's IsDefault."""
        return self.source == ConfigSource.DEFAULT_CONFIG


# -- the broker config ------------------------------------------------------------------------------

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


# -- topic configs ----------------------------------------------------------------------------------

def tables_installed() -> bool:
    """Whether the optional `tables` extra (pyiceberg over pyarrow, kafkapy/tables) is installed;
    found without importing it (a topic's config is checked on the broker's loop)."""
    from importlib.util import find_spec

    try:
        return find_spec("pyiceberg") is not None and find_spec("pyarrow") is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False


def validate_topic_configs(configs: Mapping[str, str | None], broker_config: BrokerConfig | None = None,
                           existing: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Validate topic config overrides for CreateTopics/AlterConfigs; returns them typed.

    Raises ConfigError (INVALID_CONFIG) with Kafka's messages: null values, unknown names
    ("Unknown topic config name: x"), bad values, and the cross-config rules of LogConfig.validate.
    """
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise ConfigError("Null value not supported for topic configs: " + ",".join(nulls), name=nulls[0])
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}", name=name)
    typed = {name: TOPIC_CONFIGS[name].parse(value) for name, value in configs.items()}

    def combined(name: str) -> Any:
        if name in typed:
            return typed[name]
        return broker_config.topic_default(name) if broker_config is not None else TOPIC_CONFIGS[name].default

    mode = typed.get("kafkapy.iceberg.mode")
    if mode is not None and mode != "disabled" and not tables_installed():
        raise ConfigError("kafkapy.iceberg.mode needs pip install 'kafkapy[tables]'",
                          name="kafkapy.iceberg.mode", value=mode)
    min_lag, max_lag = combined("min.compaction.lag.ms"), combined("max.compaction.lag.ms")
    if min_lag > max_lag:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                          f"max.compaction.lag.ms ({max_lag})", name="min.compaction.lag.ms", value=min_lag)
    if combined("remote.storage.enable"):
        system_enabled = broker_config is not None and broker_config.get("remote.log.storage.system.enable")
        if not system_enabled:
            raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                              "with remote log storage.", name="remote.storage.enable", value=True)
        if "compact" in combined("cleanup.policy"):
            raise ConfigError("Remote log storage is unsupported for the compacted topics",
                              name="remote.storage.enable", value=True)
    elif existing is not None and str(existing.get("remote.storage.enable", "false")).strip().lower() == "true" \
            and not combined("remote.log.delete.on.disable"):
        raise ConfigError("It is invalid to disable remote storage without deleting remote data. If you want to keep "
                          "the remote data and turn to read only, please set `remote.storage.enable=true,"
                          "remote.log.copy.disable=true`. If you want to disable remote storage and delete all "
                          "remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.",
                          name="remote.storage.enable", value=False)
    return typed


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


def describe_topic_configs(topic_overrides: Mapping[str, str], broker_config: BrokerConfig,
                           names: Iterable[str] | None = None, *, include_synonyms: bool = True,
                           include_documentation: bool = False) -> list[ConfigEntry]:
    """DescribeConfigs entries of a topic, with Kafka's sources and synonyms.

    An override is DYNAMIC_TOPIC_CONFIG with synonyms [override, broker dynamic/static settings of
    the broker synonym, broker default]; otherwise the source is the first broker synonym found.
    `names` None or empty means all configs.
    """
    wanted = set(names) if names else None
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        if wanted is not None and name not in wanted:
            continue
        definition = TOPIC_CONFIGS[name]
        value, overridden = _topic_value(name, topic_overrides, broker_config)
        text = definition.format(value)
        synonyms = []
        if definition.synonyms:
            primary = definition.synonyms[0].name
            synonyms = broker_config.config_synonyms(primary, broker_synonym_group(primary), False)
        if overridden:
            synonyms.insert(0, ConfigSynonym(name, text, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        entries.append(ConfigEntry(
            name=name, value=text, read_only=False,
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG, is_sensitive=False,
            synonyms=synonyms if include_synonyms else [], config_type=definition.type,
            documentation=definition.doc if include_documentation else None))
    return entries


def describe_broker_configs(config: BrokerConfig, names: Iterable[str] | None = None, *, per_broker: bool = True,
                            include_synonyms: bool = True, include_documentation: bool = False) -> list[ConfigEntry]:
    """DescribeConfigs entries of this broker (resource name = node id) or, with per_broker=False,
    of the cluster-wide dynamic defaults (resource name "")."""
    if per_broker:
        values: dict[str, Any] = {k: v for k, v in config._merged().items() if v is not None}
        values.update({n: config.get(n) for n, d in BROKER_CONFIGS.items() if not d.internal})
    else:
        values = config.dynamic_configs(per_broker=False)
    wanted = set(names) if names else None
    entries = []
    for name in sorted(values):
        if wanted is not None and name not in wanted:
            continue
        definition = BROKER_CONFIGS.get(name)
        ctype = definition.type if definition is not None else ConfigType.UNKNOWN
        sensitive = ctype in (ConfigType.PASSWORD, ConfigType.UNKNOWN)  # Kafka's maybeSensitive
        value = values[name]
        text = None if sensitive else (value if isinstance(value, str) else format_value(ctype, value))
        synonyms = config.config_synonyms(name, broker_synonym_group(name), sensitive)
        if not per_broker:
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        entries.append(ConfigEntry(
            name=name, value=text, read_only=not (definition is not None and definition.dynamic),
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG, is_sensitive=sensitive,
            synonyms=synonyms if include_synonyms else [], config_type=ctype,
            documentation=definition.doc if include_documentation and definition is not None else None))
    return entries


# -- AlterConfigs / IncrementalAlterConfigs -----------------------------------------------------------

class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs operation ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def apply_config_ops(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]], *, for_topic: bool,
                     defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """Apply IncrementalAlterConfigs (name, op, value) operations to a config dict, as Kafka does.

    APPEND/SUBTRACT work on LIST configs only; `defaults` gives the starting value of a list that is
    not set yet. Raises InvalidRequestError for duplicate names, null values and unknown ops, and
    ConfigError (INVALID_CONFIG) for list operations on non-list configs.
    """
    ops = list(ops)
    seen = [name for name, _, _ in ops]
    if len(seen) != len(set(seen)):
        raise InvalidRequestError("Error due to duplicate config keys")
    nulls = [name for name, op, value in ops if op != AlterConfigOp.DELETE and value is None]
    if nulls:
        raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))
    defs = TOPIC_CONFIGS if for_topic else BROKER_CONFIGS
    result = dict(current)
    for name, op, value in ops:
        if op not in AlterConfigOp._value2member_map_:
            raise InvalidRequestError(f"Unknown operations type {op}")
        op = AlterConfigOp(op)
        if op is AlterConfigOp.SET:
            result[name] = value
        elif op is AlterConfigOp.DELETE:
            result.pop(name, None)
        else:
            definition = defs.get(name)
            if definition is None or definition.type is not ConfigType.LIST:
                if for_topic:
                    raise ConfigError(f"Can't {op.name} to key {name} because its type is not LIST.", name=name)
                if definition is None:
                    raise ConfigError(f"Unknown config name: {name}", name=name)
                raise ConfigError(f"Config value {op.name.lower()} is not allowed for config key: {name}", name=name)
            start = result.get(name)
            if start is None:
                start = (defaults or {}).get(name, definition.format(definition.default) or "")
            items = [v for v in start.split(",") if v] if start else []
            if op is AlterConfigOp.APPEND:
                items += [v for v in value.split(",") if v not in items]
            else:
                removed = value.split(",")
                items = [v for v in items if v not in removed]
            result[name] = ",".join(items)
    return result


def alter_topic_configs(store: MetadataStore, broker_config: BrokerConfig, topic: str, *,
                        ops: Iterable[tuple[str, int, str | None]] | None = None,
                        replace: Mapping[str, str | None] | None = None, validate_only: bool = False) -> dict[str, str]:
    """AlterConfigs (`replace`: the full new override set) or IncrementalAlterConfigs (`ops`) on a topic.

    Validates like Kafka, stores unless validate_only, and returns the new overrides.
    """
    meta = store.get_topic(topic)
    if meta is None:
        raise UnknownTopicOrPartitionError(f"The topic '{topic}' does not exist.")
    current = dict(meta.configs)
    if ops is not None:
        defaults = {n: TOPIC_CONFIGS[n].format(broker_config.topic_default(n)) for n in TOPIC_CONFIGS
                    if TOPIC_CONFIGS[n].type is ConfigType.LIST}
        new = apply_config_ops(current, ops, for_topic=True, defaults=defaults)
    else:
        new = dict(replace or {})
    validate_topic_configs(new, broker_config, existing=current)
    if not validate_only:
        store.alter_topic_configs(topic, new)
    return new


def alter_broker_configs(config: BrokerConfig, store: MetadataStore, resource_name: str, *,
                         ops: Iterable[tuple[str, int, str | None]] | None = None,
                         replace: Mapping[str, str | None] | None = None, validate_only: bool = False) -> dict[str, str]:
    """AlterConfigs/IncrementalAlterConfigs on a BROKER resource ("" = cluster default, else this node id).

    Read-only configs and bad values are rejected with INVALID_REQUEST, as Kafka does. The new
    layer is persisted in the metadata store (so it survives restarts) and applied to `config`.
    """
    per_broker = resource_name != ""
    if per_broker:
        try:
            node = int(resource_name)
        except ValueError:
            raise InvalidRequestError(f"Node id must be an integer, but it is: {resource_name}") from None
        if node != config.node_id:
            raise InvalidRequestError(f"Unexpected broker id, expected {config.node_id}, but received {resource_name}")
    current = dict(store.get_broker_configs(resource_name))
    if ops is not None:
        new = apply_config_ops(current, ops, for_topic=False)
    else:
        nulls = [n for n, v in (replace or {}).items() if v is None]
        if nulls:
            raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))
        new = dict(replace or {})
    config.validate_dynamic_configs(new, per_broker)
    if not validate_only:
        store.set_broker_configs(resource_name, new)
        config.set_dynamic_configs(per_broker, new)
        log.info("dynamic broker configs of %s are now %s", f"broker {resource_name}" if per_broker
                 else "the cluster default", {k: ("[hidden]" if k in BROKER_CONFIGS and BROKER_CONFIGS[k].type
                                                  is ConfigType.PASSWORD else v) for k, v in new.items()})
    return new


def open_metadata_store(config: BrokerConfig) -> MetadataStore:
    """Open the single node's embedded metadata store for `config`, wired to its topic-config
    validation and defaults, and install the dynamic broker configs kept in it. (In cluster mode
    the broker opens the ZooKeeper store instead: kafkapy/broker/cluster_member.py.)"""
    from ..metadata.embedded import EmbeddedMetadataStore

    store = EmbeddedMetadataStore(
        config.metadata_dir, cluster_id=config.cluster_id,
        topic_config_validator=lambda configs, existing: validate_topic_configs(configs, config, existing),
        default_num_partitions=config.get("num.partitions"),
        default_replication_factor=config.get("default.replication.factor"))
    config.load_dynamic_configs(store.get_broker_configs(""), store.get_broker_configs(str(config.node_id)))
    return store
