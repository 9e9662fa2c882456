"""Share group requests on a raw socket to a real broker: ListGroups' share type and
ShareGroupDescribe, then requests that are wrong: stale or unknown share
session epochs, unknown members, acknowledgements of records not held, out of range, overlapping
or oversized acknowledgement batches, unknown topic ids. Each gets Kafka's error code; the
connection stays usable and the share state is untouched (the records still held are then
acknowledged normally and nothing is delivered twice). And group.share.enable=false: the share
APIs are not advertised (Kafka's share.version=0)."""
from __future__ import annotations

import itertools
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conformance.broker_process import start_broker  # noqa: E402
from conformance.kafka_wire import RawConnection, api_versions_request, frame, parse_api_versions_v0  # noqa: E402
from kafkapy.protocol.error_codes import ErrorCode  # noqa: E402
from kafkapy.protocol.headers import decode_response_header, encode_request_header  # noqa: E402
from kafkapy.protocol.messages import (  # noqa: E402
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    MetadataRequest,
    MetadataResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

pytestmark = pytest.mark.timeout(90)

SHARE_APIS = (76, 77, 78, 79)


class Wire:
    """Requests encoded with kafkapy's codecs, answers decoded with them."""

    def __init__(self, bootstrap: str) -> None:
        self.conn = RawConnection(bootstrap)
        self.ids = itertools.count(1)

    def call(self, request, version: int, response_cls):
        cid = next(self.ids)
        payload = encode_request_header(request.API_KEY, version, cid, "share-bad-input") + b"".join(
            bytes(p) for p in request.encode_parts(version))
        raw = self.conn.roundtrip(frame(payload))
        got, pos = decode_response_header(raw, request.API_KEY, version)
        assert got == cid
        return response_cls.decode(raw, version, pos)

    def close(self) -> None:
        self.conn.close()


def _fetch(wire, group, member, epoch, topic_id=None, acks=None, max_records=100, wait_ms=2000, version=1):
    R = ShareFetchRequest
    topics = []
    if topic_id is not None:
        batches = [R.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=t)
                   for f, l, t in (acks or [])]
        topics = [R.FetchTopic(topic_id=topic_id, partitions=[
            R.FetchPartition(partition_index=0, acknowledgement_batches=batches)])]
    return wire.call(R(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms,
                       min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
                       topics=topics), version, ShareFetchResponse)


def _ack(wire, group, member, epoch, topic_id, acks):
    R = ShareAcknowledgeRequest
    batches = [R.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=t) for f, l, t in acks]
    return wire.call(R(group_id=group, member_id=member, share_session_epoch=epoch, topics=[
        R.AcknowledgeTopic(topic_id=topic_id, partitions=[
            R.AcknowledgePartition(partition_index=0, acknowledgement_batches=batches)])]),
        1, ShareAcknowledgeResponse)


def _partition(response):
    [topic] = response.responses
    [part] = topic.partitions
    return part


@pytest.fixture(scope="module")
def setup():
    with start_broker(overrides={"offsets.topic.replication.factor": "1",
                                 "share.coordinator.state.topic.replication.factor": "1",
                                 "share.coordinator.state.topic.num.partitions": "3"}) as broker:
        topic, group = "share-bad-input", "share-bad-input-g"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            producer.produce(topic, value=b"v%d" % i)
        assert producer.flush(15) == 0
        wire = Wire(broker.bootstrap)
        try:
            meta = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12,
                             MetadataResponse)
            topic_id = meta.topics[0].topic_id
            # the group's coordinator exists before the first heartbeat
            found = wire.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4,
                              FindCoordinatorResponse)
            assert found.coordinators[0].error_code in (ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            R = IncrementalAlterConfigsRequest
            altered = wire.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
                R.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest")])]),
                1, IncrementalAlterConfigsResponse)
            assert altered.responses[0].error_code == ErrorCode.NONE
            yield broker, wire, group, topic_id
        finally:
            wire.close()


def test_session_epochs(setup):
    _, wire, group, topic_id = setup
    member = uuid.uuid4().hex
    # no session yet
    assert _fetch(wire, group, member, 3, topic_id).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert _ack(wire, group, member, 1, topic_id, [(0, 0, [1])]).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    # a new session cannot carry acknowledgements; ShareAcknowledge cannot open one
    assert _fetch(wire, group, member, 0, topic_id, acks=[(0, 0, [1])]).error_code == ErrorCode.INVALID_REQUEST
    assert _ack(wire, group, member, 0, topic_id, [(0, 0, [1])]).error_code == \
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    opened = _fetch(wire, group, member, 0, topic_id, max_records=0, wait_ms=0)
    assert opened.error_code == ErrorCode.NONE
    # a stale or skipped epoch
    assert _fetch(wire, group, member, 5, topic_id).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert _fetch(wire, group, member, 1, topic_id, max_records=0).error_code == ErrorCode.NONE
    assert _fetch(wire, group, member, 1, topic_id).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # closing it
    assert _fetch(wire, group, member, -1, topic_id).error_code == ErrorCode.NONE
    assert _fetch(wire, group, member, 3, topic_id).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_unknown_members_and_fenced_epochs_on_heartbeat(setup):
    _, wire, group, _ = setup
    R = ShareGroupHeartbeatRequest
    member = uuid.uuid4().hex
    # no member has joined the group yet (Kafka 4.4: GROUP_ID_NOT_FOUND; kafkapy does not store share
    # groups, so it cannot tell a group never seen from one a moved coordinator lost: its members rejoin)
    answer = wire.call(R(group_id=group, member_id=member, member_epoch=4), 1, ShareGroupHeartbeatResponse)
    assert answer.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    joined = wire.call(R(group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=["share-bad-input"]),
                       1, ShareGroupHeartbeatResponse)
    assert joined.error_code == ErrorCode.NONE and joined.member_epoch > 0 and joined.assignment is not None
    unknown = wire.call(R(group_id=group, member_id=uuid.uuid4().hex, member_epoch=4), 1, ShareGroupHeartbeatResponse)
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    stale = wire.call(R(group_id=group, member_id=member, member_epoch=joined.member_epoch + 7), 1,
                      ShareGroupHeartbeatResponse)
    assert stale.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert wire.call(R(group_id=group, member_id="", member_epoch=0, subscribed_topic_names=["x"]), 1,
                     ShareGroupHeartbeatResponse).error_code == ErrorCode.INVALID_REQUEST
    left = wire.call(R(group_id=group, member_id=member, member_epoch=-1), 1, ShareGroupHeartbeatResponse)
    assert left.error_code == ErrorCode.NONE and left.member_epoch == -1


def test_bad_acknowledgements_leave_the_share_state_alone(setup):
    _, wire, group, topic_id = setup
    holder, other = uuid.uuid4().hex, uuid.uuid4().hex
    assert _fetch(wire, group, holder, 0, topic_id, max_records=0, wait_ms=0).error_code == ErrorCode.NONE
    got = _partition(_fetch(wire, group, holder, 1, topic_id, max_records=3))
    assert got.error_code == ErrorCode.NONE and got.acquired_records
    first, last = got.acquired_records[0].first_offset, got.acquired_records[-1].last_offset
    assert (first, got.acquired_records[0].delivery_count) == (0, 1)
    epoch = 2
    bad = [
        ([(last + 100, last + 100, [1])], ErrorCode.INVALID_REQUEST),          # past what was delivered
        ([(first, last, [1]), (last, last, [1])], ErrorCode.INVALID_RECORD_STATE),  # last offset twice
        ([(first, last, [1]), (first, first, [1])], ErrorCode.INVALID_REQUEST),  # out of order
        ([(last, first - 1, [1])], ErrorCode.INVALID_REQUEST),                 # reversed
        ([(first, last, [1] * (last - first + 3))], ErrorCode.INVALID_REQUEST),  # types length
        ([(first, first, [9])], ErrorCode.INVALID_REQUEST),                    # unknown type
        ([(first, first, [4])], ErrorCode.INVALID_REQUEST),                    # RENEW without IsRenewAck
        ([(0, 2**40, [1])], ErrorCode.INVALID_REQUEST),                        # oversized
    ]
    for acks, code in bad:
        answer = _ack(wire, group, holder, epoch, topic_id, acks)
        epoch += 1
        assert answer.error_code == ErrorCode.NONE
        assert _partition(answer).error_code == code, acks
    # another member's session cannot acknowledge what the holder has
    assert _fetch(wire, group, other, 0, topic_id, max_records=0, wait_ms=0).error_code == ErrorCode.NONE
    stolen = _ack(wire, group, other, 1, topic_id, [(first, last, [1])])
    assert _partition(stolen).error_code == ErrorCode.INVALID_RECORD_STATE
    # an unknown topic id
    unknown = _ack(wire, group, holder, epoch, uuid.uuid4(), [(first, last, [1])])
    epoch += 1
    assert _partition(unknown).error_code == ErrorCode.UNKNOWN_TOPIC_ID
    # the holder still holds everything: a release brings it back with delivery count 2
    released = _ack(wire, group, holder, epoch, topic_id, [(first, last, [2])])
    epoch += 1
    assert _partition(released).error_code == ErrorCode.NONE
    again = _partition(_fetch(wire, group, other, 2, topic_id, max_records=last - first + 1))
    assert [(r.first_offset, r.delivery_count) for r in again.acquired_records][:1] == [(first, 2)]
    assert _fetch(wire, group, other, -1, topic_id).error_code == ErrorCode.NONE
    assert _fetch(wire, group, holder, -1, topic_id).error_code == ErrorCode.NONE


def test_renew_extends_a_lock_on_v2(setup):
    _, wire, group, topic_id = setup
    member = uuid.uuid4().hex
    assert _fetch(wire, group, member, 0, topic_id, max_records=0, wait_ms=0).error_code == ErrorCode.NONE
    got = _partition(_fetch(wire, group, member, 1, topic_id, max_records=1))
    held = got.acquired_records[0].first_offset
    R = ShareAcknowledgeRequest
    renewed = wire.call(R(group_id=group, member_id=member, share_session_epoch=2, is_renew_ack=True, topics=[
        R.AcknowledgeTopic(topic_id=topic_id, partitions=[R.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            R.AcknowledgementBatch(first_offset=held, last_offset=held, acknowledge_types=[4])])])]),
        2, ShareAcknowledgeResponse)
    assert renewed.error_code == ErrorCode.NONE and _partition(renewed).error_code == ErrorCode.NONE
    assert renewed.acquisition_lock_timeout_ms == 30000
    assert _fetch(wire, group, member, -1, topic_id).error_code == ErrorCode.NONE


def test_share_apis_not_advertised_when_turned_off():
    with start_broker(overrides={"offsets.topic.replication.factor": "1", "group.share.enable": "false"}) as off:
        with RawConnection(off.bootstrap) as conn:
            ranges = parse_api_versions_v0(conn.roundtrip(api_versions_request(0, correlation_id=3))).ranges
    assert not set(SHARE_APIS) & set(ranges)
    assert 68 in ranges  # the consumer protocol stays


def test_list_groups_share_type_and_share_group_describe(setup):
    _, wire, group, topic_id = setup
    R = ShareGroupHeartbeatRequest
    member = uuid.uuid4().hex
    joined = wire.call(R(group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=["share-bad-input"]),
                       1, ShareGroupHeartbeatResponse)
    assert joined.error_code == ErrorCode.NONE
    [tp] = joined.assignment.topic_partitions
    assert (tp.topic_id, tp.partitions) == (topic_id, [0])
    try:
        listed = wire.call(ListGroupsRequest(types_filter=["share"]), 5, ListGroupsResponse)
        assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed.groups] == [
            (group, "share", "share", "Stable")]
        assert wire.call(ListGroupsRequest(types_filter=["classic"]), 5, ListGroupsResponse).groups == []
        assert wire.call(ListGroupsRequest(states_filter=["Empty"], types_filter=["share"]), 5,
                         ListGroupsResponse).groups == []
        described = wire.call(ShareGroupDescribeRequest(group_ids=[group, "no-such-group"]), 1,
                              ShareGroupDescribeResponse)
        found, missing = described.groups
        assert found.error_code == ErrorCode.NONE and found.group_state == "Stable"
        assert [(m.member_id, m.subscribed_topic_names) for m in found.members] == [(member, ["share-bad-input"])]
        [assigned] = found.members[0].assignment.topic_partitions
        assert (assigned.topic_name, assigned.partitions) == ("share-bad-input", [0])
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        wire.call(R(group_id=group, member_id=member, member_epoch=-1), 1, ShareGroupHeartbeatResponse)
    listed = wire.call(ListGroupsRequest(types_filter=["share"]), 5, ListGroupsResponse)
    assert [(g.group_id, g.group_state) for g in listed.groups] == [(group, "Empty")]


def test_describe_share_group_offsets(setup):
    _, wire, group, topic_id = setup
    R = DescribeShareGroupOffsetsRequest
    member = uuid.uuid4().hex
    joined = wire.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                  subscribed_topic_names=["share-bad-input"]),
                       1, ShareGroupHeartbeatResponse)
    assert joined.error_code == ErrorCode.NONE
    try:
        assert _fetch(wire, group, member, 0, topic_id, max_records=0, wait_ms=0).error_code == ErrorCode.NONE
        got = _partition(_fetch(wire, group, member, 1, topic_id, max_records=100))
        first, last = got.acquired_records[0].first_offset, got.acquired_records[-1].last_offset
        assert (first, last) == (0, 9)
        # accept 0-3: the start offset moves to 4; 4-9 are in flight (lag counts them)
        assert _partition(_ack(wire, group, member, 2, topic_id, [(0, 3, [1])])).error_code == ErrorCode.NONE
        answer = wire.call(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),
                                     R.DescribeShareGroupOffsetsRequestGroup(group_id="no-such-share-group",
                                                                             topics=None)]),
                           1, DescribeShareGroupOffsetsResponse)
        found, missing = answer.groups
        assert found.error_code == ErrorCode.NONE
        [topic] = found.topics
        assert (topic.topic_name, topic.topic_id) == ("share-bad-input", topic_id)
        [part] = topic.partitions
        assert (part.partition_index, part.start_offset, part.lag, part.error_code) == (0, 4, 6, ErrorCode.NONE)
        # Kafka 4.4: all topics of a group that does not exist is no error and no topics
        assert (missing.error_code, missing.topics) == (ErrorCode.NONE, [])
        # by topic, v0 (no lag), and an unknown partition
        named = wire.call(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
            R.DescribeShareGroupOffsetsRequestTopic(topic_name="share-bad-input", partitions=[0, 5])])]),
            0, DescribeShareGroupOffsetsResponse)
        p0, p5 = named.groups[0].topics[0].partitions
        assert (p0.start_offset, p0.error_code) == (4, ErrorCode.NONE)
        assert p5.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _fetch(wire, group, member, -1, topic_id).error_code == ErrorCode.NONE
    finally:
        wire.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1), 1,
                  ShareGroupHeartbeatResponse)


def test_share_version_zero_turns_share_groups_off(setup):
    """kafka-features.sh disable --feature share.version: heartbeats answer UNSUPPORTED_VERSION
    (Kafka 4.2's GroupCoordinatorService), and share groups work again once it is back at 1."""
    from kafkapy.protocol.messages import UpdateFeaturesRequest, UpdateFeaturesResponse

    _, wire, group, _ = setup
    U = UpdateFeaturesRequest

    def set_share_version(level: int, upgrade_type: int) -> None:
        answer = wire.call(U(timeout_ms=10_000, feature_updates=[U.FeatureUpdateKey(
            feature="share.version", max_version_level=level, upgrade_type=upgrade_type)]), 1, UpdateFeaturesResponse)
        assert answer.error_code == ErrorCode.NONE, answer

    R = ShareGroupHeartbeatRequest
    join = R(group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, subscribed_topic_names=["share-bad-input"])
    set_share_version(0, 2)  # SAFE_DOWNGRADE
    try:
        assert wire.call(join, 1, ShareGroupHeartbeatResponse).error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        set_share_version(1, 1)  # UPGRADE
    joined = wire.call(join, 1, ShareGroupHeartbeatResponse)
    assert joined.error_code == ErrorCode.NONE
    wire.call(R(group_id=group, member_id=join.member_id, member_epoch=-1), 1, ShareGroupHeartbeatResponse)


def test_alter_and_delete_share_group_offsets_and_delete_the_group(setup):
    """AlterShareGroupOffsets / DeleteShareGroupOffsets / DeleteGroups: refused while a member is
    active (NON_EMPTY_GROUP), then the start offset moves and the next fetch starts there; deleted
    offsets read back as -1; DescribeGroups (up to v5) shows a share group as Dead, as Kafka."""
    _, wire, _, topic_id = setup
    topic, group = "share-bad-input", "share-admin-g"
    C = IncrementalAlterConfigsRequest
    assert wire.call(C(resources=[C.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        C.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest")])]),
        1, IncrementalAlterConfigsResponse).responses[0].error_code == ErrorCode.NONE
    A, D, O = AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest

    def alter(group_id, *partitions):
        return wire.call(A(group_id=group_id, topics=[A.AlterShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                          for p, o in partitions])]), 0, AlterShareGroupOffsetsResponse)

    def delete_offsets(group_id, *topics):
        return wire.call(D(group_id=group_id, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                                                      for t in topics]), 0, DeleteShareGroupOffsetsResponse)

    def start_offset():
        answer = wire.call(O(groups=[O.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
            O.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])]),
            1, DescribeShareGroupOffsetsResponse)
        return answer.groups[0].topics[0].partitions[0].start_offset

    def delete_group():
        return wire.call(DeleteGroupsRequest(groups_names=[group]), 2, DeleteGroupsResponse).results[0].error_code

    def join_and_fetch():
        member = uuid.uuid4().hex
        assert wire.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                    subscribed_topic_names=[topic]),
                         1, ShareGroupHeartbeatResponse).error_code == ErrorCode.NONE
        opened = _fetch(wire, group, member, 0, topic_id, max_records=0, wait_ms=0)
        assert opened.error_code == ErrorCode.NONE
        got = _partition(_fetch(wire, group, member, 1, topic_id, max_records=100))
        return member, got.acquired_records[0].first_offset

    def leave(member, epoch):
        assert _fetch(wire, group, member, -1, topic_id, max_records=0, wait_ms=0).error_code == ErrorCode.NONE
        wire.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1), 1,
                  ShareGroupHeartbeatResponse)

    # Kafka 4.4 creates a share group no member joined yet (test_share_groups_offsets_admin.py)
    assert alter(f"{group}-never-joined", (0, 3)).error_code == ErrorCode.NONE
    assert wire.call(DeleteGroupsRequest(groups_names=[f"{group}-never-joined"]), 2,
                     DeleteGroupsResponse).results[0].error_code == ErrorCode.NONE
    member, first = join_and_fetch()
    assert first == 0
    # acknowledged with a fetch that wants no records: its Records field is empty, never null
    # (librdkafka's share consumer drops a response with a null one, acknowledgement results included)
    acked = _partition(_fetch(wire, group, member, 2, topic_id, acks=[(0, 1, [1])], max_records=0, wait_ms=0))
    assert (acked.error_code, acked.acknowledge_error_code) == (ErrorCode.NONE, ErrorCode.NONE)
    assert acked.records is not None
    try:
        refused = alter(group, (0, 7))
        assert refused.error_code == ErrorCode.NON_EMPTY_GROUP
        assert refused.responses == []    # Kafka 4.4: the error alone
        assert delete_offsets(group, topic).error_code == ErrorCode.NON_EMPTY_GROUP
        assert delete_group() == ErrorCode.NON_EMPTY_GROUP
        assert start_offset() == 2
    finally:
        leave(member, 3)
    # empty now: the start offset moves to 7, bad partitions answer their own errors
    answer = alter(group, (0, 7), (3, 0))
    assert answer.error_code == ErrorCode.NONE
    [t] = answer.responses
    assert (t.topic_name, t.topic_id) == (topic, topic_id)
    assert [(p.partition_index, p.error_code) for p in t.partitions] == [
        (0, ErrorCode.NONE), (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert alter(group, (0, -5)).responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    assert start_offset() == 7
    member, first = join_and_fetch()
    assert first == 7
    leave(member, 2)
    # deleted: read back as never fetched; an unknown topic is named in the answer
    deleted = delete_offsets(group, topic, "no-such-topic")
    assert deleted.error_code == ErrorCode.NONE
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        (topic, ErrorCode.NONE), ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert start_offset() == -1
    # DescribeGroups up to v5: a group that is not classic is described as Dead, no error (Kafka 4.x)
    [described] = wire.call(DescribeGroupsRequest(groups=[group]), 5, DescribeGroupsResponse).groups
    assert (described.error_code, described.group_state, described.members) == (ErrorCode.NONE, "Dead", [])
    assert delete_group() == ErrorCode.NONE
    listed = wire.call(ListGroupsRequest(types_filter=["share"]), 5, ListGroupsResponse)
    assert group not in [g.group_id for g in listed.groups]
    assert delete_group() == ErrorCode.GROUP_ID_NOT_FOUND
