"""DescribeConfigs entries of topics and brokers, with Kafka's sources and synonyms."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .broker_config import BrokerConfig, _topic_value
from .config_defs import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigType, broker_synonym_group, format_value
from .config_entries import ConfigEntry, ConfigSource, ConfigSynonym


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
