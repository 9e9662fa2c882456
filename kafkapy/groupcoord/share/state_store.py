"""__share_group_state: where share-partition state survives a restart (Kafka's share coordinator).

Each share-partition (group, topic id, partition) has a key whose partition of
__share_group_state is Kafka's: abs(hashCode("group:topicId:partition")) % partitions. Its
state is written as a ShareSnapshot record (state_records.py) appended to that partition, and
read back by scanning the partition the first time a share-partition is created after a start
or a leadership change (the scan is cached per partition and leader epoch).

The share-partition leader writes the snapshot itself when the __share_group_state partition is
led by the same broker (always on a single node), else it sends ReadShareGroupState /
WriteShareGroupState to that partition's leader, the share coordinator, as Kafka's leader does
(broker/handlers/share_groups.py).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from ..offsets_topic import OffsetsTopicStore, partition_for
from .state_records import SNAPSHOT, UPDATE, ShareState, StateRecordError, apply_update, decode_key, decode_value, \
    encode_key, encode_value

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey()."""
    return f"{group_id}:{topic_id}:{partition}"


class ShareStateStore:
    """Reads and writes share-partition state in the local partitions of __share_group_state."""

    def __init__(self, store: OffsetsTopicStore, num_partitions: int,
                 local_epoch: Callable[[int], int | None]) -> None:
        self._store = store
        self.num_partitions = num_partitions
        # the leader epoch of a state partition led here, None when it is not led here
        self._local_epoch = local_epoch
        self._cache: dict[int, tuple[int, dict[tuple[str, uuid.UUID, int], ShareState]]] = {}

    def partition_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(coordinator_key(group_id, topic_id, partition), self.num_partitions)

    def _states(self, state_partition: int) -> dict | None:
        epoch = self._local_epoch(state_partition)
        if epoch is None:
            return None
        cached = self._cache.get(state_partition)
        if cached is not None and cached[0] == epoch:
            return cached[1]
        states: dict = {}
        for key, value in self._store.read(state_partition):
            try:
                kind, group_id, topic_id, partition = decode_key(key)
                if kind not in (SNAPSHOT, UPDATE):
                    continue
                k = (group_id, topic_id, partition)
                if value is None:  # a tombstone: the share-partition's state was deleted
                    states.pop(k, None)
                    continue
                state = decode_value(kind, value)
            except StateRecordError as exc:
                log.warning("%s-%d: unreadable record skipped: %s", SHARE_STATE_TOPIC, state_partition, exc)
                continue
            states[k] = state if kind == SNAPSHOT else apply_update(states.get(k), state)
        self._cache[state_partition] = (epoch, states)
        return states

    def is_local(self, state_partition: int) -> bool:
        return self._local_epoch(state_partition) is not None

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareState | None:
        """The stored state of a share-partition (None: none stored, or not led here)."""
        states = self._states(self.partition_of(group_id, topic_id, partition))
        return None if states is None else states.get((group_id, topic_id, partition))

    def local_keys(self) -> list[tuple[str, uuid.UUID, int]]:
        """The share-partitions (group, topic id, partition) with state in the partitions led here."""
        keys = []
        for state_partition in range(self.num_partitions):
            states = self._states(state_partition)
            if states:
                keys.extend(k for k, state in states.items() if state.start_offset >= 0)
        return keys

    def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: ShareState) -> int | None:
        """Append a ShareSnapshot of the share-partition; the state partition written (the
        caller waits for it to be durable), or None when it is not led here."""
        state_partition = self.partition_of(group_id, topic_id, partition)
        states = self._states(state_partition)
        if states is None:
            return None
        key = (group_id, topic_id, partition)
        previous = states.get(key)
        state.snapshot_epoch = 0 if previous is None else (previous.snapshot_epoch + 1) & 0xFFFF
        self._store.append(state_partition, [(encode_key(SNAPSHOT, group_id, topic_id, partition),
                                              encode_value(SNAPSHOT, state))])
        states[key] = state
        return state_partition
