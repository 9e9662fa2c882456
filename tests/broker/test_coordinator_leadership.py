"""Which __transaction_state / __consumer_offsets partitions a broker's coordinators count as led here
(broker/group_coordination.py partition_leaders), and the produce verification that follows from it.

Campaign #5, round 38: broker 2's log dir holding __transaction_state-2 went full; the controller
elected broker 3 at a newer leader epoch, but broker 2's replica refused the LeaderAndIsr and stayed
leader at the old epoch, so broker 2 kept coordinating the transactional id. Broker 3 added
faults-out-0 to the next transaction; the produce to faults-out-0 (led by broker 2) was verified by
broker 2's own stale coordinator, which answered INVALID_TXN_STATE."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkapy.broker.group_coordination import partition_leaders
from kafkapy.broker.txn_verification import (
    coordinated_here,
    verify_transactional_produce,
)
from kafkapy.metadata.store import PartitionMetadata
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.errors import KafkaError
from kafkapy.txncoord import TRANSACTION_STATE_TOPIC
from tests.txncoord.harness import STATE_PARTITIONS, TxnHarness

SELF, OTHER = 0, 1
OUT = ("faults-out", 0)


def broker_with(hosted: dict[int, SimpleNamespace], **attrs) -> SimpleNamespace:
    """A broker `SELF` whose replica manager hosts `hosted` (partition -> replica) of __transaction_state."""
    replicas = SimpleNamespace(partition=lambda topic, p: hosted.get(p) if topic == TRANSACTION_STATE_TOPIC else None)
    return SimpleNamespace(node_id=SELF, replicas=replicas, **attrs)


def topic(partitions: list[PartitionMetadata]) -> SimpleNamespace:
    return SimpleNamespace(name=TRANSACTION_STATE_TOPIC, partitions=tuple(partitions))


def state(leader: int, epoch: int) -> PartitionMetadata:
    return PartitionMetadata(0, (SELF, OTHER), (SELF, OTHER), leader, epoch)


def replica(is_leader: bool, epoch: int) -> SimpleNamespace:
    return SimpleNamespace(is_leader=is_leader, leader_epoch=epoch)


@pytest.mark.parametrize("hosted, meta, expected", [
    (replica(True, 20), state(SELF, 20), SELF),    # leader, and the cache agrees
    (replica(True, 21), state(SELF, 20), SELF),    # LeaderAndIsr arrived before the UpdateMetadata
    (replica(True, 21), state(OTHER, 20), SELF),   # re-elected here; the cache has not heard yet
    (replica(True, 20), state(OTHER, 21), OTHER),  # the controller moved it; this replica never heard (full dir)
    (replica(True, 20), state(-1, 21), -1),        # ... or left it leaderless
    (replica(False, 21), state(SELF, 21), -1),     # named leader, but LeaderAndIsr not applied yet
    (replica(False, 21), state(OTHER, 21), OTHER),
    (None, state(OTHER, 21), OTHER),               # not hosted here
])
def test_partition_leaders(hosted, meta, expected):
    broker = broker_with({0: hosted} if hosted is not None else {})
    assert partition_leaders(broker, topic([meta])) == [expected]


def test_no_topic_no_leaders():
    assert partition_leaders(broker_with({}), None) is None


@pytest.fixture
def h(tmp_path):
    harness = TxnHarness(tmp_path)
    yield harness
    harness.close()


def test_a_produce_is_verified_by_the_new_coordinator_not_by_a_replica_left_leader_in_a_full_dir(h):
    """Fails before the fix with INVALID_TXN_STATE (the verification answered by the stale local coordinator)."""
    pid, epoch = (lambda r: (r.producer_id, r.producer_epoch))(h.coord.handle_init_producer_id("tx", 60_000))
    # the last transaction this broker coordinated: committed (offset 2068 in the campaign)
    assert h.coord.handle_add_partitions("tx", pid, epoch, [OUT]) == E.NONE
    assert h.coord.handle_end_txn("tx", pid, epoch, commit=True) == E.NONE
    hosted = {p: replica(True, 20) for p in range(STATE_PARTITIONS)}
    meta = [state(SELF, 20) for _ in range(STATE_PARTITIONS)]
    broker = broker_with(hosted, transaction_coordinator=h.coord)
    h.coord.state_topic_leaders = lambda create: partition_leaders(broker, topic(meta))
    assert coordinated_here(broker, "tx")

    # the log dir of this broker's replica goes full: the controller elects OTHER at epoch 21 and
    # tells every broker; this replica refuses the LeaderAndIsr (KAFKA_STORAGE_ERROR) and stays
    # leader at epoch 20. OTHER's coordinator then adds OUT to the producer's next transaction.
    state_partition = h.coord.partition_for("tx")
    meta[state_partition] = state(OTHER, 21)

    # the first transactional batch of that transaction reaches OUT's leader, this broker
    part = SimpleNamespace(log=SimpleNamespace(producer_state=SimpleNamespace(last_entry=lambda producer_id: None)))
    headers = [SimpleNamespace(is_transactional=True, producer_id=pid, producer_epoch=epoch)]
    try:
        remote = verify_transactional_produce(broker, "tx", *OUT, part, headers, 9)
    except KafkaError as exc:
        pytest.fail(f"verified by the stale local coordinator: {E(exc.code).name}")
    assert remote == ("tx", pid, epoch)  # asked of OTHER, as Kafka's AddPartitionsToTxnManager does
    assert h.coord.state.get("tx")[0] == E.NOT_COORDINATOR  # and this broker let go of the partition
