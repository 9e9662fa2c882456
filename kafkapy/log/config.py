"""Topic-level log configuration with Kafka's property names, types and defaults.

`LOG_CONFIG_DEFS` is the table `LogConfig.from_properties` parses with; the broker's definitions
(DescribeConfigs, the broker-level defaults) are broker/config_defs*.py's.
`CleanerConfig` is the broker's log.cleaner.* settings, here so that the cleaner (cleaner.py) and
the compaction it runs (compaction.py) both read it and compaction.py needs nothing of cleaner.py.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from .errors import InvalidConfigError

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

__all__ = ["LONG_MAX", "CleanerConfig", "ConfigDef", "LOG_CONFIG_DEFS", "LogConfig"]

OFFSET_MAP_ENTRY_BYTES = 24  # Kafka's SkimpyOffsetMap: a 16-byte MD5 of the key + an 8-byte offset


class CleanerConfig(NamedTuple):
    """The broker's log.cleaner.* settings."""

    enable: bool = True
    threads: int = 1
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = float("inf")

    @property
    def max_map_entries(self) -> int:
        per_thread = min(self.dedupe_buffer_size // max(self.threads, 1), 2**31 - 1)
        return max(int(per_thread // OFFSET_MAP_ENTRY_BYTES * self.io_buffer_load_factor), 1)


class ConfigDef(NamedTuple):
    """One topic config: Kafka property name, LogConfig field, type, default, checks, docs."""

    name: str
    field: str
    type: str  # "int" | "long" | "double" | "string" | "boolean" | "list"
    default: Any
    doc: str
    broker_name: str | None = None  # the server.properties name of the broker-wide default
    minimum: int | None = None
    choices: tuple[str, ...] | None = None


LOG_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef("segment.bytes", "segment_bytes", "int", 1073741824,
              "Size at which the active segment is rolled.", "log.segment.bytes", minimum=14),
    ConfigDef("segment.ms", "segment_ms", "long", 604800000,
              "Age (by first batch timestamp) at which the active segment is rolled.",
              "log.roll.ms", minimum=1),
    ConfigDef("segment.jitter.ms", "segment_jitter_ms", "long", 0,
              "Maximum random jitter subtracted from segment.ms.", "log.roll.jitter.ms", minimum=0),
    ConfigDef("segment.index.bytes", "segment_index_bytes", "int", 10485760,
              "Preallocated size of each offset/time index; a full index rolls the segment.",
              "log.index.size.max.bytes", minimum=4),
    ConfigDef("index.interval.bytes", "index_interval_bytes", "int", 4096,
              "Log bytes between two offset index entries.", "log.index.interval.bytes", minimum=0),
    ConfigDef("retention.ms", "retention_ms", "long", 604800000,
              "Segments whose newest timestamp is older than this are deleted; -1 = unlimited.",
              "log.retention.ms", minimum=-1),
    ConfigDef("retention.bytes", "retention_bytes", "long", -1,
              "Old segments are deleted while the partition is larger than this; -1 = unlimited.",
              "log.retention.bytes"),
    ConfigDef("flush.messages", "flush_messages", "long", LONG_MAX,
              "Messages appended between two background fsyncs.", "log.flush.interval.messages",
              minimum=1),
    ConfigDef("flush.ms", "flush_ms", "long", LONG_MAX,
              "Milliseconds between two fsyncs of a dirty log (checked by flush_dirty).",
              "log.flush.interval.ms", minimum=0),
    ConfigDef("message.timestamp.type", "message_timestamp_type", "string", "CreateTime",
              "CreateTime keeps the producer's timestamp; LogAppendTime stamps the broker's clock.",
              "log.message.timestamp.type", choices=("CreateTime", "LogAppendTime")),
    ConfigDef("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", "long",
              LONG_MAX, "Largest allowed age of a CreateTime timestamp.",
              "log.message.timestamp.before.max.ms", minimum=0),
    ConfigDef("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", "long",
              LONG_MAX, "Largest allowed lead of a CreateTime timestamp over the broker clock.",
              "log.message.timestamp.after.max.ms", minimum=0),
    ConfigDef("cleanup.policy", "cleanup_policy", "list", "delete",
              "delete and/or compact (retention applies to delete; the log cleaner to compact).",
              "log.cleanup.policy"),
    ConfigDef("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "double", 0.5,
              "Dirty/total ratio of a compacted log's closed segments above which it is cleaned.",
              "log.cleaner.min.cleanable.ratio"),
    ConfigDef("min.compaction.lag.ms", "min_compaction_lag_ms", "long", 0,
              "Minimum age of a segment's newest record before the cleaner may compact it.",
              "log.cleaner.min.compaction.lag.ms", minimum=0),
    ConfigDef("max.compaction.lag.ms", "max_compaction_lag_ms", "long", LONG_MAX,
              "Age after which a closed segment is compacted whatever the dirty ratio.",
              "log.cleaner.max.compaction.lag.ms", minimum=1),
    ConfigDef("delete.retention.ms", "delete_retention_ms", "long", 86400000,
              "How long tombstones are kept after their segment has been cleaned once.",
              "log.cleaner.delete.retention.ms", minimum=0),
    ConfigDef("file.delete.delay.ms", "file_delete_delay_ms", "long", 60000,
              "Delay between a segment leaving the log and its files being removed.",
              "log.segment.delete.delay.ms", minimum=0),
    ConfigDef("max.message.bytes", "max_message_bytes", "int", 1048588,
              "Largest record batch accepted.", "message.max.bytes", minimum=0),
    ConfigDef("min.insync.replicas", "min_insync_replicas", "int", 1,
              "Replicas that must acknowledge an acks=all produce.", "min.insync.replicas",
              minimum=1),
    ConfigDef("kafkapy.log.fsync.on.ack", "fsync_on_ack", "boolean", False,
              "kafkapy extension: acknowledge produce requests only after their data is fsynced "
              "(group commit).", "kafkapy.log.fsync.on.ack"),
)

_DEFS_BY_NAME = {d.name: d for d in LOG_CONFIG_DEFS}


def _parse(definition: ConfigDef, raw: Any) -> Any:
    try:
        if definition.type in ("int", "long"):
            value = int(str(raw).strip())
            limit = INT_MAX if definition.type == "int" else LONG_MAX
            if value > limit:
                raise ValueError("out of range")
        elif definition.type == "double":
            value = float(str(raw).strip())
            if not 0.0 <= value <= 1.0:
                raise ValueError("must be between 0 and 1")
        elif definition.type == "boolean":
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError("expected true or false")
            value = text == "true"
        elif definition.type == "list":
            value = ",".join(part.strip() for part in str(raw).split(",") if part.strip())
        else:
            value = str(raw).strip()
    except ValueError as exc:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {definition.name}: {exc}")
    if definition.minimum is not None and value < definition.minimum:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {definition.name}: "
            f"Value must be at least {definition.minimum}")
    if definition.choices is not None and value not in definition.choices:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {definition.name}: "
            f"String must be one of: {', '.join(definition.choices)}")
    return value


# LogConfig's fields and their defaults (Kafka's topic-config defaults)
_LOG_CONFIG_DEFAULTS: dict[str, Any] = {
    "segment_bytes": 1073741824,
    "segment_ms": 604800000,
    "segment_jitter_ms": 0,
    "segment_index_bytes": 10485760,
    "index_interval_bytes": 4096,
    "retention_ms": 604800000,
    "retention_bytes": -1,
    "flush_messages": LONG_MAX,
    "flush_ms": LONG_MAX,
    "message_timestamp_type": "CreateTime",
    "message_timestamp_before_max_ms": LONG_MAX,
    "message_timestamp_after_max_ms": LONG_MAX,
    "cleanup_policy": "delete",
    "min_cleanable_dirty_ratio": 0.5,
    "min_compaction_lag_ms": 0,
    "max_compaction_lag_ms": LONG_MAX,
    "delete_retention_ms": 86400000,
    "file_delete_delay_ms": 60000,
    "max_message_bytes": 1048588,
    "min_insync_replicas": 1,
    "fsync_on_ack": False,
}


class LogConfig:
    """Typed per-topic log settings (Kafka topic-config semantics): `LogConfig(retention_ms=...)`,
    the fields and defaults of _LOG_CONFIG_DEFAULTS.

    A plain slotted class rather than a dataclass: the broker builds it at start-up, where a
    dataclass costs about a millisecond to create (docs/benchmarks.md, start-up)."""

    __slots__ = tuple(_LOG_CONFIG_DEFAULTS)
    segment_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    retention_ms: int
    retention_bytes: int
    flush_messages: int
    flush_ms: int
    message_timestamp_type: str
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    cleanup_policy: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    delete_retention_ms: int
    file_delete_delay_ms: int
    max_message_bytes: int
    min_insync_replicas: int
    fsync_on_ack: bool

    def __init__(self, **values: Any):
        unknown = values.keys() - _LOG_CONFIG_DEFAULTS.keys()
        if unknown:
            raise TypeError(f"LogConfig() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
        for name, default in _LOG_CONFIG_DEFAULTS.items():
            setattr(self, name, values.get(name, default))

    def copy(self) -> LogConfig:
        return LogConfig(**{name: getattr(self, name) for name in self.__slots__})

    def __eq__(self, other: object) -> bool:
        if type(other) is not LogConfig:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None  # mutable, as the dataclass it replaces

    def __repr__(self) -> str:
        return "LogConfig(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__) + ")"

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @classmethod
    def from_properties(cls, props: dict[str, str], base: "LogConfig | None" = None) -> "LogConfig":
        """Overlay Kafka topic properties (segment.bytes, retention.ms, ...) on `base`.

        Unknown names are ignored (topic configs of other layers pass through here too).
        message.timestamp.difference.max.ms (deprecated) sets both before/after limits unless
        they are given explicitly, as Kafka 3.6+ does.
        """
        config = base.copy() if base is not None else cls()
        for name, raw in props.items():
            definition = _DEFS_BY_NAME.get(name)
            if definition is not None:
                setattr(config, definition.field, _parse(definition, raw))
        legacy = props.get("message.timestamp.difference.max.ms")
        if legacy is not None:
            legacy_def = ConfigDef("message.timestamp.difference.max.ms", "", "long", LONG_MAX, "",
                                   minimum=0)
            value = _parse(legacy_def, legacy)
            if "message.timestamp.before.max.ms" not in props:
                config.message_timestamp_before_max_ms = value
            if "message.timestamp.after.max.ms" not in props:
                config.message_timestamp_after_max_ms = value
        return config
