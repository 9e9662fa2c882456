"""__share_group_state as the share coordinator keeps it (state_store.py): snapshots, updates laid
over them, a snapshot every N updates, many writes in one append, and state written by earlier
kafkapy versions (a ShareSnapshot per write) still loading after a restart."""
from __future__ import annotations

import uuid

from kafkapy.groupcoord import OffsetsTopicStore
from kafkapy.groupcoord.share.state_records import SNAPSHOT, UPDATE, ShareState, decode_key, encode_key, \
    encode_value
from kafkapy.groupcoord.share.state_store import ShareStateStore
from kafkapy.log import PartitionLog

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


class _Logs:
    """One-partition __share_group_state on disk, reopened like a restarted broker would."""

    def __init__(self, path) -> None:
        self.path = path
        self.plog = PartitionLog.open(path / "__share_group_state-0")

    def store(self, per_snapshot: int = 500) -> ShareStateStore:
        return ShareStateStore(OffsetsTopicStore(lambda p: self.plog, topic="__share_group_state"), 1,
                               lambda p: 0, per_snapshot)

    def restart(self) -> ShareStateStore:
        self.plog.close()
        self.plog = PartitionLog.open(self.path / "__share_group_state-0")
        return self.store()

    def kinds(self) -> list[int]:
        store = OffsetsTopicStore(lambda p: self.plog, topic="__share_group_state")
        return [decode_key(key)[0] for key, _ in store.read(0)]

    def batches(self) -> int:
        store = OffsetsTopicStore(lambda p: self.plog, topic="__share_group_state")
        return sum(1 for header, _ in store.read_batches(0) if not header.is_control)


def test_a_snapshot_followed_by_updates_loads(tmp_path):
    """What earlier kafkapy wrote (a ShareSnapshot per write), then ShareUpdate records (Kafka's
    record type 1) laid over it in order, read back after a restart."""
    logs = _Logs(tmp_path)
    raw = OffsetsTopicStore(lambda p: logs.plog, topic="__share_group_state")
    snap_key, update_key = encode_key(SNAPSHOT, "g", TOPIC_ID, 0), encode_key(UPDATE, "g", TOPIC_ID, 0)
    raw.append(0, [(snap_key, encode_value(SNAPSHOT, ShareState(0, [(0, 9, 0, 1)], 0, 0, 3)))])
    raw.append(0, [(snap_key, encode_value(SNAPSHOT, ShareState(2, [(2, 4, 0, 1), (5, 9, 2, 1)], 1, 2, 3)))])
    raw.append(0, [(update_key, encode_value(UPDATE, ShareState(2, [(2, 3, 2, 1), (10, 14, 0, 1)], 1, 0, 4)))])
    raw.append(0, [(update_key, encode_value(UPDATE, ShareState(4, [(4, 4, 0, 2)], 1, 0, -1)))])
    state = logs.restart().read("g", TOPIC_ID, 0)
    assert state.start_offset == 4
    assert state.batches == [(4, 4, 0, 2), (5, 9, 2, 1), (10, 14, 0, 1)]
    assert (state.state_epoch, state.snapshot_epoch, state.leader_epoch) == (2, 1, 4)
    logs.plog.close()


def test_writes_are_updates_with_a_snapshot_every_n(tmp_path):
    logs = _Logs(tmp_path)
    store = logs.store(per_snapshot=3)
    store.write("g", TOPIC_ID, 0, ShareState(0, [(0, 4, 0, 1)]))            # nothing stored yet: a snapshot
    for i in range(5):
        store.write("g", TOPIC_ID, 0, ShareState(i + 1, [(i, i, 2, 1), (5 + i, 5 + i, 0, 1)]))
    assert logs.kinds() == [SNAPSHOT, UPDATE, UPDATE, UPDATE, SNAPSHOT, UPDATE]
    want = store.read("g", TOPIC_ID, 0)
    assert (want.start_offset, want.batches) == (5, [(5, 9, 0, 1)])
    assert want.snapshot_epoch == 1
    loaded = logs.restart().read("g", TOPIC_ID, 0)
    assert (loaded.start_offset, loaded.batches, loaded.snapshot_epoch) == (5, [(5, 9, 0, 1)], 1)
    logs.plog.close()


def test_a_newer_state_epoch_replaces_the_state(tmp_path):
    logs = _Logs(tmp_path)
    store = logs.store()
    store.write("g", TOPIC_ID, 0, ShareState(0, [(0, 9, 0, 1)]))
    store.write("g", TOPIC_ID, 0, ShareState(3, [], state_epoch=1))      # AlterShareGroupOffsets
    assert logs.kinds() == [SNAPSHOT, SNAPSHOT]
    state = logs.restart().read("g", TOPIC_ID, 0)
    assert (state.start_offset, state.batches, state.state_epoch) == (3, [], 1)
    logs.plog.close()


def test_many_writes_go_in_one_append(tmp_path):
    logs = _Logs(tmp_path)
    store = logs.store()
    store.write_many([("g", TOPIC_ID, p, ShareState(0, [(0, 0, 0, 1)]), False) for p in range(8)]
                     + [("g", TOPIC_ID, 0, ShareState(0, [(1, 1, 0, 1)]), False)])
    assert logs.batches() == 1
    assert logs.kinds() == [SNAPSHOT] * 8 + [UPDATE]
    reloaded = logs.restart()
    assert reloaded.read("g", TOPIC_ID, 0).batches == [(0, 1, 0, 1)]
    assert all(reloaded.read("g", TOPIC_ID, p).batches == [(0, 0, 0, 1)] for p in range(1, 8))
    logs.plog.close()


def test_compaction_keeping_the_latest_snapshot_and_update_loses_nothing(tmp_path):
    """__share_group_state is compacted: only the latest record of each key survives (the latest
    ShareSnapshot and the latest ShareUpdate of a share-partition). Each update carries every
    change since the snapshot, so what survives still loads as the whole state."""
    logs = _Logs(tmp_path)
    store = logs.store(per_snapshot=4)
    writes = [ShareState(0, [(0, 9, 0, 1)]), ShareState(0, [(0, 1, 2, 1)]), ShareState(0, [(5, 6, 4, 1)]),
              ShareState(2, [(2, 2, 2, 1), (10, 14, 0, 1)]), ShareState(3, [(8, 8, 2, 1)]),
              ShareState(3, [(3, 3, 0, 2)]), ShareState(3, [(15, 15, 0, 1)])]
    for n, state in enumerate(writes, 1):
        store.write("g", TOPIC_ID, 0, state)
        whole = store.read("g", TOPIC_ID, 0)
        raw = OffsetsTopicStore(lambda p: logs.plog, topic="__share_group_state")
        records = list(raw.read(0))
        latest = {key: i for i, (key, _) in enumerate(records)}
        compacted = _Logs(tmp_path / f"compacted-{n}")
        OffsetsTopicStore(lambda p: compacted.plog, topic="__share_group_state").append(
            0, [records[i] for i in sorted(latest.values())])
        loaded = compacted.restart().read("g", TOPIC_ID, 0)
        assert (loaded.start_offset, loaded.batches) == (whole.start_offset, whole.batches), n
        compacted.plog.close()
    assert logs.kinds() == [SNAPSHOT, UPDATE, UPDATE, UPDATE, UPDATE, SNAPSHOT, UPDATE]
    logs.plog.close()
