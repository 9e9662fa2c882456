"""Broker configuration: server.properties parsing, typed access, dynamic layers, DescribeConfigs.

The names the rest of kafkapy imports, from the module of each concern: config_properties
(.properties syntax), config_listeners (listeners), broker_config (BrokerConfig and its layers),
config_entries and config_describe (DescribeConfigs), config_alter (topic config validation,
AlterConfigs and IncrementalAlterConfigs). The definition table is config_defs.
"""
from __future__ import annotations

from ..metadata.errors import ConfigError
from .broker_config import QUICKSTART_PROPERTIES, BrokerConfig, effective_topic_properties
from .config_alter import (
    AlterConfigOp,
    alter_broker_configs,
    alter_topic_configs,
    apply_config_ops,
    open_metadata_store,
    tables_installed,
    validate_topic_configs,
)
from .config_describe import describe_broker_configs, describe_topic_configs
from .config_entries import ConfigEntry, ConfigSource, ConfigSynonym
from .config_listeners import Listener, parse_listeners
from .config_properties import parse_properties

__all__ = [
    "AlterConfigOp", "BrokerConfig", "ConfigEntry", "ConfigError", "ConfigSource", "ConfigSynonym", "Listener",
    "QUICKSTART_PROPERTIES", "alter_broker_configs", "alter_topic_configs", "apply_config_ops",
    "describe_broker_configs", "describe_topic_configs", "effective_topic_properties", "open_metadata_store",
    "parse_listeners", "parse_properties", "tables_installed", "validate_topic_configs",
]
