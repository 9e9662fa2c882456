"""What the tables service reads of its broker (`TablesHost`), a typing.Protocol the composition
root (node.py) hands the Broker as. Annotations only: importing this module loads nothing else."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..broker.broker_config import BrokerConfig
    from ..broker.interfaces import Membership
    from ..metadata.store import MetadataStore
    from ..replication.interfaces import Wakeups
    from ..replication.replica_manager import ReplicaManager
    from ..schemaregistry import SchemaRegistryService

__all__ = ["TablesHost"]


class TablesHost(Protocol):
    """The broker as the tables service (service.py) and its registry schemas (registry_schemas.py)
    read it: the config and log dirs (the catalog settings, the status file), the node id, the
    metadata (topic modes and their changes), the replica manager (the partitions led here, their
    leadership changes), the purgatory (a partition's reader waits for appends) and the broker's
    schema registry (None unless kafkapy.schema.registry.listener is on). Without that registry,
    the tables tail `_schemas` with a KafkaStore of their own, which reads the node id, config,
    metadata (broker endpoints) and the membership's `mode` (`cluster`)."""

    node_id: int
    config: BrokerConfig
    log_dirs: list[str]
    metadata: MetadataStore
    replicas: ReplicaManager
    purgatory: Wakeups
    cluster: Membership
    schema_registry: SchemaRegistryService | None
