"""JoinGroup -> SyncGroup -> OffsetCommit on the wire, and what a rebalance timeout of 0 does.

Issue 15 reported that a member joining with rebalance_timeout_ms=0 (JoinGroup v5: an empty
member id, MEMBER_ID_REQUIRED, then the returned id), syncing and committing (OffsetCommit v5)
gets UNKNOWN_MEMBER_ID from kafkapy while Kafka 3.7 accepts the commit. The cause was the
pending-sync deadline: after a join completes, the coordinator (like Kafka 3.7's
GroupCoordinator.schedulePendingSync) armed a timer of the group's rebalance timeout, here 0, so
the member was removed before its SyncGroup arrived. Kafka's source reads the same way; the issue
reports Kafka accepting the commit, and kafkapy follows the issue: a rebalance timeout of 0 gives
the members the session timeout to sync. Any other rebalance timeout is used as Kafka uses it;
JoinGroup v0 takes the session timeout as rebalance timeout, as Kafka does.
Requests are kafka-python's protocol classes (not kafkapy's codec); one socket per member.
"""
from __future__ import annotations

import time
import uuid

import pytest

from conformance.kafka_wire import RawConnection
from conformance.test_groups_tools import create_topic

pytestmark = pytest.mark.timeout(120)

NONE, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED = 0, 25, 79


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    # a short initial delay, so that the first join goes through Kafka's InitialDelayedJoin
    return {"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "2",
            "group.initial.rebalance.delay.ms": "300"}


class Member:
    """One consumer's connection to the coordinator (requests in order, as a client sends them)."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.conn = RawConnection(bootstrap, timeout=20)
        self.group = group
        self.correlation = 0

    def send(self, request, version: int) -> None:
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="group-timeouts")
        self.conn.send(bytes(request.encode(version=version, header=True, framed=True)))

    def receive(self, response_cls, version: int):
        return response_cls.decode(self.conn.receive(), version=version, header=True)

    def call(self, request, response_cls, version: int):
        self.send(request, version)
        return self.receive(response_cls, version)

    def join_request(self, member_id: str, rebalance_timeout_ms: int, session_timeout_ms: int = 10_000):
        from kafka.protocol.consumer.group import JoinGroupRequest

        proto = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01\x00\x00\x00\x00")
        return JoinGroupRequest(group_id=self.group, session_timeout_ms=session_timeout_ms,
                                rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
                                protocol_type="consumer", protocols=[proto])

    def join(self, rebalance_timeout_ms: int, version: int = 5, session_timeout_ms: int = 10_000):
        """The whole join: MEMBER_ID_REQUIRED first (v4+), then the join with the given id."""
        from kafka.protocol.consumer.group import JoinGroupResponse

        member_id = ""
        if version >= 4:
            first = self.call(self.join_request("", rebalance_timeout_ms, session_timeout_ms), JoinGroupResponse,
                              version)
            assert first.error_code == MEMBER_ID_REQUIRED and first.member_id
            member_id = first.member_id
        return self.call(self.join_request(member_id, rebalance_timeout_ms, session_timeout_ms), JoinGroupResponse,
                         version)

    def sync_request(self, generation: int, member_id: str, assignments: dict[str, bytes]):
        from kafka.protocol.consumer.group import SyncGroupRequest

        A = SyncGroupRequest.SyncGroupRequestAssignment
        return SyncGroupRequest(group_id=self.group, generation_id=generation, member_id=member_id,
                                assignments=[A(member_id=m, assignment=a) for m, a in assignments.items()])

    def receive_sync(self, version: int = 3):
        from kafka.protocol.consumer.group import SyncGroupResponse

        return self.receive(SyncGroupResponse, version)

    def sync(self, generation: int, member_id: str, assignments: dict[str, bytes]):
        self.send(self.sync_request(generation, member_id, assignments), 3)
        return self.receive_sync(3)

    def commit(self, topic: str, generation: int, member_id: str, offset: int = 5) -> int:
        from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetCommitResponse

        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        response = self.call(OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=generation, member_id=member_id,
            topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=offset, committed_metadata="")])]),
            OffsetCommitResponse, 5)
        [partition] = response.topics[0].partitions
        return partition.error_code

    def close(self) -> None:
        self.conn.close()


def coordinator_ready(bootstrap: str, group: str) -> None:
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

    deadline = time.monotonic() + 20
    while True:
        request = FindCoordinatorRequest(key=group, key_type=0)
        request.with_header(correlation_id=1, client_id="group-timeouts")
        with RawConnection(bootstrap) as conn:
            body = conn.roundtrip(bytes(request.encode(version=2, header=True, framed=True)))
        if FindCoordinatorResponse.decode(body, version=2, header=True).error_code == NONE:
            return
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.1)


def group_state(bootstrap: str, group: str) -> tuple[str, int]:
    from kafka.protocol.admin.groups import DescribeGroupsRequest, DescribeGroupsResponse

    request = DescribeGroupsRequest(groups=[group])
    request.with_header(correlation_id=2, client_id="group-timeouts")
    with RawConnection(bootstrap) as conn:
        body = conn.roundtrip(bytes(request.encode(version=4, header=True, framed=True)))
    [described] = DescribeGroupsResponse.decode(body, version=4, header=True).groups
    return described.group_state, len(described.members)


@pytest.fixture
def setup(broker):
    topic, group = f"gct-{uuid.uuid4().hex[:8]}", f"gct-group-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    coordinator_ready(broker.bootstrap, group)
    members: list[Member] = []

    def member() -> Member:
        members.append(Member(broker.bootstrap, group))
        return members[-1]

    yield broker.bootstrap, topic, group, member
    for m in members:
        m.close()


@pytest.mark.parametrize("rebalance_timeout_ms", [2_000, 10_000])
def test_join_sync_commit_with_a_rebalance_timeout(setup, rebalance_timeout_ms: int) -> None:
    """The issue's exact sequence (JoinGroup v5 twice, SyncGroup, OffsetCommit v5; session timeout
    10 s, within group.min/max.session.timeout.ms) with a rebalance timeout that leaves time to sync."""
    bootstrap, topic, group, member = setup
    m = member()
    joined = m.join(rebalance_timeout_ms=rebalance_timeout_ms)
    assert (joined.error_code, joined.generation_id, joined.leader) == (NONE, 1, joined.member_id)
    assert [(x.member_id, x.metadata) for x in joined.members] == [(joined.member_id, b"\x00\x01\x00\x00\x00\x00")]
    sync = m.sync(joined.generation_id, joined.member_id, {joined.member_id: b"own"})
    assert (sync.error_code, sync.assignment) == (NONE, b"own")
    assert m.commit(topic, joined.generation_id, joined.member_id) == NONE
    assert group_state(bootstrap, group) == ("Stable", 1)


def test_rebalance_timeout_zero_join_sync_commit(setup) -> None:
    """The issue's exact sequence with rebalance_timeout_ms 0: the commit is accepted. Kafka 3.7's
    source expires a DelayedSync(0) at once (the member would be gone before its SyncGroup); the
    issue reports Kafka accepting the commit, and kafkapy follows the issue: a rebalance timeout of
    0 gives the members their session timeout to sync (membership.pending_sync_timeout_ms)."""
    bootstrap, topic, group, member = setup
    m = member()
    joined = m.join(rebalance_timeout_ms=0)
    assert (joined.error_code, joined.generation_id) == (NONE, 1)
    sync = m.sync(joined.generation_id, joined.member_id, {joined.member_id: b"own"})
    assert (sync.error_code, sync.assignment) == (NONE, b"own")
    assert m.commit(topic, joined.generation_id, joined.member_id) == NONE
    assert group_state(bootstrap, group) == ("Stable", 1)


def test_rebalance_timeout_zero_with_two_members(setup) -> None:
    """Two members join the same generation with rebalance timeout 0; both sync and commit."""
    from kafka.protocol.consumer.group import JoinGroupResponse

    bootstrap, topic, group, member = setup
    a, b = member(), member()
    ids = []
    for m in (a, b):
        first = m.call(m.join_request("", 0), JoinGroupResponse, 5)
        assert first.error_code == MEMBER_ID_REQUIRED
        ids.append(first.member_id)
    # both joins are in flight together: the initial delay collects them into one generation
    a.send(a.join_request(ids[0], 0), 5)
    b.send(b.join_request(ids[1], 0), 5)
    ja, jb = a.receive(JoinGroupResponse, 5), b.receive(JoinGroupResponse, 5)
    assert (ja.error_code, jb.error_code) == (NONE, NONE) and ja.generation_id == jb.generation_id == 1
    leader, follower = (a, b) if ja.leader == ja.member_id else (b, a)
    leader_join, follower_join = (ja, jb) if leader is a else (jb, ja)
    assert len(leader_join.members) == 2
    leader.send(leader.sync_request(1, leader_join.member_id, {mid: mid.encode() for mid in ids}), 3)
    follower.send(follower.sync_request(1, follower_join.member_id, {}), 3)
    for m, joined in ((leader, leader_join), (follower, follower_join)):
        sync = m.receive_sync(3)
        assert (sync.error_code, sync.assignment) == (NONE, joined.member_id.encode())
        assert m.commit(topic, 1, joined.member_id) == NONE
    assert group_state(bootstrap, group) == ("Stable", 2)


def test_join_group_v0_uses_the_session_timeout_as_rebalance_timeout(setup) -> None:
    """JoinGroup v0 has no rebalance timeout; Kafka takes the session timeout (JoinGroupRequest
    .maybeOverrideRebalanceTimeout), so the member has that long to sync: the sequence passes."""
    bootstrap, topic, group, member = setup
    m = member()
    joined = m.join(rebalance_timeout_ms=0, version=0, session_timeout_ms=6_000)  # 0 is not sent at v0
    assert (joined.error_code, joined.generation_id) == (NONE, 1)
    time.sleep(0.3)  # well within the 6 s the coordinator waits for the SyncGroup
    sync = m.sync(joined.generation_id, joined.member_id, {joined.member_id: b"own"})
    assert (sync.error_code, sync.assignment) == (NONE, b"own")
    assert m.commit(topic, joined.generation_id, joined.member_id) == NONE
    assert group_state(bootstrap, group) == ("Stable", 1)
