"""What each part of the broker is built with instead of the Broker object (typing.Protocol).

Broker (broker.py) is the composition root: it builds every part and is the one object that
satisfies these interfaces; no part imports it. Each Protocol names only what its users read:

- `HandlerServices`: the handler-facing bundle a RequestContext carries (ctx.partitions,
  ctx.replicas, ctx.metadata, ...: dispatch.RequestContext's typed accessors read it), like
  Redpanda's request_context. The lazily built coordinators stay lazy behind it.
- `Membership`: what ClusterOfOne (cluster_of_one.py) and ClusterMember (cluster_member.py) share,
  the broker's view of the cluster whatever the mode. Both are built with plain values (the
  config, the advertised address and endpoints, the data dir; a cluster member with a
  `registered(broker_epoch)` callback) before the parts that need their metadata store, and get
  those parts with `attach` once they exist (the fetch session cache as a callable: it is built on
  the first Fetch). ProducerIdBlocks is built by ClusterMember with the config, node id, metadata
  store, controller object and the broker epoch (a callable).

A KafkaConnection (connection.py) is made with a ConnectionServices, built once per broker: the
HandlerServices bundle, the open connections, the memory pool and the connection quotas.

The handler bundle is the one part the Broker object itself satisfies, by design: the composition
root is what every request may reach (ConnectionServices.handlers is the Broker). The group and
transaction coordination (CoordinationHost, TransactionCoordinationHost) are built lazily from that
bundle's accessors and read it the same way. Every other part is built with its collaborators:
the membership (above), the partition and replica managers, the share coordination, the fault
injector (faults.py: config, logs, topic_by_id, node id, advertised address, cluster id,
serving()), the services above the broker (node.py).

This module imports nothing of the broker's own modules at run time, and under TYPE_CHECKING only
modules that do not import it (scripts/check_import_cycles.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Sequence

    from ..log.manager import LogManager
    from ..metadata.store import BrokerInfo, MetadataStore, TopicMetadata
    from ..metrics import BrokerMetrics
    from ..replication.purgatory import Purgatory
    from ..replication.replica_manager import ReplicaManager
    from ..security.quota_tracker import ClientQuotaTracker
    from .config import BrokerConfig
    from .fetch_sessions import FetchSessionCache


class Membership(Protocol):
    """The broker's membership of its cluster: a cluster of one or a ZooKeeper cluster member."""

    mode: str
    metadata: MetadataStore
    controller: Any  # the KafkaController in a ZooKeeper cluster, else None
    controller_epoch_seen: int

    def attach(self, *, logs: LogManager, partitions: Any, replicas: ReplicaManager,
               fetch_sessions: Callable[[], FetchSessionCache]) -> None: ...

    async def topic_names(self) -> list[str]: ...

    async def start(self, host: str, port: int) -> None: ...

    async def controlled_shutdown(self) -> None: ...

    async def stop(self) -> None: ...

    def producer_ids(self) -> Any: ...

    def brokers_for(self, listener_name: str | None) -> list[BrokerInfo]: ...

    def log_dir_changed(self, path: Any, status: str) -> None: ...

    def host_loaded_partitions(self, partitions: Any) -> None: ...

    def topic_created(self, partitions: Any, meta: TopicMetadata) -> None: ...

    def partitions_created(self, partitions: Any, meta: TopicMetadata) -> None: ...

    def topic_deleted(self, partitions: Any, meta: TopicMetadata) -> None: ...

    def is_active_controller(self) -> bool: ...

    async def elect_leaders(self, wanted: Sequence[tuple[str, Sequence[int]]] | None, unclean: bool,
                            timeout_ms: int) -> Any: ...

    async def alter_partition_reassignments(self, targets: Any, allow_replication_factor_change: bool = True
                                            ) -> Any: ...

    async def list_partition_reassignments(self, wanted: Any) -> Any: ...


class HandlerServices(Protocol):
    """The handler-facing bundle: everything a request handler may reach, by typed accessor.
    RequestContext carries it (one per broker, shared by every request)."""

    config: BrokerConfig
    node_id: int
    broker_epoch: int
    log_dirs: list[str]
    advertised_host: str
    advertised_port: int
    advertised_versions: dict[int, tuple[int, int]]
    partitions: Any  # partitions.PartitionManager
    replicas: ReplicaManager
    metadata: MetadataStore
    cluster: Membership
    logs: LogManager
    purgatory: Purgatory
    metrics: BrokerMetrics
    client_quotas: ClientQuotaTracker
    client_telemetry: Any  # metrics.client_telemetry.ClientTelemetry, when something shows it
    faults: Any  # faults.FaultInjector, when a launcher turned fault injection on
    authorizer: Any  # security.authorizer's, None without authorizer.class.name
    producer_ids: Any
    fatal_error: asyncio.Event

    @property
    def cluster_id(self) -> str: ...

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...

    @property
    def group_coordination(self) -> Any: ...

    @property
    def group_coordinator(self) -> Any: ...

    @property
    def loaded_group_coordinator(self) -> Any: ...

    @property
    def transaction_coordination(self) -> Any: ...

    @property
    def transaction_coordinator(self) -> Any: ...

    @property
    def share_coordination(self) -> Any: ...

    @property
    def share_groups(self) -> Any: ...

    @property
    def loaded_share_groups(self) -> Any: ...

    def brokers_for(self, listener_name: str | None) -> list[BrokerInfo]: ...

    def readvertise(self) -> None: ...

    def serving(self) -> bool: ...
