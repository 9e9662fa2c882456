"""The registry schemas the tables worker needs (value_schema_id_prefix mode), read in the broker
process: from the broker's schema registry when kafkapy.schema.registry.listener is on, otherwise from
a registry of the tables' own that tails the `_schemas` topic (kafkapy/schemaregistry/store.py)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .host import TablesHost

log = logging.getLogger(__name__)

_own = {}  # broker id() -> (Registry, KafkaStore) tailing _schemas for a broker without the registry on


async def _registry_and_store(broker: TablesHost):
    service = broker.schema_registry
    if service is not None:
        await service.ready()
        return service.registry, service.store
    found = _own.get(id(broker))
    if found is None:
        from ..schemaregistry.registry import Registry
        from ..schemaregistry.store import KafkaStore

        registry = Registry()
        store = KafkaStore(broker, registry.apply, topic=broker.config.get("kafkapy.schema.registry.topic"),
                           replication_factor=broker.config.get("kafkapy.schema.registry.topic.replication.factor"))
        await store.start()
        found = _own[id(broker)] = (registry, store)
    return found


async def stop_own_registry(broker: TablesHost) -> None:
    found = _own.pop(id(broker), None)
    if found is not None:
        await found[1].stop()


def _schema_text(registry, content):
    from .values import SchemaText

    resolved: list[tuple[str, str, str]] = []
    registry._resolve_references(content.references, resolved, set(), [], 0)
    return SchemaText(content.schema_type, content.text, {name: text for name, _, text in resolved})


async def lookup_schemas(broker: TablesHost, ids: list[int]) -> dict:
    """id -> SchemaText for `ids`; None for an id the registry does not know once it has read
    `_schemas` to its end."""
    registry, store = await _registry_and_store(broker)
    if any(i not in registry.schemas for i in ids):
        try:
            await store.sync()
        except Exception as exc:
            log.warning("tables: cannot catch up with the schemas topic: %s", exc)
    out = {}
    for schema_id in ids:
        content = registry.schemas.get(schema_id)
        try:
            out[schema_id] = None if content is None else _schema_text(registry, content)
        except Exception as exc:  # a reference that no longer resolves: the records become dead letters
            log.warning("tables: schema %d cannot be resolved: %s", schema_id, exc)
            out[schema_id] = None
    return out
