"""Loading __consumer_offsets on an event loop: it yields while it reads, every group API answers
as Kafka's GroupCoordinator does while a partition loads, the state appears in one step, and
what is appended or decided meanwhile is not lost."""
from __future__ import annotations

import asyncio

import pytest

from kafkapy.groupcoord import GroupCoordinator, GroupCoordinatorConfig, JoinRequest, OffsetAndMetadata
from kafkapy.groupcoord import OffsetsTopicStore
from kafkapy.groupcoord import metadata_manager
from kafkapy.log import PartitionLog
from kafkapy.protocol.errors import ErrorCode

from .fakes import ManualScheduler

LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
GROUPS, PARTITIONS = 50, 40  # 2,000 commits


def fill(plog: PartitionLog) -> None:
    coord = GroupCoordinator(GroupCoordinatorConfig(offsets_topic_num_partitions=1),
                             OffsetsTopicStore(lambda p: plog))
    coord.start(ManualScheduler())
    coord.sync_leadership([0], 0)
    for g in range(GROUPS):
        assert set(coord.commit_offsets(f"g{g}", "", None, -1, {
            ("t", p): OffsetAndMetadata(100 + p) for p in range(PARTITIONS)}).values()) == {0}
    coord.close()


def coordinator_on(loop, plog: PartitionLog) -> GroupCoordinator:
    coord = GroupCoordinator(GroupCoordinatorConfig(offsets_topic_num_partitions=1,
                                                    group_initial_rebalance_delay_ms=0),
                             OffsetsTopicStore(lambda p: plog))
    coord.start(loop)
    return coord


@pytest.fixture
def plog(tmp_path):
    log = PartitionLog.open(tmp_path / "__consumer_offsets-0")
    fill(log)
    yield log
    log.close()


@pytest.fixture
def small_slices(monkeypatch):
    monkeypatch.setattr(metadata_manager, "LOAD_SLICE_S", 0.0005)


async def wait_loaded(coord: GroupCoordinator, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while coord.manager.loading_partitions:
        assert asyncio.get_running_loop().time() < deadline, "load did not finish"
        await asyncio.sleep(0.001)


@pytest.mark.timeout(60)
def test_group_apis_answer_load_in_progress_until_the_state_is_applied(plog, small_slices):
    async def scenario():
        coord = coordinator_on(asyncio.get_running_loop(), plog)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        coord.on_elected(0)
        assert coord.manager.is_loading("g1")
        # as Kafka's GroupCoordinator: the group APIs wait, SyncGroup asks to rejoin, Heartbeat passes
        assert coord.fetch_offsets("g1", [("t", 3)]) == (LOADING, {})
        assert coord.commit_offsets("g1", "", None, -1, {("t", 3): OffsetAndMetadata(1)}) == {("t", 3): LOADING}
        assert coord.describe_group("g1")[0] == LOADING
        assert coord.delete_groups(["g1"]) == {"g1": LOADING}
        assert coord.delete_offsets("g1", [("t", 3)]) == (LOADING, {})
        assert coord.leave_group("g1", [("m", None)])[0] == LOADING
        assert coord.list_groups()[0] == LOADING
        joined = []
        coord.join_group(JoinRequest("g1", "", None, "c", "/h", 1000, 1000, "consumer", [("range", b"")]),
                         joined.append)
        assert joined[0].error == LOADING
        synced = []
        coord.sync_group("g1", 1, "m", None, None, None, {}, synced.append)
        assert synced[0].error == ErrorCode.REBALANCE_IN_PROGRESS
        assert coord.heartbeat("g1", "m", None, 1) == ErrorCode.NONE
        assert coord.manager.groups == {}  # nothing shows before the load is applied
        await wait_loaded(coord)
        ticking.cancel()
        assert ticks > 5, "the load never yielded to the loop"
        assert len(coord.manager.groups) == GROUPS
        error, found = coord.fetch_offsets("g1", [("t", 3)])
        assert error == ErrorCode.NONE and found[("t", 3)][0].offset == 103
        assert coord.list_groups()[0] == ErrorCode.NONE
        coord.close()

    asyncio.run(scenario())


@pytest.mark.timeout(60)
def test_losing_leadership_while_loading_stops_the_load(plog, small_slices):
    async def scenario():
        coord = coordinator_on(asyncio.get_running_loop(), plog)
        coord.on_elected(0)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        coord.on_resigned(0)
        assert not coord.manager.loading_partitions and not coord.manager.owned_partitions
        await asyncio.sleep(0.05)
        assert coord.manager.groups == {}
        assert coord.fetch_offsets("g1", [("t", 3)])[0] == ErrorCode.NOT_COORDINATOR
        # and leading it again loads it again
        coord.on_elected(0)
        await wait_loaded(coord)
        assert len(coord.manager.groups) == GROUPS
        coord.close()

    asyncio.run(scenario())


@pytest.mark.timeout(60)
def test_a_transaction_decided_while_loading_is_applied(plog, small_slices):
    async def scenario():
        writer = coordinator_on(asyncio.get_running_loop(), plog)
        writer.manager.load_partition(0)
        assert writer.commit_txn_offsets("g1", 77, 0, "", None, -1, {("t", 3): OffsetAndMetadata(999)}) \
            == {("t", 3): ErrorCode.NONE}
        writer.close()

        coord = coordinator_on(asyncio.get_running_loop(), plog)
        coord.on_elected(0)
        await asyncio.sleep(0)
        assert coord.manager.loading_partitions
        # the transaction commits while the partition loads: marker in the log, coordinator told
        plog.append_txn_marker(77, 0, 0, True)
        coord.on_transaction_completed(77, [0], True)
        await wait_loaded(coord)
        error, found = coord.fetch_offsets("g1", [("t", 3)], require_stable=True)
        assert error == ErrorCode.NONE and found[("t", 3)] == (found[("t", 3)][0], ErrorCode.NONE)
        assert found[("t", 3)][0].offset == 999
        coord.close()

    asyncio.run(scenario())


def test_without_an_event_loop_the_load_is_immediate(plog):
    coord = GroupCoordinator(GroupCoordinatorConfig(offsets_topic_num_partitions=1),
                             OffsetsTopicStore(lambda p: plog))
    coord.start(ManualScheduler())
    coord.on_elected(0)
    assert not coord.manager.loading_partitions and len(coord.manager.groups) == GROUPS
    coord.close()
