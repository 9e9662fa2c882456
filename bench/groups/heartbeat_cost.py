"""What a ConsumerGroupHeartbeat costs the coordinator (KIP-848), next to a classic Heartbeat.

In-process, on a manual clock, through the real GroupCoordinator with __consumer_offsets in
memory (records are encoded and appended as batches, as on a broker; no network, no fsync):

- steady: a member of a settled group heartbeats with nothing changed (no records, no assignor:
  validation, lookups, the session timer); the classic Heartbeat of a settled classic group of
  the same size for comparison;
- join: one more member joins a settled group (new group epoch, target assignment for every
  member by the uniform assignor, records written), then the members reconcile until stable;
- the size of the group and of the topic are parameters.

    python bench/groups/heartbeat_cost.py                     # 100 members, 1000 partitions
    python bench/groups/heartbeat_cost.py --members 10 --partitions 12
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kafkapy.groupcoord import GroupCoordinator, GroupCoordinatorConfig, JoinRequest, OffsetsTopicStore  # noqa: E402
from kafkapy.groupcoord.consumer.group import TopicMetadata  # noqa: E402
from kafkapy.groupcoord.consumer.membership import HeartbeatRequest, StaticTopicView  # noqa: E402
from kafkapy.protocol.consumer_protocol import encode_subscription  # noqa: E402
from kafkapy.protocol.errors import ErrorCode  # noqa: E402
from tests.groupcoord.fakes import ManualScheduler, MemoryLogs  # noqa: E402

TOPIC_ID = uuid.UUID(int=0x5EED)


def coordinator(partitions: int) -> tuple[GroupCoordinator, ManualScheduler]:
    sched = ManualScheduler()
    config = GroupCoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0,
                                    group_min_session_timeout_ms=10)
    coord = GroupCoordinator(config, OffsetsTopicStore(MemoryLogs()), clock_ms=sched.clock_ms)
    coord.consumer.topics = StaticTopicView([TopicMetadata(TOPIC_ID, "t", partitions)])
    coord.start(sched)
    coord.on_elected(0)
    return coord, sched


class ConsumerMember:
    def __init__(self, coord: GroupCoordinator, member_id: str):
        self.coord, self.member_id, self.epoch, self.owned = coord, member_id, 0, {}

    def beat(self) -> bool:
        """One heartbeat; True if the member's state moved."""
        if self.epoch == 0:
            request = HeartbeatRequest("g", self.member_id, 0, rebalance_timeout_ms=30000,
                                       subscribed_topic_names=["t"], topic_partitions=[])
        else:
            request = HeartbeatRequest("g", self.member_id, self.epoch,
                                       topic_partitions=[(t, sorted(p)) for t, p in self.owned.items()])
        result = self.coord.consumer_group_heartbeat(request)
        assert result.error == ErrorCode.NONE, result
        moved = result.member_epoch != self.epoch or result.assignment is not None
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = dict(result.assignment)
        return moved


def settle(members: list[ConsumerMember]) -> int:
    rounds = 0
    while True:
        rounds += 1
        moved = [m.beat() for m in members]
        if not any(moved) and rounds > 1:
            return rounds


def timed(fn, repeat: int) -> float:
    """Median seconds per call over `repeat` batches."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bench_consumer(members: int, partitions: int, steady_calls: int) -> dict[str, float]:
    coord, _ = coordinator(partitions)
    group = [ConsumerMember(coord, f"m{i}") for i in range(members)]
    for m in group:
        m.beat()
    settle(group)
    one = group[0]
    # the same request every time (as a client sends it), so that only the coordinator is timed
    request = HeartbeatRequest("g", one.member_id, one.epoch,
                               topic_partitions=[(t, sorted(p)) for t, p in one.owned.items()])
    assert coord.consumer_group_heartbeat(request).assignment is None
    steady = timed(lambda: [coord.consumer_group_heartbeat(request) for _ in range(steady_calls)], 5) / steady_calls
    newcomer = ConsumerMember(coord, "new")
    start = time.perf_counter()
    newcomer.beat()
    join = time.perf_counter() - start
    start = time.perf_counter()
    rounds = settle(group + [newcomer])
    settle_s = time.perf_counter() - start
    return {"steady_us": steady * 1e6, "join_ms": join * 1e3, "settle_ms": settle_s * 1e3, "settle_rounds": rounds}


def bench_classic(members: int, steady_calls: int) -> dict[str, float]:
    coord, _ = coordinator(1)
    ids: list[str] = []
    subscription = encode_subscription(["t"])
    # join everyone in one generation: first JoinGroup with an unknown id gets MEMBER_ID_REQUIRED
    boxes = []
    for i in range(members):
        box: list = []
        coord.join_group(JoinRequest("g", "", None, "c", "/h", 30000, 30000, "consumer", [("range", subscription)],
                                     require_known_member_id=False), box.append)
        boxes.append(box)
    # the rebalance completes when the join timer fires (initial delay 0)
    coord.scheduler.advance(1)
    for box in boxes:
        ids.append(box[0].member_id)
    generation = boxes[0][0].generation_id
    leader = boxes[0][0].leader_id
    coord.sync_group("g", generation, leader, None, None, None, {i: b"" for i in ids}, lambda r: None)
    for member_id in ids:
        if member_id != leader:
            coord.sync_group("g", generation, member_id, None, None, None, {}, lambda r: None)
    assert coord.heartbeat("g", ids[0], None, generation) == ErrorCode.NONE
    steady = timed(lambda: [coord.heartbeat("g", ids[0], None, generation) for _ in range(steady_calls)], 5)
    return {"steady_us": steady / steady_calls * 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--steady-calls", type=int, default=20000)
    args = parser.parse_args(argv)
    consumer = bench_consumer(args.members, args.partitions, args.steady_calls)
    classic = bench_classic(args.members, args.steady_calls)
    print(f"{args.members} members, {args.partitions} partitions, Python {sys.version.split()[0]}")
    print(f"  ConsumerGroupHeartbeat, nothing changed: {consumer['steady_us']:.1f} us per call")
    print(f"  classic Heartbeat, settled group:       {classic['steady_us']:.1f} us per call")
    print(f"  a member joins (new epoch, target for all): {consumer['join_ms']:.2f} ms")
    print(f"  the group settles after it ({consumer['settle_rounds']} heartbeat rounds): {consumer['settle_ms']:.2f} ms")


if __name__ == "__main__":
    main()
