"""RemoteMarkers: marker outcomes are kept per coordinator epoch and forgotten with their
transaction, so that a stale answer (campaign #1 round 79: a FENCED given to the epoch-44
coordinator) never answers a later coordinator's or transaction's marker."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kafkapy.broker.txn_marker_sender import RemoteMarkers
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.messages import WriteTxnMarkersResponse

TP = ("faults-out", 1)
PID = 2000


class StubPeers:
    """Answers every WriteTxnMarkers with `code`, recording the requests."""

    def __init__(self, code: int):
        self.code = code
        self.requests = []
        self.gate: asyncio.Event | None = None

    async def send(self, leader, request, version):
        self.requests.append(request)
        if self.gate is not None:
            await self.gate.wait()
        R = WriteTxnMarkersResponse
        return R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=self.code)
                for p in t.partition_indexes]) for t in m.topics]) for m in request.markers])

    def close(self):
        pass


@pytest.fixture(autouse=True)
def _no_security(monkeypatch):
    monkeypatch.setattr("kafkapy.broker.txn_marker_sender.inter_broker_options", lambda config: {})


def markers(code: int) -> tuple[RemoteMarkers, StubPeers, list[int]]:
    broker = SimpleNamespace(node_id=3, config=SimpleNamespace(get=lambda name: 1000),
                             metadata=SimpleNamespace(broker_endpoint=lambda node: ("127.0.0.1", 1)))
    done: list[int] = []
    remote = RemoteMarkers(broker.node_id, broker.config, broker.metadata, replicas=None, on_done=done.append)
    peers = StubPeers(code)
    remote._peers.close()
    remote._peers = peers
    return remote, peers, done


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_fenced_answer_at_epoch_44_does_not_answer_an_epoch_48_write():
    async def run():
        remote, peers, done = markers(E.TRANSACTION_COORDINATOR_FENCED)
        assert remote.write(2, PID, 7, 44, True, [TP]) == {TP: E.REQUEST_TIMED_OUT}
        await settle()
        assert done == [PID]
        # the epoch-48 coordinator's write is not answered by the epoch-44 outcome: it is sent
        peers.code = E.NONE
        assert remote.write(2, PID, 7, 48, True, [TP]) == {TP: E.REQUEST_TIMED_OUT}
        await settle()
        assert [r.markers[0].coordinator_epoch for r in peers.requests] == [44, 48]
        assert remote.write(2, PID, 7, 48, True, [TP]) == {TP: E.NONE}
        # the local-leader path looks outcomes up with the same key
        assert remote.outcome((PID, 7, 48, True, *TP)) is None
        assert remote.outcome((PID, 7, 44, True, *TP)) == E.TRANSACTION_COORDINATOR_FENCED
        remote.close()

    asyncio.run(run())


def test_forget_drops_outcomes_and_late_answers():
    async def run():
        remote, peers, _ = markers(E.TRANSACTION_COORDINATOR_FENCED)
        remote.write(2, PID, 7, 44, True, [TP])
        await settle()
        remote.forget([PID])
        # the next transaction (same producer epoch, same coordinator epoch) is sent anew
        peers.code = E.NONE
        assert remote.write(2, PID, 7, 44, True, [TP]) == {TP: E.REQUEST_TIMED_OUT}
        await settle()
        assert len(peers.requests) == 2
        assert remote.write(2, PID, 7, 44, True, [TP]) == {TP: E.NONE}
        # an answer arriving after its producer was forgotten is not kept
        peers.code = E.TRANSACTION_COORDINATOR_FENCED
        peers.gate = asyncio.Event()
        remote.write(2, PID, 7, 44, True, [TP])
        await settle()
        remote.forget([PID])
        peers.gate.set()
        await settle()
        assert remote.outcome((PID, 7, 44, True, *TP)) is None
        assert remote._abandoned == set()
        remote.close()

    asyncio.run(run())
