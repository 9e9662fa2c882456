"""Every entry point of the controller object before its event task runs and after it stopped:
Kafka answers NOT_CONTROLLER until the controller is ready (found with a real Kafka 3.7 broker that
sent AlterPartition to a kafkapy broker just elected, before its event queue existed)."""
from __future__ import annotations

import asyncio

from kafkapy.controller.kafka_controller import KafkaController
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import AlterPartitionRequest


def _controller() -> KafkaController:
    # no ZooKeeper client: none of these paths may reach it
    return KafkaController(None, 1, listener_name="PLAINTEXT")


async def _every_entry_point(controller: KafkaController) -> None:
    request = AlterPartitionRequest(broker_id=2, broker_epoch=-1, topics=[])
    assert (await controller.alter_partition(request, 2)).error_code == ErrorCode.NOT_CONTROLLER
    assert (await controller.allocate_producer_ids(2, -1)).error_code == ErrorCode.NOT_CONTROLLER
    assert await controller.controlled_shutdown(2, -1) == (ErrorCode.STALE_CONTROLLER_EPOCH, [])
    assert await controller.elect_leaders([("t", 0)], False) == {("t", 0): (ErrorCode.NOT_CONTROLLER, None)}
    assert await controller.alter_partition_reassignments({("t", 0): [1]}) is None
    assert await controller.list_partition_reassignments(None) is None
    controller.post("broker_change")  # dropped quietly
    assert not controller.active


def test_entry_points_before_start_answer_not_controller():
    asyncio.run(asyncio.wait_for(_every_entry_point(_controller()), 5))


def test_entry_points_after_stop_answer_not_controller():
    async def scenario():
        controller = _controller()
        # the event task as start() creates it, without ZooKeeper watches or an election
        controller._loop = asyncio.get_running_loop()
        controller._events = asyncio.Queue()
        controller._task = asyncio.create_task(controller._run())
        await controller.stop()
        await _every_entry_point(controller)

    asyncio.run(asyncio.wait_for(scenario(), 5))


def test_a_request_queued_when_the_controller_stops_is_answered():
    async def scenario():
        controller = _controller()
        controller._loop = asyncio.get_running_loop()
        controller._events = asyncio.Queue()
        # no event task yet: the request stays queued, as behind a long ZooKeeper event
        controller._task = asyncio.get_running_loop().create_future()
        waiting = asyncio.create_task(controller.allocate_producer_ids(2, -1))
        await asyncio.sleep(0)
        await controller.stop()
        assert (await waiting).error_code == ErrorCode.NOT_CONTROLLER

    asyncio.run(asyncio.wait_for(scenario(), 5))
