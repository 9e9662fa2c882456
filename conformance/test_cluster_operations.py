"""Cluster operations with real processes (ZooKeeper and kafkapy brokers on loopback), measured.

- Rolling restart: each of three brokers in turn gets SIGTERM (controlled shutdown), comes back and
  rejoins every ISR before the next, the controller's broker included, under an idempotent acks=all
  producer and a committing consumer group. Every acknowledged record is consumed, the log holds each
  record at most once, and each restart's unavailability (time a partition had no leader or was led
  by the stopped broker, and the producer's longest gap between acknowledgements) is printed (-s).
- Controlled-shutdown settings: `controlled.shutdown.max.retries` attempts
  `controlled.shutdown.retry.backoff.ms` apart when the controller cannot move a leadership, then an
  unclean shutdown; `controlled.shutdown.enable=false` just stops (ZooKeeper tells the controller).
- ElectLeaders: PREFERRED with the preferred replica down answers PREFERRED_LEADER_NOT_AVAILABLE and
  changes nothing; UNCLEAN on a partition whose whole ISR is down elects the live out-of-sync replica.
- Automatic preferred-leader rebalance (`auto.leader.rebalance.enable`,
  `leader.imbalance.check.interval.seconds`): leadership returns to the preferred replicas after a
  broker comes back from SIGTERM or kill -9, without any ElectLeaders request.
- A broker added to a running cluster gets replicas of topics created afterwards at once.
- Topic deletion with a replica's broker down waits (as Kafka 3.7's TopicDeletionManager does) and
  completes when the broker returns, leaving no partition directory anywhere; the name can be reused.

`LeaderWatch`, `TimedSequenceProducer` and `restart_in_turn` are also what
bench/cluster/rolling_restart.py measures with.
"""
from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import pytest

from conformance.cluster_harness import (
    ClusterUnreachable,
    PartitionState,
    cluster_fixture,
    controller_id,
    describe,
    wait_for_isr,
    wait_for_leader,
    wait_until,
)
from kafkapy.devcluster.brokers import LocalCluster

confluent_kafka = pytest.importorskip("confluent_kafka")
kazoo_client = pytest.importorskip("kazoo.client")
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conformance.replication_campaign import wait_for_controller_everywhere  # noqa: E402
from conformance.replication_workload import (  # noqa: E402
    SequenceProducer,
    check_records,
    client_log,
    decode_value,
    read_topic,
)

pytestmark = pytest.mark.timeout(300)

OFFSETS_TOPIC = "__consumer_offsets"
BASE_OVERRIDES = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "unclean.leader.election.enable": "false",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    # fewer group-coordinator partitions to replicate and move on two shared cores
    "offsets.topic.num.partitions": "6",
    # brokers stopped together (the fixture's teardown) cannot hand partitions to each other: do not
    # wait Kafka's 5 s between the attempts
    "controlled.shutdown.retry.backoff.ms": "500",
}
# Only ElectLeaders (or nothing) moves leaders back in these; Kafka's retry count, a short backoff.
OVERRIDES = {**BASE_OVERRIDES, "auto.leader.rebalance.enable": "false",
             "controlled.shutdown.max.retries": "2", "controlled.shutdown.retry.backoff.ms": "1000"}
REBALANCE_OVERRIDES = {**BASE_OVERRIDES, "auto.leader.rebalance.enable": "true",
                       "leader.imbalance.check.interval.seconds": "2"}
MAX_RETRIES = int(OVERRIDES["controlled.shutdown.max.retries"])
BACKOFF_S = int(OVERRIDES["controlled.shutdown.retry.backoff.ms"]) / 1000

ROLLING_PARTITIONS = 6
ROLLING_RATE = 300.0  # records/s over all partitions
UNAVAILABLE_LIMIT_S = 15.0  # loose: a controlled shutdown moves leaderships in well under a second
STOP_TIMEOUT_S = 30.0
REJOIN_TIMEOUT_S = 60.0

PREFERRED_LEADER_NOT_AVAILABLE = 80
REQUEST_TIMED_OUT = 7

# Log lines of kafkapy/broker/cluster_member.py's controlled shutdown.
STARTING_CONTROLLED_SHUTDOWN = "starting controlled shutdown"
ATTEMPT_FAILED = "did not complete"
GAVE_UP = "proceeding with an unclean shutdown"
SUCCEEDED = "controlled shutdown succeeded"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 10000, "logger": client_log})


def create_topic(cluster: LocalCluster, topic: NewTopic) -> None:
    client = admin(cluster)  # kept alive until the result: a destroyed handle fails its futures
    client.create_topics([topic], request_timeout=30)[topic.topic].result(timeout=60)


def elect(cluster: LocalCluster, election: ElectionType, partitions: list[TopicPartition]) -> dict[int, int]:
    """ElectLeaders through the AdminClient: per partition index, the error code (0 for none)."""
    client = admin(cluster)
    # (no request_timeout: confluent-kafka 2.16's elect_leaders raises SystemError on any keyword)
    results = client.elect_leaders(election, partitions).result(timeout=60)
    codes = {}
    for tp, error in results.items():
        # the result holds a KafkaError, though confluent-kafka documents a KafkaException
        error = error.args[0] if isinstance(error, KafkaException) else error
        codes[tp.partition] = 0 if error is None else error.code()
    return codes


def ensure_running(cluster: LocalCluster) -> None:
    """Start any broker a previous test left stopped, and wait until every broker knows the controller."""
    for node in cluster.brokers.values():
        if not node.is_running():
            node.start(60)
    wait_for_controller_everywhere(cluster)


def log_count(cluster: LocalCluster, broker_id: int, text: str) -> int:
    """How often `text` appears in the broker's output (all its runs)."""
    return cluster.broker(broker_id).log_path.read_text(errors="replace").lower().count(text)


def preferred_everywhere(cluster: LocalCluster, topic: str) -> dict[int, PartitionState] | None:
    state = describe(cluster, topic)
    return state if state and all(p.leader == p.replicas[0] for p in state.values()) else None


# ------------------------------------------------------------------ measuring

class LeaderWatch:
    """Polls a topic's leaders through Metadata every `interval_s`, from a thread.

    Asks the first running broker not in `avoid` (the one being restarted), so a stopping broker's
    own view does not count. `unavailable` then says, per partition, how long within a window it
    had no leader or was led by a given (stopping) broker.
    """

    def __init__(self, cluster: LocalCluster, topic: str, interval_s: float = 0.05) -> None:
        self.cluster = cluster
        self.topic = topic
        self.interval_s = interval_s
        self.avoid: frozenset[int] = frozenset()
        self.samples: list[tuple[float, dict[int, int]]] = []
        self.failed_polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"leader-watch-{topic}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _poll(self) -> dict[int, int] | None:
        for node in list(self.cluster.brokers.values()):
            if node.broker_id in self.avoid or not node.is_running():
                continue
            try:
                state = describe(self.cluster, self.topic, via=node.broker_id)
            except ClusterUnreachable:
                continue
            if state:
                return {p: s.leader for p, s in state.items()}
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            leaders = self._poll()
            if leaders is None:
                self.failed_polls += 1
            else:
                self.samples.append((began, leaders))
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    def unavailable(self, start: float, end: float, broker: int, broker_down_until: float) -> dict[int, float]:
        """Per partition: seconds within [start, end] with no leader (-1), or led by `broker`
        before `broker_down_until` (from its SIGTERM until it was started again)."""
        window = [s for s in list(self.samples) if start <= s[0] <= end]
        total: dict[int, float] = defaultdict(float)
        for (at, leaders), (next_at, _) in zip(window, window[1:]):
            for partition, leader in leaders.items():
                if leader < 0 or (leader == broker and at < broker_down_until):
                    total[partition] += next_at - at
        partitions = set().union(*(leaders for _, leaders in window)) if window else set()
        return {p: round(total.get(p, 0.0), 3) for p in sorted(partitions)}


class TimedSequenceProducer(SequenceProducer):
    """SequenceProducer that also keeps when each partition got each acknowledgement."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ack_times: list[list[float]] = [[] for _ in range(self.partitions)]

    def _on_delivery(self, err, msg) -> None:
        super()._on_delivery(err, msg)
        if err is None and 0 <= msg.partition() < self.partitions:
            self.ack_times[msg.partition()].append(time.monotonic())

    def longest_gap(self, start: float, end: float) -> dict[int, tuple[float, float]]:
        """Per partition: the longest time between consecutive acknowledgements that overlaps
        [start, end] (the end of the window counts as an acknowledgement if none came since), and
        when it began, in seconds from `start` (negative: before it)."""
        gaps = {}
        for partition, times in enumerate(self.ack_times):
            times = list(times)
            before = [t for t in times if t < start][-1:] or [start]
            inside = [t for t in times if start <= t <= end]
            after = [t for t in times if t > end][:1] or [end]
            points = before + inside + after
            gap, began = max((b - a, a) for a, b in zip(points, points[1:]))
            gaps[partition] = (round(gap, 3), round(began - start, 3))
        return gaps


class GroupConsumer:
    """A consumer in a group (subscribe, commit after every batch) reading from a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self._lock = threading.Lock()
        self.consumed: Counter[tuple[int, int]] = Counter()  # (partition, seq) -> times consumed
        self.errors: Counter[str] = Counter()
        self.commit_errors: Counter[str] = Counter()
        self.assignments = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"group-consumer-{group}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def consumed_keys(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self.consumed)

    def _on_commit(self, err, partitions) -> None:
        if err is not None and err.code() != KafkaError._NO_OFFSET:
            with self._lock:
                self.commit_errors[err.name()] += 1

    def _on_assign(self, consumer, partitions) -> None:
        with self._lock:
            self.assignments += 1

    def _run(self) -> None:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "socket.timeout.ms": 10000,
            "session.timeout.ms": 10000,
            "on_commit": self._on_commit,
            "logger": client_log,
        })
        try:
            consumer.subscribe([self.topic], on_assign=self._on_assign)
            while not self._stop.is_set():
                messages = consumer.consume(500, timeout=0.2)
                for msg in messages:
                    if msg.error():
                        with self._lock:
                            self.errors[msg.error().name()] += 1
                        continue
                    decoded = decode_value(msg.value())
                    if decoded is not None:
                        with self._lock:
                            self.consumed[decoded] += 1
                if messages:
                    try:
                        consumer.commit(asynchronous=True)
                    except KafkaException as exc:
                        with self._lock:
                            self.commit_errors[exc.args[0].name()] += 1
        finally:
            consumer.close()


@dataclass(slots=True)
class RestartResult:
    """One broker's SIGTERM, restart and return to every ISR, timed (seconds from the SIGTERM)."""

    broker: int
    was_controller: bool
    exit_code: int | None
    exited_s: float  # the process had ended
    serving_s: float  # started again and registered
    rejoined_s: float  # back in every ISR, every broker knows the controller
    unavailable: dict[int, float] = field(default_factory=dict)  # per partition (LeaderWatch)
    ack_gaps: dict[int, float] = field(default_factory=dict)  # per partition (producer)
    ack_gaps_began: dict[int, float] = field(default_factory=dict)  # when each began, from the SIGTERM
    controlled: bool = False  # its log says the controlled shutdown succeeded

    @property
    def max_unavailable(self) -> float:
        return max(self.unavailable.values(), default=0.0)

    @property
    def max_ack_gap(self) -> float:
        return max(self.ack_gaps.values(), default=0.0)

    def line(self) -> str:
        worst = max(self.unavailable, key=self.unavailable.get, default=None)
        gap_at = max(self.ack_gaps, key=self.ack_gaps.get, default=None)
        gap_began = self.ack_gaps_began.get(gap_at, 0.0)
        return (f"broker {self.broker}{' (controller)' if self.was_controller else ''}: "
                f"exit {self.exited_s:.2f} s (code {self.exit_code}, controlled {self.controlled}), "
                f"serving {self.serving_s:.2f} s, full ISR {self.rejoined_s:.2f} s; "
                f"leaderless max {self.max_unavailable:.3f} s (p{worst}), "
                f"longest ack gap {self.max_ack_gap:.3f} s (p{gap_at}, from {gap_began:+.2f} s)")


def restart_in_turn(cluster: LocalCluster, topic: str, watch: LeaderWatch, producer: TimedSequenceProducer | None,
                    brokers: Iterable[int] | None = None, also_wait_for: Iterable[str] = (),
                    sig: int = signal.SIGTERM, progress: Callable[[str], None] = print) -> list[RestartResult]:
    """Restart each broker in turn with `sig`; before the next one, wait until it is back in every ISR
    of `topic` (and of the topics in `also_wait_for`), every broker knows the controller and (with a
    `producer`) every partition has been acknowledged again, so that each restart starts from a
    steady state. Each restart's numbers go to `progress` as one line."""
    results = []
    for broker_id in (sorted(cluster.brokers) if brokers is None else brokers):
        node = cluster.broker(broker_id)
        was_controller = controller_id(cluster) == broker_id
        succeeded_before = log_count(cluster, broker_id, SUCCEEDED)
        watch.avoid = frozenset({broker_id})
        began = time.monotonic()
        node.send_signal(sig)
        code = node.wait_stopped(STOP_TIMEOUT_S)
        exited = time.monotonic()
        controlled = log_count(cluster, broker_id, SUCCEEDED) > succeeded_before
        node.start(REJOIN_TIMEOUT_S)
        serving = time.monotonic()
        size = len(cluster.brokers)
        for name in (topic, *also_wait_for):
            wait_for_isr(cluster, name, min(3, size), timeout=REJOIN_TIMEOUT_S)
        wait_for_controller_everywhere(cluster)
        rejoined = time.monotonic()
        watch.avoid = frozenset()
        settled = rejoined
        if producer is not None:
            wait_until(lambda: all(times and times[-1] > rejoined for times in producer.ack_times), REJOIN_TIMEOUT_S,
                       message=f"acknowledgements on every partition after broker {broker_id} returned")
            settled = time.monotonic()
        gaps = producer.longest_gap(began, settled) if producer is not None else {}
        result = RestartResult(broker_id, was_controller, code, exited - began, serving - began, rejoined - began,
                               watch.unavailable(began, rejoined, broker_id, serving),
                               {p: gap for p, (gap, _) in gaps.items()},
                               {p: at for p, (_, at) in gaps.items()}, controlled)
        progress(result.line())
        results.append(result)
    return results


# ------------------------------------------------------------------ automatic rebalance, added broker

# A cluster of its own, torn down once the class's tests are done (not at the end of the module).
rebalance_cluster = cluster_fixture(3, REBALANCE_OVERRIDES, scope="class")


class TestWithAutomaticLeaderRebalance:
    """Brokers with auto.leader.rebalance.enable=true and a check every 2 s."""

    def test_leadership_returns_to_preferred_replicas_without_elect_leaders(self, rebalance_cluster):
        cluster = rebalance_cluster
        ensure_running(cluster)
        topic = unique("auto-rebalance")
        create_topic(cluster, NewTopic(topic, 6, 3))
        wait_for_isr(cluster, topic, 3)
        wait_until(lambda: preferred_everywhere(cluster, topic), 30, message=f"{topic}: preferred leaders",
                   ignore=(ClusterUnreachable,))
        rebalances_logged = sum(log_count(cluster, b, "back to their preferred leaders") for b in cluster.brokers)

        controller = controller_id(cluster)
        victim = next(b for b in sorted(cluster.brokers) if b != controller)
        # 1. a clean stop: controlled shutdown moves its leaderships away; back, it leads them again
        cluster.broker(victim).stop(signal.SIGTERM)
        wait_until(lambda: all(p.leader not in (victim, -1) for p in describe(cluster, topic).values()), 30,
                   message=f"{topic}: no partition led by stopped broker {victim}", ignore=(ClusterUnreachable,))
        cluster.broker(victim).start(60)
        wait_for_isr(cluster, topic, 3, timeout=60)
        in_sync = time.monotonic()
        wait_until(lambda: preferred_everywhere(cluster, topic), 30, ignore=(ClusterUnreachable,),
                   message=f"{topic}: leadership back on the preferred replicas after broker {victim} returned")
        after_term = time.monotonic() - in_sync

        # 2. kill -9 of the controller: the next controller runs the rebalance check too
        cluster.broker(controller).kill9()
        survivors = [b for b in cluster.brokers if b != controller]
        wait_until(lambda: controller_id(cluster) in survivors, 30, ignore=(ClusterUnreachable,),
                   message=f"a new controller among {survivors}")
        wait_until(lambda: all(p.leader in survivors for p in describe(cluster, topic).values()), 30,
                   message=f"{topic}: no partition led by killed broker {controller}", ignore=(ClusterUnreachable,))
        cluster.broker(controller).start(60)  # waits for ZooKeeper to expire the killed session first
        wait_for_isr(cluster, topic, 3, timeout=60)
        in_sync = time.monotonic()
        wait_until(lambda: preferred_everywhere(cluster, topic), 30, ignore=(ClusterUnreachable,),
                   message=f"{topic}: leadership back on the preferred replicas after broker {controller} returned")
        after_kill = time.monotonic() - in_sync
        print(f"auto rebalance: preferred leaders back {after_term:.1f} s after the full ISR (SIGTERM of "
              f"broker {victim}), {after_kill:.1f} s (kill -9 of controller {controller})", flush=True)
        logged = sum(log_count(cluster, b, "back to their preferred leaders") for b in cluster.brokers)
        assert logged >= rebalances_logged + 2, "the controllers did not log their preferred-leader moves"

    def test_added_broker_gets_replicas_of_new_topics_at_once(self, rebalance_cluster):
        cluster = rebalance_cluster
        ensure_running(cluster)
        node = cluster.add_broker()
        assert node.broker_id == 4 and node.is_running()
        wait_for_controller_everywhere(cluster)
        wait_until(lambda: len(_brokers_in_metadata(cluster)) == 4, 30, ignore=(ClusterUnreachable,),
                   message="4 brokers in Metadata")
        topic = unique("after-added-broker")
        create_topic(cluster, NewTopic(topic, 12, 3))
        state = wait_for_isr(cluster, topic, 3, timeout=60)
        on_new = sorted(p for p, s in state.items() if 4 in s.replicas)
        led_by_new = sorted(p for p, s in state.items() if s.leader == 4)
        print(f"added broker 4: replicas of {len(on_new)} of 12 partitions, leader of {len(led_by_new)}", flush=True)
        # Kafka's placement spreads 36 replicas evenly over 4 brokers: 9 each, 3 leaderships each
        assert len(on_new) == 9 and len(led_by_new) == 3, state
        # the new broker serves: records to a partition it leads come back
        client = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                           "enable.idempotence": True, "logger": client_log})
        for i in range(20):
            client.produce(topic, b"via-4-%d" % i, partition=led_by_new[0])
        assert client.flush(30) == 0
        records = read_topic(cluster.bootstrap, topic, 12)
        assert [v for _, v in records[led_by_new[0]]] == [b"via-4-%d" % i for i in range(20)]


def _brokers_in_metadata(cluster: LocalCluster) -> set[int]:
    from conformance.cluster_harness import _metadata

    return {b.node_id for b in _metadata(cluster, [], None).brokers}


# ------------------------------------------------------------------ one cluster for the rest

cluster = cluster_fixture(3, OVERRIDES)


def test_rolling_restart_keeps_every_acknowledged_record(cluster):
    ensure_running(cluster)
    topic = unique("rolling")
    create_topic(cluster, NewTopic(topic, ROLLING_PARTITIONS, 3, config={"min.insync.replicas": "2"}))
    wait_for_isr(cluster, topic, 3)
    producer = TimedSequenceProducer(cluster.bootstrap, topic, ROLLING_PARTITIONS, rate=ROLLING_RATE)
    consumer = GroupConsumer(cluster.bootstrap, topic, unique("rolling-group"))
    watch = LeaderWatch(cluster, topic)
    watch.start()
    producer.start()
    consumer.start()
    started = time.monotonic()
    try:
        wait_until(lambda: min(producer.acked_counts()) >= 50, 60, message="first acknowledgements")
        wait_until(lambda: len(consumer.consumed_keys()) >= 100, 60, message="the group consumes")
        wait_for_isr(cluster, OFFSETS_TOPIC, 3, timeout=60)
        results = restart_in_turn(cluster, topic, watch, producer, also_wait_for=[OFFSETS_TOPIC])
        time.sleep(1.0)  # acknowledgements after the last restart
    finally:
        producer.stop(flush_timeout=30.0)
    acked = producer.acked()
    acked_keys = {(p, seq) for p, seqs in enumerate(acked) for seq in seqs}
    try:
        wait_until(lambda: not (acked_keys - consumer.consumed_keys()), 60,
                   message="the group consumed every acknowledged record")
    finally:
        consumer.stop()
        watch.stop()
    elapsed = time.monotonic() - started

    check = check_records(read_topic(cluster.bootstrap, topic, ROLLING_PARTITIONS), acked, producer.sent())
    consumed_twice = sum(n - 1 for n in consumer.consumed.values() if n > 1)
    print(f"rolling restart of {len(results)} brokers in {elapsed:.1f} s: {check.acked} acknowledged, "
          f"{check.read} in the log, {check.duplicates} duplicates, {check.missing} missing; group consumer: "
          f"{len(consumer.consumed)} distinct, {consumed_twice} redelivered, {consumer.assignments} assignments, "
          f"commit errors {dict(consumer.commit_errors)}; producer delivery errors "
          f"{dict(producer.delivery_errors)}; leader polls {len(watch.samples)} ({watch.failed_polls} failed)",
          flush=True)
    assert not producer.fatal_errors, producer.fatal_errors
    assert check.ok, check.violations
    assert check.acked == producer.acked_total() > 0 and check.duplicates == 0 and check.missing == 0
    assert any(r.was_controller for r in results), [r.line() for r in results]
    for result in results:
        assert result.exit_code == 0 and result.controlled, result.line()
        assert result.max_unavailable < UNAVAILABLE_LIMIT_S, result.line()
        assert result.max_ack_gap < UNAVAILABLE_LIMIT_S, result.line()


def test_controlled_shutdown_retries_then_stops_and_unclean_election_elects_out_of_sync_replica(cluster):
    ensure_running(cluster)
    controller = controller_id(cluster)
    leader, follower = [b for b in sorted(cluster.brokers) if b != controller]
    topic = unique("unclean")
    create_topic(cluster, NewTopic(topic, num_partitions=1, replica_assignment=[[leader, follower]],
                                   config={"min.insync.replicas": "1"}))
    wait_for_isr(cluster, topic, 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "logger": client_log})
    try:
        for i in range(10):
            producer.produce(topic, b"both-%d" % i, partition=0)
        assert producer.flush(30) == 0

        cluster.broker(follower).stop(signal.SIGTERM)
        wait_until(lambda: describe(cluster, topic)[0].isr == (leader,), 30, ignore=(ClusterUnreachable,),
                   message=f"{topic}-0: ISR [{leader}] once broker {follower} stopped")
        for i in range(5):
            producer.produce(topic, b"leader-only-%d" % i, partition=0)
        assert producer.flush(30) == 0

        # The controller cannot move the leadership (its only other replica is down): the broker
        # tries max.retries times, backoff apart, then stops anyway.
        attempts_before = log_count(cluster, leader, ATTEMPT_FAILED)
        gave_up_before = log_count(cluster, leader, GAVE_UP)
        began = time.monotonic()
        code = cluster.broker(leader).stop(signal.SIGTERM, timeout=STOP_TIMEOUT_S)
        took = time.monotonic() - began
        attempts = log_count(cluster, leader, ATTEMPT_FAILED) - attempts_before
        print(f"controlled shutdown of broker {leader} with a partition no one else can lead: {attempts} "
              f"attempts, stopped after {took:.2f} s (code {code})", flush=True)
        assert code == 0
        assert attempts == MAX_RETRIES, cluster.broker(leader).log_tail()
        assert log_count(cluster, leader, GAVE_UP) == gave_up_before + 1, cluster.broker(leader).log_tail()
        assert (MAX_RETRIES - 1) * BACKOFF_S <= took < (MAX_RETRIES - 1) * BACKOFF_S + 10, took

        offline = wait_until(lambda: (s := describe(cluster, topic).get(0)) and s.leader == -1 and s, 30,
                             ignore=(ClusterUnreachable,), message=f"{topic}-0 offline")
        assert offline.isr == (leader,)  # the last ISR member stays in the ISR
        cluster.broker(follower).start(60)
        wait_for_controller_everywhere(cluster)
        time.sleep(2.0)  # time for a (wrong) clean election of the returned out-of-sync replica
        still = describe(cluster, topic)[0]
        assert still.leader == -1 and still.isr == (leader,), still

        # PREFERRED: the preferred replica (the old leader) is down
        assert elect(cluster, ElectionType.PREFERRED, [TopicPartition(topic, 0)]) == \
            {0: PREFERRED_LEADER_NOT_AVAILABLE}
        assert describe(cluster, topic)[0] == still
        # UNCLEAN: the live replica that is not in the ISR leads, alone
        assert elect(cluster, ElectionType.UNCLEAN, [TopicPartition(topic, 0)]) == {0: 0}
        elected = wait_until(lambda: (s := describe(cluster, topic).get(0)) and s.leader == follower and s, 30,
                             ignore=(ClusterUnreachable,), message=f"{topic}-0 led by {follower}")
        assert elected.isr == (follower,) and elected.leader_epoch > still.leader_epoch, elected
        for i in range(5):
            producer.produce(topic, b"after-unclean-%d" % i, partition=0)
        assert producer.flush(30) == 0
        values = [v for _, v in read_topic(cluster.bootstrap, topic, 1)[0]]
        assert values == [b"both-%d" % i for i in range(10)] + [b"after-unclean-%d" % i for i in range(5)]

        # the old leader returns, drops what only it had, and rejoins the ISR
        cluster.broker(leader).start(60)
        wait_for_isr(cluster, topic, 2, timeout=60)
        values = [v for _, v in read_topic(cluster.bootstrap, topic, 1)[0]]
        assert values == [b"both-%d" % i for i in range(10)] + [b"after-unclean-%d" % i for i in range(5)]
    finally:
        ensure_running(cluster)


def test_elect_preferred_with_preferred_replica_down_changes_nothing(cluster):
    ensure_running(cluster)
    topic = unique("preferred-down")
    create_topic(cluster, NewTopic(topic, 3, 3))
    wait_for_isr(cluster, topic, 3)
    preferred = describe(cluster, topic)[0].replicas[0]
    try:
        cluster.broker(preferred).stop(signal.SIGTERM)
        wait_until(lambda: (s := describe(cluster, topic).get(0)) and s.leader not in (-1, preferred)
                   and preferred not in s.isr, 30, ignore=(ClusterUnreachable,),
                   message=f"{topic}-0 led elsewhere, broker {preferred} out of its ISR")
        before = describe(cluster, topic)
        assert elect(cluster, ElectionType.PREFERRED, [TopicPartition(topic, 0)]) == \
            {0: PREFERRED_LEADER_NOT_AVAILABLE}
        assert describe(cluster, topic) == before
    finally:
        ensure_running(cluster)
    wait_for_isr(cluster, topic, 3, timeout=60)
    assert elect(cluster, ElectionType.PREFERRED, [TopicPartition(topic, 0)]) == {0: 0}
    wait_until(lambda: describe(cluster, topic)[0].leader == preferred, 30, ignore=(ClusterUnreachable,),
               message=f"{topic}-0 led by its preferred replica {preferred} again")


def test_controlled_shutdown_disabled_just_stops(cluster):
    ensure_running(cluster)
    controller = controller_id(cluster)
    broker = next(b for b in sorted(cluster.brokers) if b != controller)
    node = cluster.broker(broker)
    topic = unique("no-controlled-shutdown")
    create_topic(cluster, NewTopic(topic, 3, 3))
    wait_for_isr(cluster, topic, 3)
    node.overrides["controlled.shutdown.enable"] = "false"
    try:
        node.restart(signal.SIGTERM)
        wait_for_isr(cluster, topic, 3, timeout=60)
        wait_for_controller_everywhere(cluster)
        led = sorted(p for p, s in describe(cluster, topic).items() if s.replicas[0] == broker)
        assert led, describe(cluster, topic)
        elect(cluster, ElectionType.PREFERRED, [TopicPartition(topic, p) for p in led])
        wait_until(lambda: all(describe(cluster, topic)[p].leader == broker for p in led), 30,
                   ignore=(ClusterUnreachable,), message=f"{topic}: partitions {led} led by broker {broker}")
        started_before = log_count(cluster, broker, STARTING_CONTROLLED_SHUTDOWN)
        watch = LeaderWatch(cluster, topic)
        watch.avoid = frozenset({broker})
        watch.start()
        began = time.monotonic()
        try:
            code = node.stop(signal.SIGTERM, timeout=STOP_TIMEOUT_S)
            exited = time.monotonic()
            for p in led:
                wait_for_leader(cluster, topic, p, not_in=(broker,), timeout=30)
            moved = time.monotonic()
        finally:
            watch.stop()
        # until it exits the broker still serves as the leader; after, nobody does until the
        # controller hears from ZooKeeper that the broker is gone
        unavailable = watch.unavailable(began, moved, broker, moved)
        after_exit = watch.unavailable(exited, moved, broker, moved)
        print(f"controlled.shutdown.enable=false: broker {broker} exited after {exited - began:.2f} s, its "
              f"{len(led)} leadership(s) moved after {moved - began:.2f} s; led by it or by none, per partition: "
              f"{unavailable} from the SIGTERM, {after_exit} after the exit", flush=True)
        assert code == 0
        assert log_count(cluster, broker, STARTING_CONTROLLED_SHUTDOWN) == started_before, node.log_tail()
        assert max(unavailable.values()) < UNAVAILABLE_LIMIT_S
    finally:
        node.overrides.pop("controlled.shutdown.enable", None)
        ensure_running(cluster)


def test_topic_deletion_waits_for_a_stopped_replica_then_completes(cluster):
    ensure_running(cluster)
    controller = controller_id(cluster)
    down = max(b for b in cluster.brokers if b != controller)
    topic = unique("delete-while-down")
    create_topic(cluster, NewTopic(topic, 3, 3))
    wait_for_isr(cluster, topic, 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "logger": client_log})
    for p in range(3):
        producer.produce(topic, b"doomed", partition=p)
    assert producer.flush(30) == 0
    zk = kazoo_client.KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=15)
    marker = f"/admin/delete_topics/{topic}"
    try:
        cluster.broker(down).stop(signal.SIGTERM)
        client = admin(cluster)
        future = client.delete_topics([topic], operation_timeout=5, request_timeout=30)[topic]
        with pytest.raises(KafkaException) as timed_out:
            future.result(timeout=60)
        # Kafka answers REQUEST_TIMED_OUT: the topic is queued but cannot leave the metadata yet
        assert timed_out.value.args[0].code() == REQUEST_TIMED_OUT, timed_out.value
        time.sleep(2.0)
        assert zk.exists(marker) and zk.exists(f"/brokers/topics/{topic}")
        for broker_id in cluster.brokers:
            if broker_id != down:  # nothing is deleted while blocked: the topic is still served
                assert sorted(describe(cluster, topic, via=broker_id)) == [0, 1, 2]
        assert all(_partition_dirs(cluster.broker(b).log_dir, topic) for b in cluster.brokers)

        cluster.broker(down).start(60)
        began = time.monotonic()
        wait_until(lambda: not zk.exists(marker) and not zk.exists(f"/brokers/topics/{topic}"), 30,
                   message=f"{marker} and /brokers/topics/{topic} removed")
        for broker_id in cluster.brokers:
            wait_until(lambda: describe(cluster, topic, via=broker_id) == {}, 30, ignore=(ClusterUnreachable,),
                       message=f"{topic} gone from broker {broker_id}'s metadata")
        wait_until(lambda: not any(_partition_dirs(cluster.broker(b).log_dir, topic) for b in cluster.brokers), 30,
                   message=f"no {topic}-<p> directory left: "
                           f"{[_partition_dirs(n.log_dir, topic) for n in cluster.brokers.values()]}")
        print(f"deletion of {topic} completed {time.monotonic() - began:.2f} s after broker {down} returned",
              flush=True)
        assert not zk.exists(f"/config/topics/{topic}")
    finally:
        zk.stop()
        zk.close()
        ensure_running(cluster)

    # the name can be used again, with fresh partitions
    create_topic(cluster, NewTopic(topic, 3, 3))
    wait_for_isr(cluster, topic, 3, timeout=60)
    for p in range(3):
        for i in range(5):
            producer.produce(topic, b"again-%d" % i, partition=p)
    assert producer.flush(30) == 0
    records = read_topic(cluster.bootstrap, topic, 3)
    assert [[v for _, v in part] for part in records] == [[b"again-%d" % i for i in range(5)]] * 3


def _partition_dirs(log_dir: Path, topic: str) -> list[str]:
    """The topic's partition directories in a log dir, including ones renamed for deletion."""
    if not log_dir.exists():
        return []
    prefix = f"{topic}-"
    return sorted(d.name for d in log_dir.iterdir()
                  if d.is_dir() and d.name.startswith(prefix) and d.name[len(prefix):].split(".")[0].isdigit())


def test_topic_deletion_completes_only_once_every_replica_is_deleted(cluster):
    """A replica that never answers its StopReplica (its broker frozen, then killed) keeps the deletion
    pending, as Kafka's TopicDeletionManager does (ReplicaDeletionIneligible until the broker returns),
    so no directory of the topic survives on it and the name can be reused."""
    ensure_running(cluster)
    controller = controller_id(cluster)
    frozen = max(b for b in cluster.brokers if b != controller)
    node = cluster.broker(frozen)
    topic = unique("delete-frozen")
    create_topic(cluster, NewTopic(topic, 3, 3))
    wait_for_isr(cluster, topic, 3)
    zk = kazoo_client.KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=15)
    marker = f"/admin/delete_topics/{topic}"
    try:
        node.send_signal(signal.SIGSTOP)  # registered (its session lives on for a while), answers nothing
        client = admin(cluster)
        try:
            client.delete_topics([topic], operation_timeout=5, request_timeout=30)[topic].result(timeout=60)
        except KafkaException as exc:
            print(f"DeleteTopics with broker {frozen} frozen: {exc}", flush=True)
        time.sleep(1.0)
        pending_while_frozen = bool(zk.exists(marker))
        node.kill9()
        node.start(60)  # once ZooKeeper has expired the frozen broker's session
        deadline = time.monotonic() + 10  # when it works: well under a second
        while time.monotonic() < deadline and _partition_dirs(node.log_dir, topic):
            time.sleep(0.5)
        left = _partition_dirs(node.log_dir, topic)
        print(f"deletion with broker {frozen} frozen: marker pending while frozen {pending_while_frozen}, "
              f"directories left on it after its return {left}", flush=True)
        assert not left, f"broker {frozen} kept {left} of the deleted topic"
        assert pending_while_frozen, f"{marker} was removed before broker {frozen} deleted its replicas"
        wait_until(lambda: not zk.exists(marker) and not zk.exists(f"/brokers/topics/{topic}"), 30,
                   message=f"{marker} and /brokers/topics/{topic} removed")
    finally:
        node.send_signal(signal.SIGCONT)
        zk.stop()
        zk.close()
        ensure_running(cluster)
    create_topic(cluster, NewTopic(topic, 3, 3))
    wait_for_isr(cluster, topic, 3, timeout=30)
