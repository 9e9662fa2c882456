"""DescribeConfigs data: the source ids and entries, with synonyms, that describe a config."""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from .config_defs import ConfigType


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
