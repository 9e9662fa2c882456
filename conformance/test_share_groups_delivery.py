"""Share groups (KIP-932): no record is delivered twice unless something failed (issue 31).

confluent-kafka's ShareConsumer (librdkafka 2.16) against a real kafkapy broker with Kafka's
default 30 s acquisition lock, so nothing in these tests comes back because a lock expired: a
record delivered a second time means the broker released records a member still held. What
Kafka 4.x does and kafkapy must do (docs/share-groups.md):

- a member leaving its group (ShareGroupHeartbeat epoch -1) does not release anything by itself:
  the share-partition leader releases a member's records when its share session closes (a
  ShareFetch/ShareAcknowledge with epoch -1, after applying the acknowledgements it carries),
  when its connection closes, or when their acquisition lock expires;
- a share session opened again (epoch 0) replaces the old one without releasing anything;
- so a closing member's implicit acknowledgements (of the records its last poll returned) and
  explicit ones (REJECT: archived for the whole group) are applied, never lost.
"""
from __future__ import annotations

import collections
import subprocess
import sys
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+ needed)", allow_module_level=True)

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from conformance.broker_process import start_broker  # noqa: E402

pytestmark = pytest.mark.timeout(120)

OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def share_broker():
    with start_broker(overrides=OVERRIDES) as broker:
        yield broker


class _BusyCpu:
    """Processes that spin on the CPU for at most `seconds` (the duplicates showed under load)."""

    def __init__(self, processes: int = 2, seconds: float = 40.0) -> None:
        self.processes, self.seconds = processes, seconds
        self.children: list[subprocess.Popen] = []

    def __enter__(self) -> "_BusyCpu":
        code = f"import time\nend = time.monotonic() + {self.seconds}\nwhile time.monotonic() < end: pass\n"
        self.children = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(self.processes)]
        return self

    def __exit__(self, *exc) -> None:
        for child in self.children:
            child.kill()
        for child in self.children:
            child.wait(10)


def _setup(bootstrap: str, group: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in topics:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def _produce(bootstrap: str, topic: str, count: int, prefix: bytes = b"r") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=prefix + b"%05d" % i)
    assert producer.flush(30) == 0


def _consumer(bootstrap: str, group: str, topics: list[str], **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe(topics)
    return consumer


def _poll(consumer: ShareConsumer, timeout: float = 0.2) -> list:
    out = []
    for message in consumer.poll(timeout) or []:
        assert message.error() is None, message.error()
        out.append(message)
    return out


class _Deliveries:
    """Every delivery to every member: (topic, offset) -> [(member, delivery count)]."""

    def __init__(self) -> None:
        self.by_record: dict[tuple[str, int], list[tuple[int, int]]] = collections.defaultdict(list)
        self.by_member: dict[int, list[tuple[str, int]]] = collections.defaultdict(list)

    def poll(self, index: int, consumer: ShareConsumer, timeout: float = 0.2) -> int:
        got = _poll(consumer, timeout)
        for m in got:
            self.by_record[(m.topic(), m.offset())].append((index, m.delivery_count()))
            self.by_member[index].append((m.topic(), m.offset()))
        return len(got)

    def duplicates(self) -> dict:
        return {k: v for k, v in self.by_record.items() if len(v) > 1 or v[0][1] != 1}


def _close_all(consumers) -> None:
    for consumer in consumers:
        try:
            consumer.close()
        except Exception as exc:  # already closed by the test
            print("close:", exc)


def test_three_members_under_load_each_record_once(share_broker, topic_name):
    """The issue's scenario: 3,000 records produced first, three members started together poll in
    a loop (implicit acknowledgement) with the CPU busy, then close one after the other while the
    others keep polling. Each member polls once more after the last records before it closes, so
    that their implicit acknowledgements go out (librdkafka 2.16's close() sends none for the last
    poll's records: they are released, as Kafka does, and may come again with delivery count 2).
    Nothing failed, so every offset is delivered exactly once, with delivery count 1."""
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    total = 3000
    _setup(bootstrap, group, [topic_name])
    _produce(bootstrap, topic_name, total)
    deliveries = _Deliveries()
    members = {i: _consumer(bootstrap, group, [topic_name], **{"max.poll.records": 100}) for i in range(3)}
    try:
        with _BusyCpu(processes=2, seconds=40):
            deadline = time.monotonic() + 30
            while len(deliveries.by_record) < total and time.monotonic() < deadline:
                for i, member in members.items():
                    deliveries.poll(i, member)
            for _ in range(3):
                for i, member in members.items():
                    deliveries.poll(i, member)    # nothing left: acknowledges the last records
            for leaving in range(2):
                members.pop(leaving).close()
                settle = time.monotonic() + 2
                while time.monotonic() < settle:
                    for i, member in members.items():
                        deliveries.poll(i, member)
        duplicates = deliveries.duplicates()
        assert not duplicates, (f"{len(duplicates)} records delivered more than once or with a count above 1, "
                                f"e.g. {sorted(duplicates.items())[:5]}")
        assert len(deliveries.by_record) == total
    finally:
        _close_all(members.values())


def test_a_member_leaving_midway_gives_back_only_what_it_never_delivered(share_broker, topic_name):
    """As above, but one member closes a third of the way through, right after a poll. What its
    earlier polls returned was acknowledged by the poll after them and never comes again; what it
    holds at close (its last poll's records, which librdkafka 2.16's close() does not acknowledge,
    and what it acquired but never handed to the application) is released as Kafka releases it,
    and may come to another member with delivery count 2."""
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    total = 3000
    _setup(bootstrap, group, [topic_name])
    _produce(bootstrap, topic_name, total)
    deliveries = _Deliveries()
    members = {i: _consumer(bootstrap, group, [topic_name], **{"max.poll.records": 100}) for i in range(3)}
    try:
        deadline = time.monotonic() + 30
        left = False
        last_poll: set = set()
        while len(deliveries.by_record) < total and time.monotonic() < deadline:
            for i, member in list(members.items()):
                before = len(deliveries.by_member[i])
                if deliveries.poll(i, member) and i == 0:
                    last_poll = set(deliveries.by_member[0][before:])
            if not left and deliveries.by_member.get(0) and len(deliveries.by_record) >= total // 3:
                members.pop(0).close()     # leaves holding the records of its last poll
                left = True
        settle = time.monotonic() + 3
        while time.monotonic() < settle:
            for i, member in members.items():
                deliveries.poll(i, member)
        assert left, "member 0 never received anything"
        twice = {k: v for k, v in deliveries.by_record.items() if len(v) > 1 and k not in last_poll}
        assert not twice, (f"{len(twice)} records the leaving member had acknowledged reached the application "
                           f"twice, e.g. {sorted(twice.items())[:5]}")
        assert all(len(v) <= 2 for v in deliveries.by_record.values())
        assert len(deliveries.by_record) == total
    finally:
        _close_all(members.values())


def test_adding_a_topic_does_not_deliver_the_first_topics_records_again(share_broker, topic_name):
    """A member reads topic A's 10 records, then subscribes to A and B; of the 10 more records
    produced to each it receives 20, none of A's first 10 again."""
    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    _setup(bootstrap, group, [first, second])
    _produce(bootstrap, first, 10, b"a1-")
    deliveries = _Deliveries()
    consumer = _consumer(bootstrap, group, [first])
    try:
        deadline = time.monotonic() + 20
        while len(deliveries.by_record) < 10 and time.monotonic() < deadline:
            deliveries.poll(0, consumer)
        assert len(deliveries.by_record) == 10
        consumer.subscribe([first, second])
        _produce(bootstrap, first, 10, b"a2-")
        _produce(bootstrap, second, 10, b"b-")
        deadline = time.monotonic() + 20
        while len(deliveries.by_member[0]) < 30 and time.monotonic() < deadline:
            deliveries.poll(0, consumer)
            if len(deliveries.by_record) == 30 and time.monotonic() > deadline - 15:
                break  # all 30 distinct seen and 5 s more gave nothing back
        assert not deliveries.duplicates(), deliveries.duplicates()
        assert len(deliveries.by_member[0]) == 30
    finally:
        consumer.close()


def test_rejects_sent_by_a_closing_member_are_applied(share_broker, topic_name):
    """Explicit acknowledgement: a member REJECTs every record and closes without committing
    (close() sends the pending acknowledgements in its closing ShareAcknowledge, epoch -1). Kafka
    applies them: the records are archived for the group and a new member receives none of them.
    Sixteen groups at once, closed with the CPU busy: the closing ShareAcknowledge and the leaving
    heartbeat race, and the defect showed when the heartbeat came first."""
    bootstrap = share_broker.bootstrap
    groups = [f"{topic_name}-g{i}" for i in range(16)]
    _setup(bootstrap, groups[0], [topic_name])
    for group in groups[1:]:
        _setup(bootstrap, group, [])
    _produce(bootstrap, topic_name, 5)
    rejecters = {g: _consumer(bootstrap, g, [topic_name], **{"share.acknowledgement.mode": "explicit"})
                 for g in groups}
    got: dict[str, list[int]] = {g: [] for g in groups}
    try:
        deadline = time.monotonic() + 20
        while any(len(v) < 5 for v in got.values()) and time.monotonic() < deadline:
            for group, rejecter in rejecters.items():
                if len(got[group]) >= 5:
                    continue  # no poll after the REJECTs: they go out with close()
                for message in _poll(rejecter, 0.1):
                    rejecter.acknowledge(message, AcknowledgeType.REJECT)
                    got[group].append(message.offset())
        assert all(sorted(v) == [0, 1, 2, 3, 4] for v in got.values()), got
    finally:
        with _BusyCpu(processes=2, seconds=20):
            _close_all(rejecters.values())
    newcomers = {g: _consumer(bootstrap, g, [topic_name]) for g in groups}
    try:
        again = {g: [] for g in groups}
        deadline = time.monotonic() + 6  # well below the 30 s lock: only a release brings them back
        while time.monotonic() < deadline:
            for group, newcomer in newcomers.items():
                again[group] += [(m.offset(), m.delivery_count()) for m in _poll(newcomer, 0.1)]
        assert not any(again.values()), f"rejected records delivered again: {again}"
    finally:
        _close_all(newcomers.values())


# -- the same rules on the wire, where the order of requests is the test's -------------------------
@pytest.fixture
def wire_setup(share_broker, topic_name):
    """A topic with 10 records, a group reading from the earliest offset and a raw connection."""
    from conformance.test_share_groups_wire import Wire
    from kafkapy.protocol.messages import MetadataRequest, MetadataResponse

    bootstrap, group = share_broker.bootstrap, f"{topic_name}-g"
    _setup(bootstrap, group, [topic_name])
    _produce(bootstrap, topic_name, 10)
    wire = Wire(bootstrap)
    try:
        meta = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic_name)]), 12,
                         MetadataResponse)
        yield wire, group, topic_name, meta.topics[0].topic_id
    finally:
        wire.close()


def _heartbeat(wire, group: str, member: str, epoch: int, topics=None):
    from kafkapy.protocol.messages import (
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        ShareGroupHeartbeatRequest,
        ShareGroupHeartbeatResponse,
    )

    deadline = time.monotonic() + 15
    while True:
        # FindCoordinator creates __consumer_offsets on first use, as a client's lookup does
        wire.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4, FindCoordinatorResponse)
        answer = wire.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                      subscribed_topic_names=topics), 1, ShareGroupHeartbeatResponse)
        # the group's __consumer_offsets partition may still be loading on first use
        if answer.error_code not in (14, 15, 16) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert answer.error_code == 0, answer
    return answer


def _acquire_all(wire, group: str, member: str, topic_id) -> tuple[int, int]:
    """Open a share session for `member` and acquire the 10 records: (first, last) offset."""
    from conformance.test_share_groups_wire import _fetch, _partition

    assert _fetch(wire, group, member, 0, topic_id, max_records=0, wait_ms=0).error_code == 0
    got = _partition(_fetch(wire, group, member, 1, topic_id, max_records=100))
    assert got.error_code == 0
    runs = [(r.first_offset, r.last_offset, r.delivery_count) for r in got.acquired_records]
    assert runs == [(0, 9, 1)], runs
    return 0, 9


def _nothing_for_another_member(wire, group: str, topic_id) -> None:
    from conformance.test_share_groups_wire import _fetch

    other = uuid.uuid4().hex
    assert _fetch(wire, group, other, 0, topic_id, max_records=0, wait_ms=0).error_code == 0
    answer = _fetch(wire, group, other, 1, topic_id, max_records=100, wait_ms=300)
    assert answer.error_code == 0
    acquired = [(r.first_offset, r.last_offset, r.delivery_count)
                for t in answer.responses for p in t.partitions for r in p.acquired_records]
    assert acquired == [], f"records another member holds (or archived) were delivered again: {acquired}"
    _fetch(wire, group, other, -1, topic_id, max_records=0, wait_ms=0)


def test_wire_leaving_the_group_keeps_the_share_session_for_the_closing_acknowledgement(wire_setup):
    """ShareGroupHeartbeat epoch -1 first, the closing ShareAcknowledge (epoch -1, REJECT) after
    (librdkafka's close() sends both, in either order): the acknowledgements are applied (Kafka's
    share-partition leader does not end share sessions on a group leave) and the rejected records
    are archived for the group."""
    from conformance.test_share_groups_wire import _ack, _partition

    wire, group, topic, topic_id = wire_setup
    member = uuid.uuid4().hex
    _heartbeat(wire, group, member, 0, [topic])
    first, last = _acquire_all(wire, group, member, topic_id)
    _heartbeat(wire, group, member, -1)
    closed = _ack(wire, group, member, -1, topic_id, [(first, last, [3])])   # REJECT
    assert closed.error_code == 0, f"closing ShareAcknowledge refused: error {closed.error_code}"
    assert _partition(closed).error_code == 0
    _nothing_for_another_member(wire, group, topic_id)


def test_wire_a_new_share_session_does_not_release_what_the_member_holds(wire_setup):
    """ShareFetch with epoch 0 while the member has a session replaces the session (Kafka's
    SharePartitionManager.newContext) and releases nothing: the records stay acquired by the
    member, who acknowledges them in the new session; nobody else gets them meanwhile."""
    from conformance.test_share_groups_wire import _ack, _fetch, _partition

    wire, group, _, topic_id = wire_setup
    member = uuid.uuid4().hex
    first, last = _acquire_all(wire, group, member, topic_id)
    assert _fetch(wire, group, member, 0, topic_id, max_records=0, wait_ms=0).error_code == 0
    _nothing_for_another_member(wire, group, topic_id)
    accepted = _ack(wire, group, member, 1, topic_id, [(first, last, [1])])
    assert accepted.error_code == 0 and _partition(accepted).error_code == 0
    _nothing_for_another_member(wire, group, topic_id)


def test_wire_a_closed_connection_gives_back_what_its_share_session_held(wire_setup, share_broker):
    """Kafka's ShareSessionCache ends a share session when the connection that opened it closes, and
    the member's acquired records go back to the group at once (onMemberLeave), not when their
    30 s locks expire: another member gets them with delivery count 2."""
    from conformance.test_share_groups_wire import Wire, _fetch, _partition

    wire, group, _, topic_id = wire_setup
    holder = Wire(share_broker.bootstrap)
    try:
        _acquire_all(holder, group, uuid.uuid4().hex, topic_id)
        _nothing_for_another_member(wire, group, topic_id)  # held while its connection lives
    finally:
        holder.close()
    other = uuid.uuid4().hex
    assert _fetch(wire, group, other, 0, topic_id, max_records=0, wait_ms=0).error_code == 0
    got = _partition(_fetch(wire, group, other, 1, topic_id, max_records=100, wait_ms=3000))
    assert got.error_code == 0
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.acquired_records] == [(0, 9, 2)]
