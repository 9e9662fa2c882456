"""The config tables' defaults pass their own validators: checked here rather than at every import of
config_defs, which the broker's start-up reads."""
from __future__ import annotations

import pytest

from kafkapy.broker.config_defs import BROKER_CONFIGS, TOPIC_CONFIGS


@pytest.mark.parametrize("table", [TOPIC_CONFIGS, BROKER_CONFIGS], ids=["topic", "broker"])
def test_every_default_satisfies_its_validator(table):
    checked = 0
    for definition in table.values():
        if definition.default is not None and definition.validator is not None:
            definition.validator(definition.name, definition.default)
            checked += 1
    assert checked > 10
