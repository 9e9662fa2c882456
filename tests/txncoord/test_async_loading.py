"""Loading __transaction_state on an event loop: COORDINATOR_LOAD_IN_PROGRESS for the partition's
transactional ids (and ListTransactions) until the loaded cache replaces it in one step."""
from __future__ import annotations

import asyncio

import pytest

from kafkapy.groupcoord import OffsetsTopicStore
from kafkapy.groupcoord import metadata_manager
from kafkapy.log import PartitionLog
from kafkapy.protocol.errors import ErrorCode
from kafkapy.txncoord import state_manager
from kafkapy.txncoord.records import TransactionLogValue, encode_key, encode_value
from kafkapy.txncoord.state_manager import TransactionStateManager

IDS = 2000


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(metadata_manager, "LOAD_SLICE_S", 0.0005)
    monkeypatch.setattr(state_manager, "LOAD_SLICE_S", 0.0005)
    plog = PartitionLog.open(tmp_path / "__transaction_state-0")
    store = OffsetsTopicStore(lambda p: plog, topic="__transaction_state")
    for start in range(0, IDS, 100):
        store.append(0, [(encode_key(f"tx-{i}"), encode_value(TransactionLogValue(i, 0, 60_000, 0), True))
                         for i in range(start, start + 100)])
    yield store
    plog.close()


@pytest.mark.timeout(60)
def test_transactional_ids_wait_for_the_load(store):
    async def scenario():
        manager = TransactionStateManager(store, 1, lambda: 0)
        done = []
        manager.start_loading(0, 5, asyncio.get_running_loop(), done.append)
        assert manager.get("tx-7")[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        yields = 0
        while manager.loading_partitions:
            yields += 1
            assert yields < 100_000
            await asyncio.sleep(0)
        assert yields > 3, "the load never yielded to the loop"
        error, cache, metadata = manager.get("tx-7")
        assert error == ErrorCode.NONE and metadata.producer_id == 7 and cache.coordinator_epoch == 5
        assert len(done[0]) == IDS

    asyncio.run(scenario())


@pytest.mark.timeout(60)
def test_unloading_stops_the_load(store):
    async def scenario():
        manager = TransactionStateManager(store, 1, lambda: 0)
        manager.start_loading(0, 5, asyncio.get_running_loop(), lambda loaded: None)
        await asyncio.sleep(0)
        manager.unload_partition(0)
        await asyncio.sleep(0.05)
        assert manager.get("tx-7")[0] == ErrorCode.NOT_COORDINATOR
        assert not manager.loading_partitions and not manager.partitions

    asyncio.run(scenario())
