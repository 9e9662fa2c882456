"""Config writes: topic config validation (CreateTopics, AlterConfigs), the AlterConfigs and
IncrementalAlterConfigs operations on topic and broker configs, and the metadata store opened
with those checks."""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ..metadata.errors import ConfigError, InvalidRequestError, UnknownTopicOrPartitionError
from .broker_config import BrokerConfig
from .config_defs import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigType

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore

# the logger of kafkapy.broker.config, which this module was part of (log settings name it)
log = logging.getLogger("kafkapy.broker.config")


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
