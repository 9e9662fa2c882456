"""The controller's handling of LeaderAndIsr answers about failed log dirs (Kafka's
replicasOnOfflineDirs): KAFKA_STORAGE_ERROR takes a replica offline, its leadership moves to an
in-sync replica on a healthy broker and it leaves the ISR; an answer without the error brings it
back. The ZooKeeper writes are stubbed (`_apply` records the changes); the whole path runs against
real processes in conformance/test_cluster_log_dir_failures.py."""
from __future__ import annotations

import asyncio
import uuid

from kafkapy.controller.kafka_controller import KafkaController
from kafkapy.metadata.zk.paths import LeaderIsr, TopicAssignment
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import LeaderAndIsrResponse

TOPIC_ID = uuid.uuid4()


def _controller() -> tuple[KafkaController, list]:
    controller = KafkaController(None, 1, listener_name="PLAINTEXT")
    controller.active = True
    controller.live = {b: (None, 10 + b) for b in (1, 2, 3)}
    controller.topics = {"t": TopicAssignment("t", TOPIC_ID, {0: [1, 2, 3], 1: [2, 1, 3]})}
    controller.states = {("t", 0): (LeaderIsr(1, 5, [1, 2, 3], 1), 7), ("t", 1): (LeaderIsr(2, 3, [2, 1, 3], 1), 4)}
    applied: list = []
    sent: list = []

    async def apply(changes, **kwargs):
        applied.append(dict(changes))
        for key, state in changes.items():
            controller.states[key] = (state, controller.states[key][1] + 1)
        return list(changes)

    controller._apply = apply
    controller._send = sent.append
    return controller, applied


def _answer(codes: dict[int, int]) -> LeaderAndIsrResponse:
    Error = LeaderAndIsrResponse.LeaderAndIsrPartitionError
    return LeaderAndIsrResponse(error_code=0, topics=[LeaderAndIsrResponse.LeaderAndIsrTopicError(
        topic_id=TOPIC_ID, partition_errors=[Error(partition_index=p, error_code=c) for p, c in codes.items()])])


def test_storage_errors_move_leadership_and_shrink_the_isr_then_the_replicas_come_back():
    controller, applied = _controller()
    storage = ErrorCode.KAFKA_STORAGE_ERROR
    asyncio.run(controller._on_leader_and_isr_outcome(1, _answer({0: storage, 1: storage})))
    assert controller.offline_replicas == {1: {("t", 0), ("t", 1)}}
    (changes,) = applied
    led = changes[("t", 0)]
    assert led.leader == 2 and led.leader_epoch == 6 and 1 not in led.isr     # leadership moved
    followed = changes[("t", 1)]
    assert followed.leader == 2 and followed.isr == [2, 3]                   # out of the ISR
    # the offline replica is listed as such in UpdateMetadata
    entry = controller._metadata_entries([("t", 0)])[0]
    assert entry[3] == [1]
    # answered again without the error: online, nothing re-elected
    asyncio.run(controller._on_leader_and_isr_outcome(1, _answer({0: ErrorCode.NONE, 1: ErrorCode.NONE})))
    assert controller.offline_replicas == {} and len(applied) == 1
    assert controller._metadata_entries([("t", 0)])[0][3] == []


def test_only_answers_that_matter_become_events():
    controller, _ = _controller()
    posted = []
    controller.post = lambda name, payload=None: posted.append(name)
    controller._leader_and_isr_outcome(2, _answer({0: ErrorCode.NONE}))
    assert posted == []      # nothing offline on broker 2: no event per LeaderAndIsr answer
    controller._leader_and_isr_outcome(2, _answer({0: ErrorCode.KAFKA_STORAGE_ERROR}))
    assert posted == ["leader_and_isr_response"]
