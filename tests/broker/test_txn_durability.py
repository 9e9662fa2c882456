"""The transaction handlers answer a state change that did not reach the ISR of its
__transaction_state partition with the error Kafka's appendTransactionToLog gives (campaign #3
round 10: an isolated coordinator answered NONE for an AddPartitionsToTxn that was then lost)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kafkapy.broker.handlers import init_producer_id as init_handlers
from kafkapy.broker.handlers import transactions as handlers
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)
from kafkapy.replication import durability
from kafkapy.replication.replica_manager import ReplicaManager
from tests.txncoord.harness import TxnHarness

TOPIC = "orders"
FAILURES = [E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE]


@pytest.fixture
def h(tmp_path):
    harness = TxnHarness(tmp_path)
    harness.replicas = Replicas(harness)
    yield harness
    harness.close()


class Replicas:
    """The replica manager's side of a coordinator's write: the real fsync-on-ack wait
    (ReplicaManager.wait_synced) over the harness's logs, and what waiting for the ISR answers."""

    wait_synced = ReplicaManager.wait_synced

    def __init__(self, h):
        self.logs = SimpleNamespace(get_log=h.log)
        self.answer = E.NONE

    async def wait_appended(self, topic, partition, timeout_s, *, fsync=True):
        assert topic == "__transaction_state" and not fsync  # the state's fsync is wait_synced's
        return self.answer


def context(h, version: int):
    broker = SimpleNamespace(
        transaction_coordinator=h.coord,
        partitions=SimpleNamespace(get_log=h.log, topic=lambda name: SimpleNamespace(internal=False,
                                                                                     partitions=[0, 1])),
        replicas=h.replicas,
        config=SimpleNamespace(get=lambda name: 1000),
        group_coordinator=SimpleNamespace(partition_for=lambda group: 0))
    # a RequestContext's bundle and its typed accessors (ctx.replicas, ctx.partitions, ...)
    return SimpleNamespace(services=broker, **vars(broker), api_version=version, authorized=lambda *args: True,
                           unauthorized_names=lambda *args: frozenset(), authorized_cluster=lambda *args: True)


# what the replica manager answers when the ISR does not get the state record, and what the
# transaction coordinator answers for it (Kafka's appendTransactionToLog)
REPLICA_ERRORS = {E.NOT_COORDINATOR: E.NOT_LEADER_OR_FOLLOWER, E.COORDINATOR_NOT_AVAILABLE: E.REQUEST_TIMED_OUT}


def replication_answers(h, code: int) -> None:
    h.replicas.answer = REPLICA_ERRORS.get(code, code)


def begin(h):
    result = h.coord.handle_init_producer_id("tx", 60_000, -1, -1)
    return result.producer_id, result.producer_epoch


def add_v3(h, pid, epoch):
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    request = AddPartitionsToTxnRequest(transactions=[], v3_and_below_transactional_id="tx",
                                        v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                                        v3_and_below_topics=[T(name=TOPIC, partitions=[0, 1])])
    response = asyncio.run(handlers.handle_add_partitions_to_txn(context(h, 3), request))
    return {p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


@pytest.mark.parametrize("code", FAILURES)
def test_add_partitions_v3_answers_the_replication_error(h, code):
    pid, epoch = begin(h)
    replication_answers(h, code)
    assert add_v3(h, pid, epoch) == {code}
    # Kafka's retry: the same coordinator answers NONE once its state is replicated
    replication_answers(h, E.NONE)
    assert add_v3(h, pid, epoch) == {E.NONE}


@pytest.mark.parametrize("code", FAILURES)
def test_add_partitions_v4_answers_the_replication_error_per_transaction(h, code):
    pid, epoch = begin(h)
    replication_answers(h, code)
    R = AddPartitionsToTxnRequest
    request = R(transactions=[R.AddPartitionsToTxnTransaction(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, verify_only=False,
        topics=[R.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])])])
    response = asyncio.run(handlers.handle_add_partitions_to_txn(context(h, 4), request))
    assert response.error_code == E.NONE
    [result] = response.results_by_transaction
    assert [p.partition_error_code for t in result.topic_results for p in t.results_by_partition] == [code]


@pytest.mark.parametrize("code", FAILURES)
def test_add_offsets_answers_the_replication_error(h, code):
    pid, epoch = begin(h)
    replication_answers(h, code)
    request = AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g")
    assert asyncio.run(handlers.handle_add_offsets_to_txn(context(h, 3), request)).error_code == code


@pytest.mark.parametrize("code", FAILURES)
def test_end_txn_answers_the_replication_error(h, code):
    pid, epoch = begin(h)
    h.coord.handle_add_partitions("tx", pid, epoch, [(TOPIC, 0)])
    replication_answers(h, code)
    request = EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True)
    assert asyncio.run(handlers.handle_end_txn(context(h, 3), request)).error_code == code
    # the client's retry of the commit is not refused: the commit went on (Kafka's retry semantics)
    replication_answers(h, E.NONE)
    assert asyncio.run(handlers.handle_end_txn(context(h, 3), request)).error_code == E.NONE


def test_init_producer_id_answers_the_replication_error(h):
    replication_answers(h, E.NOT_COORDINATOR)
    request = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000, producer_id=-1,
                                    producer_epoch=-1)
    response = asyncio.run(init_handlers._init_transactional(context(h, 4), request))
    assert (response.error_code, response.producer_id, response.producer_epoch) == (E.NOT_COORDINATOR, -1, -1)


def test_a_failed_fsync_answers_not_coordinator(h, monkeypatch):
    pid, epoch = begin(h)

    async def failing(*futures):
        raise OSError("disk gone")

    monkeypatch.setattr(durability, "wait_durable", failing)
    replication_answers(h, E.NONE)
    plog = h.log("__transaction_state", h.coord.partition_for("tx"))
    monkeypatch.setattr(plog.config, "fsync_on_ack", True, raising=False)
    assert add_v3(h, pid, epoch) == {E.NOT_COORDINATOR}
