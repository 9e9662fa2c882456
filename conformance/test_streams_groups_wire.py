"""Streams groups (KIP-1071) on the wire: StreamsGroupHeartbeat/Describe against `kafkapy serve`,
with kafkapy's own client and generated request classes (Kafka 4.4's schemas, v1)."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from kafkapy.net.client import BrokerConnection
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreateTopicsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    StreamsGroupDescribeRequest,
    StreamsGroupHeartbeatRequest,
)

pytestmark = pytest.mark.timeout(90)

# the initial rebalance delay (Kafka's 3 s) is tested on its own broker below
NO_DELAY = {"group.streams.initial.rebalance.delay.ms": "0", "group.streams.assignment.interval.ms": "0"}


@pytest.fixture(scope="module")
def broker_overrides():
    return NO_DELAY

V = 1
_Req = StreamsGroupHeartbeatRequest
MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS = 1, 3


def _topology(source: str, app: str, epoch: int = 0) -> _Req.Topology:
    return _Req.Topology(epoch=epoch, subtopologies=[_Req.Subtopology(
        subtopology_id="0", source_topics=[source], source_topic_regex=[],
        state_changelog_topics=[_Req.TopicInfo(name=f"{app}-store-changelog", partitions=0, replication_factor=0,
                                               topic_configs=[])],
        repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])])


def _join(group: str, member: str, topology, process: str | None = None) -> _Req:
    return _Req(group_id=group, member_id=member, member_epoch=0, endpoint_information_epoch=0,
                rebalance_timeout_ms=10000, topology=topology, process_id=process or member,
                active_tasks=[], standby_tasks=[], warmup_tasks=[], client_tags=[])


def _beat(group: str, member: str, epoch: int, active: dict[str, list[int]] | None = None) -> _Req:
    tasks = None if active is None else [_Req.TaskIds(subtopology_id=s, partitions=p) for s, p in active.items()]
    return _Req(group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
                active_tasks=tasks, standby_tasks=None if tasks is None else [],
                warmup_tasks=None if tasks is None else [])


def _active(response) -> dict[str, list[int]] | None:
    if response.active_tasks is None:
        return None
    return {t.subtopology_id: sorted(t.partitions) for t in response.active_tasks}


class _Wire:
    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.loop = asyncio.new_event_loop()
        self.conn = BrokerConnection(host, int(port), client_id="streams-wire-test", request_timeout_s=15)
        self.send(FindCoordinatorRequest(key="streams-wire-test", key_type=0), 3)

    def send(self, request, version: int = V):
        for _ in range(100):
            response = self.loop.run_until_complete(self.conn.send(request, version))
            # the first request of a group may find __consumer_offsets still being created/loaded
            if getattr(response, "error_code", 0) not in (ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                                          ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                                          ErrorCode.NOT_COORDINATOR):
                return response
            self.loop.run_until_complete(asyncio.sleep(0.1))
        return response

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> int:
        req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
            configs=[])], timeout_ms=10000)
        resp = self.send(req, 5)
        assert resp.topics[0].error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NOT_CONTROLLER)
        return resp.topics[0].error_code

    def close(self) -> None:
        async def close():
            self.conn.close()
            await asyncio.sleep(0)

        self.loop.run_until_complete(close())
        self.loop.close()


@pytest.fixture
def wire(broker):
    w = _Wire(broker.bootstrap)
    try:
        yield w
    finally:
        w.close()


def _group() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


def test_missing_source_topic_status(wire):
    group = _group()
    resp = wire.send(_join(group, "m1", _topology("no-such-topic-" + group, group)))
    assert resp.error_code == 0
    assert [s.status_code for s in resp.status] == [MISSING_SOURCE_TOPICS]
    assert "no-such-topic" in resp.status[0].status_detail
    assert resp.member_epoch >= 1 and _active(resp) == {}
    described = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
    assert described.groups[0].group_state == "NotReady"


def test_internal_topics_created_then_tasks_assigned(wire, topic_name):
    group = _group()
    wire.create_topic(topic_name, 4)
    resp = wire.send(_join(group, "m1", _topology(topic_name, group)))
    assert resp.error_code == 0, resp.error_message
    assert [s.status_code for s in resp.status] == [MISSING_INTERNAL_TOPICS]
    # the coordinator created the changelog with the source's partition count
    for _ in range(20):
        resp = wire.send(_beat(group, "m1", resp.member_epoch))
        assert resp.error_code == 0
        if not resp.status and _active(resp):
            break
    assert _active(resp) == {"0": [0, 1, 2, 3]}
    described = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=True))
    g = described.groups[0]
    assert g.error_code == 0 and g.group_state == "Stable"
    assert g.topology.subtopologies[0].state_changelog_topics[0].partitions == 4
    listed = wire.send(ListGroupsRequest(states_filter=[], types_filter=["streams"]), 5)
    assert [(x.group_id, x.group_type) for x in listed.groups if x.group_id == group] == [(group, "streams")]


def test_two_members_revocation_before_reassignment(wire, topic_name):
    group = _group()
    wire.create_topic(topic_name, 4)
    topology = _topology(topic_name, group)
    r1 = wire.send(_join(group, "m1", topology))
    for _ in range(20):
        r1 = wire.send(_beat(group, "m1", r1.member_epoch, _active(r1) or {}))
        if _active(r1):
            break
    owned1 = _active(r1)
    assert owned1 == {"0": [0, 1, 2, 3]}
    r2 = wire.send(_join(group, "m2", topology))
    assert r2.error_code == 0
    # m2 gets nothing until m1 revoked: the tasks are still m1's
    assert _active(r2) == {}
    r1 = wire.send(_beat(group, "m1", r1.member_epoch, owned1))
    kept = _active(r1)
    assert kept is not None and len(kept["0"]) == 2
    r2 = wire.send(_beat(group, "m2", r2.member_epoch, {}))
    assert not _active(r2)  # still pending revocation by m1
    r1 = wire.send(_beat(group, "m1", r1.member_epoch, kept))  # m1 acknowledges the revocation
    r2 = wire.send(_beat(group, "m2", r2.member_epoch, {}))
    got = _active(r2)
    assert got is not None and sorted(got["0"] + kept["0"]) == [0, 1, 2, 3]
    assert r1.member_epoch == r2.member_epoch
    # stale epochs are fenced; unknown tasks are refused; the group is undisturbed
    assert wire.send(_beat(group, "m1", r1.member_epoch + 5, kept)).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert wire.send(_beat(group, "nobody", 3, {})).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    bad = wire.send(_beat(group, "m2", r2.member_epoch, {"0": [9]}))
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    bad = wire.send(_beat(group, "m2", r2.member_epoch, {"7": [0]}))
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    # a topology contradicting the group's: Kafka 4.4 has no topology updates
    other = _topology(topic_name + "-other", group)
    assert wire.send(_join(group, "m3", other)).error_code == ErrorCode.INVALID_REQUEST
    # a stale topology epoch: accepted with STALE_TOPOLOGY
    # a member commits with its epoch; a stale epoch is refused
    commit = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=r2.member_epoch, member_id="m2",
                                 topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                     name=topic_name, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                                         partition_index=got["0"][0], committed_offset=5)])])
    assert wire.send(commit, 9).topics[0].partitions[0].error_code == 0
    commit.generation_id_or_member_epoch = r2.member_epoch + 1
    assert wire.send(commit, 9).topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    described = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
    assert described.groups[0].group_state == "Stable"
    assert len(described.groups[0].members) == 2
    # leaving: m2's tasks go back to m1
    assert wire.send(_beat(group, "m2", -1)).error_code == 0
    r1 = wire.send(_beat(group, "m1", r1.member_epoch, kept))
    assert _active(r1) == {"0": [0, 1, 2, 3]}


def test_invalid_requests(wire):
    group = _group()
    no_timeout = _join(group, "m1", _topology("t", group))
    no_timeout.rebalance_timeout_ms = -1
    assert wire.send(no_timeout).error_code == ErrorCode.INVALID_REQUEST
    assert wire.send(_join(group, "m1", None)).error_code == ErrorCode.INVALID_REQUEST
    internal = _join(group, "m1", _topology("__consumer_offsets", group))
    assert wire.send(internal).error_code == ErrorCode.STREAMS_INVALID_TOPOLOGY
    bad_changelog = _join(group, "m1", _topology("t", group))
    bad_changelog.topology.subtopologies[0].state_changelog_topics[0].partitions = 3
    assert wire.send(bad_changelog).error_code == ErrorCode.STREAMS_INVALID_TOPOLOGY
    assert wire.send(_beat(group, "m1", 1)).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_restart_keeps_the_group(broker_factory, topic_name):
    broker = broker_factory(NO_DELAY)
    wire = _Wire(broker.bootstrap)
    group = _group()
    try:
        wire.create_topic(topic_name, 2)
        r = wire.send(_join(group, "m1", _topology(topic_name, group)))
        for _ in range(20):
            r = wire.send(_beat(group, "m1", r.member_epoch, _active(r) or {}))
            if _active(r) and not r.status:
                break
        assert _active(r) == {"0": [0, 1]}
        epoch = r.member_epoch
    finally:
        wire.close()
    broker.restart()
    wire = _Wire(broker.bootstrap)
    try:
        described = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
        g = described.groups[0]
        assert g.error_code == 0 and g.group_state == "Stable"
        assert [(m.member_id, m.member_epoch) for m in g.members] == [("m1", epoch)]
        assert {t.subtopology_id: sorted(t.partitions) for t in g.members[0].assignment.active_tasks} == {"0": [0, 1]}
        assert g.topology.epoch == 0 and g.topology.subtopologies[0].source_topics == [topic_name]
        r = wire.send(_beat(group, "m1", epoch, {"0": [0, 1]}))
        assert r.error_code == 0 and r.member_epoch == epoch
    finally:
        wire.close()


def test_initial_rebalance_delay(broker_factory, topic_name):
    """A new group's first members get no tasks and ASSIGNMENT_DELAYED until the delay is over."""
    broker = broker_factory({"group.streams.initial.rebalance.delay.ms": "1500"})
    wire = _Wire(broker.bootstrap)
    group = _group()
    try:
        wire.create_topic(topic_name, 2)
        wire.create_topic(f"{group}-store-changelog", 2)
        r = wire.send(_join(group, "m1", _topology(topic_name, group)))
        assert r.error_code == 0 and [s.status_code for s in r.status] == [5]  # ASSIGNMENT_DELAYED
        assert _active(r) == {} and r.member_epoch == 1
        assert r.task_offset_interval_ms == 60000 and r.acceptable_recovery_lag == 10000
        r2 = wire.send(_join(group, "m2", _topology(topic_name, group)))
        assert [s.status_code for s in r2.status] == [5] and _active(r2) == {}
        wire.loop.run_until_complete(asyncio.sleep(2))
        r = wire.send(_beat(group, "m1", r.member_epoch, {}))
        r2 = wire.send(_beat(group, "m2", r2.member_epoch, {}))
        assert not r.status and not r2.status
        assert sorted(_active(r)["0"] + _active(r2)["0"]) == [0, 1]
    finally:
        wire.close()


def test_acls(broker_factory, topic_name):
    """KafkaApis' checks: READ on the group, DESCRIBE on every topic of the topology, CREATE for the
    internal topics (else a MISSING_INTERNAL_TOPICS detail naming them), DESCRIBE to describe."""
    from kafkapy.protocol.messages import CreateAclsRequest

    broker = broker_factory({**NO_DELAY, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                             "allow.everyone.if.no.acl.found": "true"})
    wire = _Wire(broker.bootstrap)
    group, denied_group = _group(), _group()
    try:
        wire.create_topic(topic_name, 2)
        wire.create_topic("secret-" + group, 2)
        acl = CreateAclsRequest.AclCreation
        deny = [acl(resource_type=3, resource_name=denied_group, resource_pattern_type=3, principal="User:ANONYMOUS",
                    host="*", operation=3, permission_type=2),          # READ on the group
                acl(resource_type=2, resource_name="secret-" + group, resource_pattern_type=3,
                    principal="User:ANONYMOUS", host="*", operation=8, permission_type=2),  # DESCRIBE topic
                acl(resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3,
                    principal="User:ANONYMOUS", host="*", operation=7, permission_type=2),  # CREATE on cluster
                acl(resource_type=2, resource_name=group, resource_pattern_type=4, principal="User:ANONYMOUS",
                    host="*", operation=7, permission_type=2),          # CREATE on the app's topics
                acl(resource_type=2, resource_name=group, resource_pattern_type=4, principal="User:ANONYMOUS",
                    host="*", operation=8, permission_type=3)]          # but DESCRIBE them
        created = wire.send(CreateAclsRequest(creations=deny), 3)
        assert [c.error_code for c in created.results] == [0] * 5
        r = wire.send(_join(denied_group, "m1", _topology(topic_name, denied_group)))
        assert r.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        r = wire.send(_join(group, "m1", _topology("secret-" + group, group)))
        assert r.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        r = wire.send(_join(group, "m1", _topology(topic_name, group)))
        assert r.error_code == 0 and [s.status_code for s in r.status] == [MISSING_INTERNAL_TOPICS]
        assert f"Unauthorized to CREATE on topics {group}-store-changelog" in r.status[0].status_detail
        # an ACL on the group (the DENY READ) and none allowing DESCRIBE: describing it is denied too
        d = wire.send(StreamsGroupDescribeRequest(group_ids=[group, denied_group], include_authorized_operations=True))
        assert [(g.group_id, g.error_code) for g in d.groups] == [(group, 0), (denied_group, ErrorCode.GROUP_AUTHORIZATION_FAILED)]
        assert d.groups[0].authorized_operations > 0
    finally:
        wire.close()


def test_admin_metrics_and_console(broker_factory, topic_name):
    """OffsetCommit/OffsetFetch/TxnOffsetCommit by members, OffsetDelete, DeleteGroups, DescribeGroups,
    the group counts on /metrics and the console's group pages for a streams group."""
    import urllib.request

    from conformance.broker_process import free_port
    from kafkapy.protocol.messages import (
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        TxnOffsetCommitRequest,
    )

    metrics_port, console_port = free_port(), free_port()
    broker = broker_factory({**NO_DELAY, "transaction.partition.verification.enable": "false",
                             "kafkapy.metrics.listener": f"http://127.0.0.1:{metrics_port}",
                             "kafkapy.console.listener": f"http://127.0.0.1:{console_port}"})
    wire = _Wire(broker.bootstrap)
    group = _group()
    try:
        wire.create_topic(topic_name, 2)
        wire.create_topic(f"{group}-store-changelog", 2)
        r = wire.send(_join(group, "m1", _topology(topic_name, group)))
        r = wire.send(_beat(group, "m1", r.member_epoch, {}))
        assert _active(r) in ({"0": [0, 1]}, None)
        epoch = r.member_epoch
        commit = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=epoch, member_id="m1",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic_name, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=3 + p)
                for p in (0, 1)])])
        assert [p.error_code for p in wire.send(commit, 9).topics[0].partitions] == [0, 0]
        assert wire.send(commit, 8).topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        commit.member_id = "nobody"
        assert wire.send(commit, 9).topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
        txn = TxnOffsetCommitRequest(
            transactional_id="t1", group_id=group, producer_id=1000, producer_epoch=0, generation_id=epoch + 3,
            member_id="m1", group_instance_id=None,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic_name, partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=9,
                                                                       committed_leader_epoch=-1,
                                                                       committed_metadata="")])])
        assert wire.send(txn, 4).topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION
        fetch = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group, member_id="m1", member_epoch=epoch, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name=topic_name, partition_indexes=[0, 1])])],
            require_stable=False)
        fetched = wire.send(fetch, 9).groups[0]
        assert fetched.error_code == 0
        assert [p.committed_offset for p in fetched.topics[0].partitions] == [3, 4]
        fetch.groups[0].member_epoch = epoch + 1
        assert wire.send(fetch, 9).groups[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
        # a topic of the topology keeps its offsets while the group has members
        delete = OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=topic_name, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
        deleted = wire.send(delete, 0)
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        assert wire.send(DeleteGroupsRequest(groups_names=[group]), 2).results[0].error_code == \
            ErrorCode.NON_EMPTY_GROUP
        described = wire.send(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 5)
        assert described.groups[0].group_state == "Dead"  # not a classic group (DescribeGroups v5)
        listed = wire.send(ListGroupsRequest(states_filter=["stable"], types_filter=[]), 5)
        assert [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group] == [("streams", "Stable")]
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        assert 'kafka_server_group_coordinator_metrics_group_count{protocol="streams"} 1.0' in text
        assert 'kafka_server_group_coordinator_metrics_streams_group_count{state="stable"} 1.0' in text
        page = urllib.request.urlopen(f"http://127.0.0.1:{console_port}/groups", timeout=10).read().decode()
        assert group in page and "streams" in page
        page = urllib.request.urlopen(f"http://127.0.0.1:{console_port}/groups/{group}", timeout=10).read().decode()
        assert "active 0_0-1" in page and "process m1" in page
        # once the member left: the offsets of the topology's topics may go, then the group
        assert wire.send(_beat(group, "m1", -1)).error_code == 0
        assert wire.send(delete, 0).topics[0].partitions[0].error_code == 0
        assert wire.send(DeleteGroupsRequest(groups_names=[group]), 2).results[0].error_code == 0
        d = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
        assert d.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        wire.close()
    broker.restart()
    wire = _Wire(broker.bootstrap)
    try:  # the deletion is durable: tombstones for the streams records too
        d = wire.send(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False))
        assert d.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        wire.close()


def test_oversized_topology(wire, topic_name):
    """A topology whose records exceed __consumer_offsets' max.message.bytes: Kafka's coordinator
    answers UNKNOWN_SERVER_ERROR (a too large batch) and keeps nothing; other groups are undisturbed."""
    group, other = _group(), _group()
    wire.create_topic(topic_name, 1)
    ok = wire.send(_join(other, "m1", _topology(topic_name, other)))
    assert ok.error_code == 0
    subtopologies = [_Req.Subtopology(
        subtopology_id=str(i), source_topics=[f"t{i:05d}-" + "x" * 200], source_topic_regex=[],
        state_changelog_topics=[], repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])
        for i in range(6000)]
    big = wire.send(_join(group, "m1", _Req.Topology(epoch=0, subtopologies=subtopologies)))
    assert big.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    d = wire.send(StreamsGroupDescribeRequest(group_ids=[group, other], include_authorized_operations=False))
    assert [g.error_code for g in d.groups] == [ErrorCode.GROUP_ID_NOT_FOUND, 0]
    assert wire.send(_beat(other, "m1", ok.member_epoch, {})).error_code == 0
    # the same member can then join with a topology that fits
    assert wire.send(_join(group, "m1", _topology(topic_name, group))).error_code == 0


def test_group_configs(wire, topic_name):
    """streams.* group configs: DescribeConfigs shows the broker defaults, IncrementalAlterConfigs
    sets them within Kafka's bounds, the heartbeat uses them; share.* configs stay apart."""
    from kafkapy.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest

    group = _group()

    def describe() -> dict[str, tuple[str, bool]]:
        resp = wire.send(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=32, resource_name=group, configuration_keys=None)], include_synonyms=False,
            include_documentation=False), 4)
        assert resp.results[0].error_code == 0
        return {c.name: (c.value, c.config_source == 5) for c in resp.results[0].configs}

    def alter(**configs) -> int:
        res = IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
            IncrementalAlterConfigsRequest.AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v)
            for k, v in configs.items()])
        return wire.send(IncrementalAlterConfigsRequest(resources=[res], validate_only=False), 1) \
            .responses[0].error_code

    before = describe()
    assert before["streams.session.timeout.ms"] == ("45000", True)
    assert before["streams.num.standby.replicas"] == ("0", True)
    assert "share.record.lock.duration.ms" in before
    assert alter(streams_session_timeout_ms="1000") == ErrorCode.INVALID_CONFIG      # below the broker minimum
    assert alter(streams_num_standby_replicas="3") == ErrorCode.INVALID_CONFIG       # above the maximum (2)
    assert alter(streams_heartbeat_interval_ms="6000", streams_num_standby_replicas="1",
                 share_record_lock_duration_ms="15000") == 0
    after = describe()
    assert after["streams.heartbeat.interval.ms"] == ("6000", False)
    assert after["streams.num.standby.replicas"] == ("1", False)
    assert after["share.record.lock.duration.ms"] == ("15000", False)
    wire.create_topic(topic_name, 1)
    r = wire.send(_join(group, "m1", _topology(topic_name, group)))
    assert r.error_code == 0 and r.heartbeat_interval_ms == 6000
