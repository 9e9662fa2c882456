"""Leader failover under a paced acks=all producer: stop the leader, time the next acknowledgement.

    with LocalCluster(...) as cluster:
        samples = measure_failover(cluster, topic, partitions=3, signals=["SIGKILL"] * 20, interval_s=0.005)

Each sample: restore the preferred leaders and wait for a full ISR, start a producer that sends
one record every `interval_s` to the partition the chosen broker leads, let it get acknowledgements
for a moment, send the signal, and wait for the first acknowledgement of a record *sent after* the
signal (records in flight at the signal are retried by the client and acknowledged at the same
moment or earlier, so they would not change the answer but could count a reply that was already
on the wire). Then the broker is started again. Every wait is bounded.
"""

from __future__ import annotations

import re
import signal as signals
import threading
import time
from dataclasses import dataclass, field

from cluster_report import FailoverSample

from conformance.cluster_harness import ClusterUnreachable, controller_id, describe, wait_for_isr, wait_until
from kafkapy.devcluster.brokers import LocalCluster, LocalClusterStartError

WARMUP_ACKS = 20  # acknowledgements before the signal: the producer knows the leader and is steady
WARMUP_TIMEOUT_S = 30.0
FAILOVER_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0  # a controlled shutdown may take a while; after this, SIGKILL
FLUSH_TIMEOUT_S = 10.0
STALL_WINDOW_S = 1.0  # produced after the old leader's exit, to see the whole disruption
ISR_TIMEOUT_S = 30.0  # restarted broker back in every ISR (it takes well under a second when it works)
ADMIN_TIMEOUT_S = 15.0


@dataclass
class Ack:
    sent_at: float
    acked_at: float
    value: bytes


@dataclass
class PacedProducer:
    """A confluent-kafka producer thread sending one record every `interval_s` to one partition."""

    bootstrap: str
    topic: str
    partition: int
    interval_s: float
    tag: str
    acks: list[Ack] = field(default_factory=list)
    failed: int = 0
    last_error: str | None = None
    sent: int = 0

    def __post_init__(self) -> None:
        from confluent_kafka import Producer

        self._producer = Producer({
            "bootstrap.servers": self.bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "enable.idempotence": False,
            "compression.type": "none",
            "message.timeout.ms": 120_000,  # longer than any failover: nothing is given up on
        })
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"paced-producer-{self.tag}", daemon=True)

    def __enter__(self) -> PacedProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(FLUSH_TIMEOUT_S + 5)

    def _run(self) -> None:
        next_at = time.perf_counter()
        while not self._stop.is_set():
            now = time.perf_counter()
            if now >= next_at:
                value = f"{self.tag}-{self.sent}".encode()
                try:
                    self._producer.produce(self.topic, value, partition=self.partition,
                                           on_delivery=lambda err, msg, t=now, v=value: self._done(err, t, v))
                    self.sent += 1
                except BufferError:
                    pass
                # a fixed schedule, but no burst to catch up after a stall
                next_at = max(next_at + self.interval_s, now)
            self._producer.poll(max(0.0, min(next_at - time.perf_counter(), self.interval_s)))
        self._producer.flush(FLUSH_TIMEOUT_S)

    def _done(self, error: object, sent_at: float, value: bytes) -> None:
        if error is None:
            self.acks.append(Ack(sent_at, time.perf_counter(), value))
        else:
            self.failed += 1
            self.last_error = str(error)

    def first_ack_sent_after(self, moment: float) -> Ack | None:
        for ack in list(self.acks):  # a copy: the producer thread appends
            if ack.sent_at >= moment:
                return ack
        return None


# The controller's line for every leader change it writes (kafkapy/controller/kafka_controller.py):
# "[2026-11-24 02:28:26,176] INFO partition t-0: leader 2, leader epoch 1, ISR [2, 3] (...)"
_ELECTION_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] INFO partition (\S+): leader (\d+),")


def leader_elected_after(cluster: LocalCluster, topic: str, partition: int, since_wall: float) -> float | None:
    """Seconds from `since_wall` (time.time()) to the first new leader of the partition that a
    controller logged after it, whichever broker was the controller; None if none is logged."""
    name = f"{topic}-{partition}"
    found = None
    for node in cluster.brokers.values():
        try:
            text = node.log_path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            match = _ELECTION_LINE.match(line)
            if match is None or match.group(3) != name:
                continue
            at = time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")) + int(match.group(2)) / 1000
            if at >= since_wall - 0.001 and (found is None or at < found):
                found = at
    return None if found is None else max(0.0, found - since_wall)


def restore_preferred_leaders(cluster: LocalCluster, topic: str, partitions: int) -> bool:
    """Ask for a preferred-leader election and wait until every partition is led by its first replica."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    def preferred() -> bool:
        state = describe(cluster, topic)
        return len(state) == partitions and all(p.leader == p.replicas[0] for p in state.values())

    if preferred():
        return True
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(partitions)],
                                     request_timeout=ADMIN_TIMEOUT_S)
        future.result(timeout=ADMIN_TIMEOUT_S)  # per-partition errors (ELECTION_NOT_NEEDED) do not matter here
    except Exception:  # noqa: BLE001  checked below by looking at the leaders
        pass
    try:
        wait_until(preferred, timeout=ADMIN_TIMEOUT_S, message="preferred leaders", ignore=(ClusterUnreachable,))
        return True
    except AssertionError:
        return False


def restart(cluster: LocalCluster, broker_id: int, deadline_s: float) -> None:
    """Start a stopped broker again; retried while its old ZooKeeper registration may linger."""
    node = cluster.broker(broker_id)
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            node.start(timeout=max(5.0, deadline - time.monotonic()))
            return
        except LocalClusterStartError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def one_sample(cluster: LocalCluster, topic: str, partitions: int, target: int, sig: str, interval_s: float,
               acked_values: set[bytes], tag: str, session_timeout_s: float) -> FailoverSample:
    preferred_ok = restore_preferred_leaders(cluster, topic, partitions)
    state = describe(cluster, topic)
    led = sorted(p for p, s in state.items() if s.leader == target)
    if not led:  # the election did not bring it back: stop whoever leads partition 0 instead
        target = state[0].leader
        led = sorted(p for p, s in state.items() if s.leader == target)
    partition = led[0]
    sample = FailoverSample(signal=sig, broker=target, partition=partition,
                            was_controller=controller_id(cluster) == target)
    if not preferred_ok:
        sample.last_error = "preferred leaders not restored before the sample"
    node = cluster.broker(target)
    with PacedProducer(cluster.bootstrap, topic, partition, interval_s, tag) as producer:
        try:
            wait_until(lambda: len(producer.acks) >= WARMUP_ACKS, timeout=WARMUP_TIMEOUT_S,
                       interval=0.01, message="producer warm-up acknowledgements")
        except AssertionError as error:
            sample.error = f"{error} (failed deliveries: {producer.failed}, last: {producer.last_error})"
            return _finish(sample, producer, acked_values)
        signalled, signalled_wall = time.perf_counter(), time.time()
        node.send_signal(getattr(signals, sig))
        node.wait_stopped(EXIT_TIMEOUT_S)
        sample.exit_s = time.perf_counter() - signalled
        deadline = signalled + FAILOVER_TIMEOUT_S
        ack = None
        while ack is None and time.perf_counter() < deadline:
            ack = producer.first_ack_sent_after(signalled)
            if ack is None:
                time.sleep(0.002)
        if ack is None:
            sample.error = f"no acknowledgement within {FAILOVER_TIMEOUT_S:.0f} s of the {sig}"
        else:
            sample.failover_s = ack.acked_at - signalled
            # keep producing a while after the old leader is gone, then find the longest silence
            time.sleep(max(0.0, signalled + sample.exit_s - time.perf_counter()) + STALL_WINDOW_S)
            moments = sorted([signalled] + [a.acked_at for a in list(producer.acks) if a.acked_at >= signalled])
            sample.stall_s = max(b - a for a, b in zip(moments, moments[1:])) if len(moments) > 1 else None
    _finish(sample, producer, acked_values)
    if sample.exit_s is not None:  # the signal was sent
        sample.elected_s = leader_elected_after(cluster, topic, partition, signalled_wall)
    try:
        sample.new_leader = describe(cluster, topic).get(partition).leader  # type: ignore[union-attr]
    except (ClusterUnreachable, AttributeError):
        pass
    # Bring the broker back for the next sample; a failure here is reported with the sample but
    # does not void the failover time already measured.
    started = time.perf_counter()
    try:
        restart(cluster, target, session_timeout_s + 30)
        wait_for_isr(cluster, topic, 3, timeout=ISR_TIMEOUT_S)
        sample.recovery_s = time.perf_counter() - started
    except (AssertionError, LocalClusterStartError) as error:
        sample.error = f"after the failover: {str(error).splitlines()[0]}"
    return sample


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.0f} ms"


def _finish(sample: FailoverSample, producer: PacedProducer, acked_values: set[bytes]) -> FailoverSample:
    sample.acked = len(producer.acks)
    sample.failed = producer.failed
    if producer.last_error:
        sample.last_error = producer.last_error
    acked_values.update(ack.value for ack in producer.acks)
    return sample


def measure_failover(cluster: LocalCluster, topic: str, partitions: int, signal_names: list[str],
                     interval_s: float, session_timeout_s: float, acked_values: set[bytes],
                     progress=print) -> list[FailoverSample]:
    """One sample per entry of `signal_names`; the stopped broker rotates over the cluster's brokers."""
    ids = sorted(cluster.brokers)
    samples = []
    for index, sig in enumerate(signal_names):
        target = ids[index % len(ids)]
        try:
            sample = one_sample(cluster, topic, partitions, target, sig, interval_s, acked_values,
                                f"{sig.lower()}{index}", session_timeout_s)
        except Exception as error:  # noqa: BLE001  report the sample, then try to bring the cluster back
            sample = FailoverSample(signal=sig, broker=target, partition=-1, was_controller=False,
                                    error=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
            for node in cluster.brokers.values():
                if not node.is_running():
                    try:
                        restart(cluster, node.broker_id, session_timeout_s + 30)
                    except Exception as again:  # noqa: BLE001
                        sample.error += f"; broker {node.broker_id} did not start again: {str(again).splitlines()[0]}"
        samples.append(sample)
        progress(f"    {sig} broker {sample.broker}{' (controller)' if sample.was_controller else ''} "
                 f"p{sample.partition}: failover "
                 f"{'—' if sample.failover_s is None else f'{sample.failover_s * 1000:.0f} ms'}, "
                 f"(elected {_ms(sample.elected_s)}, longest ack gap {_ms(sample.stall_s)}, "
                 f"exit {_ms(sample.exit_s)}), new leader {sample.new_leader}, acked {sample.acked}, "
                 f"failed {sample.failed}"
                 f"{', recovery %.1f s' % sample.recovery_s if sample.recovery_s is not None else ''}"
                 f"{' ERROR ' + sample.error if sample.error else ''}")
    return samples
