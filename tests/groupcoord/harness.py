"""A coordinator wired to a manual scheduler and in-memory logs, with helpers to drive members."""
from __future__ import annotations

from kafkapy.groupcoord import GroupCoordinator, GroupCoordinatorConfig, JoinRequest, OffsetsTopicStore
from kafkapy.protocol.consumer_protocol import encode_assignment, encode_subscription

from .fakes import ManualScheduler, MemoryLogs

NUM_PARTITIONS = 3


def subscription(*topics: str) -> bytes:
    return encode_subscription(list(topics))


class Harness:
    def __init__(self, logs: MemoryLogs | None = None, scheduler: ManualScheduler | None = None, **config):
        defaults = dict(offsets_topic_num_partitions=NUM_PARTITIONS, group_initial_rebalance_delay_ms=0,
                        group_min_session_timeout_ms=10, offsets_retention_check_interval_ms=60_000)
        defaults.update(config)
        self.config = GroupCoordinatorConfig(**defaults)
        self.logs = logs or MemoryLogs()
        self.sched = scheduler or ManualScheduler()
        self.coord = GroupCoordinator(self.config, OffsetsTopicStore(self.logs), clock_ms=self.sched.clock_ms)
        self.coord.start(self.sched)
        for p in range(NUM_PARTITIONS):
            self.coord.on_elected(p)

    def join(self, group="g", member_id="", instance_id=None, protocols=None, protocol_type="consumer",
             session_ms=10_000, rebalance_ms=30_000, require_known=True, skip=False, client_id="client"):
        box = []
        request = JoinRequest(group, member_id, instance_id, client_id, "/127.0.0.1", rebalance_ms, session_ms,
                              protocol_type, protocols if protocols is not None else [("range", subscription("t"))],
                              require_known_member_id=require_known, support_skipping_assignment=skip)
        self.coord.join_group(request, box.append)
        return box

    def sync(self, group, generation, member_id, assignments=None, instance_id=None, protocol_type=None,
             protocol_name=None):
        box = []
        self.coord.sync_group(group, generation, member_id, instance_id, protocol_type, protocol_name,
                              assignments or {}, box.append)
        return box

    def join_new(self, group="g", **kw):
        """A v4+ join: MEMBER_ID_REQUIRED, then the real join; returns the pending result box."""
        first = self.join(group, **kw)
        assert first and first[0].error == 79, first  # MEMBER_ID_REQUIRED
        kw.pop("member_id", None)
        return self.join(group, member_id=first[0].member_id, **kw)

    def stable_group(self, group="g", n=1, **kw):
        """Bring a group of n members to Stable; returns their member ids (leader first)."""
        boxes = [self.join_new(group, **kw) for _ in range(n)]
        self.sched.advance(1)
        results = [b[0] for b in boxes]
        leader = next(r for r in results if r.member_id == r.leader_id)
        others = [r for r in results if r is not leader]
        assignments = {r.member_id: encode_assignment({"t": [i]}) for i, r in enumerate(results)}
        sync_boxes = [self.sync(group, r.generation_id, r.member_id) for r in others]
        leader_box = self.sync(group, leader.generation_id, leader.member_id, assignments)
        assert leader_box and leader_box[0].error == 0
        for box in sync_boxes:
            assert box and box[0].error == 0
        return [leader.member_id] + [r.member_id for r in others]
