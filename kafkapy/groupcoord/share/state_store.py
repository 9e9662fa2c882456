"""__share_group_state: where share-partition state survives a restart (Kafka's share coordinator).

Each share-partition (group, topic id, partition) has a key whose partition of
__share_group_state is Kafka's: abs(hashCode("group:topicId:partition")) % partitions. As
Kafka's share coordinator (ShareCoordinatorShard.generateShareStateRecord), a write carries the
state batches that changed and is laid over the stored state: it is appended as a ShareUpdate
record, or as a whole ShareSnapshot when the share-partition has none yet, when its state is
replaced (a new state epoch) or after `updates_per_snapshot` updates
(share.coordinator.snapshot.update.records.per.snapshot, 500). The records of many writes to one
partition go in one append (write_many).

A ShareUpdate record carries every change since the share-partition's last snapshot (the updates
since then laid over each other, nothing before the start offset: about the in-flight window),
not only the last write's: kafkapy creates __share_group_state compacted, and compaction keeps
only the latest record of each key, i.e. the latest snapshot and the latest update, which then
still add up to the whole state. (Kafka creates the topic with cleanup.policy=delete and no
retention and deletes the records before the oldest snapshot still needed; its updates carry
only the write's batches.) State is read back by scanning the partition the first
time a share-partition is created after a start or a leadership change, each snapshot followed by
its updates (the scan is cached per partition and leader epoch and kept current by the writes).

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
# Kafka's share.coordinator.snapshot.update.records.per.snapshot default
UPDATES_PER_SNAPSHOT = 500


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey()."""
    return f"{group_id}:{topic_id}:{partition}"


class ShareStateStore:
    """Reads and writes share-partition state in the local partitions of __share_group_state."""

    def __init__(self, store: OffsetsTopicStore, num_partitions: int,
                 local_epoch: Callable[[int], int | None], updates_per_snapshot: int = UPDATES_PER_SNAPSHOT) -> None:
        self._store = store
        self.num_partitions = num_partitions
        self.updates_per_snapshot = max(updates_per_snapshot, 1)
        # the leader epoch of a state partition led here, None when it is not led here
        self._local_epoch = local_epoch
        self._cache: dict[int, tuple[int, dict[tuple[str, uuid.UUID, int], ShareState]]] = {}
        # the state partition of each share-partition (a Java string hash, asked several times a write)
        self._partition_of: dict[tuple[str, uuid.UUID, int], int] = {}
        # ShareUpdate records since each share-partition's last ShareSnapshot, and what they add up to
        self._updates: dict[tuple[str, uuid.UUID, int], int] = {}
        self._since_snapshot: dict[tuple[str, uuid.UUID, int], ShareState] = {}

    def partition_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        key = (group_id, topic_id, partition)
        found = self._partition_of.get(key)
        if found is None:
            if len(self._partition_of) > 100_000:
                self._partition_of.clear()
            found = self._partition_of[key] = partition_for(coordinator_key(group_id, topic_id, partition),
                                                            self.num_partitions)
        return found

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
                    self._updates.pop(k, None)
                    self._since_snapshot.pop(k, None)
                    continue
                state = decode_value(kind, value)
            except StateRecordError as exc:
                log.warning("%s-%d: unreadable record skipped: %s", SHARE_STATE_TOPIC, state_partition, exc)
                continue
            if kind == SNAPSHOT:
                states[k] = state
                self._updates[k] = 0
                self._since_snapshot.pop(k, None)
            else:
                states[k] = apply_update(states.get(k), state)
                self._updates[k] = self._updates.get(k, 0) + 1
                self._since_snapshot[k] = apply_update(self._since_snapshot.get(k), state)
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

    def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: ShareState,
              replace: bool = False) -> int | None:
        """Store a write of a share-partition's state (see the module docstring); the state
        partition written (the caller waits for it to be durable), or None when it is not led here."""
        written = self.write_many([(group_id, topic_id, partition, state, replace)])
        return written[0] if written else None

    def write_many(self, writes) -> list[int]:
        """Store writes (group id, topic id, partition, state, replace): `state` holds the batches
        that changed, laid over what is stored, unless `replace` (a new state, InitializeShareGroupState).
        One append per state partition for all of them; the state partitions appended to. Writes of
        partitions not led here are left out (the caller checked is_local)."""
        by_partition: dict[int, list] = {}
        pending: dict[tuple[str, uuid.UUID, int], tuple[ShareState, int]] = {}
        for group_id, topic_id, partition, state, replace in writes:
            state_partition = self.partition_of(group_id, topic_id, partition)
            states = self._states(state_partition)
            if states is None:
                continue
            key = (group_id, topic_id, partition)
            previous, updates, since = pending.get(key) or (states.get(key), self._updates.get(key, 0),
                                                            self._since_snapshot.get(key))
            # a newer state epoch is a new state (Kafka's coordinator writes a snapshot for it too)
            replace = replace or (previous is not None and state.state_epoch > previous.state_epoch)
            if replace or previous is None or updates >= self.updates_per_snapshot:
                merged = state if replace or previous is None else apply_update(previous, state)
                merged.snapshot_epoch = 0 if previous is None else (previous.snapshot_epoch + 1) & 0xFFFF
                merged.state_epoch = state.state_epoch if replace or previous is None else previous.state_epoch
                record = (encode_key(SNAPSHOT, group_id, topic_id, partition), encode_value(SNAPSHOT, merged))
                updates, since = 0, None
            else:
                merged = apply_update(previous, state)
                # the update written carries every change since the snapshot (see the module docstring)
                since = apply_update(since, state)
                since.snapshot_epoch, since.leader_epoch = previous.snapshot_epoch, merged.leader_epoch
                record = (encode_key(UPDATE, group_id, topic_id, partition), encode_value(UPDATE, since))
                updates += 1
            pending[key] = (merged, updates, since)
            by_partition.setdefault(state_partition, []).append((key, record, merged, updates, since))
        for state_partition, planned in by_partition.items():
            self._store.append(state_partition, [record for _, record, _, _, _ in planned])
            states = self._states(state_partition)
            for key, _, merged, updates, since in planned:
                states[key] = merged
                self._updates[key] = updates
                if since is None:
                    self._since_snapshot.pop(key, None)
                else:
                    self._since_snapshot[key] = since
        return list(by_partition)
