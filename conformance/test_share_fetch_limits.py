"""The limits a ShareFetch carries, honoured as Kafka 4.x honours them, on a raw socket.

Read from Kafka 4.2's sources (KafkaApis.handleShareFetchRequest, SharePartitionManager,
DelayedShareFetch, PartitionMaxBytesStrategy, PartitionRotateStrategy, ShareFetchUtils,
SharePartition.acquire/createBatches); docs/share-groups.md, "What a share fetch returns":

- MaxRecords, ShareAcquireMode batch_optimized (0): records are acquired in whole record batches,
  the batch holding the MaxRecords-th record included, so a fetch may return more; record_limit
  (1, v2): exactly MaxRecords, the rest of the batch staying available.
- MaxRecords is for the whole request: share-partitions are served in turn, each with what the
  ones before it left, and the turn rotates with the share session epoch.
- BatchSize: records delivered for the first time are answered as AcquiredRecords ranges cut at a
  record batch's first offset once BatchSize records are in the range (batch_optimized only).
- MaxBytes (capped by the broker's fetch.max.bytes) is shared evenly between the partitions;
  only the first partition read that returns anything may exceed its share, by one batch.
- MinBytes / MaxWaitMs: the answer waits until MinBytes are readable or MaxWaitMs passed, then
  acquires what there is.
- IsRenewAck (v2) with MaxBytes, MinBytes, MaxRecords or MaxWaitMs set: INVALID_REQUEST.
"""
from __future__ import annotations

import itertools
import threading
import time
import uuid

import pytest

from conformance.broker_process import start_broker
from conformance.kafka_wire import RawConnection, encode_batch, frame, parse_produce_v3, produce_request_v3
from kafkapy.protocol.error_codes import ErrorCode
from kafkapy.protocol.headers import decode_response_header, encode_request_header
from kafkapy.protocol.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    MetadataRequest,
    MetadataResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)

pytestmark = pytest.mark.timeout(120)

BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1


class Wire:
    """Requests encoded with kafkapy's codecs, answers decoded with them."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.conn = RawConnection(bootstrap, timeout=30.0)
        self.ids = itertools.count(1)

    def call(self, request, version: int, response_cls):
        cid = next(self.ids)
        payload = encode_request_header(request.API_KEY, version, cid, "share-fetch-limits") + b"".join(
            bytes(p) for p in request.encode_parts(version))
        raw = self.conn.roundtrip(frame(payload))
        got, pos = decode_response_header(raw, request.API_KEY, version)
        assert got == cid
        return response_cls.decode(raw, version, pos)

    def close(self) -> None:
        self.conn.close()


def produce(bootstrap: str, topic: str, partition: int, batches: list[list[bytes]]) -> list[int]:
    """Each inner list as one record batch (so the log's batch boundaries are known): base offsets."""
    out = []
    with RawConnection(bootstrap) as conn:
        for i, values in enumerate(batches):
            batch = encode_batch([(None, v) for v in values])
            _, results = parse_produce_v3(conn.roundtrip(produce_request_v3(1000 + i, topic, partition, batch)))
            assert results[0].error_code == 0, results[0].error_code
            out.append(results[0].base_offset)
    return out


class Session:
    """One member's share session on a raw connection."""

    def __init__(self, wire: Wire, group: str, topic_id, partitions: list[int]) -> None:
        self.wire, self.group, self.topic_id, self.partitions = wire, group, topic_id, partitions
        self.member = uuid.uuid4().hex
        self.epoch = 0
        opened = self.fetch(max_records=0, wait_ms=0)
        assert opened.error_code == ErrorCode.NONE

    def fetch(self, max_records=500, batch_size=None, max_bytes=1 << 20, min_bytes=1, wait_ms=3000,
              mode=BATCH_OPTIMIZED, version=2, renew=False, acks=None):
        R = ShareFetchRequest
        topics = []
        if self.epoch == 0 or acks:
            topics = [R.FetchTopic(topic_id=self.topic_id, partitions=[
                R.FetchPartition(partition_index=p, acknowledgement_batches=[
                    R.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=t)
                    for f, l, t in (acks or {}).get(p, [])])
                for p in self.partitions])]
        request = R(group_id=self.group, member_id=self.member, share_session_epoch=self.epoch,
                    max_wait_ms=wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, max_records=max_records,
                    batch_size=max_records if batch_size is None else batch_size,
                    share_acquire_mode=mode, is_renew_ack=renew, topics=topics)
        answer = self.wire.call(request, version, ShareFetchResponse)
        if answer.error_code == ErrorCode.NONE:
            self.epoch += 1
        return answer

    def close(self) -> None:
        self.epoch = -1
        self.fetch(max_records=0, wait_ms=0)


def acquired(answer) -> dict[int, list[tuple[int, int, int]]]:
    """partition -> [(first, last, delivery count)] of a ShareFetch answer."""
    assert answer.error_code == ErrorCode.NONE, answer.error_code
    out: dict[int, list] = {}
    for topic in answer.responses:
        for part in topic.partitions:
            assert part.error_code == ErrorCode.NONE, part.error_code
            if part.acquired_records:
                out[part.partition_index] = [(r.first_offset, r.last_offset, r.delivery_count)
                                             for r in part.acquired_records]
    return out


def count(answer) -> int:
    return sum(last - first + 1 for runs in acquired(answer).values() for first, last, _ in runs)


@pytest.fixture(scope="module")
def cluster():
    with start_broker(overrides={"offsets.topic.replication.factor": "1",
                                 "share.coordinator.state.topic.replication.factor": "1",
                                 "share.coordinator.state.topic.num.partitions": "1"}) as broker:
        wire = Wire(broker.bootstrap)
        try:
            yield broker, wire
        finally:
            wire.close()


@pytest.fixture
def topic(cluster, request):
    """A new topic (partitions: the fixture's parameter, default 1) and a new group
    reading it from the earliest offset: (bootstrap, wire, topic, topic id, group)."""
    broker, wire = cluster
    partitions = getattr(request, "param", 1)
    name = "limits-" + uuid.uuid4().hex[:8]
    group = name + "-g"
    C = CreateTopicsRequest
    created = wire.call(C(topics=[C.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
                          timeout_ms=15000), 5, CreateTopicsResponse)
    assert created.topics[0].error_code == ErrorCode.NONE
    meta = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 12,
                     MetadataResponse)
    topic_id = meta.topics[0].topic_id
    A = IncrementalAlterConfigsRequest
    altered = wire.call(A(resources=[A.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        A.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest")])]),
        1, IncrementalAlterConfigsResponse)
    assert altered.responses[0].error_code == ErrorCode.NONE
    return broker.bootstrap, wire, name, topic_id, group


def values(n: int, size: int = 10) -> list[bytes]:
    return [b"%0*d" % (size, i) for i in range(n)]


# -- MaxRecords and the acquire mode ---------------------------------------------------------
def test_max_records_batch_optimized_takes_whole_batches(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [values(10), values(10)])          # offsets 0-9, 10-19
    s = Session(wire, group, topic_id, [0])
    # 3 of a 10-record batch: the whole batch (the limit "can be exceeded for batch boundaries")
    assert acquired(s.fetch(max_records=3)) == {0: [(0, 9, 1)]}
    # 11: the second batch holds the 11th record, so it comes whole
    s2 = Session(wire, group, topic_id, [0])
    assert acquired(s2.fetch(max_records=1)) == {0: [(10, 19, 1)]}
    s.close()
    s2.close()


def test_max_records_single_record_batches_is_exact(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [[v] for v in values(8)])
    s = Session(wire, group, topic_id, [0])
    assert acquired(s.fetch(max_records=3)) == {0: [(0, 2, 1)]}
    assert acquired(s.fetch(max_records=4)) == {0: [(3, 6, 1)]}
    assert acquired(s.fetch(max_records=4)) == {0: [(7, 7, 1)]}
    s.close()


def test_record_limit_acquires_exactly_max_records(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [values(10)])
    s = Session(wire, group, topic_id, [0])
    assert acquired(s.fetch(max_records=3, mode=RECORD_LIMIT)) == {0: [(0, 2, 1)]}
    # the rest of the batch stays available, to this member or another
    other = Session(wire, group, topic_id, [0])
    assert acquired(other.fetch(max_records=4, mode=RECORD_LIMIT)) == {0: [(3, 6, 1)]}
    # released records come back in record_limit mode one limit at a time too
    assert acquired(s.fetch(max_records=0, wait_ms=0, acks={0: [(0, 2, [2])]})) == {}
    assert acquired(other.fetch(max_records=2, mode=RECORD_LIMIT)) == {0: [(0, 1, 2)]}
    s.close()
    other.close()


@pytest.mark.parametrize("topic", [2], indirect=True)
def test_max_records_counts_the_whole_request_and_rotates(topic):
    """MaxRecords 3 over two partitions of single-record batches: 3 records per answer in all,
    and the partition served first changes with the session epoch (no partition starves)."""
    bootstrap, wire, name, topic_id, group = topic
    for p in (0, 1):
        produce(bootstrap, name, p, [[v] for v in values(6)])
    s = Session(wire, group, topic_id, [0, 1])
    firsts = []
    for _ in range(4):
        got = s.fetch(max_records=3)
        assert count(got) == 3
        firsts.append(sorted(acquired(got)))
    # epochs 1 and 3 start at partition 1, 2 and 4 at partition 0 (rotated left by epoch % 2)
    assert firsts == [[1], [0], [1], [0]], firsts
    s.close()


# -- BatchSize -------------------------------------------------------------------------------
def test_batch_size_cuts_acquired_ranges_at_batch_boundaries(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [values(3) for _ in range(6)])     # batches at 0, 3, 6, 9, 12, 15
    s = Session(wire, group, topic_id, [0])
    # a cut at the first batch start at least 5 records after the range's first offset
    assert acquired(s.fetch(max_records=100, batch_size=5)) == {0: [(0, 5, 1), (6, 11, 1), (12, 17, 1)]}
    s.close()


def test_batch_size_does_not_cut_in_record_limit_mode(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [values(3) for _ in range(6)])
    s = Session(wire, group, topic_id, [0])
    assert acquired(s.fetch(max_records=100, batch_size=5, mode=RECORD_LIMIT)) == {0: [(0, 17, 1)]}
    s.close()


def test_batch_size_larger_than_the_records_is_one_range(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [values(3) for _ in range(6)])
    s = Session(wire, group, topic_id, [0])
    assert acquired(s.fetch(max_records=100, batch_size=500)) == {0: [(0, 17, 1)]}
    s.close()


# -- MaxBytes ----------------------------------------------------------------------------------
def test_max_bytes_returns_the_first_batch_whole_and_no_more(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [[v] for v in values(5, size=1000)])   # ~1,070 bytes a batch
    s = Session(wire, group, topic_id, [0])
    assert acquired(s.fetch(max_bytes=1)) == {0: [(0, 0, 1)]}           # the first batch always
    assert acquired(s.fetch(max_bytes=2500)) == {0: [(1, 2, 1)]}        # two fit, the third not
    s.close()


@pytest.mark.parametrize("topic", [2], indirect=True)
def test_max_bytes_is_shared_between_partitions(topic):
    """MaxBytes 2,500 over two partitions: 1,250 each, one ~1,070-byte batch from each."""
    bootstrap, wire, name, topic_id, group = topic
    for p in (0, 1):
        produce(bootstrap, name, p, [[v] for v in values(4, size=1000)])
    s = Session(wire, group, topic_id, [0, 1])
    assert acquired(s.fetch(max_bytes=2500)) == {0: [(0, 0, 1)], 1: [(0, 0, 1)]}
    # fewer bytes than one batch: only the first partition read answers, with one batch
    got = acquired(s.fetch(max_bytes=10))
    assert len(got) == 1 and list(got.values())[0] == [(1, 1, 1)], got
    s.close()


# -- MinBytes and MaxWaitMs --------------------------------------------------------------------
def test_max_wait_bounds_an_empty_fetch(topic):
    _, wire, _, topic_id, group = topic
    s = Session(wire, group, topic_id, [0])
    started = time.monotonic()
    assert acquired(s.fetch(wait_ms=700)) == {}
    elapsed = time.monotonic() - started
    assert 0.6 <= elapsed < 5, elapsed
    s.close()


def test_records_produced_during_the_wait_answer_early(topic):
    bootstrap, wire, name, topic_id, group = topic
    s = Session(wire, group, topic_id, [0])
    timer = threading.Timer(0.4, produce, (bootstrap, name, 0, [values(2)]))
    timer.start()
    try:
        started = time.monotonic()
        assert acquired(s.fetch(wait_ms=8000)) == {0: [(0, 1, 1)]}
        assert time.monotonic() - started < 6
    finally:
        timer.join()
    s.close()


def test_min_bytes_waits_for_enough_bytes(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [values(1, size=100)])                  # ~170 bytes
    s = Session(wire, group, topic_id, [0])
    # not enough for MinBytes: the answer comes at MaxWait, with the records there are
    started = time.monotonic()
    assert acquired(s.fetch(min_bytes=5000, wait_ms=800)) == {0: [(0, 0, 1)]}
    assert time.monotonic() - started >= 0.7
    # enough arrives during the wait: answered before MaxWait
    timer = threading.Timer(0.4, produce, (bootstrap, name, 0, [values(8, size=1000)]))
    timer.start()
    try:
        started = time.monotonic()
        assert acquired(s.fetch(min_bytes=5000, wait_ms=10000)) == {0: [(1, 8, 1)]}
        assert time.monotonic() - started < 8
    finally:
        timer.join()
    s.close()


def test_min_bytes_zero_answers_at_once(topic):
    _, wire, _, topic_id, group = topic
    s = Session(wire, group, topic_id, [0])
    started = time.monotonic()
    assert acquired(s.fetch(min_bytes=0, wait_ms=5000)) == {}
    assert time.monotonic() - started < 2
    s.close()


# -- IsRenewAck ------------------------------------------------------------------------------
def test_renew_with_fetch_limits_is_invalid(topic):
    bootstrap, wire, name, topic_id, group = topic
    produce(bootstrap, name, 0, [values(1)])
    s = Session(wire, group, topic_id, [0])
    assert acquired(s.fetch(max_records=1)) == {0: [(0, 0, 1)]}
    bad = s.fetch(max_records=5, max_bytes=0, min_bytes=0, wait_ms=0, renew=True, acks={0: [(0, 0, [4])]})
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    assert bad.error_message == "maxRecords must be set to 0, if isRenewAck is true."
    good = s.fetch(max_records=0, max_bytes=0, min_bytes=0, wait_ms=0, renew=True, acks={0: [(0, 0, [4])]})
    assert good.error_code == ErrorCode.NONE
    s.close()
