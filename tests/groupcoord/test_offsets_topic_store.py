"""The coordinator's records through a real PartitionLog: append, roll segments, reopen, load."""
from __future__ import annotations

from kafkapy.groupcoord import GroupCoordinator, GroupCoordinatorConfig, OffsetAndMetadata, OffsetsTopicStore
from kafkapy.log.config import LogConfig
from kafkapy.log.partition_log import PartitionLog

from .fakes import ManualScheduler


def make(tmp_path, sched):
    config = LogConfig(segment_bytes=2048)
    logs = {}

    def log_for(partition):
        if partition not in logs:
            logs[partition] = PartitionLog.open(tmp_path / f"__consumer_offsets-{partition}", config)
        return logs[partition]

    coord = GroupCoordinator(GroupCoordinatorConfig(offsets_topic_num_partitions=1), OffsetsTopicStore(log_for),
                             clock_ms=sched.clock_ms)
    coord.start(sched)
    coord.on_elected(0)
    return coord, logs


def test_offsets_survive_reopening_a_multi_segment_log(tmp_path):
    sched = ManualScheduler()
    coord, logs = make(tmp_path, sched)
    for i in range(300):
        result = coord.commit_offsets(f"g{i % 7}", "", None, -1,
                                      {("t", i % 5): OffsetAndMetadata(i, metadata=f"m{i}")})
        assert set(result.values()) == {0}
    coord.delete_groups(["g3"])
    assert len(logs[0].segments) > 3
    coord.close()
    for plog in logs.values():
        plog.close()

    coord2, logs2 = make(tmp_path, sched)
    expected = {}
    for i in range(300):
        expected[(f"g{i % 7}", i % 5)] = (i, f"m{i}")
    for (group, partition), (offset, metadata) in expected.items():
        error, found = coord2.fetch_offsets(group, [("t", partition)])
        committed = found[("t", partition)][0]
        if group == "g3":
            assert committed is None
        else:
            assert (committed.offset, committed.metadata) == (offset, metadata)
    assert coord2.manager.get_group("g3") is None
    coord2.close()
    for plog in logs2.values():
        plog.close()
