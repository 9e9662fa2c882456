"""ListOffsets v0's offset selection (Kafka's UnifiedLog.legacyFetchOffsetsBefore) on a stand-in log.

The wire behaviour is tested in conformance/test_old_versions.py.
"""
from __future__ import annotations

import os

from kafkapy.broker.handlers.list_offsets import EARLIEST, LATEST, legacy_offsets_before


class _Segment:
    def __init__(self, base_offset: int, size: int, path: str):
        self.base_offset = base_offset
        self.size = size
        self._path = path

    def path(self, suffix: str) -> str:
        return self._path


class _Log:
    def __init__(self, segments, log_start_offset: int, log_end_offset: int):
        self.segments = segments
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


def test_legacy_offsets_before(tmp_path):
    files = []
    for i, mtime in enumerate((1000, 2000, 3000)):
        f = tmp_path / f"{i}.log"
        f.write_bytes(b"x")
        os.utime(f, (mtime, mtime))
        files.append(str(f))
    log = _Log([_Segment(0, 10, files[0]), _Segment(10, 10, files[1]), _Segment(20, 10, files[2])],
               log_start_offset=5, log_end_offset=25)
    now = 10_000_000
    # newest first; the first segment's base is raised to the log start offset
    assert legacy_offsets_before(log, LATEST, 10, now) == [25, 20, 10, 5]
    assert legacy_offsets_before(log, LATEST, 2, now) == [25, 20]
    assert legacy_offsets_before(log, EARLIEST, 10, now) == [5]
    # by time: the newest candidate modified at or before the timestamp, then older ones
    assert legacy_offsets_before(log, 2_500_000, 10, now) == [10, 5]
    assert legacy_offsets_before(log, 1_500_000, 10, now) == [5]
    assert legacy_offsets_before(log, 999_999, 10, now) == []
    assert legacy_offsets_before(log, now, 1, now) == [25]
    assert legacy_offsets_before(log, LATEST, 0, now) == []
    # an empty active segment adds no log end entry
    log.segments[-1].size = 0
    assert legacy_offsets_before(log, LATEST, 10, now) == [20, 10, 5]
    # a segment file that is gone (memory storage) is dated now
    log.segments[0]._path = str(tmp_path / "missing.log")
    assert legacy_offsets_before(log, 1_500_000, 10, now) == []
