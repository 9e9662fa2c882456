"""Transactional offset commits in the group coordinator: pending until the marker, then applied."""
from __future__ import annotations

import pytest

from kafkapy.groupcoord import GroupCoordinator, GroupCoordinatorConfig, OffsetAndMetadata, OffsetsTopicStore
from kafkapy.groupcoord.txn_offsets import PendingTxnOffsets
from kafkapy.log import PartitionLog
from kafkapy.protocol.errors import ErrorCode
from tests.groupcoord.fakes import ManualScheduler

TP = ("orders", 0)
TP1 = ("orders", 1)


class Offsets:
    """A group coordinator over one real __consumer_offsets partition log."""

    def __init__(self, path):
        self.path = path
        self.plog = PartitionLog.open(path / "__consumer_offsets-0")
        self.coord = self._coordinator()

    def _coordinator(self) -> GroupCoordinator:
        coord = GroupCoordinator(GroupCoordinatorConfig(offsets_topic_num_partitions=1),
                                 OffsetsTopicStore(lambda p: self.plog))
        sched = ManualScheduler()
        coord.clock_ms = sched.clock_ms
        coord.start(sched)
        coord.sync_leadership([0], 0)
        return coord

    def txn_commit(self, pid: int, offsets: dict, group: str = "g", epoch: int = 0) -> dict:
        return self.coord.commit_txn_offsets(group, pid, epoch, "", None, -1,
                                             {tp: OffsetAndMetadata(o) for tp, o in offsets.items()})

    def end(self, pid: int, commit: bool, epoch: int = 0) -> None:
        self.plog.append_txn_marker(pid, epoch, 0, commit)
        self.coord.on_transaction_completed(pid, [0], commit)

    def fetch(self, tp=TP, stable: bool = True, group: str = "g"):
        error, found = self.coord.fetch_offsets(group, [tp], stable)
        assert error == ErrorCode.NONE
        committed, code = found[tp]
        return (committed.offset if committed else None), code

    def restart(self) -> None:
        self.coord.close()
        self.plog.close()
        self.plog = PartitionLog.open(self.path / "__consumer_offsets-0", clean_shutdown=True)
        self.coord = self._coordinator()

    def close(self) -> None:
        self.coord.close()
        self.plog.close()


@pytest.fixture
def offsets(tmp_path):
    o = Offsets(tmp_path)
    yield o
    o.close()


def test_pending_until_commit_marker(offsets):
    assert offsets.txn_commit(1, {TP: 5}) == {TP: ErrorCode.NONE}
    assert offsets.fetch() == (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert offsets.fetch(stable=False) == (None, ErrorCode.NONE)
    assert offsets.fetch(TP1) == (None, ErrorCode.NONE)
    offsets.end(1, commit=True)
    assert offsets.fetch() == (5, ErrorCode.NONE)


def test_abort_drops_pending(offsets):
    offsets.coord.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(3)})
    offsets.txn_commit(1, {TP: 9})
    offsets.end(1, commit=False)
    assert offsets.fetch() == (3, ErrorCode.NONE)


def test_later_plain_commit_wins_over_earlier_transactional_one(offsets):
    offsets.txn_commit(1, {TP: 9})
    offsets.coord.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(11)})
    assert offsets.fetch() == (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    offsets.end(1, commit=True)
    assert offsets.fetch() == (11, ErrorCode.NONE)


def test_newer_transactional_commit_wins_whatever_order_they_complete(offsets):
    offsets.txn_commit(1, {TP: 5})
    offsets.txn_commit(2, {TP: 6})
    offsets.end(2, commit=True)
    offsets.end(1, commit=True)
    assert offsets.fetch() == (6, ErrorCode.NONE)


def test_pending_and_decided_commits_survive_restart(offsets):
    offsets.txn_commit(1, {TP: 5})
    offsets.end(1, commit=True)
    offsets.txn_commit(2, {TP1: 7})
    offsets.txn_commit(3, {TP: 8})
    offsets.end(3, commit=False)
    offsets.restart()
    assert offsets.fetch() == (5, ErrorCode.NONE)
    assert offsets.fetch(TP1) == (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    offsets.end(2, commit=True)
    assert offsets.fetch(TP1) == (7, ErrorCode.NONE)


def test_fenced_producer_epoch_is_refused(offsets):
    offsets.txn_commit(1, {TP: 5}, epoch=3)
    offsets.end(1, commit=False, epoch=3)
    assert offsets.txn_commit(1, {TP: 6}, epoch=2) == {TP: ErrorCode.INVALID_PRODUCER_EPOCH}


def test_member_checks_apply_when_named(offsets):
    result = offsets.coord.commit_txn_offsets("g", 1, 0, "someone", None, 4, {TP: OffsetAndMetadata(1)})
    assert result == {TP: ErrorCode.UNKNOWN_MEMBER_ID}
    assert offsets.coord.commit_txn_offsets("", 1, 0, "", None, -1, {TP: OffsetAndMetadata(1)}) == \
        {TP: ErrorCode.INVALID_GROUP_ID}


def test_pending_offsets_model():
    pending = PendingTxnOffsets()
    pending.add("g", 1, {TP: OffsetAndMetadata(1)}, append_offset=10)
    pending.add("h", 1, {TP: OffsetAndMetadata(2)}, append_offset=11)
    assert pending.has_pending("g", TP) and not pending.has_pending("g", TP1)
    applied = pending.complete(1, True, include=lambda g: g == "g")
    assert applied == {"g": {TP: OffsetAndMetadata(1)}}
    assert not pending.has_group("g") and pending.has_group("h")
    pending.drop_groups(["h"])
    assert not pending
