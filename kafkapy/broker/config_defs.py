"""The one typed table of broker and topic configs (Kafka 3.9 names, types, defaults, validators, docs).

Parsing server.properties, DescribeConfigs, topic-config validation and LogConfig properties all read
from `BROKER_CONFIGS` and `TOPIC_CONFIGS`. Values are parsed and printed the way Kafka's ConfigDef does
(`parse_value`, `format_value`), so error messages and DescribeConfigs strings match Kafka's.
"""
from __future__ import annotations

from ..metadata.errors import ConfigError
from .config_defs_groups import GROUP_CONFIGS
from .config_defs_log import LOG_CONFIGS
from .config_defs_security import SECURITY_CONFIGS
from .config_defs_server import SERVER_CONFIGS
from .config_defs_topic import COMPRESSION_TYPES, ICEBERG_MODES, TOPIC_CONFIGS
from .config_values import (
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    BrokerSynonym,
    ConfigDef,
    ConfigType,
    EachOneOf,
    GzipLevel,
    Importance,
    MetadataVersion,
    NonNull,
    OneOf,
    Password,
    Range,
    SuperUsers,
    ThrottledReplicas,
    Validator,
    _table,
    format_value,
    java_double_str,
    java_trim,
    parse_value,
)

__all__ = [
    "BROKER_CONFIGS", "TOPIC_CONFIGS", "BrokerSynonym", "ConfigDef", "ConfigType", "Importance", "Password",
    "broker_synonym_group", "format_value", "parse_value",
]
# also importable from here, as before the table was split by concern
__all__ += ["COMPRESSION_TYPES", "DOUBLE_MAX", "ICEBERG_MODES", "INT_MAX", "LONG_MAX", "ConfigError", "EachOneOf",
            "GzipLevel", "MetadataVersion", "NonNull", "OneOf", "Range", "SuperUsers", "ThrottledReplicas",
            "Validator", "java_double_str", "java_trim"]

# in the order of Kafka's documentation: server, logs and replication, groups and transactions, security
BROKER_CONFIGS: dict[str, ConfigDef] = _table(*SERVER_CONFIGS, *LOG_CONFIGS, *GROUP_CONFIGS, *SECURITY_CONFIGS)


def broker_synonym_group(name: str) -> list[str]:
    """Broker configs that set the same value (Kafka's DynamicBrokerConfig.brokerConfigSynonyms)."""
    for group in (["log.roll.ms", "log.roll.hours"], ["log.roll.jitter.ms", "log.roll.jitter.hours"],
                  ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]):
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    return [name]
