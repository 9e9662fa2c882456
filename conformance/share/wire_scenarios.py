"""Stale sessions and epochs of share groups on a raw connection, as observations to compare.

`observe(bootstrap)` sends the same raw requests (kafkapy's codecs over a blocking socket) to a
broker, kafkapy or Apache Kafka 4.4.0, and returns {step: answer} with every field a client reads:
top-level and per-partition error codes and messages, member epochs, assignments, acquired ranges
with their delivery counts. Names (topics, members, topic ids) are made generic so two brokers'
answers compare with ==. conformance/share/test_share_wire_differential.py holds Kafka's answers.

Members are separate connections: a share session ends with the connection that opened it, in
both brokers, so each member keeps its own for the whole run.
"""
from __future__ import annotations

import base64
import itertools
import re
import time
import uuid

from conformance.kafka_wire import RawConnection, frame
from kafkapy.protocol.headers import decode_response_header, encode_request_header
from kafkapy.protocol.records import build_batch
from kafkapy.protocol.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

__all__ = ["observe", "BROKER_SETTINGS"]

# Given to both brokers: a short record lock (the expired-lock step waits it out), a short share
# session timeout for the expired-member step's group (a group config, so Kafka's minimum is lowered).
BROKER_SETTINGS = {
    "group.share.record.lock.duration.ms": "1500",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.session.timeout.ms": "3000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    # Kafka 4.4 computes a share group's target assignment at most once a second by default (a
    # member joining sooner gets the previous assignment epoch and nothing assigned until its next
    # heartbeat); kafkapy at every change: 0 makes Kafka do the same (kafkapy warns of the key)
    "group.share.assignment.interval.ms": "0",
}
EXPIRY_SESSION_TIMEOUT_MS = 3000
ACCEPT, RELEASE = 1, 2
RECORDS = 10


def member_id() -> str:
    """A member id as the Java client and librdkafka make them (a Uuid, base64 without padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class Wire:
    """One connection; requests encoded with kafkapy's codecs, answers decoded with them."""

    def __init__(self, bootstrap: str) -> None:
        self.conn = RawConnection(bootstrap, timeout=20.0)
        self.ids = itertools.count(1)

    def call(self, request, version: int, response_cls):
        cid = next(self.ids)
        payload = encode_request_header(request.API_KEY, version, cid, "share-wire-diff") + b"".join(
            bytes(p) for p in request.encode_parts(version))
        raw = self.conn.roundtrip(frame(payload))
        got, pos = decode_response_header(raw, request.API_KEY, version)
        assert got == cid
        return response_cls.decode(raw, version, pos)

    def close(self) -> None:
        self.conn.close()


class Names:
    """Replaces run-specific names and ids by stable aliases."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def add(self, value, alias: str) -> None:
        self.aliases[str(value)] = alias

    def __call__(self, value):
        if value is None:
            return None
        text = str(value)
        for name, alias in sorted(self.aliases.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(name, alias)
        return text


def observe(bootstrap: str) -> dict:
    names = Names()
    suffix = uuid.uuid4().hex[:8]
    topic, other_topic = f"share-wire-{suffix}", f"share-wire-other-{suffix}"
    group, expiry_group = f"share-wire-g-{suffix}", f"share-wire-x-{suffix}"
    names.add(topic, "T")
    names.add(other_topic, "U")
    names.add(group, "G")
    names.add(expiry_group, "X")
    admin = Wire(bootstrap)
    wires: list[Wire] = [admin]

    def connect() -> Wire:
        wire = Wire(bootstrap)
        wires.append(wire)
        return wire

    try:
        ids = _setup(admin, topic, other_topic, group, expiry_group)
        names.add(ids[topic], "T-ID")
        names.add(ids[other_topic], "U-ID")
        return _steps(bootstrap, connect, admin, names, topic, other_topic, group, expiry_group, ids)
    finally:
        for wire in wires:
            wire.close()


# -- setup ----------------------------------------------------------------------------------------
def _setup(admin: Wire, topic: str, other_topic: str, group: str, expiry_group: str) -> dict:
    C = CreateTopicsRequest
    created = admin.call(C(topics=[C.CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                                   for n in (topic, other_topic)], timeout_ms=20000), 5, CreateTopicsResponse)
    assert all(t.error_code == 0 for t in created.topics), created
    ids: dict = {}
    deadline = time.monotonic() + 20
    while True:
        meta = admin.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n)
                                                  for n in (topic, other_topic)]), 12, MetadataResponse)
        if all(t.error_code == 0 and t.partitions and t.partitions[0].leader_id >= 0 for t in meta.topics):
            ids = {t.name: t.topic_id for t in meta.topics}
            break
        assert time.monotonic() < deadline, meta
        time.sleep(0.2)
    for name, count in ((topic, RECORDS), (other_topic, 3)):
        _produce(admin, name, count)
    R = IncrementalAlterConfigsRequest
    configs = {group: [("share.auto.offset.reset", "earliest")],
               expiry_group: [("share.auto.offset.reset", "earliest"),
                              ("share.session.timeout.ms", str(EXPIRY_SESSION_TIMEOUT_MS))]}
    altered = admin.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=g, configs=[
        R.AlterableConfig(name=k, config_operation=0, value=v) for k, v in c]) for g, c in configs.items()]),
        1, IncrementalAlterConfigsResponse)
    assert all(r.error_code == 0 for r in altered.responses), altered
    _warm_up(admin, other_topic, ids[other_topic], f"{group}-warm-up")
    return ids


def _warm_up(admin: Wire, topic: str, topic_id, group: str) -> None:
    """Until a member of another group receives a record: a Kafka just started answers
    NOT_COORDINATOR, and errors for share-partitions, until its group and share coordinators loaded."""
    member = member_id()
    R = IncrementalAlterConfigsRequest
    admin.call(R(resources=[R.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        R.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest")])]),
        1, IncrementalAlterConfigsResponse)
    deadline = time.monotonic() + 45
    epoch = 0
    while True:
        # FindCoordinator makes Kafka create __consumer_offsets; it answers NOT_COORDINATOR until then
        admin.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4, FindCoordinatorResponse)
        beat = _heartbeat(admin, group, member, epoch, [topic] if epoch == 0 else None)
        if beat.error_code == 0:
            epoch = beat.member_epoch
            fetched = _fetch(admin, group, member, 0, [(topic_id, 0)], max_records=1)
            if fetched.error_code == 0 and any(p.acquired_records for t in fetched.responses for p in t.partitions):
                _fetch(admin, group, member, -1, [(topic_id, 0)], max_records=0)
                _heartbeat(admin, group, member, -1)
                return
        assert time.monotonic() < deadline, f"no share group served after 45 s: {beat}"
        time.sleep(0.3)


def _produce(admin: Wire, topic: str, count: int) -> None:
    """`count` records, one record batch each: a fetch's MaxRecords then counts records exactly."""
    P = ProduceRequest
    for i in range(count):
        deadline = time.monotonic() + 20
        while True:
            answer = admin.call(P(acks=-1, timeout_ms=15000, topic_data=[P.TopicProduceData(
                name=topic, partition_data=[P.PartitionProduceData(index=0, records=build_batch([(None, b"v%d" % i)]))])]),
                9, ProduceResponse)
            [t] = answer.responses
            code = t.partition_responses[0].error_code
            # a Kafka whose metadata already names the leader may not have made its replica leader yet:
            # NOT_LEADER_OR_FOLLOWER (6) or UNKNOWN_TOPIC_OR_PARTITION (3) for a moment, as a client retries
            if code in (3, 6) and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            assert code == 0, answer
            break


# -- the requests ---------------------------------------------------------------------------------
def _heartbeat(wire, group, member, epoch, topics=None):
    return wire.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                subscribed_topic_names=topics), 1, ShareGroupHeartbeatResponse)


def _fetch(wire, group, member, epoch, parts=(), acks=None, max_records=100, wait_ms=500, version=1):
    """parts: [(topic_id, partition)]; acks: {(topic_id, partition): [(first, last, [types])]}"""
    R = ShareFetchRequest
    by_topic: dict = {}
    for topic_id, partition in parts:
        batches = [R.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=t)
                   for f, l, t in (acks or {}).get((topic_id, partition), [])]
        by_topic.setdefault(topic_id, []).append(R.FetchPartition(partition_index=partition,
                                                                  acknowledgement_batches=batches))
    topics = [R.FetchTopic(topic_id=t, partitions=p) for t, p in by_topic.items()]
    return wire.call(R(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms,
                       min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
                       topics=topics), version, ShareFetchResponse)


def _ack(wire, group, member, epoch, topic_id, acks, partition=0):
    R = ShareAcknowledgeRequest
    batches = [R.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=t) for f, l, t in acks]
    return wire.call(R(group_id=group, member_id=member, share_session_epoch=epoch, topics=[
        R.AcknowledgeTopic(topic_id=topic_id, partitions=[
            R.AcknowledgePartition(partition_index=partition, acknowledgement_batches=batches)])]),
        1, ShareAcknowledgeResponse)


# -- what a client reads of the answers --------------------------------------------------------------
def _hb(names, r) -> dict:
    out = {"error": r.error_code, "message": names(r.error_message)}
    if r.error_code == 0:
        out["epoch"] = r.member_epoch
        out["assignment"] = None if r.assignment is None else sorted(
            [names(tp.topic_id), sorted(tp.partitions)] for tp in r.assignment.topic_partitions)
    return out


def _fetched(names, r) -> dict:
    out = {"error": r.error_code, "message": names(r.error_message)}
    if r.error_code == 0:
        out["partitions"] = sorted(
            [names(t.topic_id), p.partition_index, p.error_code, names(p.error_message), p.acknowledge_error_code,
             names(p.acknowledge_error_message), [[a.first_offset, a.last_offset, a.delivery_count]
                                                  for a in p.acquired_records]]
            for t in r.responses for p in t.partitions)
    return out


def _acked(names, r) -> dict:
    out = {"error": r.error_code, "message": names(r.error_message)}
    if r.error_code == 0:
        out["partitions"] = sorted([names(t.topic_id), p.partition_index, p.error_code, names(p.error_message)]
                                   for t in r.responses for p in t.partitions)
    return out


def _described(names, wire, group) -> dict:
    r = wire.call(ShareGroupDescribeRequest(group_ids=[group]), 1, ShareGroupDescribeResponse)
    [g] = r.groups
    return {"error": g.error_code, "message": names(g.error_message), "state": g.group_state,
            "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "members": sorted([names(m.member_id), m.member_epoch] for m in g.members)}


class _Relative:
    """Answers with member and group epochs written relative to S (and in messages too)."""

    def __init__(self, names: Names, s_epoch: int) -> None:
        self.names, self.s = names, s_epoch

    def epoch(self, value: int) -> str | int:
        if value in (-1, 0):
            return value
        delta = value - self.s
        return "S" if delta == 0 else f"S{delta:+d}"

    def text(self, message: str | None) -> str | None:
        if message is None:
            return None
        return re.sub(r"\((\d+)\)", lambda m: f"({self.epoch(int(m.group(1)))})", self.names(message))

    def hb(self, r) -> dict:
        out = _hb(self.names, r)
        out["message"] = self.text(r.error_message)
        if "epoch" in out:
            out["epoch"] = self.epoch(out["epoch"])
        return out

    def describe(self, wire, group) -> dict:
        out = _described(self.names, wire, group)
        out["group_epoch"], out["assignment_epoch"] = self.epoch(out["group_epoch"]), self.epoch(
            out["assignment_epoch"])
        out["members"] = [[m, self.epoch(e)] for m, e in out["members"]]
        return out


def _until(predicate, fn, timeout_s: float = 15.0):
    """fn() until predicate(answer) or the timeout; the last answer."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = fn()
        if predicate(answer) or time.monotonic() >= deadline:
            return answer
        time.sleep(0.2)


def _steps(bootstrap, connect, admin, names, topic, other_topic, group, expiry_group, ids) -> dict:
    out: dict = {}
    tid, uid = ids[topic], ids[other_topic]
    a_wire, b_wire, c_wire = connect(), connect(), connect()
    a, b, c = member_id(), member_id(), member_id()
    names.add(a, "A")
    names.add(b, "B")
    names.add(c, "C")

    # ---- ShareGroupHeartbeat
    out["hb.unknown_group"] = _hb(names, _heartbeat(a_wire, group, a, 4))
    out["hb.empty_member_id"] = _hb(names, _heartbeat(a_wire, group, "", 0, [topic]))
    out["hb.join_without_topics"] = _hb(names, _heartbeat(a_wire, group, a, 0))
    joined = _heartbeat(a_wire, group, a, 0, [topic])
    out["hb.join"] = _hb(names, joined)
    # Kafka assigns a partition once its share state is initialized, after the join's answer
    # (the next heartbeat, one epoch later); kafkapy in the join's answer. Epochs from here on are
    # written relative to S, the epoch of the first answer with the assignment.
    steady = joined
    if joined.error_code == 0 and not (joined.assignment and joined.assignment.topic_partitions):
        steady = _until(lambda r: r.error_code != 0 or bool(r.assignment and r.assignment.topic_partitions),
                        lambda: _heartbeat(a_wire, group, a, joined.member_epoch), 15)
    s_epoch = steady.member_epoch
    out["hb.steady"] = _hb(names, steady)
    rel = _Relative(names, s_epoch)
    out["describe.one_member"] = rel.describe(admin, group)
    # a second member moves the group to S+1; A follows with its next heartbeat (previous epoch S)
    b_joined = _heartbeat(b_wire, group, b, 0, [topic])
    out["hb.second_join"] = rel.hb(b_joined)
    out["hb.follows"] = rel.hb(_heartbeat(a_wire, group, a, s_epoch))
    out["hb.previous_epoch"] = rel.hb(_heartbeat(a_wire, group, a, s_epoch))
    out["hb.older_epoch"] = rel.hb(_heartbeat(a_wire, group, a, s_epoch - 1))
    out["hb.greater_epoch"] = rel.hb(_heartbeat(a_wire, group, a, s_epoch + 8))
    out["hb.current_after_fenced"] = rel.hb(_heartbeat(a_wire, group, a, s_epoch + 1))
    out["hb.full_request"] = rel.hb(_heartbeat(a_wire, group, a, s_epoch + 1, [topic]))
    out["hb.rejoin_with_epoch_0"] = rel.hb(_heartbeat(a_wire, group, a, 0, [topic]))
    out["describe.two_members"] = rel.describe(admin, group)
    b_left = _heartbeat(b_wire, group, b, -1)
    out["hb.second_leaves"] = rel.hb(b_left)
    out["hb.after_second_left"] = rel.hb(_heartbeat(a_wire, group, a, s_epoch + 1))

    # ---- ShareFetch
    t0, u0 = (tid, 0), (uid, 0)
    out["fetch.no_session"] = _fetched(names, _fetch(a_wire, group, a, 3, [t0]))
    out["fetch.epoch_0_with_acks"] = _fetched(names, _fetch(a_wire, group, a, 0, [t0], {t0: [(0, 0, [ACCEPT])]}))
    out["ack.epoch_0"] = _acked(names, _ack(a_wire, group, a, 0, tid, [(0, 0, [ACCEPT])]))
    out["fetch.open"] = _fetched(names, _fetch(a_wire, group, a, 0, [t0], max_records=4))
    out["fetch.skipped_epoch"] = _fetched(names, _fetch(a_wire, group, a, 5, [t0]))
    out["fetch.epoch_1"] = _fetched(names, _fetch(a_wire, group, a, 1, [t0], max_records=0))
    out["fetch.stale_epoch"] = _fetched(names, _fetch(a_wire, group, a, 1, [t0], max_records=0))
    out["fetch.epoch_2_ack_not_acquired"] = _fetched(
        names, _fetch(a_wire, group, a, 2, [t0], {t0: [(7, 8, [ACCEPT])]}, max_records=0))
    out["fetch.epoch_3_ack_partly_held"] = _fetched(
        names, _fetch(a_wire, group, a, 3, [t0], {t0: [(3, 5, [ACCEPT])]}, max_records=0))
    # a partition of a topic the group is not subscribed to, added to the session (the session's T-0
    # comes first and takes the 2 records); its own answer apart: Kafka's varies (below)
    answer = _fetched(names, _fetch(a_wire, group, a, 4, [u0], max_records=2))
    out["fetch.not_assigned_partition"] = dict(answer, partitions=[p for p in answer.get("partitions", [])
                                                                   if p[0] != "U-ID"])
    out["fetch.not_assigned_partition.U"] = [p for p in answer.get("partitions", []) if p[0] == "U-ID"]
    # epoch 0 on the existing session: a new session; the records A holds stay A's
    out["fetch.epoch_0_again"] = _fetched(names, _fetch(a_wire, group, a, 0, [t0], max_records=0))
    out["fetch.after_reopen_ack_held"] = _fetched(
        names, _fetch(a_wire, group, a, 1, [t0], {t0: [(0, 0, [ACCEPT])]}, max_records=0))

    # C: a member that never joined the group fetches as any member does
    out["fetch.unknown_member_open"] = _fetched(names, _fetch(c_wire, group, c, 0, [t0], max_records=3))
    out["fetch.unknown_member_epoch_1"] = _fetched(names, _fetch(c_wire, group, c, 1, [t0], max_records=0))
    # A acknowledges what it does not hold: C's records and offsets past the fetched ones
    out["ack.others_records"] = _acked(names, _ack(a_wire, group, a, 2, tid, [(6, 6, [ACCEPT])]))
    out["ack.never_acquired"] = _acked(names, _ack(a_wire, group, a, 3, tid, [(9, 9, [ACCEPT])]))
    out["ack.held"] = _acked(names, _ack(a_wire, group, a, 4, tid, [(1, 3, [ACCEPT])]))
    out["ack.already_acknowledged"] = _acked(names, _ack(a_wire, group, a, 5, tid, [(2, 2, [ACCEPT])]))
    # bad acknowledgement batches (checked before the share-partition looks at them)
    out["ack.reversed"] = _acked(names, _ack(a_wire, group, a, 6, tid, [(5, 4, [ACCEPT])]))
    out["ack.overlapping"] = _acked(names, _ack(a_wire, group, a, 7, tid, [(4, 5, [ACCEPT]), (5, 5, [ACCEPT])]))
    out["ack.types_length"] = _acked(names, _ack(a_wire, group, a, 8, tid, [(4, 5, [ACCEPT, ACCEPT, ACCEPT])]))
    out["ack.unknown_type"] = _acked(names, _ack(a_wire, group, a, 9, tid, [(4, 4, [9])]))
    out["ack.renew_without_is_renew_ack"] = _acked(names, _ack(a_wire, group, a, 10, tid, [(4, 4, [4])]))
    out["ack.wrong_epoch"] = _acked(names, _ack(a_wire, group, a, 20, tid, [(1, 1, [ACCEPT])]))
    stranger = member_id()
    out["ack.unknown_session"] = _acked(names, _ack(c_wire, group, stranger, 1, tid, [(1, 1, [ACCEPT])]))
    out["fetch.empty_member_id"] = _fetched(names, _fetch(c_wire, group, "", 0, [t0], max_records=0))
    out["ack.empty_member_id"] = _acked(names, _ack(c_wire, group, "", 1, tid, [(1, 1, [ACCEPT])]))
    # closing A's session, then using it
    out["fetch.close"] = _fetched(names, _fetch(a_wire, group, a, -1, [t0], max_records=0))
    out["fetch.after_close"] = _fetched(names, _fetch(a_wire, group, a, 12, [t0]))
    out["ack.after_close"] = _acked(names, _ack(a_wire, group, a, 12, tid, [(1, 1, [ACCEPT])]))
    out["ack.close_unknown_session"] = _acked(names, _ack(a_wire, group, a, -1, tid, [(1, 1, [ACCEPT])]))
    out["fetch.close_unknown_session"] = _fetched(names, _fetch(a_wire, group, a, -1, [t0], max_records=0))
    out["fetch.unknown_member_close"] = _fetched(names, _fetch(c_wire, group, c, -1, [t0], max_records=0))

    # ---- a member that left: its session and heartbeats
    d_wire, d = connect(), member_id()
    names.add(d, "D")
    joined = _heartbeat(d_wire, group, d, 0, [topic])
    d_epoch = joined.member_epoch
    opened = _until(lambda r: r.error_code != 0 or any(p.acquired_records for t in r.responses
                                                        for p in t.partitions),
                    lambda: _fetch(d_wire, group, d, 0, [t0], max_records=2), 10)
    out["left.open"] = {"error": opened.error_code,
                        "acquired": sum(len(p.acquired_records) > 0 for t in opened.responses for p in t.partitions)}
    held = [(x.first_offset, x.last_offset) for t in opened.responses for p in t.partitions
            for x in p.acquired_records]
    left = _heartbeat(d_wire, group, d, -1)
    out["left.leave"] = _hb(names, left)
    out["left.heartbeat_after_leave"] = _hb(names, _heartbeat(d_wire, group, d, d_epoch))
    out["left.leave_again"] = _hb(names, _heartbeat(d_wire, group, d, -1))
    first = held[0][0] if held else 0
    out["left.ack_after_leave"] = _acked(names, _ack(d_wire, group, d, 1, tid, [(first, first, [ACCEPT])]))
    out["left.fetch_after_leave"] = _fetched(names, _fetch(d_wire, group, d, 2, [t0], max_records=1))
    out["left.close_after_leave"] = _fetched(names, _fetch(d_wire, group, d, -1, [t0], max_records=0))

    # ---- a member expired by the group coordinator (share.session.timeout.ms 3 s), its session kept
    e_wire, e = connect(), member_id()
    names.add(e, "E")
    joined = _heartbeat(e_wire, expiry_group, e, 0, [topic])
    e_epoch = joined.member_epoch
    opened = _until(lambda r: r.error_code != 0 or any(p.acquired_records for t in r.responses
                                                        for p in t.partitions),
                    lambda: _fetch(e_wire, expiry_group, e, 0, [t0], max_records=2), 10)
    out["expired.open"] = _fetched(names, opened)
    expired = _until(lambda r: r["members"] == [], lambda: _described(names, admin, expiry_group), 20)
    out["expired.describe"] = {k: expired[k] for k in ("error", "state", "members")}
    out["expired.heartbeat"] = _hb(names, _heartbeat(e_wire, expiry_group, e, e_epoch))
    out["expired.fetch"] = _fetched(names, _fetch(e_wire, expiry_group, e, 1, [t0], {t0: [(0, 0, [ACCEPT])]},
                                                  max_records=0))
    # ---- an expired lock: E's record 1 was released by the lock timer (1.5 s) during the wait
    out["expired.ack_after_lock_expiry"] = _acked(names, _ack(e_wire, expiry_group, e, 2, tid, [(1, 1, [ACCEPT])]))
    out["expired.close"] = _acked(names, _ack(e_wire, expiry_group, e, -1, tid, [(1, 1, [RELEASE])]))
    return out
