"""Share-group delivery invariants in a three-broker cluster while brokers are SIGKILLed (issue 31).

A replication-factor-3 topic of three partitions, records produced (acks=all, idempotent) all
through the run, three confluent-kafka ShareConsumers (two with implicit acknowledgement, one
ACCEPTing explicitly) consuming them, while a killer SIGKILLs first the share-partition leader
of partition 0, then the share coordinator of partition 0's state (the broker leading its
__share_group_state partition), and starts each again a few seconds later. Every delivery
(partition, offset, delivery count, member, time) and every acknowledgement the broker confirmed
(the acknowledgement commit callback) is recorded; at the end:

- every produced record was delivered, and the group's state ends with every record acknowledged
  (the start offset of each share-partition is its end, a new member receives nothing);
- the delivery count of an offset only grows from one delivery to the next;
- a record is delivered again only if it was in flight (no confirmed acknowledgement) when a
  broker was killed or its member closed, or after its acquisition lock expired;
- a record whose acknowledgement the broker confirmed is never delivered again: kafkapy answers
  an acknowledgement only after its state record is written to __share_group_state with the
  whole ISR (docs/share-groups.md "Durability"), as Kafka's share-partition leader answers only
  after the share coordinator persisted the state.

The scenario runs once (the module's `run` fixture, ~30 s); each test checks one invariant. The
redelivery invariant is xfail, not strict: once in a few runs a record held by a live member came
back to another member right after the partition's share coordinator moved (not explained yet).
Its main cause, a leader epoch moving under the same leader, is fixed and pinned down by
test_records_held_stay_with_their_member_when_a_follower_dies. What the later runs showed (issue 31,
five runs after the share coordinator backoff, one hit): 2 records of partition 2, whose leader
(broker 1) was never killed, came back with delivery count 2 about 7 s after the ZooKeeper
controller (broker 3) was killed, when broker 1 became the controller, took over partition 2's
__share_group_state partition and bumped partition 2's leader epoch under itself. Broker 1 logged
no share-partition dropped or reloaded and no member lost its connection to it; the summary now
lists the unexplained redeliveries (run with -s) to find which path released them. ~50 s in all.
"""
from __future__ import annotations

import collections
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest

from conformance.cluster_harness import (
    ClusterUnreachable,
    _metadata,
    cluster_fixture,
    describe,
    wait_for_isr,
    wait_for_leader,
    wait_until,
)

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.15+ needed)", allow_module_level=True)
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kafkapy.groupcoord.offsets_topic import partition_for  # noqa: E402
from kafkapy.groupcoord.share.state_store import SHARE_STATE_TOPIC, coordinator_key  # noqa: E402

pytestmark = pytest.mark.timeout(180)

LOCK_S = 10.0
PARTITIONS = 3
RECORDS = 1800
PRODUCE_SECONDS = 24.0
TARGET = 0  # the partition whose share-partition leader, then share coordinator, is killed

cluster = cluster_fixture(3, {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "4000",
    "auto.leader.rebalance.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "group.share.record.lock.duration.ms": str(int(LOCK_S * 1000)),
})


@dataclass(slots=True)
class Delivery:
    t: float  # time.monotonic()
    wall: float  # time.time(), to find the moment in the broker logs
    member: str
    partition: int
    offset: int
    count: int


@dataclass
class Recorder:
    """Every delivery, every confirmed acknowledgement and every fault, with the time it was seen."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    deliveries: list[Delivery] = field(default_factory=list)
    acked: dict[tuple[int, int], list[tuple[float, str]]] = field(default_factory=dict)
    ack_failures: list[tuple[float, str, str]] = field(default_factory=list)
    events: list[tuple[float, str, object]] = field(default_factory=list)  # (t, "kill"/"start"/"close", who)
    # (t, broker killed, {partition: its leader just before}): which share-partitions the kill took down
    kills: list[tuple[float, int, dict[int, int]]] = field(default_factory=list)
    # (t, {partition: (leader, leader epoch)}) as Metadata answered, every 0.25 s
    leadership: list[tuple[float, dict[int, tuple[int, int]]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def delivered(self, member: str, partition: int, offset: int, count: int) -> None:
        with self.lock:
            self.deliveries.append(Delivery(time.monotonic(), time.time(), member, partition, offset, count))

    def acknowledged(self, member: str, offsets: dict, exception: object) -> None:
        now = time.monotonic()
        with self.lock:
            if exception is not None:
                self.ack_failures.append((now, member, str(exception)))
                return
            for tp, done in offsets.items():
                for offset in done:
                    self.acked.setdefault((tp.partition, offset), []).append((now, member))

    def event(self, kind: str, who: object) -> None:
        with self.lock:
            self.events.append((time.monotonic(), kind, who))

    def seen(self, partition: int | None = None) -> int:
        with self.lock:
            return sum(1 for d in self.deliveries if partition is None or d.partition == partition)


def _member(bootstrap: str, group: str, topic: str, name: str, explicit: bool, recorder: Recorder,
            stop: threading.Event) -> None:
    """A ShareConsumer polling until `stop`, recording what it receives and what the broker
    confirms it acknowledged; it then commits its last acknowledgements and closes."""
    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "max.poll.records": 30}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    consumer.set_acknowledgement_commit_callback(
        lambda offsets, exc: recorder.acknowledged(name, offsets, exc))
    try:
        consumer.subscribe([topic])
        while not stop.is_set():
            try:
                messages = consumer.poll(0.3) or []
            except KafkaException as exc:
                recorder.errors.append(f"{name} poll: {exc}")
                continue
            for m in messages:
                if m.error() is not None:
                    recorder.errors.append(f"{name} message error: {m.error()}")
                    continue
                recorder.delivered(name, m.partition(), m.offset(), m.delivery_count())
                if explicit:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            time.sleep(0.4)  # processing time per batch: a member always holds records in flight
        try:
            consumer.commit_sync(10)   # the last poll's acknowledgements
        except KafkaException as exc:
            recorder.errors.append(f"{name} final commit: {exc}")
    except Exception as exc:  # noqa: BLE001 - reported by the test, not lost in the thread
        recorder.errors.append(f"{name} crashed: {exc!r}")
    finally:
        consumer.close()
        recorder.event("close", name)


def _producer(bootstrap: str, topic: str, produced: dict[int, set[int]], failures: list[str],
              stop: threading.Event) -> None:
    """RECORDS records over PRODUCE_SECONDS, round robin over the partitions; records the offset
    of each one the cluster acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000})

    def on_delivery(err, msg):
        if err is not None:
            failures.append(str(err))
        else:
            produced[msg.partition()].add(msg.offset())

    start = time.monotonic()
    for i in range(RECORDS):
        if stop.is_set():
            break
        pause = start + i * PRODUCE_SECONDS / RECORDS - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, value=b"record-%05d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining:
        failures.append(f"{remaining} records not acknowledged by the end")


def _watch_leadership(cluster, topic: str, recorder: Recorder, stop: threading.Event) -> None:
    while not stop.wait(0.25):
        try:
            state = {p: (st.leader, st.leader_epoch) for p, st in describe(cluster, topic).items()}
        except ClusterUnreachable:
            continue
        with recorder.lock:
            recorder.leadership.append((time.monotonic(), state))


def _epoch_moved_under_leader(recorder: Recorder, partition: int, start: float, end: float) -> bool:
    """Whether the partition's leader epoch changed between `start` and `end` (seen up to 0.5 s
    later) while the same broker led it."""
    seen = [state[partition] for t, state in recorder.leadership if start - 0.5 <= t <= end + 0.5
            and partition in state and state[partition][0] >= 0]
    return any(a[0] == b[0] and a[1] != b[1] for a, b in zip(seen, seen[1:]))


def _state_leader(cluster, group: str, topic_id: uuid.UUID, partition: int) -> int:
    """The share coordinator of (group, topic, partition): the leader of its __share_group_state partition."""
    state = describe(cluster, SHARE_STATE_TOPIC)
    return state[partition_for(coordinator_key(group, topic_id, partition), len(state))].leader


def _kill_and_restart(cluster, topic: str, broker_id: int, recorder: Recorder, down_s: float = 3.0) -> None:
    leaders = {p: state.leader for p, state in describe(cluster, topic).items()}
    with recorder.lock:
        in_flight = {(d.partition, d.offset) for d in recorder.deliveries} - set(recorder.acked)
        recorder.kills.append((time.monotonic(), broker_id, leaders))
    recorder.event("kill", f"broker {broker_id} at {time.time():.3f}, leaders {leaders}, "
                           f"{len(in_flight)} records without a confirmed acknowledgement")
    cluster.broker(broker_id).kill9()
    time.sleep(down_s)
    cluster.broker(broker_id).start()   # waits for ZooKeeper to expire the killed broker's session
    recorder.event("start", broker_id)


def _start_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """DescribeShareGroupOffsets from the group's coordinator: each partition's start offset."""
    from kafkapy.admin.client import AdminClient as KafkapyAdmin
    from kafkapy.protocol.messages import DescribeShareGroupOffsetsRequest as R

    with KafkapyAdmin(bootstrap, timeout_s=15) as client:
        coordinator = client.coordinator(group)
        request = R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
            R.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=list(range(PARTITIONS)))])])
        [entry] = client.send(request, node=coordinator).groups
        assert entry.error_code == 0, entry
        [described] = entry.topics
        return {p.partition_index: p.start_offset for p in described.partitions}


def _check(recorder: Recorder, produced: dict[int, set[int]]) -> dict[str, list[str]]:
    """The invariants over the recorded run: {name: [violations]}."""
    closes = {who: t for t, kind, who in recorder.events if kind == "close"}
    by_offset: dict[tuple[int, int], list[Delivery]] = collections.defaultdict(list)
    for d in sorted(recorder.deliveries, key=lambda d: d.t):
        by_offset[(d.partition, d.offset)].append(d)
    violations: dict[str, list[str]] = {"lost": [], "count_decreased": [], "unexplained_redelivery": [],
                                        "acknowledged_redelivered": [], "redelivered_after_epoch_move": []}
    for partition, offsets in produced.items():
        for offset in sorted(offsets):
            if (partition, offset) not in by_offset:
                violations["lost"].append(f"{partition}:{offset} never delivered")
    for (partition, offset), seen in by_offset.items():
        for before, after in zip(seen, seen[1:]):
            where = (f"{partition}:{offset} {before.member} count {before.count} at {before.wall:.3f}, "
                     f"then {after.member} count {after.count} at {after.wall:.3f}")
            if after.count <= before.count:
                violations["count_decreased"].append(where)
            confirmed = [(t, m) for t, m in recorder.acked.get((partition, offset), []) if t < after.t]
            if confirmed:
                violations["acknowledged_redelivered"].append(f"{where}; acknowledgement confirmed to "
                                                              f"{confirmed[0][1]} {after.t - confirmed[0][0]:.2f} s before")
                continue
            # the share-partition leader holding the record was killed meanwhile (its sessions
            # and in-memory state went with it)
            killed = any(before.t - 0.5 <= t <= after.t and leaders.get(partition) == broker
                         for t, broker, leaders in recorder.kills)
            closed = before.member in closes and closes[before.member] <= after.t
            expired = after.t - before.t >= LOCK_S - 1.0
            if killed or closed or expired:
                continue
            if _epoch_moved_under_leader(recorder, partition, before.t, after.t):
                # the known defect (test_records_held_stay_with_their_member_when_a_follower_dies)
                violations["redelivered_after_epoch_move"].append(where)
            else:
                violations["unexplained_redelivery"].append(where)
    return violations


@dataclass
class Run:
    produced: dict[int, set[int]]
    produce_failures: list[str]
    recorder: Recorder
    violations: dict[str, list[str]]
    starts: dict[int, int]
    ends: dict[int, int]
    summary: str


@pytest.fixture(scope="module")
def run(cluster) -> Run:
    """The scenario, run once: the tests below each check one invariant over what it recorded."""
    began = time.monotonic()
    topic, recorder = f"share-kill-{uuid.uuid4().hex[:8]}", Recorder()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)], request_timeout=30)[topic].result(60)
    wait_for_isr(cluster, topic, 3)
    if SHARE_STATE_TOPIC not in admin.list_topics(timeout=10).topics:
        warm = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "warm-up"})
        try:
            warm.subscribe([topic])
            deadline = time.monotonic() + 30
            while SHARE_STATE_TOPIC not in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
                warm.poll(0.5)
        finally:
            warm.close()
    wait_for_isr(cluster, SHARE_STATE_TOPIC, 3)
    [entry] = [t for t in _metadata(cluster, [topic], None).topics if t.name == topic]
    topic_id = uuid.UUID(str(entry.topic_id))
    leader = describe(cluster, topic)[TARGET].leader
    # a group whose share coordinator (for the target partition) is another broker than the
    # share-partition leader, so that the two kills hit two different roles
    for _ in range(500):
        group = f"share-kill-g-{uuid.uuid4().hex[:8]}"
        if _state_leader(cluster, group, topic_id, TARGET) != leader:
            break
    else:
        pytest.fail(f"no group found whose share coordinator is not broker {leader}")
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)])]).values():
        future.result(15)

    produced: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    produce_failures: list[str] = []
    stop_members, stop_producer = threading.Event(), threading.Event()
    threads = [threading.Thread(target=_producer, daemon=True,
                                args=(cluster.bootstrap, topic, produced, produce_failures, stop_producer))]
    threads.append(threading.Thread(target=_watch_leadership, daemon=True,
                                    args=(cluster, topic, recorder, stop_members)))
    threads += [threading.Thread(target=_member, daemon=True,
                                 args=(cluster.bootstrap, group, topic, f"member-{i}", i == 2, recorder, stop_members))
                for i in range(3)]
    for thread in threads:
        thread.start()
    down: set[int] = set()
    try:
        # 1. the share-partition leader of the target partition, with records in flight on it
        wait_until(lambda: recorder.seen(TARGET) >= 60, 30, message="first deliveries of the target partition")
        first = describe(cluster, topic)[TARGET].leader
        down.add(first)
        _kill_and_restart(cluster, topic, first, recorder)
        down.discard(first)
        wait_for_leader(cluster, topic, TARGET)
        after_first = recorder.seen(TARGET)
        wait_until(lambda: recorder.seen(TARGET) >= after_first + 60, 30,
                   message="deliveries of the target partition after the leader's restart")
        # 2. the share coordinator holding the target partition's state
        second = wait_until(lambda: _state_leader(cluster, group, topic_id, TARGET), 15,
                            ignore=(ClusterUnreachable, KeyError), message="the share coordinator")
        down.add(second)
        _kill_and_restart(cluster, topic, second, recorder)
        down.discard(second)
        threads[0].join(max(1.0, began + 75 - time.monotonic()))
        # every produced record delivered at least once (or the time is up)
        wanted = {(p, o) for p, offsets in produced.items() for o in offsets}
        deadline = time.monotonic() + max(5.0, began + 90 - time.monotonic())
        while time.monotonic() < deadline:
            with recorder.lock:
                missing = wanted - {(d.partition, d.offset) for d in recorder.deliveries}
            if not missing:
                break
            time.sleep(0.2)
    finally:
        stop_producer.set()
        stop_members.set()
        for thread in threads:
            thread.join(30)
        for broker_id in down:
            if not cluster.broker(broker_id).is_running():
                cluster.broker(broker_id).start()

    # a new member finds nothing left: everything was acknowledged
    recorder.event("drain", None)
    _member_for(cluster.bootstrap, group, topic, recorder, seconds=3.0)
    violations = _check(recorder, produced)
    ends = {p: max(offsets, default=-1) + 1 for p, offsets in produced.items()}
    starts = _start_offsets(cluster.bootstrap, group, topic)
    deadline = time.monotonic() + 10   # the last acknowledgements' state may still be on its way
    while starts != ends and time.monotonic() < deadline:
        time.sleep(0.3)
        starts = _start_offsets(cluster.bootstrap, group, topic)
    elapsed = time.monotonic() - began
    summary = (f"{sum(map(len, produced.values()))} produced, {len(recorder.deliveries)} deliveries, "
               f"{sum(1 for d in recorder.deliveries if d.count > 1)} with delivery count > 1 "
               f"({collections.Counter(d.partition for d in recorder.deliveries if d.count > 1)} by partition), "
               f"{sum(1 for d in recorder.deliveries if d.member == 'drain')} to the last member, "
               f"acknowledgement failures {recorder.ack_failures[:5]}, "
               f"{len(violations['redelivered_after_epoch_move'])} redelivered after the leader epoch moved "
               f"under the same leader (known defect): {violations['redelivered_after_epoch_move'][:3]}, "
               f"{len(violations['unexplained_redelivery'])} unexplained redeliveries: "
               f"{violations['unexplained_redelivery'][:5]}, events "
               f"{[(round(t - began, 1), k, w) for t, k, w in recorder.events]}, start offsets {starts}, "
               f"client errors {recorder.errors[:5]}, {elapsed:.1f} s")
    print(summary)
    return Run(produced, produce_failures, recorder, violations, starts, ends, summary)


def test_every_produced_record_is_delivered_and_ends_acknowledged(run):
    assert not run.produce_failures, run.produce_failures[:5]
    assert not run.violations["lost"], (run.violations["lost"][:10], run.summary)
    assert run.starts == run.ends, (run.starts, run.ends, run.summary)  # nothing left unacknowledged
    assert sum(1 for d in run.recorder.deliveries if d.count > 1) > 0, run.summary  # the kills did hit records in flight


def test_delivery_counts_only_grow(run):
    assert not run.violations["count_decreased"], (run.violations["count_decreased"][:10], run.summary)


def test_a_confirmed_acknowledgement_is_never_undone(run):
    assert not run.violations["acknowledged_redelivered"], (run.violations["acknowledged_redelivered"][:10],
                                                            run.summary)


@pytest.mark.xfail(strict=False, reason="defect: records in flight on a share-partition leader that did not fail "
                   "come back to another member before their lock expires, while their holder still holds them: "
                   "once in 3 runs, right after the partition's share coordinator moved to the leader's own broker "
                   "(the epoch-move cause is fixed); not every run hits it, so not strict")
def test_redelivered_only_after_the_holder_failed(run):
    """A record comes back only when the share-partition leader holding it was killed, its member
    closed, or its lock expired."""
    unexplained = run.violations["unexplained_redelivery"] + run.violations["redelivered_after_epoch_move"]
    assert not unexplained, (unexplained[:10], run.summary)


def _member_for(bootstrap: str, group: str, topic: str, recorder: Recorder, seconds: float) -> None:
    """A member that polls (acknowledging implicitly) until `seconds` pass with nothing received."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "drain"})
    consumer.set_acknowledgement_commit_callback(lambda offsets, exc: recorder.acknowledged("drain", offsets, exc))
    try:
        consumer.subscribe([topic])
        quiet_until = time.monotonic() + seconds
        while time.monotonic() < quiet_until:
            for m in consumer.poll(0.3) or []:
                if m.error() is None:
                    recorder.delivered("drain", m.partition(), m.offset(), m.delivery_count())
                    quiet_until = time.monotonic() + seconds
        consumer.commit_sync(10)
    finally:
        consumer.close()
        recorder.event("close", "drain")


# Fixed: a share-partition leader that stayed leader while its leader epoch changed (a follower died:
# ZooKeeper-mode controllers bump the epoch when they shrink the ISR) dropped the share-partition in
# memory and reloaded the stored state, giving held records to another member. It now follows the
# replica's leadership term (_current_share_partition).


def test_records_held_stay_with_their_member_when_a_follower_dies(cluster, run):
    """One partition; member A holds 5 records (explicit mode, not acknowledged, 30 s lock); a
    broker that neither leads the partition nor keeps its share state is SIGKILLed. The leader
    stays, its leader epoch moves (the controller removes the dead follower from the ISR). Nothing
    failed that held A's records: member B receives none of them, and A's ACCEPT is taken."""
    topic, group = f"share-f-{uuid.uuid4().hex[:8]}", f"share-f-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=30)[topic].result(60)
    wait_for_isr(cluster, topic, 3)
    [entry] = [t for t in _metadata(cluster, [topic], None).topics if t.name == topic]
    topic_id = uuid.UUID(str(entry.topic_id))
    before = describe(cluster, topic)[0]
    victim = next(b for b in sorted(cluster.brokers)
                  if b != before.leader and b != _state_leader(cluster, group, topic_id, 0))
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.record.lock.duration.ms", "30000", incremental_operation=AlterConfigOpType.SET),
    ])]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce(topic, value=b"held-%d" % i, partition=0)
    assert producer.flush(30) == 0
    holder = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": "holder",
                            "share.acknowledgement.mode": "explicit"})
    other = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": "other"})
    try:
        holder.subscribe([topic])
        held = []
        deadline = time.monotonic() + 30
        while len(held) < 5 and time.monotonic() < deadline:
            held += [m for m in holder.poll(0.5) or [] if m.error() is None]
        assert sorted(m.offset() for m in held) == list(range(5))
        other.subscribe([topic])   # joined and fetching (nothing: A holds every record) before the kill
        end = time.monotonic() + 2
        while time.monotonic() < end:
            assert [m for m in other.poll(0.5) or [] if m.error() is None] == []
        cluster.broker(victim).kill9()
        try:
            wait_until(lambda: describe(cluster, topic)[0].leader_epoch > before.leader_epoch, 20,
                       ignore=(ClusterUnreachable,), message="the leader epoch moving")
            assert describe(cluster, topic)[0].leader == before.leader
            stolen = []
            end = time.monotonic() + 5
            while time.monotonic() < end:
                stolen += [(m.offset(), m.delivery_count()) for m in other.poll(0.5) or [] if m.error() is None]
            for m in held:
                holder.acknowledge(m, AcknowledgeType.ACCEPT)
            results = holder.commit_sync(15)
            assert stolen == [], f"records held by a live member delivered to another: {stolen}"
            assert all(error is None for error in results.values()), results
        finally:
            cluster.broker(victim).start()
    finally:
        holder.close()
        other.close()
