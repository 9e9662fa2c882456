"""What the replication layer receives from the broker (the composition root) and what it offers
the controller's requests: typing.Protocol interfaces, so that nothing here reaches through a
Broker object. Annotations only: importing this module costs nothing at start-up."""
from __future__ import annotations

from typing import TYPE_CHECKING, Hashable, Iterable, Protocol

if TYPE_CHECKING:
    import uuid

    from ..log.partition_log import PartitionLog
    from .partition import Partition

__all__ = ["LocalBroker", "LogLookup", "ReplicaHost", "Wakeups"]


class LogLookup(Protocol):
    """Opening, finding and removing partition logs (broker/partitions.py PartitionManager)."""

    def get_log(self, topic: str, partition: int) -> PartitionLog | None: ...

    def open_log(self, topic: str, partition: int) -> PartitionLog: ...

    def remove_log(self, topic: str, partition: int, delete: bool) -> None: ...


class Wakeups(Protocol):
    """The purgatory (purgatory.py): waiters parked on keys, woken when a key is notified."""

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float) -> bool: ...

    def notify(self, key: Hashable) -> None: ...


class ReplicaHost(Protocol):
    """The ReplicaManager as control_requests.py (LeaderAndIsr, StopReplica) changes it."""

    node_id: int
    logs: LogLookup

    @property
    def fetchers(self): ...

    def partition(self, topic: str, partition: int) -> Partition | None: ...

    def new_partition(self, topic: str, index: int, plog: PartitionLog,
                      topic_id: uuid.UUID | None) -> Partition: ...

    def remember_topic_id(self, topic_id: uuid.UUID, topic: str) -> None: ...

    def forget_partition(self, topic: str, index: int) -> None: ...

    def is_live(self, node_id: int) -> bool: ...

    def high_watermark_changed(self, topic: str, partition: int) -> None: ...

    def tell_listeners(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None: ...

    def control_request_applied(self) -> None: ...


class LocalBroker(Protocol):
    """What the follower fetchers and the AlterPartition channel need of this broker (the
    ReplicaManager gives it): who we are, the config, the metadata cache, our broker epoch."""

    node_id: int
    config: object      # the broker config: `get(name)`
    metadata: object    # the metadata cache: broker_endpoint, controller_id, is_live, get_topic

    @property
    def broker_epoch(self) -> int: ...
