"""The one typed table of broker and topic configs (Kafka 3.9 names, types, defaults, validators, docs).

Parsing server.properties, DescribeConfigs, topic-config validation and LogConfig properties all read
from `BROKER_CONFIGS` and `TOPIC_CONFIGS`. Values are parsed and printed the way Kafka's ConfigDef does
(`parse_value`, `format_value`), so error messages and DescribeConfigs strings match Kafka's.
"""
from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from enum import Enum, IntEnum
from typing import Any, NamedTuple

from ..metadata.errors import ConfigError

__all__ = [
    "BROKER_CONFIGS", "TOPIC_CONFIGS", "BrokerSynonym", "ConfigDef", "ConfigType", "Importance", "Password",
    "broker_synonym_group", "format_value", "parse_value",
]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = sys.float_info.max


class SuperUsers:
    """Validator of `super.users`: principals `User:<name>` separated by ';' (the authorizer's
    parser, imported when a value is checked: a broker without the setting never loads it)."""

    def __call__(self, name: str, value: object) -> None:
        if value is None or not str(value).strip():
            return  # no super users (the default)
        from ..security.authorizer import parse_super_users

        parse_super_users(str(value))

    def __str__(self) -> str:
        return "User:<name>;User:<name>..."


class ConfigType(IntEnum):
    """Config value types; the ids are DescribeConfigs' ConfigType (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Password:
    """A secret config value; prints as [hidden] so it never reaches a log line by accident."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


# -- value syntax (Kafka's ConfigDef.parseType / convertToString) --------------------------------

_JAVA_TRIM = "".join(chr(c) for c in range(33))  # String.trim() strips every char <= ' '
# patterns compiled (and cached) by `re` on first use: most starts parse no number from text
_INT_RE = r"[+-]?[0-9]+"
_DOUBLE_RE = r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?)"
_COMMA = r"\s*,\s*"
_INT_BOUNDS = {ConfigType.INT: (-2**31, 2**31 - 1), ConfigType.SHORT: (-2**15, 2**15 - 1),
               ConfigType.LONG: (-2**63, 2**63 - 1)}


def java_trim(text: str) -> str:
    return text.strip(_JAVA_TRIM)


def parse_value(name: str, ctype: ConfigType, raw: Any) -> Any:
    """Parse a raw (usually string) value of config `name` into its typed value, as Kafka does."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        return _coerce_typed(name, ctype, raw)
    text = java_trim(raw)
    if ctype is ConfigType.BOOLEAN:
        if text.lower() == "true":
            return True
        if text.lower() == "false":
            return False
        raise ConfigError.invalid_value(name, raw, "Expected value to be either true or false")
    if ctype in (ConfigType.STRING, ConfigType.CLASS):
        return text
    if ctype is ConfigType.PASSWORD:
        return Password(text)
    if ctype in _INT_BOUNDS:
        low, high = _INT_BOUNDS[ctype]
        if not re.fullmatch(_INT_RE, text) or not low <= int(text) <= high:
            raise ConfigError.invalid_value(name, raw, f"Not a number of type {ctype.name}")
        return int(text)
    if ctype is ConfigType.DOUBLE:
        if not re.fullmatch(_DOUBLE_RE, text):
            raise ConfigError.invalid_value(name, raw, "Not a number of type DOUBLE")
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    if ctype is ConfigType.LIST:
        return [] if not text else re.split(_COMMA, text)
    return raw


def _coerce_typed(name: str, ctype: ConfigType, value: Any) -> Any:
    """Accept already-typed values (defaults in the table, values given by code)."""
    ok = {
        ConfigType.BOOLEAN: isinstance(value, bool),
        ConfigType.INT: isinstance(value, int) and not isinstance(value, bool),
        ConfigType.SHORT: isinstance(value, int) and not isinstance(value, bool),
        ConfigType.LONG: isinstance(value, int) and not isinstance(value, bool),
        ConfigType.DOUBLE: isinstance(value, (int, float)) and not isinstance(value, bool),
        ConfigType.LIST: isinstance(value, (list, tuple)),
        ConfigType.PASSWORD: isinstance(value, Password),
    }.get(ctype, False)
    if not ok:
        raise ConfigError.invalid_value(name, value, f"Expected a value of type {ctype.name}")
    if ctype is ConfigType.DOUBLE:
        return float(value)
    if ctype is ConfigType.LIST:
        return [str(v) for v in value]
    return value


def java_double_str(value: float) -> str:
    """Java's Double.toString: '0.5', '1.0', '1.0E10', '1.7976931348623157E308'."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    # The shortest repr's significant digits and exponent (what Decimal(repr(v)).as_tuple() gives)
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole_part, _, frac_part = mantissa.partition(".")
    significant = (whole_part + frac_part).lstrip("0") or "0"
    digits_tuple, exponent = significant, int(exp or 0) - len(frac_part)
    digits = significant.rstrip("0") or "0"
    point = len(digits_tuple) + exponent  # position of the decimal point within the digit string
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole = digits[:point].ljust(point, "0")
        frac = digits[point:] or "0"
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def format_value(ctype: ConfigType, value: Any) -> str | None:
    """Kafka's ConfigDef.convertToString: the string DescribeConfigs reports for a typed value."""
    if value is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.DOUBLE:
        return java_double_str(float(value))
    if ctype is ConfigType.LIST:
        return ",".join(value)
    if ctype is ConfigType.PASSWORD:
        return "[hidden]"
    return str(value)


# -- validators ----------------------------------------------------------------------------------

# The validators and definitions below are NamedTuples and plain classes, not dataclasses: every
# broker start builds these tables before its first answer, and a frozen dataclass costs about a
# millisecond to create (generated code compiled at import), a NamedTuple a tenth of that.

class Range(NamedTuple):
    """Kafka's Range.atLeast / Range.between."""

    min: float | None = None
    max: float | None = None

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError.invalid_value(name, None, "Value must be non-null")
        if self.min is not None and value < self.min:
            raise ConfigError.invalid_value(name, _shown(value), f"Value must be at least {_num(self.min)}")
        if self.max is not None and value > self.max:
            raise ConfigError.invalid_value(name, _shown(value), f"Value must be no more than {_num(self.max)}")

    def __str__(self) -> str:
        if self.max is None:
            return f"[{_num(self.min)},...]"
        if self.min is None:
            return f"[...,{_num(self.max)}]"
        return f"[{_num(self.min)},...,{_num(self.max)}]"


class OneOf(NamedTuple):
    """Kafka's ValidString.in (or CaseInsensitiveValidString)."""

    choices: tuple[str, ...]
    case_insensitive: bool = False

    def __call__(self, name: str, value: Any) -> None:
        ok = (value.upper() in {c.upper() for c in self.choices}) if self.case_insensitive \
            else value in self.choices
        if not ok:
            raise ConfigError.invalid_value(name, value, "String must be one of: " + ", ".join(self.choices))

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


class EachOneOf(NamedTuple):
    """Kafka's ValidList.in: every list element must be one of the choices (an empty list is fine)."""

    choices: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        for item in value:
            OneOf(self.choices)(name, item)

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


class _Stateless:
    """A validator without parameters: all instances of a class are equal."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class GzipLevel(_Stateless):
    """gzip levels: 1..9, or -1 for zlib's default."""

    __slots__ = ()

    def __call__(self, name: str, value: Any) -> None:
        if value > 9 or (value < 1 and value != -1):
            raise ConfigError.invalid_value(name, value, "Value must be between 1 and 9 or equal to -1")

    def __str__(self) -> str:
        return "[1,...,9] or -1"


class ThrottledReplicas(_Stateless):
    """'*' or a list of partitionId:brokerId pairs (Kafka's ThrottledReplicaListValidator)."""

    __slots__ = ()

    def __call__(self, name: str, value: Any) -> None:
        # Kafka's check, empty elements included ("0:1," is valid) and '*' spelled by all of them
        items = [java_trim(v) for v in value]
        if all(re.fullmatch(r"([0-9]+:[0-9]+)?", v) for v in items) or "".join(items) == "*":
            return
        # the value as Java prints a List
        raise ConfigError.invalid_value(name, "[" + ", ".join(value) + "]", f"{name} must be the literal '*' or a "
                                        "list of replicas in the following format: "
                                        "[partitionId]:[brokerId],[partitionId]:[brokerId],...")

    def __str__(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


class MetadataVersion(_Stateless):
    """A Kafka release/IBP version string such as 0.10.0, 2.8, 3.0-IV1, 3.9-IV0."""

    __slots__ = ()

    def __call__(self, name: str, value: Any) -> None:
        if not re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?(\.[0-9]+)?(-IV[0-9]+)?", value or ""):
            raise ConfigError.invalid_value(name, value, "Not a valid metadata version")

    def __str__(self) -> str:
        return "[0.8.0, ..., 3.9-IV0]"


class NonNull(_Stateless):
    __slots__ = ()

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigError.invalid_value(name, None, "entry must be non null")

    def __str__(self) -> str:
        return "non-null string"


def _num(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else str(x)


def _shown(value: Any) -> str:
    return java_double_str(value) if isinstance(value, float) else str(value)


Validator = Callable[[str, Any], None]


def _ip_count_map(name: str, value: Any) -> None:
    """max.connections.per.ip.overrides: comma-separated host:count (Kafka's getMap + count >= 0)."""
    for entry in (value or "").split(","):
        if not entry.strip():
            continue
        host, sep, count = entry.strip().rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ConfigError.invalid_value(name, value, f"Invalid entry {entry.strip()!r}: expected host:count "
                                            "with a count of at least 0")


def _http_listener(name: str, value: Any) -> None:
    """kafkapy.metrics.listener, kafkapy.console.listener: http://host:port (kafkapy/metrics/http_endpoint.py
    parses it)."""
    if value:
        from ..metrics.http_endpoint import parse_listener_url

        try:
            parse_listener_url(value)
        except ValueError as exc:
            raise ConfigError.invalid_value(name, value, str(exc)) from None


def _registry_listener(name: str, value: Any) -> None:
    """kafkapy.schema.registry.listener: http://host:port or https://host:port."""
    if value:
        text = str(value).strip()
        _http_listener(name, "http://" + text[len("https://"):] if text.lower().startswith("https://") else text)


def _iceberg_catalog_uri(name: str, value: Any) -> None:
    """kafkapy.iceberg.catalog.uri: a SQLAlchemy URL of a SQL catalog or a REST catalog's http(s) URL."""
    scheme = str(value).split(":", 1)[0].lower() if ":" in str(value) else ""
    if scheme.split("+", 1)[0] not in ("sqlite", "postgresql", "http", "https"):
        raise ConfigError.invalid_value(name, value, "must be a sqlite:///, postgresql:// (SQL catalog) or "
                                        "http(s):// (REST catalog) URI")


def _registry_authentication(name: str, value: Any) -> None:
    if value not in ("none", "basic"):
        raise ConfigError.invalid_value(name, value, "Expected 'none' or 'basic'")


# -- definitions ---------------------------------------------------------------------------------

class BrokerSynonym(NamedTuple):
    """A broker config that supplies a topic config's default; values are multiplied by `to_ms`."""

    name: str
    to_ms: int = 1


class ConfigDef(NamedTuple):
    """One config: Kafka name, type, default (typed), validator, importance, documentation.

    Topic configs list their broker `synonyms` in Kafka's priority order. Broker configs say whether
    they can be changed at runtime (`dynamic`, `per_broker` = only for one broker, not as a cluster
    default), whether kafkapy acts on them (`used`; unused ones are accepted and warned about when
    set) and whether they are `internal` (accepted, never described).
    """

    name: str
    type: ConfigType
    default: Any
    importance: Importance
    doc: str
    validator: Validator | None = None
    synonyms: tuple[BrokerSynonym, ...] = ()
    dynamic: bool = False
    per_broker: bool = False
    used: bool = True
    internal: bool = False

    def parse(self, raw: Any) -> Any:
        """Parse and validate a raw value for this config (raises ConfigError naming the key)."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value

    def format(self, value: Any) -> str | None:
        return format_value(self.type, value)


H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
B, S, I, SH, LG, D, LS, C, P = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT,
                               ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS,
                               ConfigType.PASSWORD)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
ICEBERG_MODES = ("disabled", "key_value", "value_schema_id_prefix")


def _syn(*names: str) -> tuple[BrokerSynonym, ...]:
    units = {"hours": 3_600_000, "minutes": 60_000}
    return tuple(BrokerSynonym(n, units.get(n.rsplit(".", 1)[-1], 1)) for n in names)


def _table(*defs: ConfigDef) -> dict[str, ConfigDef]:
    table = {d.name: d for d in defs}
    assert len(table) == len(defs), "duplicate config name in table"
    # That every default satisfies its own validator is checked by tests/broker/test_config_defs.py,
    # not at each import: the broker's start-up reads this table.
    return table


def T(name: str, ctype: ConfigType, default: Any, doc: str, validator: Validator | None = None,
      synonyms: tuple[str, ...] = (), importance: Importance = M) -> ConfigDef:
    return ConfigDef(name, ctype, default, importance, doc, validator, _syn(*synonyms))


TOPIC_CONFIGS: dict[str, ConfigDef] = _table(
    T("segment.bytes", I, 1073741824, "Size of one log segment file; retention and compaction work a "
      "segment at a time.", Range(14), ("log.segment.bytes",)),
    T("segment.ms", LG, 604800000, "Time after which the active segment is rolled even if not full.",
      Range(1), ("log.roll.ms", "log.roll.hours")),
    T("segment.jitter.ms", LG, 0, "Maximum random jitter subtracted from the scheduled segment roll time.",
      Range(0), ("log.roll.jitter.ms", "log.roll.jitter.hours")),
    T("segment.index.bytes", I, 10485760, "Size of the offset index preallocated for each segment.",
      Range(4), ("log.index.size.max.bytes",)),
    T("flush.messages", LG, LONG_MAX, "Number of messages after which the log is fsynced.", Range(1),
      ("log.flush.interval.messages",)),
    T("flush.ms", LG, LONG_MAX, "Time after which unflushed data is fsynced.", Range(0),
      ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    T("retention.bytes", LG, -1, "Maximum size of a partition before old segments are deleted "
      "(delete policy); -1 means no size limit.", None, ("log.retention.bytes",)),
    T("retention.ms", LG, 604800000, "Maximum time a segment is kept before deletion (delete policy); "
      "-1 means no time limit.", Range(-1), ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    T("max.message.bytes", I, 1048588, "Largest record batch size accepted (after compression).", Range(0),
      ("message.max.bytes",)),
    T("index.interval.bytes", I, 4096, "Bytes of log between two offset index entries.", Range(0),
      ("log.index.interval.bytes",)),
    T("delete.retention.ms", LG, 86400000, "How long delete tombstones are kept in compacted topics.",
      Range(0), ("log.cleaner.delete.retention.ms",)),
    T("min.compaction.lag.ms", LG, 0, "Minimum time a message stays uncompacted.", Range(0),
      ("log.cleaner.min.compaction.lag.ms",)),
    T("max.compaction.lag.ms", LG, LONG_MAX, "Maximum time a message stays ineligible for compaction.",
      Range(1), ("log.cleaner.max.compaction.lag.ms",)),
    T("file.delete.delay.ms", LG, 60000, "Time to wait before deleting a file from the filesystem.", Range(0),
      ("log.segment.delete.delay.ms",)),
    T("min.cleanable.dirty.ratio", D, 0.5, "Dirty/total ratio above which a compacted log is cleaned.",
      Range(0, 1), ("log.cleaner.min.cleanable.ratio",)),
    T("cleanup.policy", LS, ["delete"], "Retention policy: delete, compact, or both.",
      EachOneOf(("compact", "delete")), ("log.cleanup.policy",)),
    T("unclean.leader.election.enable", B, False, "Allow out-of-sync replicas to become leader as a last "
      "resort, at the risk of data loss.", None, ("unclean.leader.election.enable",)),
    T("min.insync.replicas", I, 1, "Replicas that must acknowledge an acks=all write.", Range(1),
      ("min.insync.replicas",)),
    T("compression.type", S, "producer", "Final compression of the topic's batches; 'producer' keeps the "
      "producer's codec.", OneOf(COMPRESSION_TYPES), ("compression.type",)),
    T("compression.gzip.level", I, -1, "gzip level when compression.type is gzip.", GzipLevel(),
      ("compression.gzip.level",)),
    T("compression.lz4.level", I, 9, "lz4 level when compression.type is lz4.", Range(1, 17),
      ("compression.lz4.level",)),
    T("compression.zstd.level", I, 3, "zstd level when compression.type is zstd.", Range(-131072, 22),
      ("compression.zstd.level",)),
    T("preallocate", B, False, "Preallocate segment files on disk when they are created.", None,
      ("log.preallocate",)),
    T("message.format.version", S, "3.0-IV1", "[DEPRECATED] Message format version; ignored with "
      "inter.broker.protocol.version 3.0 or later.", MetadataVersion(), ("log.message.format.version",)),
    T("message.timestamp.type", S, "CreateTime", "Whether record timestamps are the producer's CreateTime "
      "or the broker's LogAppendTime.", OneOf(("CreateTime", "LogAppendTime")), ("log.message.timestamp.type",)),
    T("message.timestamp.difference.max.ms", LG, LONG_MAX, "[DEPRECATED] Maximum allowed difference "
      "between a CreateTime timestamp and the broker's clock.", Range(0),
      ("log.message.timestamp.difference.max.ms",)),
    T("message.timestamp.before.max.ms", LG, LONG_MAX, "How far a CreateTime timestamp may lie in the past.",
      Range(0), ("log.message.timestamp.before.max.ms",)),
    T("message.timestamp.after.max.ms", LG, LONG_MAX, "How far a CreateTime timestamp may lie in the future.",
      Range(0), ("log.message.timestamp.after.max.ms",)),
    T("leader.replication.throttled.replicas", LS, [], "Replicas whose replication is throttled on the leader "
      "side (leader.replication.throttled.rate): partitionId:brokerId pairs, or '*' for all replicas.",
      ThrottledReplicas()),
    T("follower.replication.throttled.replicas", LS, [], "Replicas whose replication is throttled on the "
      "follower side (follower.replication.throttled.rate): partitionId:brokerId pairs, or '*' for all "
      "replicas.", ThrottledReplicas()),
    T("message.downconversion.enable", B, True, "Whether fetches by old consumers may down-convert batches.",
      None, ("log.message.downconversion.enable",), L),
    T("remote.storage.enable", B, False, "Enable tiered storage for the topic."),
    T("local.retention.ms", LG, -2, "Time local segments are kept with tiered storage; -2 means "
      "retention.ms.", Range(-2), ("log.local.retention.ms",)),
    T("local.retention.bytes", LG, -2, "Size of local segments kept with tiered storage; -2 means "
      "retention.bytes.", Range(-2), ("log.local.retention.bytes",)),
    T("remote.log.copy.disable", B, False, "Stop copying segments to tiered storage (read-only tier)."),
    T("remote.log.delete.on.disable", B, False, "Delete tiered data when tiered storage is disabled."),
    T("kafkapy.log.fsync.on.ack", B, False, "kafkapy: fsync the log before acknowledging a produce "
      "request (acks != 0).", None, ("kafkapy.log.fsync.on.ack",)),
    T("kafkapy.iceberg.mode", S, "disabled", "kafkapy: write the topic's committed records, exactly once, "
      "to the Iceberg table kafka.<topic> too (docs/tables.md): disabled, key_value (raw key and value "
      "columns) or value_schema_id_prefix (values in Confluent's wire format decoded into typed columns). "
      "Needs pip install 'kafkapy[tables]'.", OneOf(ICEBERG_MODES)),
)

# Broker configs whose value Kafka can change at runtime (DynamicBrokerConfig.AllDynamicConfigs),
# restricted to the ones kafkapy defines; listener and security configs are left out on purpose because
# kafkapy cannot rebind or re-key its listeners at runtime.
_DYNAMIC_LOG = {syn[0].name for d in TOPIC_CONFIGS.values() if (syn := d.synonyms)} - {
    "log.message.format.version", "kafkapy.log.fsync.on.ack"}
_DYNAMIC = _DYNAMIC_LOG | {
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
    "num.network.threads", "metric.reporters", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "max.connections", "max.connection.creation.rate", "producer.id.expiration.ms",
    "transaction.partition.verification.enable", "kafkapy.log.fsync.on.ack",
    "advertised.listeners",
    # Kafka's DynamicConfig.Broker (KIP-73), not in AllDynamicConfigs but changed the same way
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
}
# Configs kafkapy honours; everything else is accepted for compatibility and warned about when set.
_USED = {
    "node.id", "broker.id", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "log.dir", "log.dirs", "metadata.log.dir", "num.partitions", "default.replication.factor",
    "auto.create.topics.enable", "delete.topic.enable", "socket.request.max.bytes", "message.max.bytes",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes", "socket.listen.backlog.size",
    "connections.max.idle.ms", "broker.rack", "fetch.max.bytes",
    # connection limits and the request memory budget (broker/connection_quotas.py, broker/memory_pool.py)
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections", "max.connection.creation.rate",
    "queued.max.request.bytes", "max.incremental.fetch.session.cache.slots",
    "telemetry.max.bytes",  # KIP-714 client telemetry (kafkapy/metrics/client_telemetry.py)
    "offsets.topic.num.partitions", "offsets.topic.replication.factor", "offsets.topic.segment.bytes",
    "offsets.retention.minutes", "offsets.retention.check.interval.ms", "offset.metadata.max.bytes",
    "offsets.commit.timeout.ms", "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
    "group.max.session.timeout.ms", "group.max.size", "group.consumer.migration.policy",
    "group.coordinator.rebalance.protocols", "group.consumer.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms", "group.consumer.max.size", "group.consumer.assignors",
    # streams groups (kafkapy/groupcoord/streams)
    "group.streams.session.timeout.ms", "group.streams.heartbeat.interval.ms", "group.streams.max.size",
    "group.streams.num.standby.replicas", "group.streams.initial.rebalance.delay.ms",
    "group.streams.task.offset.interval.ms", "group.streams.acceptable.recovery.lag",
    "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms",
    "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms",
    "group.streams.max.standby.replicas", "group.streams.assignment.interval.ms",
    "group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms",
    # share groups (kafkapy/groupcoord/share)
    "group.share.enable", "group.share.record.lock.duration.ms", "group.share.delivery.count.limit",
    "group.share.session.timeout.ms", "group.share.heartbeat.interval.ms", "group.share.max.size",
    "group.share.partition.max.record.locks", "share.coordinator.state.topic.num.partitions",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.segment.bytes",
    "share.coordinator.snapshot.update.records.per.snapshot",
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor", "transaction.state.log.segment.bytes",
    "transaction.state.log.min.isr", "transaction.max.timeout.ms", "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms", "producer.id.expiration.ms",
    "producer.id.expiration.check.interval.ms", "log.retention.check.interval.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "log.roll.hours", "log.retention.minutes", "log.retention.hours", "kafkapy.cluster.id",
    "request.timeout.ms", "queued.max.requests", "authorizer.class.name", "super.users",
    "allow.everyone.if.no.acl.found",
    # server defaults of the topic configs the partition logs implement
    "log.segment.bytes", "log.roll.ms", "log.index.size.max.bytes", "log.index.interval.bytes",
    "log.retention.ms", "log.retention.bytes", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms", "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.message.timestamp.difference.max.ms", "log.cleanup.policy",
    "log.segment.delete.delay.ms", "min.insync.replicas", "compression.type",
    # the log cleaner (kafkapy/log/cleaner.py)
    "log.cleaner.enable", "log.cleaner.backoff.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second",
    # cluster mode (kafkapy/controller, kafkapy/replication; docs/cluster.md)
    "zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
    "inter.broker.listener.name", "security.inter.broker.protocol", "unclean.leader.election.enable",
    "replica.lag.time.max.ms", "replica.socket.timeout.ms", "replica.fetch.max.bytes", "replica.fetch.wait.max.ms",
    "replica.fetch.min.bytes", "replica.fetch.backoff.ms", "replica.fetch.response.max.bytes",
    "replica.high.watermark.checkpoint.interval.ms", "controlled.shutdown.enable", "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms", "controller.socket.timeout.ms", "auto.leader.rebalance.enable",
    "leader.imbalance.per.broker.percentage", "leader.imbalance.check.interval.seconds",
    "num.replica.fetchers",
    # replication throttles (kafkapy/replication/throttle.py)
    "leader.replication.throttled.rate", "follower.replication.throttled.rate", "replication.quota.window.num",
    "replication.quota.window.size.seconds",
    # TLS listeners and inter-broker TLS (kafkapy/security/tls.py)
    "ssl.protocol", "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth",
    "ssl.endpoint.identification.algorithm", "ssl.cipher.suites", "ssl.principal.mapping.rules",
    # SASL listeners (kafkapy/security/sasl, security/session.py)
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "connections.max.reauth.ms", "sasl.server.max.receive.size",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.clock.skew.seconds",
    "connection.failed.authentication.delay.ms",
}
# Kafka's per-broker-only dynamic configs are listener/security ones; kafkapy can re-advertise
# itself, but not rebind its sockets, so only advertised.listeners is among them.
_PER_BROKER: set[str] = {"advertised.listeners"}


def K(name: str, ctype: ConfigType, default: Any, importance: Importance, doc: str,
      validator: Validator | None = None, internal: bool = False) -> ConfigDef:
    return ConfigDef(name, ctype, default, importance, doc, validator, (), name in _DYNAMIC,
                     name in _PER_BROKER, name in _USED or name.startswith("kafkapy."), internal)


_TOPIC_DOC = {s.name: d.doc for d in TOPIC_CONFIGS.values() for s in d.synonyms}


def KT(name: str, ctype: ConfigType, default: Any, importance: Importance, validator: Validator | None = None,
       doc: str | None = None) -> ConfigDef:
    """A broker config that is the server default of a topic config (doc taken from the topic config)."""
    return K(name, ctype, default, importance, doc or _TOPIC_DOC[name], validator)


BROKER_CONFIGS: dict[str, ConfigDef] = _table(
    # -- identity, roles, quorum ---------------------------------------------------------------
    K("node.id", I, -1, H, "Id of this node; in KRaft mode it must equal broker.id when both are set. "
      "kafkapy uses 0 when neither is set."),
    K("broker.id", I, -1, H, "Broker id of this server (the same as node.id)."),
    K("broker.id.generation.enable", B, True, M, "Generate broker ids automatically (ZooKeeper mode)."),
    K("reserved.broker.max.id", I, 1000, M, "Largest broker id that can be configured by hand.", Range(0)),
    K("broker.rack", S, None, M, "Rack of the broker, used for rack-aware replica placement."),
    K("process.roles", LS, [], H, "KRaft roles of this process: broker, controller or both.",
      EachOneOf(("broker", "controller"))),
    K("controller.quorum.voters", LS, [], H, "KRaft controller quorum voters as id@host:port."),
    K("controller.quorum.bootstrap.servers", LS, [], H, "KRaft controller quorum bootstrap endpoints."),
    K("controller.listener.names", S, None, H, "Listener names used by KRaft controllers."),
    K("controller.quorum.election.timeout.ms", I, 1000, H, "KRaft election timeout."),
    K("controller.quorum.fetch.timeout.ms", I, 2000, H, "KRaft fetch timeout."),
    K("controller.quorum.election.backoff.max.ms", I, 1000, H, "KRaft maximum election backoff."),
    K("controller.quorum.append.linger.ms", I, 25, M, "KRaft append linger time."),
    K("controller.quorum.request.timeout.ms", I, 2000, M, "KRaft request timeout."),
    K("controller.quorum.retry.backoff.ms", I, 20, L, "KRaft retry backoff."),
    K("metadata.log.dir", S, None, H, "Directory of the cluster metadata; defaults to the first log "
      "directory. kafkapy keeps its metadata file here."),
    K("metadata.log.segment.bytes", I, 1073741824, H, "KRaft metadata log segment size.", Range(12)),
    K("metadata.log.segment.ms", LG, 604800000, H, "KRaft metadata log roll time."),
    K("metadata.max.retention.bytes", LG, 104857600, H, "KRaft metadata log retention size."),
    K("metadata.max.retention.ms", LG, 604800000, H, "KRaft metadata log retention time."),
    K("metadata.max.idle.interval.ms", I, 500, L, "KRaft no-op record interval.", Range(0)),
    K("metadata.log.max.record.bytes.between.snapshots", LG, 20971520, H, "KRaft snapshot size trigger.",
      Range(1)),
    K("metadata.log.max.snapshot.interval.ms", LG, 3600000, H, "KRaft snapshot time trigger.", Range(0)),
    K("initial.broker.registration.timeout.ms", I, 60000, M, "KRaft broker registration timeout."),
    K("broker.heartbeat.interval.ms", I, 2000, M, "KRaft broker heartbeat interval."),
    K("broker.session.timeout.ms", I, 9000, M, "KRaft broker session timeout."),
    K("sasl.mechanism.controller.protocol", S, "GSSAPI", H, "SASL mechanism used to talk to controllers."),
    K("eligible.leader.replicas.enable", B, False, H, "Enable eligible leader replicas (KIP-966)."),
    K("zookeeper.connect", S, None, H, "ZooKeeper connection string host:port[,host:port][/chroot]; "
      "kafkapy will keep its metadata in ZooKeeper when set (not implemented yet)."),
    K("zookeeper.session.timeout.ms", I, 18000, H, "ZooKeeper session timeout."),
    K("zookeeper.connection.timeout.ms", I, None, H, "Maximum time to wait for a ZooKeeper connection; "
      "zookeeper.session.timeout.ms when unset."),
    K("zookeeper.set.acl", B, False, H, "Use secure ACLs on ZooKeeper nodes."),
    K("zookeeper.max.in.flight.requests", I, 10, H, "Unacknowledged ZooKeeper requests before blocking.",
      Range(1)),
    K("zookeeper.ssl.client.enable", B, False, M, "Use TLS to connect to ZooKeeper."),
    K("zookeeper.metadata.migration.enable", B, False, H, "Enable ZooKeeper to KRaft migration."),
    # -- listeners and sockets -----------------------------------------------------------------
    K("listeners", S, "PLAINTEXT://localhost:9092", H, "Comma-separated listener URIs NAME://host:port. "
      "An empty host binds every interface; kafkapy's default binds loopback only (localhost)."),
    K("advertised.listeners", S, None, H, "Listener URIs given to clients in metadata; defaults to "
      "listeners (an empty host is replaced by this machine's name)."),
    K("listener.security.protocol.map", S, "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,"
      "SASL_PLAINTEXT:SASL_PLAINTEXT", L, "Map of listener name to security protocol."),
    K("control.plane.listener.name", S, None, H, "Listener used for controller-to-broker traffic."),
    K("inter.broker.listener.name", S, None, M, "Listener used between brokers."),
    K("security.inter.broker.protocol", S, "PLAINTEXT", M, "Security protocol used between brokers.",
      OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))),
    K("early.start.listeners", S, None, H, "Listeners started before the authorizer is ready."),
    K("socket.send.buffer.bytes", I, 102400, H, "SO_SNDBUF of server sockets; -1 uses the OS default."),
    K("socket.receive.buffer.bytes", I, 102400, H, "SO_RCVBUF of server sockets; -1 uses the OS default."),
    K("socket.request.max.bytes", I, 104857600, H, "Largest request the server accepts.", Range(1)),
    K("socket.listen.backlog.size", I, 50, M, "Listen backlog of server sockets.", Range(1)),
    K("socket.connection.setup.timeout.ms", LG, 10000, M, "Client connection setup timeout."),
    K("socket.connection.setup.timeout.max.ms", LG, 30000, M, "Maximum connection setup timeout."),
    K("max.connections.per.ip", I, INT_MAX, M, "Connections allowed from one IP address.", Range(0)),
    K("max.connections.per.ip.overrides", S, "", M, "Per-IP or per-host overrides of max.connections.per.ip.",
      _ip_count_map),
    K("max.connections", I, INT_MAX, M, "Connections allowed in the broker at any time.", Range(0)),
    K("max.connection.creation.rate", I, INT_MAX, M, "New connections per second allowed.", Range(0)),
    K("connections.max.idle.ms", LG, 600000, M, "Idle connections are closed after this long."),
    K("connection.failed.authentication.delay.ms", I, 100, L, "Delay before closing a connection that failed "
      "authentication.", Range(0)),
    K("queued.max.requests", I, 500, H, "Requests queued per connection before reading pauses.", Range(1)),
    K("queued.max.request.bytes", LG, -1, M, "Bytes of requests held in memory by all connections before "
      "reading pauses. kafkapy never runs unbounded: -1 (Kafka: no limit) means an eighth of physical memory, "
      "at most 256 MiB and at least socket.request.max.bytes."),
    K("num.network.threads", I, 3, H, "Threads handling network requests (accepted; kafkapy uses one event "
      "loop).", Range(1)),
    K("num.io.threads", I, 8, H, "Threads processing requests (accepted; kafkapy uses one event loop).",
      Range(1)),
    K("background.threads", I, 10, H, "Threads for background tasks.", Range(1)),
    K("num.replica.alter.log.dirs.threads", I, None, H, "Threads moving replicas between log directories."),
    K("request.timeout.ms", I, 30000, H, "Timeout of requests the broker sends."),
    K("max.request.partition.size.limit", I, 2000, M, "Maximum partitions served in one request.", Range(1)),
    # -- general server ------------------------------------------------------------------------
    K("message.max.bytes", I, 1048588, H, "Largest record batch size accepted (after compression); the "
      "topic-level max.message.bytes overrides it.", Range(0)),
    K("delete.topic.enable", B, True, H, "Allow topics to be deleted."),
    K("auto.create.topics.enable", B, True, H, "Create a topic when a client asks for metadata of an unknown "
      "topic."),
    K("num.partitions", I, 1, M, "Default number of partitions of a new topic.", Range(1)),
    K("default.replication.factor", I, 1, M, "Default replication factor of a new topic."),
    K("fetch.max.bytes", I, 57671680, M, "Most bytes returned by one fetch request.", Range(1024)),
    K("max.incremental.fetch.session.cache.slots", I, 1000, M, "Incremental fetch sessions kept.", Range(0)),
    K("authorizer.class.name", S, "", L, "Class of the authorizer; empty for none. kafkapy enforces ACLs "
      "(security/authorizer.py) with Kafka's AclAuthorizer semantics; any other class name is served the same "
      "way, with a warning.", NonNull()),
    K("super.users", S, "", L, "Principals allowed everything by the authorizer (User:a;User:b).", SuperUsers()),
    K("allow.everyone.if.no.acl.found", B, False, L, "With an authorizer: allow an action on a resource that "
      "no ACL matches."),
    K("controlled.shutdown.enable", B, True, M, "Enable controlled shutdown."),
    K("controlled.shutdown.max.retries", I, 3, M, "Controlled shutdown retries."),
    K("controlled.shutdown.retry.backoff.ms", LG, 5000, M, "Backoff between controlled shutdown retries."),
    K("create.topic.policy.class.name", C, None, L, "Policy class validating topic creation."),
    K("alter.config.policy.class.name", C, None, L, "Policy class validating config changes."),
    KT("compression.type", S, "producer", H, OneOf(COMPRESSION_TYPES)),
    KT("compression.gzip.level", I, -1, M, GzipLevel()),
    KT("compression.lz4.level", I, 9, M, Range(1, 17)),
    KT("compression.zstd.level", I, 3, M, Range(-131072, 22)),
    KT("min.insync.replicas", I, 1, H, Range(1)),
    KT("unclean.leader.election.enable", B, False, H),
    K("unstable.api.versions.enable", B, False, H, "Advertise unreleased API versions.", internal=True),
    K("unstable.feature.versions.enable", B, False, H, "Allow unreleased metadata versions.", internal=True),
    # -- logs --------------------------------------------------------------------------------
    K("log.dir", S, "./kafkapy-data", H, "Directory of the log data, used when log.dirs is unset "
      "(kafkapy default: ./kafkapy-data)."),
    K("log.dirs", S, None, H, "Comma-separated directories of the log data; log.dir when unset."),
    KT("log.segment.bytes", I, 1073741824, H, Range(14)),
    KT("log.roll.ms", LG, None, H, doc="Time before a new segment is rolled, in ms; log.roll.hours when unset."),
    K("log.roll.hours", I, 168, H, "Time before a new segment is rolled, in hours (second to log.roll.ms).",
      Range(1)),
    KT("log.roll.jitter.ms", LG, None, H, doc="Maximum jitter subtracted from the roll time, in ms; "
       "log.roll.jitter.hours when unset."),
    K("log.roll.jitter.hours", I, 0, H, "Maximum roll jitter in hours (second to log.roll.jitter.ms).", Range(0)),
    KT("log.retention.ms", LG, None, H, doc="Time to keep a segment, in ms; log.retention.minutes when "
       "unset; -1 for no time limit."),
    K("log.retention.minutes", I, None, H, "Time to keep a segment, in minutes (second to log.retention.ms)."),
    K("log.retention.hours", I, 168, H, "Time to keep a segment, in hours (third to log.retention.ms)."),
    KT("log.retention.bytes", LG, -1, H),
    K("log.retention.check.interval.ms", LG, 300000, M, "How often logs are checked for deletable segments.",
      Range(1)),
    KT("log.cleanup.policy", LS, ["delete"], M, EachOneOf(("compact", "delete"))),
    KT("log.index.size.max.bytes", I, 10485760, M, Range(4)),
    KT("log.index.interval.bytes", I, 4096, M, Range(0)),
    KT("log.flush.interval.messages", LG, LONG_MAX, H, Range(1)),
    KT("log.segment.delete.delay.ms", LG, 60000, H, Range(0)),
    K("log.flush.scheduler.interval.ms", LG, LONG_MAX, H, "How often the flusher checks for logs to flush."),
    KT("log.flush.interval.ms", LG, None, H, doc="Maximum time unflushed data stays in memory; "
       "log.flush.scheduler.interval.ms when unset."),
    K("log.flush.offset.checkpoint.interval.ms", I, 60000, H, "How often the recovery point is checkpointed.",
      Range(0)),
    K("log.flush.start.offset.checkpoint.interval.ms", I, 60000, H, "How often log start offsets are "
      "checkpointed.", Range(0)),
    KT("log.preallocate", B, False, M),
    K("num.recovery.threads.per.data.dir", I, 1, H, "Threads per log directory for recovery and shutdown "
      "flushing.", Range(1)),
    KT("log.message.format.version", S, "3.0-IV1", M, MetadataVersion()),
    KT("log.message.timestamp.type", S, "CreateTime", M, OneOf(("CreateTime", "LogAppendTime"))),
    KT("log.message.timestamp.difference.max.ms", LG, LONG_MAX, M, Range(0)),
    KT("log.message.timestamp.before.max.ms", LG, LONG_MAX, M, Range(0)),
    KT("log.message.timestamp.after.max.ms", LG, LONG_MAX, M, Range(0)),
    KT("log.message.downconversion.enable", B, True, L),
    K("log.dir.failure.timeout.ms", LG, 30000, L, "Time a failed log directory may go unreported before the "
      "broker shuts down.", Range(1)),
    K("log.initial.task.delay.ms", LG, 30000, L, "Initial delay of log manager tasks.", Range(0), internal=True),
    KT("log.local.retention.ms", LG, -2, M, Range(-2)),
    KT("log.local.retention.bytes", LG, -2, M, Range(-2)),
    K("remote.log.storage.system.enable", B, False, M, "Enable tiered storage in the broker."),
    K("log.cleaner.enable", B, True, M, "Run the log cleaner (needed for compacted topics)."),
    K("log.cleaner.threads", I, 1, M, "Log cleaner threads.", Range(0)),
    K("log.cleaner.io.max.bytes.per.second", D, DOUBLE_MAX, M, "I/O throttle of the log cleaner."),
    K("log.cleaner.dedupe.buffer.size", LG, 134217728, M, "Memory for log deduplication."),
    K("log.cleaner.io.buffer.size", I, 524288, M, "Memory for log cleaner I/O buffers.", Range(0)),
    K("log.cleaner.io.buffer.load.factor", D, 0.9, M, "Fill ratio of the dedupe buffer."),
    K("log.cleaner.backoff.ms", LG, 15000, M, "Sleep when no log needs cleaning.", Range(0)),
    KT("log.cleaner.min.cleanable.ratio", D, 0.5, M, Range(0, 1)),
    KT("log.cleaner.delete.retention.ms", LG, 86400000, M, Range(0)),
    KT("log.cleaner.min.compaction.lag.ms", LG, 0, M, Range(0)),
    KT("log.cleaner.max.compaction.lag.ms", LG, LONG_MAX, M, Range(1)),
    # -- replication -----------------------------------------------------------------------------
    K("controller.socket.timeout.ms", I, 30000, M, "Socket timeout of controller-to-broker channels."),
    K("replica.lag.time.max.ms", LG, 30000, H, "A follower that has not caught up for this long leaves the ISR."),
    K("replica.socket.timeout.ms", I, 30000, H, "Socket timeout of replica fetches."),
    K("replica.socket.receive.buffer.bytes", I, 65536, H, "Receive buffer of replica fetch sockets."),
    K("replica.fetch.max.bytes", I, 1048576, M, "Bytes fetched per partition by a follower.", Range(0)),
    K("replica.fetch.wait.max.ms", I, 500, H, "Maximum wait of a follower fetch."),
    K("replica.fetch.min.bytes", I, 1, H, "Minimum bytes of a follower fetch response."),
    K("replica.fetch.backoff.ms", I, 1000, M, "Sleep after a follower fetch error.", Range(0)),
    K("replica.fetch.response.max.bytes", I, 10485760, M, "Maximum bytes of a follower fetch response.",
      Range(0)),
    K("num.replica.fetchers", I, 1, H, "Replica fetcher threads per source broker."),
    K("replica.high.watermark.checkpoint.interval.ms", LG, 5000, H, "How often high watermarks are saved."),
    K("replica.selector.class", S, None, M, "Class choosing the replica a consumer fetches from."),
    K("fetch.purgatory.purge.interval.requests", I, 1000, M, "Purge interval of the fetch purgatory."),
    K("producer.purgatory.purge.interval.requests", I, 1000, M, "Purge interval of the produce purgatory."),
    K("delete.records.purgatory.purge.interval.requests", I, 1, M, "Purge interval of the delete-records "
      "purgatory."),
    K("auto.leader.rebalance.enable", B, True, H, "Move leadership back to preferred replicas."),
    K("leader.imbalance.per.broker.percentage", I, 10, H, "Leader imbalance tolerated per broker."),
    K("leader.imbalance.check.interval.seconds", LG, 300, H, "How often leader balance is checked.", Range(1)),
    K("inter.broker.protocol.version", S, "3.9-IV0", M, "Inter-broker protocol version.", MetadataVersion()),
    # -- consumer groups and offsets ---------------------------------------------------------------
    K("group.min.session.timeout.ms", I, 6000, M, "Smallest session timeout a consumer may use."),
    K("group.max.session.timeout.ms", I, 1800000, M, "Largest session timeout a consumer may use."),
    K("group.initial.rebalance.delay.ms", I, 3000, M, "Wait for more members before the first rebalance of an "
      "empty group."),
    K("group.max.size", I, INT_MAX, M, "Most members in one consumer group.", Range(1)),
    K("group.coordinator.rebalance.protocols", LS, ["classic", "consumer", "streams"], M,
      "Enabled rebalance protocols.", EachOneOf(("classic", "consumer", "share", "streams"))),
    K("group.coordinator.threads", I, 1, M, "Group coordinator threads.", Range(1)),
    K("group.coordinator.append.linger.ms", I, 10, M, "Linger of group coordinator writes.", Range(0)),
    K("group.consumer.session.timeout.ms", I, 45000, M, "Session timeout of KIP-848 consumers.", Range(1)),
    K("group.consumer.min.session.timeout.ms", I, 45000, M, "Minimum KIP-848 session timeout.", Range(1)),
    K("group.consumer.max.session.timeout.ms", I, 60000, M, "Maximum KIP-848 session timeout.", Range(1)),
    K("group.consumer.heartbeat.interval.ms", I, 5000, M, "Heartbeat interval of KIP-848 consumers.", Range(1)),
    K("group.consumer.min.heartbeat.interval.ms", I, 5000, M, "Minimum KIP-848 heartbeat interval.", Range(1)),
    K("group.consumer.max.heartbeat.interval.ms", I, 15000, M, "Maximum KIP-848 heartbeat interval.", Range(1)),
    K("group.consumer.max.size", I, INT_MAX, M, "Most members in one KIP-848 group.", Range(1)),
    K("group.consumer.assignors", LS, ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                                      "org.apache.kafka.coordinator.group.assignor.RangeAssignor"], M,
      "Server-side assignors of KIP-848 groups."),
    K("group.consumer.migration.policy", S, "bidirectional", M, "Whether a non-empty classic group may become a "
      "KIP-848 consumer group and back: bidirectional, upgrade, downgrade or disabled.",
      OneOf(("bidirectional", "upgrade", "downgrade", "disabled"), case_insensitive=True)),
    # -- streams groups (KIP-1071, kafkapy/groupcoord/streams; Kafka 4.4's defaults) ------------------
    K("group.streams.session.timeout.ms", I, 45000, M, "Session timeout of streams group members.", Range(1)),
    K("group.streams.min.session.timeout.ms", I, 45000, M, "Minimum streams group session timeout.", Range(1)),
    K("group.streams.max.session.timeout.ms", I, 60000, M, "Maximum streams group session timeout.", Range(1)),
    K("group.streams.heartbeat.interval.ms", I, 5000, M, "Heartbeat interval of streams group members.", Range(1)),
    K("group.streams.min.heartbeat.interval.ms", I, 5000, M, "Minimum streams group heartbeat interval.", Range(1)),
    K("group.streams.max.heartbeat.interval.ms", I, 15000, M, "Maximum streams group heartbeat interval.",
      Range(1)),
    K("group.streams.max.size", I, INT_MAX, M, "Most members in one streams group.", Range(1)),
    K("group.streams.num.standby.replicas", I, 0, M, "Standby replicas of each stateful task.", Range(0)),
    K("group.streams.max.standby.replicas", I, 2, M, "Most standby replicas a streams group may ask for.",
      Range(0)),
    K("group.streams.initial.rebalance.delay.ms", I, 3000, M, "How long a new streams group waits for more members"
      " before its first assignment (members get ASSIGNMENT_DELAYED meanwhile).", Range(0)),
    K("group.streams.assignment.interval.ms", I, 1000, M, "Least time between two target assignments of a"
      " streams group (members get ASSIGNMENT_DELAYED meanwhile).", Range(0)),
    K("group.streams.min.assignment.interval.ms", I, 0, M, "Minimum streams.assignment.interval.ms.", Range(0)),
    K("group.streams.max.assignment.interval.ms", I, 15000, M, "Maximum streams.assignment.interval.ms.", Range(0)),
    K("group.streams.task.offset.interval.ms", I, 60000, M, "How often streams members report their task offsets.",
      Range(1)),
    K("group.streams.acceptable.recovery.lag", LG, 10000, M, "The lag under which a member is caught up on a task.",
      Range(0)),
    # -- share groups (KIP-932, kafkapy/groupcoord/share) -------------------------------------------
    K("group.share.enable", B, True, M, "Serve share groups (Kafka 4.2 finalizes share.version=1 by default; "
      "false stands for share.version=0: the share APIs are not advertised)."),
    K("group.share.record.lock.duration.ms", I, 30000, M, "How long a share consumer holds a record it was "
      "given before it goes back to the group.", Range(1000, 3600000)),
    K("group.share.delivery.count.limit", I, 5, M, "Deliveries of a record before it is archived.", Range(2, 10)),
    K("group.share.session.timeout.ms", I, 45000, M, "Session timeout of share group members.", Range(1)),
    K("group.share.heartbeat.interval.ms", I, 5000, M, "Heartbeat interval of share group members.", Range(1)),
    K("group.share.max.size", I, 200, M, "Most members in one share group.", Range(1, 1000)),
    K("group.share.partition.max.record.locks", I, 2000, M, "Most records in flight on one share-partition.",
      Range(100, 10000)),
    K("share.coordinator.state.topic.num.partitions", I, 50, H, "Partitions of __share_group_state, where "
      "share-partition state is kept.", Range(1)),
    K("share.coordinator.state.topic.replication.factor", SH, 3, H, "Replication factor of __share_group_state; "
      "until it can be created share-partition state is kept in memory only.", Range(1)),
    K("share.coordinator.state.topic.segment.bytes", I, 104857600, H, "Segment size of __share_group_state.",
      Range(1)),
    K("share.coordinator.snapshot.update.records.per.snapshot", I, 500, M, "Share-state updates (ShareUpdate "
      "records) written for a share-partition between two full snapshots (ShareSnapshot).", Range(0)),
    K("offset.metadata.max.bytes", I, 4096, H, "Largest metadata string of a committed offset."),
    K("offsets.load.buffer.size", I, 5242880, H, "Read buffer when loading offsets.", Range(1)),
    K("offsets.topic.replication.factor", SH, 3, H, "Replication factor of __consumer_offsets; it cannot be "
      "created until this many brokers are alive.", Range(1)),
    K("offsets.topic.num.partitions", I, 50, H, "Partitions of __consumer_offsets.", Range(1)),
    K("offsets.topic.segment.bytes", I, 104857600, H, "Segment size of __consumer_offsets.", Range(1)),
    K("offsets.topic.compression.codec", I, 0, H, "Compression codec id of __consumer_offsets."),
    K("offsets.retention.minutes", I, 10080, H, "How long offsets of an empty group are kept.", Range(1)),
    K("offsets.retention.check.interval.ms", LG, 600000, H, "How often stale offsets are removed.", Range(1)),
    K("offsets.commit.timeout.ms", I, 5000, H, "Timeout of an offset commit write.", Range(1)),
    K("offsets.commit.required.acks", SH, -1, H, "Acks required for an offset commit."),
    # -- transactions and producer ids ----------------------------------------------------------------
    K("transaction.state.log.num.partitions", I, 50, H, "Partitions of __transaction_state.", Range(1)),
    K("transaction.state.log.replication.factor", SH, 3, H, "Replication factor of __transaction_state.",
      Range(1)),
    K("transaction.state.log.segment.bytes", I, 104857600, H, "Segment size of __transaction_state.", Range(1)),
    K("transaction.state.log.min.isr", I, 2, H, "min.insync.replicas of __transaction_state.", Range(1)),
    K("transaction.state.log.load.buffer.size", I, 5242880, H, "Read buffer when loading transactions.",
      Range(1)),
    K("transaction.max.timeout.ms", I, 900000, H, "Largest transaction timeout a producer may use.", Range(1)),
    K("transactional.id.expiration.ms", I, 604800000, H, "Idle time after which a transactional id expires.",
      Range(1)),
    K("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10000, L, "How often timed-out "
      "transactions are aborted.", Range(1)),
    K("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3600000, L, "How often expired "
      "transactional ids are removed.", Range(1)),
    K("transaction.partition.verification.enable", B, True, L, "Verify partitions were added to a transaction "
      "before accepting transactional writes."),
    K("producer.id.expiration.ms", I, 86400000, L, "Idle time after which a producer id's state is dropped.",
      Range(1)),
    K("producer.id.expiration.check.interval.ms", I, 600000, L, "How often expired producer ids are removed.",
      Range(1), internal=True),
    # -- quotas, metrics, tokens ---------------------------------------------------------------------------
    K("quota.window.num", I, 11, L, "Samples kept for client quotas.", Range(1)),
    K("quota.window.size.seconds", I, 1, L, "Time span of a client quota sample.", Range(1)),
    K("replication.quota.window.num", I, 11, L, "Samples kept for replication quotas.", Range(1)),
    K("replication.quota.window.size.seconds", I, 1, L, "Time span of a replication quota sample.", Range(1)),
    K("leader.replication.throttled.rate", LG, LONG_MAX, M, "Upper bound (bytes/sec) on the replication "
      "traffic this broker sends as leader of the replicas listed in leader.replication.throttled.replicas "
      "(per topic). It is suggested that the limit be kept above 1MB/s for accurate behaviour.", Range(0)),
    K("follower.replication.throttled.rate", LG, LONG_MAX, M, "Upper bound (bytes/sec) on the replication "
      "traffic this broker fetches as follower of the replicas listed in "
      "follower.replication.throttled.replicas (per topic). It is suggested that the limit be kept above "
      "1MB/s for accurate behaviour.", Range(0)),
    K("client.quota.callback.class", C, None, L, "Class of the client quota callback."),
    K("metric.reporters", LS, [], L, "Classes used as metrics reporters."),
    K("metrics.num.samples", I, 2, L, "Samples kept to compute metrics.", Range(1)),
    K("metrics.sample.window.ms", LG, 30000, L, "Window of a metrics sample.", Range(1)),
    K("metrics.recording.level", S, "INFO", L, "Highest recording level of metrics."),
    K("auto.include.jmx.reporter", B, True, L, "[DEPRECATED] Always include the JMX reporter."),
    K("kafka.metrics.reporters", LS, [], L, "Yammer metrics reporter classes."),
    K("kafka.metrics.polling.interval.secs", I, 10, L, "Metrics polling interval.", Range(1)),
    K("telemetry.max.bytes", I, 1048576, L, "Largest client telemetry payload.", Range(1)),
    K("delegation.token.secret.key", P, None, M, "Secret used to sign delegation tokens."),
    K("delegation.token.max.lifetime.ms", LG, 604800000, M, "Maximum lifetime of a delegation token.", Range(1)),
    K("delegation.token.expiry.time.ms", LG, 86400000, M, "Renewal interval of delegation tokens.", Range(1)),
    K("delegation.token.expiry.check.interval.ms", LG, 3600000, L, "How often expired tokens are removed.",
      Range(1)),
    # -- security (docs/security.md) ------------------------------------------------------------------
    K("sasl.enabled.mechanisms", LS, ["GSSAPI"], M, "SASL mechanisms enabled in the server."),
    K("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", M, "SASL mechanism used between brokers."),
    K("sasl.jaas.config", P, None, M, "JAAS login context for SASL connections (one login module; PLAIN's "
      "users are its user_<name>=\"<password>\" options). listener.name.<l>.<mechanism>.sasl.jaas.config "
      "overrides it per listener and mechanism."),
    K("sasl.server.max.receive.size", I, 524288, L, "Largest SASL frame accepted before authentication.",
      Range(1)),
    K("sasl.oauthbearer.sub.claim.name", S, "sub", L, "OAUTHBEARER: claim naming the principal (the JAAS "
      "option unsecuredValidatorPrincipalClaimName wins)."),
    K("sasl.oauthbearer.scope.claim.name", S, "scope", L, "OAUTHBEARER: claim holding the scopes (the JAAS "
      "option unsecuredValidatorScopeClaimName wins)."),
    K("sasl.oauthbearer.clock.skew.seconds", I, 30, L, "OAUTHBEARER: allowable clock skew for exp and iat (the "
      "JAAS option unsecuredValidatorAllowableClockSkewMs wins).", Range(0)),
    K("kafkapy.oauthbearer.validator", S, None, M, "kafkapy: OAUTHBEARER token validator as module:function, "
      "called with the token and returning a kafkapy.security.sasl.oauthbearer.OAuthBearerToken (or the "
      "principal name); unset: Kafka's unsecured JWS validator."),
    K("ssl.protocol", S, "TLSv1.3", M, "TLS protocol used to create the SSLContext."),
    K("ssl.enabled.protocols", LS, ["TLSv1.2", "TLSv1.3"], M, "TLS protocols enabled for connections."),
    K("ssl.keystore.type", S, "JKS", M, "Format of the key store file."),
    K("ssl.keystore.location", S, None, M, "Location of the key store file."),
    K("ssl.keystore.password", P, None, M, "Password of the key store file."),
    K("ssl.key.password", P, None, M, "Password of the private key."),
    K("ssl.truststore.type", S, "JKS", M, "Format of the trust store file."),
    K("ssl.truststore.location", S, None, M, "Location of the trust store file."),
    K("ssl.truststore.password", P, None, M, "Password of the trust store file."),
    K("ssl.client.auth", S, "none", M, "Whether the server asks for client certificates.",
      OneOf(("required", "requested", "none"))),
    K("ssl.endpoint.identification.algorithm", S, "https", L, "Host name verification algorithm."),
    K("ssl.cipher.suites", LS, [], M, "Enabled cipher suites (Java or OpenSSL names; TLS 1.2 and older)."),
    K("ssl.keystore.certificate.chain", P, None, H, "Certificate chain in PEM, for ssl.keystore.type=PEM."),
    K("ssl.keystore.key", P, None, H, "Private key in PEM (PKCS#8, encrypted with ssl.key.password if set), for "
      "ssl.keystore.type=PEM."),
    K("ssl.truststore.certificates", P, None, H, "Trusted certificates in PEM, for ssl.truststore.type=PEM."),
    K("ssl.principal.mapping.rules", S, "DEFAULT", L, "Rules mapping a client certificate's subject DN to a "
      "principal name: RULE:pattern/replacement/[LU], DEFAULT."),
    K("ssl.keymanager.algorithm", S, "SunX509", L, "Key manager algorithm (Java only; accepted)."),
    K("ssl.trustmanager.algorithm", S, "PKIX", L, "Trust manager algorithm (Java only; accepted)."),
    K("connections.max.reauth.ms", LG, 0, M, "Maximum session lifetime before SASL re-authentication."),
    K("principal.builder.class", C, "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
      M, "Class building the principal of a connection."),
    # -- kafkapy extensions ----------------------------------------------------------------------------------
    K("kafkapy.cluster.id", S, None, M, "kafkapy: cluster id to format new storage with; must match the "
      "stored one afterwards. Generated when unset."),
    K("kafkapy.log.fsync.on.ack", B, False, M, "kafkapy: fsync the log before acknowledging a produce "
      "request (acks != 0); topics can override it."),
    K("kafkapy.log.dir.space.check.interval.ms", LG, 5000, L, "kafkapy: how often a log dir that filled up "
      "(ENOSPC) is probed for free space; it takes writes again once a probe write and fsync succeed "
      "(docs/operations.md, log directory failures)."),
    K("kafkapy.control.listener", S, None, L, "kafkapy: loopback host:port (port 0: a free one) of the fault "
      "injection control endpoint, HTTP+JSON for tests (docs/testing.md); off when unset."),
    K("kafkapy.metrics.listener", S, None, L, "kafkapy: http://host:port of the Prometheus endpoint (GET "
      "/metrics, docs/operations.md); off when unset.", _http_listener),
    K("kafkapy.console.listener", S, None, L, "kafkapy: http://host:port of the built-in web console "
      "(docs/console.md); off when unset.", _http_listener),
    K("kafkapy.console.writes.enable", B, False, L, "kafkapy: allow the web console's write actions "
      "(offset reset); read-only when false."),
    K("kafkapy.schema.registry.listener", S, None, L, "kafkapy: http://host:port (or https://, with the broker's "
      "ssl.* key store) of the built-in schema registry (Confluent's REST API; docs/schema-registry.md); off "
      "when unset.", _registry_listener),
    K("kafkapy.schema.registry.topic", S, "_schemas", L, "kafkapy: the compacted topic the schema registry keeps "
      "its schemas in (Confluent's kafkastore.topic)."),
    K("kafkapy.schema.registry.topic.replication.factor", I, 3, L, "kafkapy: replicas of the schema registry's "
      "topic in a cluster (Confluent's kafkastore.topic.replication.factor; capped by the brokers there are; "
      "a single node has 1)."),
    K("kafkapy.schema.registry.authentication", S, "none", L, "kafkapy: 'basic' asks HTTP basic auth of the "
      "schema registry's clients, with the broker's PLAIN and SCRAM users; its ACLs on the registry's topic "
      "decide what they may do (docs/schema-registry.md).", _registry_authentication),
    K("kafkapy.schema.registry.group.id", S, "schema-registry", L, "kafkapy: the Kafka group through which the "
      "brokers' schema registries elect the one that writes (Confluent's schema.registry.group.id)."),
    K("kafkapy.iceberg.catalog.uri", S, None, M, "kafkapy: the Iceberg catalog of the topics' tables "
      "(kafkapy.iceberg.mode, docs/tables.md): sqlite:/// or postgresql:// (pyiceberg's SQL catalog) or "
      "http(s):// (a REST catalog); unset: sqlite:///<first log dir>/iceberg/catalog.db.", _iceberg_catalog_uri),
    K("kafkapy.iceberg.warehouse", S, None, M, "kafkapy: where the tables' data and metadata files go: a path, "
      "file:// or s3:// URI; unset: <first log dir>/iceberg/warehouse."),
    K("kafkapy.iceberg.commit.interval.ms", LG, 60000, M, "kafkapy: how often a table-enabled topic's new "
      "records are committed to its table at least (the table's target lag).", Range(1)),
    K("kafkapy.iceberg.translation.max.bytes", LG, 64 * 1024 * 1024, L, "kafkapy: bytes of translated, "
      "uncommitted records a broker buffers for its tables; reaching it commits early.", Range(1024)),
)


def broker_synonym_group(name: str) -> list[str]:
    """Broker configs that set the same value (Kafka's DynamicBrokerConfig.brokerConfigSynonyms)."""
    for group in (["log.roll.ms", "log.roll.hours"], ["log.roll.jitter.ms", "log.roll.jitter.hours"],
                  ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]):
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    return [name]
