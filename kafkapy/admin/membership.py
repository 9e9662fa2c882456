"""A consumer group member for `kafkapy consume -G`: the classic protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) with the "range" assignor, as Kafka's consumer speaks it, so the CLI shares
a topic's partitions with the group's other consumers and commits with its generation."""
from __future__ import annotations

import time

from ..protocol.consumer_protocol import encode_assignment, encode_subscription, parse_subscription
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from .client import AdminClient
from .errors import KafkaApiError
from .groups import decode_assignment

__all__ = ["GroupMember", "range_assign", "encode_subscription", "decode_subscription", "encode_assignment"]

_REJOIN = {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID,
           ErrorCode.MEMBER_ID_REQUIRED}
_COORDINATOR_MOVED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


def decode_subscription(data: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription; [] if the bytes do not parse."""
    try:
        return parse_subscription(data).topics
    except ValueError:
        return []


def range_assign(subscriptions: dict[str, list[str]], partitions: dict[str, int]) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, its members sorted by id take consecutive ranges, the first ones
    one partition more when the count does not divide."""
    result: dict[str, dict[str, list[int]]] = {member: {} for member in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            if size:
                result[member][topic] = list(range(start, start + size))
            start += size
    return result


class GroupMember:
    """One member of a consumer group subscribed to `topics`; `join()` returns its assignment."""

    def __init__(self, client: AdminClient, group_id: str, topics: list[str], *, session_timeout_ms: int = 10_000,
                 rebalance_timeout_ms: int = 20_000, heartbeat_interval_s: float = 3.0):
        self.client = client
        self.group_id = group_id
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_s
        self.member_id = ""
        self.generation = -1
        self.coordinator = -1
        self._last_heartbeat = 0.0

    def join(self) -> dict[str, list[int]]:
        """Join (or rejoin) the group and return this member's partitions, by topic."""
        deadline = time.monotonic() + self.client.timeout_s + self.rebalance_timeout_ms / 1000
        while True:
            try:
                assignment = self._join_once()
            except KafkaApiError as exc:
                if exc.code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                if exc.code not in _REJOIN | _COORDINATOR_MOVED or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            self._last_heartbeat = time.monotonic()
            return assignment

    def _join_once(self) -> dict[str, list[int]]:
        self.coordinator = self.client.coordinator(self.group_id)
        request = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id, group_instance_id=None,
            protocol_type="consumer", reason=None,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                metadata=encode_subscription(self.topics))])
        joined = self.client.send(request, node=self.coordinator, floor=1)
        if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: join again with the id given
            self.member_id = joined.member_id
            raise KafkaApiError(joined.error_code, f"joining group '{self.group_id}'")
        if joined.error_code:
            raise KafkaApiError(joined.error_code, f"cannot join group '{self.group_id}'")
        self.member_id, self.generation = joined.member_id, joined.generation_id
        assignments = []
        if joined.leader == joined.member_id:
            subscriptions = {m.member_id: decode_subscription(m.metadata) for m in joined.members}
            wanted = sorted({t for topics in subscriptions.values() for t in topics})
            counts = {t.name: len(t.partitions) for t in self.client.metadata(wanted).topics if not t.error_code}
            plan = range_assign(subscriptions, counts)
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
                           for m, a in plan.items()]
        synced = self.client.send(SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=None, protocol_type="consumer", protocol_name=joined.protocol_name or "range",
            assignments=assignments), node=self.coordinator)
        if synced.error_code:
            raise KafkaApiError(synced.error_code, f"cannot sync with group '{self.group_id}'")
        return decode_assignment(synced.assignment)

    def heartbeat_due(self) -> bool:
        return time.monotonic() - self._last_heartbeat >= self.heartbeat_interval_s

    def heartbeat(self) -> bool:
        """Tell the coordinator this member lives; False when the group rebalances (join again)."""
        self._last_heartbeat = time.monotonic()
        response = self.client.send(HeartbeatRequest(group_id=self.group_id, generation_id=self.generation,
                                                     member_id=self.member_id, group_instance_id=None),
                                    node=self.coordinator)
        if response.error_code in _REJOIN or response.error_code in _COORDINATOR_MOVED:
            return False
        if response.error_code:
            raise KafkaApiError(response.error_code, f"heartbeat to group '{self.group_id}' failed")
        return True

    def commit(self, positions: dict[tuple[str, int], int]) -> bool:
        """Commit `positions` as this generation's member; False if the group moved on (rebalanced)."""
        if not positions:
            return True
        topics: dict[str, list] = {}
        for (topic, partition), offset in sorted(positions.items()):
            topics.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                commit_timestamp=-1, committed_metadata=""))
        request = OffsetCommitRequest(group_id=self.group_id, generation_id_or_member_epoch=self.generation,
                                      member_id=self.member_id, group_instance_id=None, retention_time_ms=-1,
                                      topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                                              for t, ps in topics.items()])
        response = self.client.send(request, node=self.coordinator, floor=1, cap=8)
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code in _REJOIN:
                    return False
                if p.error_code:
                    raise KafkaApiError(p.error_code, f"cannot commit {topic.name}:{p.partition_index} for group "
                                                      f"'{self.group_id}'")
        return True

    def leave(self) -> None:
        """Leave the group so that the others get this member's partitions at once."""
        if not self.member_id:
            return
        version = self.client.version(LeaveGroupRequest, node=self.coordinator)
        if version >= 3:
            request = LeaveGroupRequest(group_id=self.group_id, members=[
                LeaveGroupRequest.MemberIdentity(member_id=self.member_id, group_instance_id=None,
                                                 reason="kafkapy consume exits")])
        else:
            request = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
        self.client.send(request, node=self.coordinator)
        self.member_id = ""
